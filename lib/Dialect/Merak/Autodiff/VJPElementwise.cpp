//===- VJPElementwise.cpp - VJP rules of elementwise ops ------------------===//
#include "VJPRules.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::vjp;

namespace mlir::merak::vjp {

// Binary ops: the result gradient, reduced back over broadcast dimensions.

LogicalResult rule(AddOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.unbroadcast(g[0], typeOf(op.getLhs())),
         e.unbroadcast(g[0], typeOf(op.getRhs()))});
  return success();
}

LogicalResult rule(SubOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.unbroadcast(g[0], typeOf(op.getLhs())),
         e.unbroadcast(e.neg(g[0]), typeOf(op.getRhs()))});
  return success();
}

LogicalResult rule(MulOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.unbroadcast(e.mul(g[0], op.getRhs()), typeOf(op.getLhs())),
         e.unbroadcast(e.mul(g[0], op.getLhs()), typeOf(op.getRhs()))});
  return success();
}

LogicalResult rule(DivOp op, Emitter &e, ValueRange g, Grads &out) {
  // d(l/r)/dr = -(l/r)/r.
  Value dl = e.div(g[0], op.getRhs());
  Value dr = e.neg(e.div(e.mul(g[0], op.getResult()), op.getRhs()));
  out.assign({e.unbroadcast(dl, typeOf(op.getLhs())), e.unbroadcast(dr, typeOf(op.getRhs()))});
  return success();
}

LogicalResult rule(PowOp op, Emitter &e, ValueRange g, Grads &out) {
  Value x = op.getLhs(), y = op.getRhs();
  // d/dx x^y = y x^(y-1); d/dy x^y = ln(x) x^y.
  Value xm1 = PowOp::create(e.b, e.loc, x, e.sub(y, e.scalar(y, 1.0)));
  Value dx = e.mul(g[0], e.mul(y, xm1));
  Value dy = e.mul(g[0], e.mul(LogOp::create(e.b, e.loc, x), op.getResult()));
  out.assign({e.unbroadcast(dx, typeOf(x)), e.unbroadcast(dy, typeOf(y))});
  return success();
}

/// max/min: the gradient goes to the selected operand (the left one on ties).
template <typename CmpOp, typename OpTy>
static LogicalResult selectRule(OpTy op, Emitter &e, ValueRange g, Grads &out) {
  Value pickLhs = CmpOp::create(e.b, e.loc, op.getLhs(), op.getRhs());
  Value zero = e.scalar(g[0], 0.0);
  Value dl = WhereOp::create(e.b, e.loc, pickLhs, g[0], zero);
  Value dr = WhereOp::create(e.b, e.loc, pickLhs, zero, g[0]);
  out.assign({e.unbroadcast(dl, typeOf(op.getLhs())), e.unbroadcast(dr, typeOf(op.getRhs()))});
  return success();
}
LogicalResult rule(MaxOp op, Emitter &e, ValueRange g, Grads &out) {
  return selectRule<GeOp>(op, e, g, out);
}
LogicalResult rule(MinOp op, Emitter &e, ValueRange g, Grads &out) {
  return selectRule<LeOp>(op, e, g, out);
}

LogicalResult rule(WhereOp op, Emitter &e, ValueRange g, Grads &out) {
  Value zero = e.scalar(g[0], 0.0);
  Value dl = WhereOp::create(e.b, e.loc, op.getCondition(), g[0], zero);
  Value dr = WhereOp::create(e.b, e.loc, op.getCondition(), zero, g[0]);
  out.assign({Value(), e.unbroadcast(dl, typeOf(op.getLhs())),
         e.unbroadcast(dr, typeOf(op.getRhs()))});
  return success();
}

// Unary ops: g * f'(x), written with the result y where that is cheaper.

