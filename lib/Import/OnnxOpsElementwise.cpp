//===- OnnxOpsElementwise.cpp - ONNX elementwise ops ----------------------===//
//
// Handlers are registered with the opset version whose semantics they
// implement; an older model version with different semantics has no
// handler and is reported as unsupported.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

template <typename OpTy>
LogicalResult binary(NodeContext &n) {
  n.setOutputs(n.create<OpTy>(n.input(0), n.input(1)));
  return success();
}

template <typename OpTy>
LogicalResult unary(NodeContext &n) {
  n.setOutputs(n.create<OpTy>(n.input(0)));
  return success();
}

/// Sum/Mean/Max/Min over any number of broadcasting inputs.
template <typename OpTy>
LogicalResult variadic(NodeContext &n) {
  if (!n.hasInput(0))
    return n.error("needs at least one input");
  Value acc = n.input(0);
  for (unsigned i = 1; i < n.numInputs(); ++i)
    acc = n.create<OpTy>(acc, n.input(i));
  n.setOutputs(acc);
  return success();
}

LogicalResult mean(NodeContext &n) {
  Value acc = n.input(0);
  for (unsigned i = 1; i < n.numInputs(); ++i)
    acc = n.create<AddOp>(acc, n.input(i));
  if (n.numInputs() > 1)
    acc = n.create<DivOp>(acc, n.scalarLike(acc, n.numInputs()));
  n.setOutputs(acc);
  return success();
}

LogicalResult pow(NodeContext &n) {
  Value base = n.input(0), exp = n.input(1);
  // ONNX allows an exponent of another numeric type; the result has the
  // base's type. An integer base with a float exponent is computed in the
  // exponent's float type and converted back (numpy's power().astype()).
  auto bt = n.inputType(0), et = n.inputType(1);
  Type be = bt.getElementType(), ee = et.getElementType();
  if (be == ee) {
    n.setOutputs(n.create<PowOp>(base, exp));
  } else if (isa<IntegerType>(be) && isa<FloatType>(ee)) {
    Value fb = n.create<CastOp>(RankedTensorType::get(bt.getShape(), ee), base);
    Value r = n.create<PowOp>(fb, exp);
    n.setOutputs(r ? n.create<CastOp>(
                         RankedTensorType::get(cast<RankedTensorType>(r.getType()).getShape(), be), r)
                   : Value());
  } else {
    exp = n.create<CastOp>(RankedTensorType::get(et.getShape(), be), exp);
    n.setOutputs(n.create<PowOp>(base, exp));
  }
  return success();
}

/// Mod: fmod=1 is C's remainder (sign of the dividend); fmod=0 (integers)
/// is Python's, with the sign of the divisor: r + b where r and b differ in
/// sign and r != 0.
/// Mod: fmod = 1 is C's fmod (merak.rem); fmod = 0 rounds the quotient
/// down (Python's %): the remainder moved by B where its sign differs from
/// B's. Before opset 28 fmod = 0 is for integers only.
LogicalResult modImpl(NodeContext &n, bool floatFloor) {
  Value a = n.input(0), b = n.input(1);
  Value r = n.create<RemOp>(a, b);
  if (n.getInt("fmod", 0)) {
    n.setOutputs(r);
    return success();
  }
  if (!floatFloor && isa<FloatType>(n.inputType(0).getElementType()))
    return n.error("fmod must be 1 for floating-point inputs");
  Value zero = n.scalarLike(a, 0.0);
  Value differ = n.create<NeOp>(n.create<LtOp>(r, zero), n.create<LtOp>(b, zero));
  Value fix = n.create<AndOp>(n.create<NeOp>(r, zero), differ);
  n.setOutputs(n.create<WhereOp>(fix, n.create<AddOp>(r, b), r));
  return success();
}
LogicalResult mod(NodeContext &n) { return modImpl(n, false); }
LogicalResult mod28(NodeContext &n) { return modImpl(n, true); }

