//===- EvalElementwise.cpp - elementwise reference kernels ----------------===//
#include "Kernels.h"

#include "llvm/ADT/TypeSwitch.h"
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
enum class Bin { Add, Sub, Mul, Div, Rem, Pow, Max, Min, Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor };
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
  }
  return failure();
}

LogicalResult kernels::evalBinary(Operation *op, Operands in, Results out) {
  Bin kind = llvm::TypeSwitch<Operation *, Bin>(op)
                 .Case<AddOp>([](auto) { return Bin::Add; })
                 .Case<SubOp>([](auto) { return Bin::Sub; })
                 .Case<MulOp>([](auto) { return Bin::Mul; })
                 .Case<DivOp>([](auto) { return Bin::Div; })
                 .Case<RemOp>([](auto) { return Bin::Rem; })
                 .Case<PowOp>([](auto) { return Bin::Pow; })
                 .Case<MaxOp>([](auto) { return Bin::Max; })
                 .Case<MinOp>([](auto) { return Bin::Min; })
                 .Case<EqOp>([](auto) { return Bin::Eq; })
                 .Case<NeOp>([](auto) { return Bin::Ne; })
                 .Case<LtOp>([](auto) { return Bin::Lt; })
                 .Case<LeOp>([](auto) { return Bin::Le; })
                 .Case<GtOp>([](auto) { return Bin::Gt; })
                 .Case<GeOp>([](auto) { return Bin::Ge; })
                 .Case<AndOp>([](auto) { return Bin::And; })
                 .Case<OrOp>([](auto) { return Bin::Or; })
                 .Default([](auto) { return Bin::Xor; });
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

LogicalResult kernels::evalWhere(WhereOp op, Operands in, Results out) {
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

LogicalResult kernels::evalUnary(Operation *op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(resultType(op));
  if (!a.isFloat()) {
    auto fn = llvm::TypeSwitch<Operation *, std::function<int64_t(int64_t)>>(op)
                  .Case<ReluOp>([](auto) { return [](int64_t x) { return std::max<int64_t>(x, 0); }; })
                  .Case<NegOp>([](auto) { return [](int64_t x) { return (int64_t)(0 - (uint64_t)x); }; })
                  .Case<AbsOp>([](auto) {
                    return [](int64_t x) { return x < 0 ? (int64_t)(0 - (uint64_t)x) : x; };
                  })
                  .Case<SignOp>([](auto) { return [](int64_t x) { return (int64_t)((x > 0) - (x < 0)); }; })
                  .Case<NotOp>([](auto) { return [](int64_t x) { return (int64_t)(x == 0); }; })
                  .Case<ClampOp>([](ClampOp c) {
                    double lo = c.getMin() ? c.getMin()->convertToDouble() : -INFINITY;
                    double hi = c.getMax() ? c.getMax()->convertToDouble() : INFINITY;
                    // min(max(x, lo), hi) like the float form (so hi wins when
                    // lo > hi); x itself is returned when in range so that
                    // int64 values above 2^53 stay exact. The bounds are f64
                    // attributes, so bounds beyond 2^53 are rounded.
                    auto toInt = [](double v) {
                      return v <= -0x1p63 ? std::numeric_limits<int64_t>::min()
                             : v >= 0x1p63 ? std::numeric_limits<int64_t>::max()
                                           : (int64_t)v;
                    };
                    return std::function<int64_t(int64_t)>([=](int64_t x) {
                      if ((double)x < lo)
                        x = toInt(std::ceil(lo));
                      if ((double)x > hi)
                        x = toInt(std::floor(hi));
                      return x;
                    });
                  })
                  .Default([](auto) { return std::function<int64_t(int64_t)>(); });
    if (!fn)
      return op->emitError("op has no integer evaluation");
    for (int64_t k = 0; k < a.size(); ++k)
      r.setFromInt(k, fn(a.i()[k]));
    out.push_back(std::move(r));
    return success();
  }
  auto fn =
      llvm::TypeSwitch<Operation *, std::function<double(double)>>(op)
          .Case<ExpOp>([](auto) { return [](double x) { return std::exp(x); }; })
          .Case<LogOp>([](auto) { return [](double x) { return std::log(x); }; })
          .Case<SqrtOp>([](auto) { return [](double x) { return std::sqrt(x); }; })
          .Case<RsqrtOp>([](auto) { return [](double x) { return 1.0 / std::sqrt(x); }; })
          .Case<TanhOp>([](auto) { return [](double x) { return std::tanh(x); }; })
          .Case<ErfOp>([](auto) { return [](double x) { return std::erf(x); }; })
          .Case<SigmoidOp>([](auto) { return [](double x) { return 1.0 / (1.0 + std::exp(-x)); }; })
          .Case<ReciprocalOp>([](auto) { return [](double x) { return 1.0 / x; }; })
          .Case<SinOp>([](auto) { return [](double x) { return std::sin(x); }; })
          .Case<CosOp>([](auto) { return [](double x) { return std::cos(x); }; })
          .Case<FloorOp>([](auto) { return [](double x) { return std::floor(x); }; })
          .Case<CeilOp>([](auto) { return [](double x) { return std::ceil(x); }; })
          .Case<ReluOp>([](auto) { return [](double x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0); }; })
          .Case<NegOp>([](auto) { return [](double x) { return -x; }; })
          .Case<AbsOp>([](auto) { return [](double x) { return std::fabs(x); }; })
          .Case<SignOp>([](auto) { return [](double x) { return (double)((x > 0) - (x < 0)); }; })
          .Case<GeluOp>([](GeluOp g) {
            bool t = g.getApproximateTanh();
            return std::function<double(double)>([t](double x) { return gelu(x, t); });
          })
          .Case<LeakyReluOp>([](LeakyReluOp l) {
            double alpha = l.getAlpha().convertToDouble();
            return std::function<double(double)>([alpha](double x) { return x >= 0 ? x : alpha * x; });
          })
          .Case<ClampOp>([](ClampOp c) {
            double lo = c.getMin() ? c.getMin()->convertToDouble() : -INFINITY;
            double hi = c.getMax() ? c.getMax()->convertToDouble() : INFINITY;
            return std::function<double(double)>([=](double x) {
              return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
            });
          })
          .Default([](auto) { return std::function<double(double)>(); });
  if (!fn)
    return op->emitError("op has no float evaluation");
  for (int64_t k = 0; k < a.size(); ++k)
    r.setFromDouble(k, fn(a.f()[k]));
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::evalCast(CastOp op, Operands in, Results out) {
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
