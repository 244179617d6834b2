//===- ReductionRules.cpp - Lowering reductions ---------------------------===//
//
// reduce_* (one runtime entry point, the op's Reduce value an argument),
// argmax / argmin, argsort, cumsum, linear_scan and selective_scan (with their
// gradients).
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
/// reduce(kind, t, x, dx, axes, y) of a reduce_* op.
FailureOr<Lowering> reduce(Operation *op, Emitter &e, const char *kind) {
  PTR(x, op->getOperand(0));
  PTR(y, op->getResult(0));
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
  Type tx = op->getOperand(0).getType();
  e.call(kernels::reduce).lit(kind).dtype(tx).ptr(x).dims(tx).dims(axes.asArrayRef()).ptr(y)
      .emit();
  return Lowering::Done;
}

/// argReduce(isMax, t, x, dx, axis, selectLast, y).
template <typename OpTy> FailureOr<Lowering> argReduce(OpTy a, Emitter &e, bool isMax) {
  PTR(x, a.getInput());
  PTR(y, a.getResult());
  Type tx = a.getInput().getType();
  e.call(kernels::argReduce).boolean(isMax).dtype(tx).ptr(x).dims(tx)
      .i64(normAxis(a.getAxis(), tx)).boolean(a.getSelectLastIndex()).ptr(y).emit();
  return Lowering::Done;
}
} // namespace

#define MERAK_REDUCE_RULE(OP, KIND) MERAK_DEFINE_KIND_RULE(OP, KIND, reduce, "Reduce")
MERAK_REDUCE_OP_KINDS(MERAK_REDUCE_RULE)
#undef MERAK_REDUCE_RULE

FailureOr<Lowering> emitc_lowering::rule(ArgMaxOp a, Emitter &e, LoweringContext &) {
  return argReduce(a, e, /*isMax=*/true);
}

FailureOr<Lowering> emitc_lowering::rule(ArgMinOp a, Emitter &e, LoweringContext &) {
  return argReduce(a, e, /*isMax=*/false);
}

FailureOr<Lowering> emitc_lowering::rule(ArgSortOp a, Emitter &e, LoweringContext &) {
  PTR(x, a.getInput());
  PTR(y, a.getResult());
  Type tx = a.getInput().getType();
  e.call(kernels::argSort)
      .dtype(tx)
      .ptr(x)
      .dims(tx)
      .i64(normAxis(a.getAxis(), tx))
      .boolean(a.getDescending())
      .ptr(y)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(CumSumOp c, Emitter &e, LoweringContext &) {
  PTR(x, c.getInput());
  PTR(y, c.getResult());
  Type r0 = c.getType();
  e.call(kernels::cumsum).dtype(r0).ptr(x).dims(r0).i64(normAxis(c.getAxis(), r0))
      .boolean(c.getExclusive()).boolean(c.getReverse()).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(LinearScanOp l, Emitter &e, LoweringContext &) {
  PTR(a, l.getDecay());
  PTR(b, l.getInput());
  PTR(y, l.getResult());
  Type t = l.getType();
  e.call(kernels::linearScan)
      .dtype(t)
      .ptr(a)
      .ptr(b)
      .dims(t)
      .i64(normAxis(l.getAxis(), t))
      .ptr(y)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(LinearScanGradOp l, Emitter &e, LoweringContext &) {
  PTR(a, l.getDecay());
  PTR(h, l.getResult());
  PTR(g, l.getGrad());
  PTR(da, l.getDecayGrad());
  PTR(db, l.getInputGrad());
  Type t = l.getDecay().getType();
  e.call(kernels::linearScanGrad)
      .dtype(t)
      .ptr(a)
      .ptr(h)
      .ptr(g)
      .dims(t)
      .i64(normAxis(l.getAxis(), t))
      .ptr(da)
      .ptr(db)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SelectiveScanOp l, Emitter &e, LoweringContext &ctx) {
  if (ctx.lacks(kernels::selectiveScan))
    return Lowering::NoKernel;
  PTR(u, l.getU());
  PTR(delta, l.getDelta());
  PTR(a, l.getA());
  PTR(b, l.getB());
  PTR(c, l.getC());
  PTR(y, l.getResult());
  e.call(kernels::selectiveScan)
      .dtype(l.getType())
      .ptr(u)
      .ptr(delta)
      .ptr(a)
      .ptr(b)
      .ptr(c)
      .dims(l.getU().getType())
      .dims(l.getA().getType())
      .ptr(y)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SelectiveScanGradOp l, Emitter &e, LoweringContext &ctx) {
  if (ctx.lacks(kernels::selectiveScanGrad))
    return Lowering::NoKernel;
  PTR(u, l.getU());
  PTR(delta, l.getDelta());
  PTR(a, l.getA());
  PTR(b, l.getB());
  PTR(c, l.getC());
  PTR(g, l.getGrad());
  PTR(du, l.getUGrad());
  PTR(ddelta, l.getDeltaGrad());
  PTR(da, l.getAGrad());
  PTR(db, l.getBGrad());
  PTR(dc, l.getCGrad());
  e.call(kernels::selectiveScanGrad)
      .dtype(l.getU().getType())
      .ptr(u)
      .ptr(delta)
      .ptr(a)
      .ptr(b)
      .ptr(c)
      .ptr(g)
      .dims(l.getU().getType())
      .dims(l.getA().getType())
      .ptr(du)
      .ptr(ddelta)
      .ptr(da)
      .ptr(db)
      .ptr(dc)
      .emit();
  return Lowering::Done;
}
