//===- EvalElementwise.cpp - elementwise reference kernels ----------------===//
#include "Kernels.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

SmallVector<int64_t> kernels::rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

SmallVector<int64_t> kernels::broadcastStrides(ArrayRef<int64_t> in,
                                              ArrayRef<int64_t> out) {
  SmallVector<int64_t> rm = rowMajorStrides(in);
  SmallVector<int64_t> s(out.size(), 0);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    s[off + d] = in[d] == 1 ? 0 : rm[d];
  return s;
}

namespace {
enum class Bin {
  Add, Sub, Mul, Div, Rem, Pow, Max, Min, Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor,
  BitAnd, BitOr, BitXor, ShiftLeft, ShiftRight
};
} // namespace

static double applyFloat(Bin k, double a, double b) {
  switch (k) {
  case Bin::Add: return a + b;
  case Bin::Sub: return a - b;
  case Bin::Mul: return a * b;
  case Bin::Div: return a / b;
  case Bin::Rem: return std::fmod(a, b);
  case Bin::Pow: return std::pow(a, b);
  case Bin::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  case Bin::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  case Bin::Eq: return a == b;
  case Bin::Ne: return a != b;
  case Bin::Lt: return a < b;
  case Bin::Le: return a <= b;
  case Bin::Gt: return a > b;
  case Bin::Ge: return a >= b;
  default: return 0;
  }
}

static int64_t ipow(int64_t base, int64_t exp) {
  if (exp < 0)
    return base == 1 ? 1 : (base == -1 ? (exp % 2 ? -1 : 1) : 0);
  int64_t r = 1;
  while (exp) {
    if (exp & 1)
      r = (int64_t)((uint64_t)r * (uint64_t)base);
    base = (int64_t)((uint64_t)base * (uint64_t)base);
    exp >>= 1;
  }
  return r;
}

static FailureOr<int64_t> applyInt(Bin k, int64_t a, int64_t b) {
  switch (k) {
  case Bin::Add: return (int64_t)((uint64_t)a + (uint64_t)b);
  case Bin::Sub: return (int64_t)((uint64_t)a - (uint64_t)b);
  case Bin::Mul: return (int64_t)((uint64_t)a * (uint64_t)b);
  case Bin::Div:
    if (b == 0)
      return failure();
    if (b == -1) // INT64_MIN / -1 overflows in C++; wrap like the hardware
      return (int64_t)(0 - (uint64_t)a);
    return a / b; // truncation toward zero, as C and ONNX's reference
  case Bin::Rem:
    if (b == 0)
      return failure();
    return b == -1 ? 0 : a % b; // INT64_MIN % -1 overflows in C++
  case Bin::Pow: return ipow(a, b);
  case Bin::Max: return std::max(a, b);
  case Bin::Min: return std::min(a, b);
  case Bin::Eq: return a == b;
  case Bin::Ne: return a != b;
  case Bin::Lt: return a < b;
  case Bin::Le: return a <= b;
  case Bin::Gt: return a > b;
  case Bin::Ge: return a >= b;
  case Bin::And: return (a != 0) && (b != 0);
  case Bin::Or: return (a != 0) || (b != 0);
  case Bin::Xor: return (a != 0) != (b != 0);
  // On the int64 storage (sign- or zero-extended), wrapped to the type by
  // the caller: the bits of the element type's width are the type's.
  case Bin::BitAnd: return a & b;
  case Bin::BitOr: return a | b;
  case Bin::BitXor: return a ^ b;
  case Bin::ShiftLeft: return b < 0 || b >= 64 ? 0 : (int64_t)((uint64_t)a << b);
  case Bin::ShiftRight: // arithmetic on the storage: logical for zero-extended unsigned values
    return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b;
  }
  return failure();
}

static LogicalResult evalBinary(Operation *op, Bin kind, Operands in, Results out) {
  const HostTensor &a = *in[0], &b = *in[1];
  HostTensor r(resultType(op));
  auto sa = broadcastStrides(a.getShape(), r.getShape());
  auto sb = broadcastStrides(b.getShape(), r.getShape());
  bool failedDiv = false;
  forEachIndex(r.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    int64_t ia = dot(idx, sa), ib = dot(idx, sb);
    if (a.isFloat()) {
      r.setFromDouble(lin, applyFloat(kind, a.f()[ia], b.f()[ib]));
    } else {
      auto v = applyInt(kind, a.i()[ia], b.i()[ib]);
      if (failed(v))
        failedDiv = true;
      else
        r.setFromInt(lin, *v);
    }
  });
  if (failedDiv)
    return op->emitError("integer division by zero");
  out.push_back(std::move(r));
  return success();
}

#define MERAK_EVAL_BINARY(OP, KIND)                                            \
  LogicalResult kernels::eval(OP op, Operands in, Results out) {               \
    return evalBinary(op, Bin::KIND, in, out);                                 \
  }
MERAK_BINARY_OP_KINDS(MERAK_EVAL_BINARY)
#undef MERAK_EVAL_BINARY