LogicalResult identity(NodeContext &n) {
  n.setOutputs(n.input(0));
  return success();
}

LogicalResult castOp(NodeContext &n) {
  int64_t to = n.getInt("to", 0);
  Type et = convertDataType(n.getContext(), to);
  if (!et)
    return n.unsupported("cast target dtype " + dataTypeName(to));
  auto t = n.inputType(0);
  n.setOutputs(n.create<CastOp>(RankedTensorType::get(t.getShape(), et), n.input(0)));
  return success();
}

LogicalResult castLike(NodeContext &n) {
  auto t = n.inputType(0);
  Type et = n.inputType(1).getElementType();
  n.setOutputs(n.create<CastOp>(RankedTensorType::get(t.getShape(), et), n.input(0)));
  return success();
}

LogicalResult leakyRelu(NodeContext &n) {
  n.setOutputs(n.create<LeakyReluOp>(n.input(0),
                                     llvm::APFloat(n.getFloat("alpha", 0.01))));
  return success();
}

LogicalResult clip(NodeContext &n) {
  FloatAttr lo, hi;
  for (unsigned i : {1u, 2u}) {
    if (!n.hasInput(i))
      continue;
    auto c = n.constantScalar(i, i == 1 ? "min" : "max");
    if (failed(c))
      return failure();
    (i == 1 ? lo : hi) = n.builder().getF64FloatAttr(*c);
  }
  n.setOutputs(n.create<ClampOp>(n.input(0), lo, hi));
  return success();
}

/// Elu, Selu, HardSigmoid, HardSwish, Softsign, Gelu-like
/// compositions of dialect ops.
Value softsignOf(NodeContext &n, Value x) {
  return n.create<DivOp>(x, n.create<AddOp>(n.create<AbsOp>(x), n.scalarLike(x, 1.0)));
}

LogicalResult softsign(NodeContext &n) {
  n.setOutputs(softsignOf(n, n.input(0)));
  return success();
}

/// where(x > 0, scaleP * x, scaleN * (exp(x) - 1)).
static Value eluLike(NodeContext &n, Value x, double alpha, double gamma) {
  Value zero = n.scalarLike(x, 0.0);
  Value pos = n.create<MulOp>(x, n.scalarLike(x, gamma));
  Value em1 = n.create<SubOp>(n.create<ExpOp>(x), n.scalarLike(x, 1.0));
  Value neg = n.create<MulOp>(em1, n.scalarLike(x, alpha * gamma));
  return n.create<WhereOp>(n.create<GtOp>(x, zero), pos, neg);
}

LogicalResult elu(NodeContext &n) {
  n.setOutputs(eluLike(n, n.input(0), n.getFloat("alpha", 1.0), 1.0));
  return success();
}

LogicalResult selu(NodeContext &n) {
  n.setOutputs(eluLike(n, n.input(0), n.getFloat("alpha", 1.67326319217681884765625),
                       n.getFloat("gamma", 1.05070102214813232421875)));
  return success();
}

Value hardSigmoidOf(NodeContext &n, Value x, double alpha, double beta) {
  Value y = n.create<AddOp>(n.create<MulOp>(x, n.scalarLike(x, alpha)), n.scalarLike(x, beta));
  auto one = n.builder().getF64FloatAttr(1.0), zero = n.builder().getF64FloatAttr(0.0);
  return n.create<ClampOp>(y, zero, one);
}

LogicalResult hardSigmoid(NodeContext &n) {
  n.setOutputs(
      hardSigmoidOf(n, n.input(0), n.getFloat("alpha", 0.2), n.getFloat("beta", 0.5)));
  return success();
}

LogicalResult hardSwish(NodeContext &n) {
  Value x = n.input(0);
  Value y = n.create<AddOp>(n.create<MulOp>(x, n.scalarLike(x, 1.0 / 6.0)),
                            n.scalarLike(x, 0.5));
  auto one = n.builder().getF64FloatAttr(1.0), zero = n.builder().getF64FloatAttr(0.0);
  n.setOutputs(n.create<MulOp>(x, n.create<ClampOp>(y, zero, one)));
  return success();
}

