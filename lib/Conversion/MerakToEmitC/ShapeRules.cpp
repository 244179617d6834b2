//===- ShapeRules.cpp - Lowering data movement and parameter access -------===//
//
// Constants and views (no call), parameter reads and writes (a copy where
// merak-plan-memory placed the value elsewhere), broadcast, transpose,
// slice, concat (one insertAlongAxis per input), split (one slice per
// result read), and the gathers and their adjoints.
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

// Constants live in the constant data, views in their operand's buffer.
bool emitc_lowering::emitsKernel(ConstantOp) { return false; }
bool emitc_lowering::emitsKernel(ReshapeOp) { return false; }
bool emitc_lowering::emitsKernel(TpIdentityOp) { return false; }
// A parameter read is a copy only where merak-plan-memory marked it so.
bool emitc_lowering::emitsKernel(GetParamOp op) { return op->hasAttr(kCopyAttr); }

FailureOr<Lowering> emitc_lowering::rule(ConstantOp, Emitter &, LoweringContext &) {
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ReshapeOp, Emitter &, LoweringContext &) {
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(TpIdentityOp, Emitter &, LoweringContext &) {
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(GetParamOp get, Emitter &e, LoweringContext &ctx) {
  if (!get->hasAttr(kCopyAttr))
    return Lowering::Done;
  auto param = ctx.symbols.lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
  PTR(dst, get.getResult());
  Value src = e.pointer(PlannedBuffer{PlannedBuffer::Params,
                                      param->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt()});
  e.call(kernels::copyBytes).ptr(dst).ptr(src).i64(byteSize(get.getType())).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SetParamOp set, Emitter &e, LoweringContext &ctx) {
  auto param = ctx.symbols.lookupNearestSymbolFrom<ParamOp>(set, set.getNameAttr());
  if (!param)
    return set->emitError("no parameter @") << set.getName();
  PTR(src, set.getValue());
  Value dst = e.pointer(PlannedBuffer{PlannedBuffer::Params,
                                      param->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt()});
  if (src != dst)
    e.call(kernels::copyBytes).ptr(dst).ptr(src).i64(byteSize(set.getValue().getType())).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(BroadcastOp c, Emitter &e, LoweringContext &) {
  PTR(x, c.getInput());
  PTR(y, c.getResult());
  Type r0 = c.getType();
  e.call(kernels::broadcastTo).dtype(r0).ptr(x).dims(c.getInput().getType()).ptr(y).dims(r0)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(TransposeOp t, Emitter &e, LoweringContext &) {
  PTR(x, t.getInput());
  PTR(y, t.getResult());
  e.call(kernels::transpose).dtype(t.getType()).ptr(x).dims(t.getInput().getType())
      .dims(t.getPerm()).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SliceOp s, Emitter &e, LoweringContext &) {
  PTR(x, s.getInput());
  PTR(y, s.getResult());
  Type r0 = s.getType();
  e.call(kernels::slice).dtype(r0).ptr(x).dims(s.getInput().getType()).dims(s.getStarts())
      .dims(s.getStrides()).ptr(y).dims(r0).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ConcatOp c, Emitter &e, LoweringContext &) {
  PTR(y, c.getResult());
  Type r0 = c.getType();
  int64_t axis = normAxis(c.getAxis(), r0), offset = 0;
  for (Value in : c.getInputs()) {
    PTR(x, in);
    e.call(kernels::insertAlongAxis).dtype(r0).ptr(x).dims(in.getType()).i64(axis).i64(offset)
        .ptr(y).dims(r0).emit();
    offset += cast<RankedTensorType>(in.getType()).getDimSize(axis);
  }
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SplitOp s, Emitter &e, LoweringContext &) {
  PTR(x, s.getInput());
  Type tx = s.getInput().getType();
  int64_t rank = cast<RankedTensorType>(tx).getRank();
  int64_t axis = normAxis(s.getAxis(), tx), offset = 0;
  for (Value r : s.getResults()) {
    SmallVector<int64_t> starts(rank, 0), strides(rank, 1);
    starts[axis] = offset;
    offset += cast<RankedTensorType>(r.getType()).getDimSize(axis);
    if (r.use_empty())
      continue;
    PTR(y, r);
    e.call(kernels::slice).dtype(tx).ptr(x).dims(tx).dims(starts).dims(strides).ptr(y)
        .dims(r.getType()).emit();
  }
  return Lowering::Done;
}

namespace {
/// gather / gatherElements: (t, data, dd, idxT, idx, di, axis, y).
template <typename OpTy>
FailureOr<Lowering> gatherLike(Kernel kernel, OpTy g, Emitter &e) {
  PTR(d, g.getData());
  PTR(i, g.getIndices());
  PTR(y, g.getResult());
  Type td = g.getData().getType(), ti = g.getIndices().getType();
  e.call(kernel).dtype(td).ptr(d).dims(td).dtype(ti).ptr(i).dims(ti)
      .i64(normAxis(g.getAxis(), td)).ptr(y).emit();
  return Lowering::Done;
}

/// Their adjoints: (t, g, idxT, idx, di, axis, y, dy[, accumulate]). With an
/// accumulator `acc` the kernel adds into y (accumulate = true), the
/// accumulator first copied into y unless merak-plan-memory placed y in its
/// buffer.
template <typename OpTy>
FailureOr<Lowering> gatherGradLike(Kernel kernel, OpTy g, Emitter &e, Value acc = {}) {
  PTR(gr, g.getGrad());
  PTR(i, g.getIndices());
  PTR(y, g.getResult());
  Type ti = g.getIndices().getType(), r0 = g.getType();
  if (acc) {
    PTR(c, acc);
    if (c != y)
      e.call(kernels::copyBytes).ptr(y).ptr(c).i64(byteSize(r0)).emit();
  }
  auto call = e.call(kernel);
  call.dtype(r0).ptr(gr).dtype(ti).ptr(i).dims(ti).i64(normAxis(g.getAxis(), r0)).ptr(y).dims(r0);
  if (acc)
    call.boolean(true);
  call.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(GatherOp g, Emitter &e, LoweringContext &) {
  return gatherLike(kernels::gather, g, e);
}

FailureOr<Lowering> emitc_lowering::rule(GatherElementsOp g, Emitter &e, LoweringContext &) {
  return gatherLike(kernels::gatherElements, g, e);
}

FailureOr<Lowering> emitc_lowering::rule(GatherGradOp g, Emitter &e, LoweringContext &) {
  return gatherGradLike(kernels::gatherGrad, g, e, g.getAcc());
}

FailureOr<Lowering> emitc_lowering::rule(GatherElementsGradOp g, Emitter &e,
                                         LoweringContext &) {
  return gatherGradLike(kernels::gatherElementsGrad, g, e);
}
