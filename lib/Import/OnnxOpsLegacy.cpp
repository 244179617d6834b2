//===- OnnxOpsLegacy.cpp - handlers for older opset versions --------------===//
//
// merak targets opsets 13-17 (what torch.onnx.export emits). Older models
// (ONNX's pytorch-converted tests are opset 6) differ in a few places:
// legacy `broadcast`/`axis` attributes on binary ops, 2-d coerced Softmax,
// attribute-based Clip. Those
// versions get their own handlers here; ops whose semantics did not change
// are registered with their original version in the per-family files.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// Binary ops before opset 7: with broadcast=1 and `axis`, B's dimensions
/// align with A's starting at `axis` (reshape B with trailing ones); without
/// broadcast the shapes must be equal.
template <typename OpTy>
LogicalResult legacyBinary(NodeContext &n) {
  Value a = n.input(0), b = n.input(1);
  auto at = n.inputType(0), bt = n.inputType(1);
  if (n.getInt("broadcast", 0)) {
    if (const auto *ax = n.attr("axis")) {
      int64_t axis = ax->i() < 0 ? ax->i() + at.getRank() : ax->i();
      int64_t trailing = at.getRank() - axis - bt.getRank();
      if (axis < 0 || trailing < 0)
        return n.error("legacy broadcast axis out of range");
      SmallVector<int64_t> shape(bt.getShape());
      shape.append(trailing, 1);
      b = n.reshape(b, shape);
    }
  } else if (at.getShape() != bt.getShape()) {
    return n.error("without broadcast=1 both operands must have the same shape");
  }
  n.setOutputs(n.create<OpTy>(a, b));
  return success();
}

/// Softmax/LogSoftmax before opset 13: coerced to 2-d at `axis` (default 1).
template <typename OpTy>
LogicalResult legacySoftmax(NodeContext &n) {
  auto t = n.inputType(0);
  auto matrix = n.flattenedAt(n.getInt("axis", 1));
  if (failed(matrix))
    return failure();
  Value x = n.reshape(n.input(0), {matrix->first, matrix->second});
  n.setOutputs(n.reshape(n.create<OpTy>(x, 1), t.getShape()));
  return success();
}

LogicalResult legacyClip(NodeContext &n) {
  auto lo = n.attr("min"), hi = n.attr("max");
  FloatAttr l = lo ? n.builder().getF64FloatAttr(lo->f()) : FloatAttr();
  FloatAttr h = hi ? n.builder().getF64FloatAttr(hi->f()) : FloatAttr();
  n.setOutputs(n.create<ClampOp>(n.input(0), l, h));
  return success();
}

/// Dropout before opset 12 is the identity at inference.
LogicalResult legacyDropout(NodeContext &n) {
  if (n.isOutputUsed(1))
    return n.unsupported("mask output of a pre-opset-12 Dropout");
  n.setOutputs(n.input(0));
  return success();
}

/// PRelu-6: a per-channel slope [C] applies along dimension 1.
LogicalResult legacyPrelu(NodeContext &n) {
  auto xt = n.inputType(0), st = n.inputType(1);
  Value slope = n.input(1);
  if (st.getRank() == 1 && xt.getRank() >= 2 && st.getDimSize(0) == xt.getDimSize(1) &&
      st.getDimSize(0) != 1) {
    SmallVector<int64_t> shape(xt.getRank() - 1, 1);
    shape[0] = st.getDimSize(0);
    slope = n.reshape(slope, shape);
  }
  Value x = n.input(0);
  Value neg = n.create<MulOp>(x, slope);
  n.setOutputs(n.create<WhereOp>(n.create<GeOp>(x, n.scalarLike(x, 0.0)), x, neg));
  return success();
}

} // namespace

void onnx_import::registerLegacyOps(OpRegistry &r) {
  r.add("Add", 6, legacyBinary<AddOp>);
  r.add("Sub", 6, legacyBinary<SubOp>);
  r.add("Mul", 6, legacyBinary<MulOp>);
  r.add("Div", 6, legacyBinary<DivOp>);
  r.add("Pow", 1, legacyBinary<PowOp>);
  r.add("Equal", 1, legacyBinary<EqOp>);
  r.add("Less", 1, legacyBinary<LtOp>);
  r.add("Greater", 1, legacyBinary<GtOp>);
  r.add("And", 1, legacyBinary<AndOp>);
  r.add("Or", 1, legacyBinary<OrOp>);
  r.add("Xor", 1, legacyBinary<XorOp>);
  r.add("Softmax", 1, legacySoftmax<SoftmaxOp>);
  r.add("LogSoftmax", 1, legacySoftmax<LogSoftmaxOp>);
  r.add("Clip", 6, legacyClip);
  r.add("Dropout", 7, legacyDropout);
  r.add("PRelu", 6, legacyPrelu);
}