Value thresholdedReluOf(NodeContext &n, Value x, double alpha) {
  Value keep = n.create<GtOp>(x, n.scalarLike(x, alpha));
  return n.create<WhereOp>(keep, x, n.scalarLike(x, 0.0));
}

LogicalResult thresholdedRelu(NodeContext &n) {
  n.setOutputs(thresholdedReluOf(n, n.input(0), n.getFloat("alpha", 1.0)));
  return success();
}

LogicalResult prelu(NodeContext &n) {
  Value x = n.input(0), slope = n.input(1);
  Value neg = n.create<MulOp>(x, slope);
  Value pos = n.create<GeOp>(x, n.scalarLike(x, 0.0));
  n.setOutputs(n.create<WhereOp>(pos, x, neg));
  return success();
}

LogicalResult where(NodeContext &n) {
  n.setOutputs(n.create<WhereOp>(n.input(0), n.input(1), n.input(2)));
  return success();
}

LogicalResult notOp(NodeContext &n) { return unary<NotOp>(n); }

/// BitShift-11 (unsigned integers) and -28 (signed too: the right shift
/// arithmetic, a shift by a negative count or at least the width 0, or -1
/// for a negative signed value shifted right), as merak's shift ops.
LogicalResult bitShift(NodeContext &n) {
  std::string dir = n.getString("direction", "");
  if (dir == "LEFT")
    return binary<ShiftLeftOp>(n);
  if (dir == "RIGHT")
    return binary<ShiftRightOp>(n);
  return n.error("direction must be LEFT or RIGHT, got '" + dir + "'");
}

LogicalResult isNaN(NodeContext &n) {
  Value x = n.input(0);
  n.setOutputs(n.create<NeOp>(x, x));
  return success();
}

/// Gelu-20: the erf form, or with approximate="tanh" the tanh form.
LogicalResult gelu(NodeContext &n) {
  std::string approx = n.getString("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return n.error("approximate must be 'none' or 'tanh', got '" + approx + "'");
  n.setOutputs(n.create<GeluOp>(n.input(0), approx == "tanh"));
  return success();
}

} // namespace

Value onnx_import::namedActivation(NodeContext &n, StringRef name, double alpha, double beta,
                                   Value x) {
  auto c = [&](double v) { return n.scalarLike(x, v); };
  if (name == "Sigmoid")
    return n.create<SigmoidOp>(x);
  if (name == "Tanh")
    return n.create<TanhOp>(x);
  if (name == "Relu")
    return n.create<ReluOp>(x);
  if (name == "Softplus")
    return n.create<SoftplusOp>(x);
  if (name == "Softsign")
    return softsignOf(n, x);
  if (name == "LeakyRelu")
    return n.create<LeakyReluOp>(x, llvm::APFloat(alpha));
  if (name == "Affine")
    return n.create<AddOp>(n.create<MulOp>(x, c(alpha)), c(beta));
  if (name == "ScaledTanh")
    return n.create<MulOp>(n.create<TanhOp>(n.create<MulOp>(x, c(beta))), c(alpha));
  if (name == "HardSigmoid")
    return hardSigmoidOf(n, x, alpha, beta);
  if (name == "ThresholdedRelu")
    return thresholdedReluOf(n, x, alpha);
  if (name == "Elu")
    return eluLike(n, x, alpha, 1.0);
  return {};
}

