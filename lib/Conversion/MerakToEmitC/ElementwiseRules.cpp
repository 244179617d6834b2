//===- ElementwiseRules.cpp - Lowering elementwise ops --------------------===//
//
// binary / unary ops (one runtime entry point each, the op's enum value an
// argument), merak.where and merak.cast.
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
/// binary(kind, t, a, da, b, db, y, dy) of a two-operand op.
FailureOr<Lowering> binary(Operation *op, Emitter &e, const char *kind) {
  PTR(a, op->getOperand(0));
  PTR(b, op->getOperand(1));
  PTR(y, op->getResult(0));
  Type ta = op->getOperand(0).getType(), tb = op->getOperand(1).getType();
  Type r0 = op->getResult(0).getType();
  e.call(kernels::binary).lit(kind).dtype(ta).ptr(a).dims(ta).ptr(b).dims(tb).ptr(y)
      .dims(r0).emit();
  return Lowering::Done;
}

/// unary(kind, t, x, y, n, a, b) of a one-operand op.
FailureOr<Lowering> unary(Operation *op, Emitter &e, const char *kind, double a = 0,
                          double b = 0) {
  PTR(x, op->getOperand(0));
  PTR(y, op->getResult(0));
  Type r0 = op->getResult(0).getType();
  e.call(kernels::unary).lit(kind).dtype(r0).ptr(x).ptr(y).i64(numElements(r0)).f64(a).f64(b)
      .emit();
  return Lowering::Done;
}
} // namespace

#define MERAK_BINARY_RULE(OP, KIND) MERAK_DEFINE_KIND_RULE(OP, KIND, binary, "Binary")
MERAK_BINARY_OP_KINDS(MERAK_BINARY_RULE)
#undef MERAK_BINARY_RULE

#define MERAK_UNARY_RULE(OP, KIND) MERAK_DEFINE_KIND_RULE(OP, KIND, unary, "Unary")
MERAK_UNARY_OPS(MERAK_UNARY_RULE)
#undef MERAK_UNARY_RULE

FailureOr<Lowering> emitc_lowering::rule(GeluOp op, Emitter &e, LoweringContext &) {
  return unary(op, e, op.getApproximateTanh() ? "Unary::GeluTanh" : "Unary::Gelu");
}

FailureOr<Lowering> emitc_lowering::rule(LeakyReluOp op, Emitter &e, LoweringContext &) {
  return unary(op, e, "Unary::LeakyRelu", op.getAlpha().convertToDouble());
}

FailureOr<Lowering> emitc_lowering::rule(ClampOp op, Emitter &e, LoweringContext &) {
  double lo = op.getMinAttr() ? op.getMinAttr().getValueAsDouble() : -HUGE_VAL;
  double hi = op.getMaxAttr() ? op.getMaxAttr().getValueAsDouble() : HUGE_VAL;
  return unary(op, e, "Unary::Clamp", lo, hi);
}

FailureOr<Lowering> emitc_lowering::rule(WhereOp w, Emitter &e, LoweringContext &) {
  PTR(c, w.getCondition());
  PTR(a, w.getLhs());
  PTR(b, w.getRhs());
  PTR(y, w.getResult());
  Type r0 = w.getType();
  e.call(kernels::where).ptr(c).dims(w.getCondition().getType()).dtype(r0).ptr(a)
      .dims(w.getLhs().getType()).ptr(b).dims(w.getRhs().getType()).ptr(y).dims(r0).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(CastOp c, Emitter &e, LoweringContext &) {
  PTR(x, c.getInput());
  PTR(y, c.getResult());
  Type r0 = c.getType();
  e.call(kernels::cast).dtype(c.getInput().getType()).ptr(x).dtype(r0).ptr(y)
      .i64(numElements(r0)).emit();
  return Lowering::Done;
}