LogicalResult kernels::eval(WhereOp op, Operands in, Results out) {
  const HostTensor &c = *in[0], &a = *in[1], &b = *in[2];
  HostTensor r(op.getType());
  auto sc = broadcastStrides(c.getShape(), r.getShape());
  auto sa = broadcastStrides(a.getShape(), r.getShape());
  auto sb = broadcastStrides(b.getShape(), r.getShape());
  forEachIndex(r.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    bool pick = c.i()[dot(idx, sc)] != 0;
    const HostTensor &src = pick ? a : b;
    int64_t o = dot(idx, pick ? sa : sb);
    if (r.isFloat())
      r.f()[lin] = src.f()[o];
    else
      r.i()[lin] = src.i()[o];
  });
  out.push_back(std::move(r));
  return success();
}

static double gelu(double x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

/// Applies `f` to a float tensor or `i` to an integer one; an op without
/// the function for its operand's element type fails.
static LogicalResult evalUnary(Operation *op, Operands in, Results out,
                               function_ref<double(double)> f,
                               function_ref<int64_t(int64_t)> i = nullptr) {
  const HostTensor &a = *in[0];
  HostTensor r(resultType(op));
  if (!a.isFloat()) {
    if (!i)
      return op->emitError("op has no integer evaluation");
    for (int64_t k = 0; k < a.size(); ++k)
      r.setFromInt(k, i(a.i()[k]));
    out.push_back(std::move(r));
    return success();
  }
  if (!f)
    return op->emitError("op has no float evaluation");
  for (int64_t k = 0; k < a.size(); ++k)
    r.setFromDouble(k, f(a.f()[k]));
  out.push_back(std::move(r));
  return success();
}

// The unary ops of floats only (Kernels.h lists them with f(x)).
#define MERAK_EVAL_FLOAT_UNARY(OP, FX)                                         \
  LogicalResult kernels::eval(OP op, Operands in, Results out) {               \
    return evalUnary(op, in, out, [](double x) { return FX; });                \
  }
MERAK_EVAL_FLOAT_UNARY_OPS(MERAK_EVAL_FLOAT_UNARY)
#undef MERAK_EVAL_FLOAT_UNARY

LogicalResult kernels::eval(ReluOp op, Operands in, Results out) {
  return evalUnary(
      op, in, out, [](double x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0); },
      [](int64_t x) { return std::max<int64_t>(x, 0); });
}

LogicalResult kernels::eval(NegOp op, Operands in, Results out) {
  return evalUnary(
      op, in, out, [](double x) { return -x; },
      [](int64_t x) { return (int64_t)(0 - (uint64_t)x); });
}

LogicalResult kernels::eval(AbsOp op, Operands in, Results out) {
  return evalUnary(
      op, in, out, [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? (int64_t)(0 - (uint64_t)x) : x; });
}

LogicalResult kernels::eval(SignOp op, Operands in, Results out) {
  return evalUnary(
      op, in, out, [](double x) { return (double)((x > 0) - (x < 0)); },
      [](int64_t x) { return (int64_t)((x > 0) - (x < 0)); });
}

LogicalResult kernels::eval(BitNotOp op, Operands in, Results out) {
  return evalUnary(op, in, out, nullptr, [](int64_t x) { return ~x; });
}

LogicalResult kernels::eval(NotOp op, Operands in, Results out) {
  return evalUnary(op, in, out, nullptr, [](int64_t x) { return (int64_t)(x == 0); });
}

LogicalResult kernels::eval(GeluOp op, Operands in, Results out) {
  bool t = op.getApproximateTanh();
  return evalUnary(op, in, out, [t](double x) { return gelu(x, t); });
}

LogicalResult kernels::eval(LeakyReluOp op, Operands in, Results out) {
  double alpha = op.getAlpha().convertToDouble();
  return evalUnary(op, in, out, [alpha](double x) { return x >= 0 ? x : alpha * x; });
}

LogicalResult kernels::eval(ClampOp op, Operands in, Results out) {
  double lo = op.getMin() ? op.getMin()->convertToDouble() : -INFINITY;
  double hi = op.getMax() ? op.getMax()->convertToDouble() : INFINITY;
  // On integers: min(max(x, lo), hi) like the float form (so hi wins when
  // lo > hi); x itself is returned when in range so that int64 values above
  // 2^53 stay exact. The bounds are f64 attributes, so bounds beyond 2^53
  // are rounded.
  auto toInt = [](double v) {
    return v <= -0x1p63 ? std::numeric_limits<int64_t>::min()
           : v >= 0x1p63 ? std::numeric_limits<int64_t>::max()
                         : (int64_t)v;
  };
  return evalUnary(
      op, in, out,
      [=](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); },
      [=](int64_t x) {
        if ((double)x < lo)
          x = toInt(std::ceil(lo));
        if ((double)x > hi)
          x = toInt(std::floor(hi));
        return x;
      });
}

LogicalResult kernels::eval(CastOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(op.getType());
  for (int64_t k = 0; k < a.size(); ++k) {
    if (a.isFloat())
      r.setFromDouble(k, a.f()[k]);
    else
      r.setFromInt(k, a.i()[k]);
  }
  out.push_back(std::move(r));
  return success();
}