LogicalResult rule(ExpOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.mul(g[0], op.getResult())});
  return success();
}
LogicalResult rule(LogOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.div(g[0], op.getInput())});
  return success();
}
LogicalResult rule(SqrtOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.div(e.mul(g[0], e.scalar(g[0], 0.5)), op.getResult())});
  return success();
}
LogicalResult rule(RsqrtOp op, Emitter &e, ValueRange g, Grads &out) {
  Value y = op.getResult();
  out.assign({e.mul(g[0], e.mul(e.scalar(y, -0.5), e.mul(y, e.mul(y, y))))});
  return success();
}
LogicalResult rule(TanhOp op, Emitter &e, ValueRange g, Grads &out) {
  Value y = op.getResult();
  out.assign({e.mul(g[0], e.sub(e.scalar(y, 1.0), e.mul(y, y)))});
  return success();
}
LogicalResult rule(ErfOp op, Emitter &e, ValueRange g, Grads &out) {
  Value x = op.getInput();
  Value gauss = ExpOp::create(e.b, e.loc, e.neg(e.mul(x, x)));
  out.assign({e.mul(g[0], e.mul(e.scalar(x, 2.0 / std::sqrt(M_PI)), gauss))});
  return success();
}
LogicalResult rule(SigmoidOp op, Emitter &e, ValueRange g, Grads &out) {
  Value y = op.getResult();
  out.assign({e.mul(g[0], e.mul(y, e.sub(e.scalar(y, 1.0), y)))});
  return success();
}
// d softplus(x) / dx = sigmoid(x).
LogicalResult rule(SoftplusOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.mul(g[0], SigmoidOp::create(e.b, e.loc, op.getInput()))});
  return success();
}
// d expm1(x) / dx = e^x = expm1(x) + 1; d log1p(x) / dx = 1 / (1 + x).
LogicalResult rule(Expm1Op op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.mul(g[0], ExpOp::create(e.b, e.loc, op.getInput()))});
  return success();
}
LogicalResult rule(Log1pOp op, Emitter &e, ValueRange g, Grads &out) {
  Value x = op.getInput();
  out.assign({DivOp::create(e.b, e.loc, g[0], e.add(x, e.scalar(x, 1.0)))});
  return success();
}
LogicalResult rule(ReciprocalOp op, Emitter &e, ValueRange g, Grads &out) {
  Value y = op.getResult();
  out.assign({e.neg(e.mul(g[0], e.mul(y, y)))});
  return success();
}
LogicalResult rule(SinOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.mul(g[0], CosOp::create(e.b, e.loc, op.getInput()))});
  return success();
}
LogicalResult rule(CosOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.neg(e.mul(g[0], SinOp::create(e.b, e.loc, op.getInput())))});
  return success();
}
// d asin(x) = 1 / sqrt(1 - x^2), d acos(x) = -1 / sqrt(1 - x^2),
// d atan(x) = 1 / (1 + x^2).
static Value rsqrtOneMinusSquare(Emitter &e, Value x) {
  return RsqrtOp::create(e.b, e.loc, e.sub(e.scalar(x, 1.0), e.mul(x, x)));
}
LogicalResult rule(AsinOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.mul(g[0], rsqrtOneMinusSquare(e, op.getInput()))});
  return success();
}
LogicalResult rule(AcosOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.neg(e.mul(g[0], rsqrtOneMinusSquare(e, op.getInput())))});
  return success();
}
LogicalResult rule(AtanOp op, Emitter &e, ValueRange g, Grads &out) {
  Value x = op.getInput();
  out.assign({e.div(g[0], e.add(e.scalar(x, 1.0), e.mul(x, x)))});
  return success();
}
// Piecewise-constant functions have zero gradient almost everywhere.
LogicalResult rule(FloorOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.zerosLike(op.getInput())});
  return success();
}
LogicalResult rule(CeilOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.zerosLike(op.getInput())});
  return success();
}
LogicalResult rule(SignOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.zerosLike(op.getInput())});
  return success();
}
LogicalResult rule(ReluOp op, Emitter &e, ValueRange g, Grads &out) {
  Value x = op.getInput();
  Value pos = GtOp::create(e.b, e.loc, x, e.scalar(x, 0.0));
  out.assign({WhereOp::create(e.b, e.loc, pos, g[0], e.scalar(x, 0.0))});
  return success();
}
LogicalResult rule(NegOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.neg(g[0])});
  return success();
}
LogicalResult rule(AbsOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.mul(g[0], SignOp::create(e.b, e.loc, op.getInput()))});
  return success();
}
LogicalResult rule(GeluOp op, Emitter &e, ValueRange g, Grads &out) {
  // One fused kernel: g * gelu'(x), exact or tanh form (see merak.gelu_grad).
  out.assign({GeluGradOp::create(e.b, e.loc, op.getInput(), g[0], op.getApproximateTanh())});
  return success();
}
LogicalResult rule(LeakyReluOp op, Emitter &e, ValueRange g, Grads &out) {
  Value x = op.getInput();
  Value pos = GtOp::create(e.b, e.loc, x, e.scalar(x, 0.0));
  Value neg = e.mul(g[0], e.scalar(x, op.getAlpha().convertToDouble()));
  out.assign({WhereOp::create(e.b, e.loc, pos, g[0], neg)});
  return success();
}
LogicalResult rule(ClampOp op, Emitter &e, ValueRange g, Grads &out) {
  // The gradient passes where min <= x <= max (PyTorch's convention).
  Value x = op.getInput(), pass;
  if (auto lo = op.getMin())
    pass = GeOp::create(e.b, e.loc, x, e.scalar(x, lo->convertToDouble()));
  if (auto hi = op.getMax()) {
    Value le = LeOp::create(e.b, e.loc, x, e.scalar(x, hi->convertToDouble()));
    pass = pass ? AndOp::create(e.b, e.loc, pass, le) : le;
  }
  out.assign({pass ? WhereOp::create(e.b, e.loc, pass, g[0], e.scalar(x, 0.0)) : g[0]});
  return success();
}
LogicalResult rule(CastOp op, Emitter &e, ValueRange g, Grads &out) {
  Type from = typeOf(op.getInput()).getElementType();
  // Only float -> float casts carry a gradient (cast back).
  if (!isa<FloatType>(from) || !isa<FloatType>(typeOf(op.getResult()).getElementType())) {
    out.assign({Value()});
    return success();
  }
  // The gradient of a bf16 copy of a float32 value (a mixed-precision
  // weight), made by a bf16 GEMM -- possibly transposed or reshaped, each
  // value read only on this path: the GEMM writes its float32 accumulation
  // instead of rounding it to bf16 to be widened here.
  if (from.isF32() && typeOf(g[0]).getElementType().isBF16() && g[0].use_empty()) {
    SmallVector<Value> chain{g[0]};
    while (isa_and_nonnull<TransposeOp, ReshapeOp>(chain.back().getDefiningOp()) &&
           chain.back().getDefiningOp()->getOperand(0).hasOneUse())
      chain.push_back(chain.back().getDefiningOp()->getOperand(0));
    if (chain.back().getDefiningOp<MatmulOp>()) {
      for (Value v : chain)
        v.setType(RankedTensorType::get(typeOf(v).getShape(), from));
      out.assign({g[0]});
      return success();
    }
  }
  out.assign({e.cast(g[0], from)});
  return success();
}

LogicalResult rule(DropoutOp op, Emitter &e, ValueRange g, Grads &out) {
  if (!g[0]) {
    out.assign({Value()});
    return success();
  }
  double scale = 1.0 / (1.0 - op.getRatio().convertToDouble());
  Value keep = e.cast(op.getMask(), typeOf(g[0]).getElementType());
  out.assign({e.mul(e.mul(g[0], keep), e.scalar(g[0], scale))});
  return success();
}

} // namespace mlir::merak::vjp
