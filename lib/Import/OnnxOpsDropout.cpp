//===- OnnxOpsDropout.cpp - ONNX Dropout (opsets 12-22) ----------------------===//
//
// Dropout(data, ratio, training_mode) becomes merak.dropout when it trains
// (training_mode true, ratio > 0), else the identity with an all-true mask.
// Seeds are per node (its first output's name, stable across imports).
//
// torch's export of scaled_dot_product_attention (both the TorchScript and
// the dynamo exporter) writes its dropout as Dropout(p, ratio) with no
// training_mode input, which ONNX reads as inference, even in a training
// export: Hugging Face models with attention dropout (GPT-2's attn_pdrop,
// BERT's attention_probs_dropout_prob) would train without it, unlike the
// module. So a node with a nonzero ratio and no training_mode input is
// imported as a merak.dropout and decided once the graph is read: when
// another Dropout of the graph trains (a training export), it trains too,
// with a warning that names it; otherwise it becomes the identity.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {
LogicalResult dropout(NodeContext &n) {
  bool training = false;
  if (n.hasInput(2)) {
    auto t = n.constantScalar(2, "training_mode");
    if (failed(t))
      return failure();
    training = *t != 0;
  }
  double ratio = 0.5;
  if (n.hasInput(1)) {
    auto r = n.constantScalar(1, "ratio");
    if (failed(r))
      return failure();
    ratio = *r;
  }
  // A nonzero ratio without training_mode: decided at the end of the graph
  // (the file comment), unless something reads the mask.
  const bool untagged = !n.hasInput(2) && n.hasInput(1) && ratio > 0 && !n.isOutputUsed(1);
  Value x = n.input(0);
  auto xt = n.inputType(0);
  auto maskType = RankedTensorType::get(xt.getShape(), n.builder().getI1Type());
  if ((!training && !untagged) || ratio == 0.0) {
    // Inference (or p = 0): identity with an all-true mask.
    HostTensor one(RankedTensorType::get({}, n.builder().getI1Type()));
    one.i()[0] = 1;
    Value mask = n.isOutputUsed(1) ? n.broadcastTo(n.constant(one), xt.getShape()) : Value();
    n.setOutputs({x, mask});
    return success();
  }
  if (ratio < 0 || ratio >= 1)
    return n.error("ratio must be in [0, 1)");
  int64_t seed = n.getInt("seed", (int64_t)(stableHash(n.getNode().output(0)) & 0x7fffffff));
  SmallVector<Value> r = n.createMulti<DropoutOp>(xt, maskType, x, llvm::APFloat(ratio), seed,
                                                  DenseI64ArrayAttr(), DenseI64ArrayAttr());
  if (r.empty())
    return failure();
  if (untagged)
    n.dropouts().untagged.push_back(r[0].getDefiningOp<DropoutOp>());
  else
    ++n.dropouts().training;
  n.setOutputs(r);
  return success();
}
} // namespace

void onnx_import::resolveUntaggedDropouts(DropoutLedger &ledger, llvm::StringMap<Value> &values) {
  if (ledger.untagged.empty())
    return;
  if (ledger.training > 0) {
    DropoutOp first = ledger.untagged.front();
    auto name = dyn_cast<NameLoc>(first.getLoc());
    emitWarning(first.getLoc())
        << ledger.untagged.size() << " Dropout node(s) with a ratio ("
        << first.getRatio().convertToDouble()
        << (name ? " in '" + name.getName().str() + "'" : std::string(" here"))
        << ") but no training_mode input, which ONNX reads as inference, train like the "
           "graph's other "
        << ledger.training
        << " Dropout node(s) (torch exports scaled_dot_product_attention's dropout so; the "
           "module trains with it)";
  } else {
    llvm::DenseMap<Value, Value> identity;
    for (DropoutOp d : ledger.untagged)
      identity[d.getOutput()] = d.getInput();
    for (auto &entry : values) // graph outputs not yet read
      if (Value in = identity.lookup(entry.getValue()))
        entry.getValue() = in;
    for (DropoutOp d : ledger.untagged) {
      d.getOutput().replaceAllUsesWith(d.getInput());
      d.erase();
    }
  }
  ledger.untagged.clear();
}

void onnx_import::registerDropoutOps(OpRegistry &r) {
  r.add("Dropout", 12, dropout);
  r.sameAs("Dropout", 22, 12);
}