void onnx_import::registerElementwiseOps(OpRegistry &r) {
  // Binary arithmetic with multidirectional broadcasting (since opset 7).
  r.add("Add", 7, binary<AddOp>);
  r.add("Sub", 7, binary<SubOp>);
  r.add("Mul", 7, binary<MulOp>);
  r.add("Div", 7, binary<DivOp>);
  r.add("Pow", 7, pow);
  r.add("Mod", 10, mod);
  r.add("Equal", 7, binary<EqOp>);
  r.add("Less", 7, binary<LtOp>);
  r.add("LessOrEqual", 12, binary<LeOp>);
  r.add("Greater", 7, binary<GtOp>);
  r.add("GreaterOrEqual", 12, binary<GeOp>);
  r.add("And", 7, binary<AndOp>);
  r.add("Or", 7, binary<OrOp>);
  r.add("Xor", 7, binary<XorOp>);
  r.add("BitwiseAnd", 18, binary<BitAndOp>);
  r.add("BitwiseOr", 18, binary<BitOrOp>);
  r.add("BitwiseXor", 18, binary<BitXorOp>);
  r.add("BitwiseNot", 18, unary<BitNotOp>);
  r.add("BitShift", 11, bitShift);
  r.add("BitShift", 28, bitShift);
  r.add("Max", 6, variadic<MaxOp>);
  r.add("Min", 6, variadic<MinOp>);
  r.add("Sum", 6, variadic<AddOp>);
  r.add("Mean", 6, mean);
  r.add("Where", 9, where);
  // Unary (semantics unchanged since opset 6).
  r.add("Exp", 6, unary<ExpOp>);
  r.add("Log", 6, unary<LogOp>);
  r.add("Sqrt", 6, unary<SqrtOp>);
  r.add("Tanh", 6, unary<TanhOp>);
  r.add("Erf", 9, unary<ErfOp>);
  r.add("Sigmoid", 6, unary<SigmoidOp>);
  r.add("Reciprocal", 6, unary<ReciprocalOp>);
  r.add("Sin", 7, unary<SinOp>);
  r.add("Cos", 7, unary<CosOp>);
  r.add("Floor", 6, unary<FloorOp>);
  r.add("Ceil", 6, unary<CeilOp>);
  r.add("Relu", 6, unary<ReluOp>);
  r.add("Neg", 6, unary<NegOp>);
  r.add("Abs", 6, unary<AbsOp>);
  r.add("Sign", 9, unary<SignOp>);
  r.add("Not", 1, notOp);
  r.add("IsNaN", 9, isNaN);
  r.add("Identity", 1, identity);
  r.add("Cast", 6, castOp);
  r.add("CastLike", 15, castLike);
  r.add("LeakyRelu", 6, leakyRelu);
  r.add("Clip", 11, clip);
  r.add("Softplus", 1, unary<SoftplusOp>);
  r.add("Softsign", 1, softsign);
  r.add("Elu", 6, elu);
  r.add("Selu", 6, selu);
  r.add("HardSigmoid", 6, hardSigmoid);
  r.add("HardSwish", 14, hardSwish);
  r.add("ThresholdedRelu", 10, thresholdedRelu);
  r.add("PRelu", 7, prelu);
  r.add("Gelu", 20, gelu);

  // Versions after 17 that only add dtypes (bfloat16, float8, int4,
  // float4, strings) that merak accepts or refuses by dtype. Cast-19 and
  // CastLike-19 add `saturate`, which only affects float8 targets.
  r.sameAs("Cos", 22, 7);
  r.sameAs("Sin", 22, 7);
  r.sameAs("Elu", 22, 6);
  r.sameAs("Selu", 22, 6);
  r.sameAs("HardSigmoid", 22, 6);
  r.sameAs("HardSwish", 22, 14);
  r.sameAs("Softplus", 22, 1);
  r.sameAs("Softsign", 22, 1);
  r.sameAs("ThresholdedRelu", 22, 10);
  r.sameAs("Equal", 19, 7);
  r.sameAs("IsNaN", 20, 9);
  // Cast-24's round_mode applies to float8e8m0 only, which merak refuses.
  for (int64_t v : {19, 21, 23, 24, 25}) {
    r.sameAs("Identity", v, 1);
    r.sameAs("Cast", v, 6);
    r.sameAs("CastLike", v, 15);
  }
  r.sameAs("Cast", 28, 6); // float6 types
  r.add("Mod", 28, mod28);
}
