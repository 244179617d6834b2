//===- OnnxOpsLoss.cpp - ONNX loss ops ------------------------------------===//
//
// SoftmaxCrossEntropyLoss without class weights maps to the fused
// merak.cross_entropy (what training uses). Weighted variants, the
// log_prob output and NegativeLogLikelihoodLoss are composed from
// log_softmax, gather_elements and reductions.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// NLL over log-probabilities `logp` [N, C, d...] and `target` [N, d...].
Value nllLoss(NodeContext &n, Value logp, Value target, Value weight,
              std::optional<int64_t> ignore, StringRef reduction) {
  if (!logp || !target)
    return {}; // an earlier create failed and reported why
  auto tt = cast<RankedTensorType>(target.getType());
  auto lt = cast<RankedTensorType>(logp.getType());
  if (!tt.getElementType().isInteger(64) && !tt.getElementType().isInteger(32)) {
    std::string got;
    llvm::raw_string_ostream os(got);
    os << tt;
    return (void)n.error("target must hold class indices (int64 or int32), got " + got),
           Value();
  }
  if (tt.getRank() != lt.getRank() - 1)
    return (void)n.error("target has rank " + Twine(tt.getRank()) + ", expected " +
                         Twine(lt.getRank() - 1) + " (the input's rank without C)"),
           Value();
  Value valid, tc = target;
  if (ignore) {
    HostTensor ii(RankedTensorType::get({}, tt.getElementType()));
    ii.i()[0] = *ignore;
    valid = n.create<NeOp>(target, n.constant(ii));
    HostTensor zero(RankedTensorType::get({}, tt.getElementType()));
    tc = n.create<WhereOp>(valid, target, n.constant(zero));
  }
  // [N, d...] -> [N, 1, d...], pick each element's target class.
  SmallVector<int64_t> withClass(tt.getShape());
  withClass.insert(withClass.begin() + 1, 1);
  Value picked = n.create<GatherElementsOp>(logp, n.reshape(tc, withClass), 1);
  Value loss = n.create<NegOp>(n.reshape(picked, tt.getShape()));
  Value w;
  if (weight)
    w = n.create<GatherOp>(weight, tc, 0);
  if (w)
    loss = n.create<MulOp>(loss, w);
  Value zero = n.scalarLike(loss, 0.0);
  if (valid) {
    loss = n.create<WhereOp>(valid, loss, zero);
    w = n.create<WhereOp>(valid, w ? w : n.scalarLike(loss, 1.0), zero);
  }
  if (reduction == "none" || !loss)
    return loss;
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < tt.getRank(); ++d)
    all.push_back(d);
  Value total = n.create<ReduceSumOp>(loss, all, false);
  if (reduction == "sum")
    return total;
  Value denom = w ? n.create<ReduceSumOp>(n.broadcastTo(w, tt.getShape()), all, false)
                  : n.scalarLike(loss, (double)tt.getNumElements());
  return n.create<DivOp>(total, denom);
}

std::optional<int64_t> ignoreIndex(NodeContext &n) {
  if (const auto *a = n.attr("ignore_index"))
    return a->i();
  return std::nullopt;
}

LogicalResult checkReduction(NodeContext &n, StringRef red) {
  if (red != "mean" && red != "sum" && red != "none")
    return n.error("reduction must be mean, sum or none, got '" + red + "'");
  return success();
}

LogicalResult softmaxCrossEntropy(NodeContext &n) {
  std::string red = n.getString("reduction", "mean");
  if (failed(checkReduction(n, red)))
    return failure();
  auto ignore = ignoreIndex(n);
  if (!n.hasInput(2) && !n.isOutputUsed(1)) {
    IntegerAttr ignoreAttr = ignore ? n.builder().getI64IntegerAttr(*ignore) : IntegerAttr();
    n.setOutputs(n.create<CrossEntropyOp>(n.input(0), n.input(1),
                                          n.builder().getI64IntegerAttr(1),
                                          n.builder().getStringAttr(red), ignoreAttr,
                                          StringAttr(), IntegerAttr()));
    return success();
  }
  if (n.inputType(0).getRank() < 2)
    return n.error("scores must have rank >= 2 (N, C, ...)");
  Value logp = n.create<LogSoftmaxOp>(n.input(0), 1);
  Value weight = n.hasInput(2) ? n.input(2) : Value();
  n.setOutputs({nllLoss(n, logp, n.input(1), weight, ignore, red), logp});
  return success();
}

LogicalResult negativeLogLikelihood(NodeContext &n) {
  std::string red = n.getString("reduction", "mean");
  if (failed(checkReduction(n, red)))
    return failure();
  if (n.inputType(0).getRank() < 2)
    return n.error("input must have rank >= 2 (N, C, ...)");
  Value weight = n.hasInput(2) ? n.input(2) : Value();
  n.setOutputs(nllLoss(n, n.input(0), n.input(1), weight, ignoreIndex(n), red));
  return success();
}

} // namespace

void onnx_import::registerLossOps(OpRegistry &r) {
  r.add("SoftmaxCrossEntropyLoss", 13, softmaxCrossEntropy);
  r.add("NegativeLogLikelihoodLoss", 13, negativeLogLikelihood);
  r.sameAs("NegativeLogLikelihoodLoss", 22, 13); // bfloat16
}
