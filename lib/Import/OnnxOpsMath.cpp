//===- OnnxOpsMath.cpp - trigonometric, rounding, index ops, Det ----------===//
//
// Ops that merak builds from its elementwise ops: the hyperbolic family and
// Tan as compositions of exp, log, sqrt, tanh, sin and cos; Round (half to
// even) from floor; IsInf, OneHot and EyeLike as comparisons; CumProd as a
// doubling scan of products; Det as Gaussian elimination with partial
// pivoting, unrolled over the columns. Their gradients follow from the
// parts' VJP rules.
//
// The compositions are written for accuracy in the input's precision, not
// only for the textbook identity: a branch that would cancel (asinh of a
// large negative x as log(x + sqrt(x^2 + 1))) or overflow (x^2 for a large
// x) is replaced by one that does not. Where a `where` picks between two
// branches, the branch that is not taken gets a harmless input, so that its
// (unused) value and gradient are finite and the gradient of the taken
// branch is not turned into NaN by 0 * inf.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

constexpr double kLn2 = 0.69314718055994530942;

LogicalResult requireFloat(NodeContext &n) {
  if (!isa<FloatType>(n.inputType(0).getElementType()))
    return n.error("input must be a floating-point tensor");
  return success();
}

Value where(NodeContext &n, Value c, Value a, Value b) { return n.create<WhereOp>(c, a, b); }

/// log(1 + y), accurate for small |y| (Kahan: log(u) * y / (u - 1) with
/// u = 1 + y rounded, and y itself where u rounds to 1).
Value log1p(NodeContext &n, Value y) {
  Value one = n.scalarLike(y, 1.0);
  Value u = n.create<AddOp>(y, one);
  Value d = n.create<SubOp>(u, one);
  Value exact = n.create<EqOp>(d, n.scalarLike(y, 0.0));
  Value den = where(n, exact, one, d);
  Value r = n.create<DivOp>(n.create<MulOp>(n.create<LogOp>(u), y), den);
  return where(n, exact, y, r);
}

/// Beyond this magnitude, asinh and acosh are log(2|x|) to the precision of
/// the element type, and x^2 may overflow a 16-bit float.
double largeArgument(NodeContext &n) {
  Type et = n.inputType(0).getElementType();
  return et.getIntOrFloatBitWidth() <= 16 ? 128.0 : 16777216.0;
}

/// f(|x|) * sign(x) for an odd f defined on x >= 0, with the derivative of
/// f at 0 kept (sign(0) = 0 would lose it).
template <typename F>
Value oddExtension(NodeContext &n, Value x, F f) {
  Value negative = n.create<LtOp>(x, n.scalarLike(x, 0.0));
  Value a = where(n, negative, n.create<NegOp>(x), x);
  Value r = f(a);
  return where(n, negative, n.create<NegOp>(r), r);
}

LogicalResult tan(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  n.setOutputs(n.create<DivOp>(n.create<SinOp>(x), n.create<CosOp>(x)));
  return success();
}

/// cosh(x) = (e^x + e^-x) / 2.
LogicalResult cosh(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  Value half = n.scalarLike(x, 0.5);
  Value s = n.create<AddOp>(n.create<ExpOp>(x), n.create<ExpOp>(n.create<NegOp>(x)));
  n.setOutputs(n.create<MulOp>(s, half));
  return success();
}

/// sinh(x) = (e^x - e^-x) / 2, which cancels for small |x|; there
/// 2t / (1 - t^2) with t = tanh(x / 2).
LogicalResult sinh(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  Value one = n.scalarLike(x, 1.0), half = n.scalarLike(x, 0.5);
  Value small = n.create<LtOp>(n.create<AbsOp>(x), one);
  Value xs = where(n, small, x, n.scalarLike(x, 0.0));
  Value t = n.create<TanhOp>(n.create<MulOp>(xs, half));
  Value viaTanh = n.create<DivOp>(n.create<AddOp>(t, t),
                                  n.create<SubOp>(one, n.create<MulOp>(t, t)));
  Value d = n.create<SubOp>(n.create<ExpOp>(x), n.create<ExpOp>(n.create<NegOp>(x)));
  n.setOutputs(where(n, small, viaTanh, n.create<MulOp>(d, half)));
  return success();
}

/// asinh(a) for a >= 0: log1p(a + a^2 / (1 + sqrt(1 + a^2))), or
/// log(a) + ln 2 for large a; odd.
LogicalResult asinh(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  n.setOutputs(oddExtension(n, x, [&](Value a) {
    Value one = n.scalarLike(a, 1.0);
    Value large = n.create<GtOp>(a, n.scalarLike(a, largeArgument(n)));
    Value as = where(n, large, n.scalarLike(a, 0.0), a);
    Value sq = n.create<MulOp>(as, as);
    Value root = n.create<SqrtOp>(n.create<AddOp>(one, sq));
    Value y = n.create<AddOp>(as, n.create<DivOp>(sq, n.create<AddOp>(one, root)));
    Value al = where(n, large, a, one);
    Value viaLog = n.create<AddOp>(n.create<LogOp>(al), n.scalarLike(a, kLn2));
    return where(n, large, viaLog, log1p(n, y));
  }));
  return success();
}

/// acosh(x) = log1p((x - 1) + sqrt(x - 1) sqrt(x + 1)) (exact x - 1 near 1),
/// or log(x) + ln 2 for large x; NaN below 1.
LogicalResult acosh(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  Value one = n.scalarLike(x, 1.0), two = n.scalarLike(x, 2.0);
  Value large = n.create<GtOp>(x, n.scalarLike(x, largeArgument(n)));
  Value xs = where(n, large, two, x);
  Value m = n.create<SubOp>(xs, one);
  // sqrt(x - 1) sqrt(x + 1): NaN below 1 (a product of two negatives
  // would not be).
  Value root = n.create<MulOp>(n.create<SqrtOp>(m), n.create<SqrtOp>(n.create<AddOp>(xs, one)));
  Value y = n.create<AddOp>(m, root);
  Value xl = where(n, large, x, two);
  Value viaLog = n.create<AddOp>(n.create<LogOp>(xl), n.scalarLike(x, kLn2));
  n.setOutputs(where(n, large, viaLog, log1p(n, y)));
  return success();
}

/// atanh(x) = (log1p(x) - log1p(-x)) / 2.
LogicalResult atanh(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  Value d = n.create<SubOp>(log1p(n, x), log1p(n, n.create<NegOp>(x)));
  n.setOutputs(n.create<MulOp>(d, n.scalarLike(x, 0.5)));
  return success();
}

template <typename OpTy>
LogicalResult floatUnary(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  n.setOutputs(n.create<OpTy>(n.input(0)));
  return success();
}

/// Round half to even: floor(x), plus 1 where the fraction is above 1/2,
/// or exactly 1/2 and floor(x) is odd. NaN and infinities pass through.
LogicalResult round(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  Value half = n.scalarLike(x, 0.5), one = n.scalarLike(x, 1.0);
  Value f = n.create<FloorOp>(x);
  Value frac = n.create<SubOp>(x, f);
  // f - 2 floor(f / 2) is 1 for odd f (exact: f is an integer).
  Value evenPart = n.create<MulOp>(n.create<FloorOp>(n.create<MulOp>(f, half)),
                                   n.scalarLike(x, 2.0));
  Value odd = n.create<EqOp>(n.create<SubOp>(f, evenPart), one);
  Value tie = n.create<AndOp>(n.create<EqOp>(frac, half), odd);
  Value up = n.create<OrOp>(n.create<GtOp>(frac, half), tie);
  n.setOutputs(where(n, up, n.create<AddOp>(f, one), f));
  return success();
}

LogicalResult isInf(NodeContext &n) {
  if (failed(requireFloat(n)))
    return failure();
  Value x = n.input(0);
  bool pos = n.getInt("detect_positive", 1), neg = n.getInt("detect_negative", 1);
  Value r;
  if (pos && neg)
    r = n.create<EqOp>(n.create<AbsOp>(x), n.scalarLike(x, INFINITY));
  else if (pos)
    r = n.create<EqOp>(x, n.scalarLike(x, INFINITY));
  else if (neg)
    r = n.create<EqOp>(x, n.scalarLike(x, -INFINITY));
  else // Nothing is below -inf: all false, NaN included.
    r = n.create<LtOp>(x, n.scalarLike(x, -INFINITY));
  n.setOutputs(r);
  return success();
}

/// An int64 index vector 0..count-1 shaped [1, .., count, .., 1] (rank
/// `rank`, `count` at `axis`).
FailureOr<Value> indexVector(NodeContext &n, int64_t count, int64_t axis, int64_t rank,
                             StringRef what) {
  if (count > kMaxMaterialisedElements) {
    (void)n.error(Twine(what) + " " + Twine(count) + " is too large (limit " +
                  Twine(kMaxMaterialisedElements) + ")");
    return failure();
  }
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = count;
  HostTensor t(RankedTensorType::get(shape, IntegerType::get(n.getContext(), 64)));
  for (int64_t k = 0; k < count; ++k)
    t.i()[k] = k;
  return n.constant(t);
}

Value int64Scalar(NodeContext &n, int64_t v) {
  HostTensor t(RankedTensorType::get({}, IntegerType::get(n.getContext(), 64)));
  t.i()[0] = v;
  return n.constant(t);
}

/// A bool tensor as element type `et` (1 and 0).
Value boolAs(NodeContext &n, Value b, Type et) {
  auto t = cast<RankedTensorType>(b.getType());
  if (et == t.getElementType())
    return b;
  return n.create<CastOp>(RankedTensorType::get(t.getShape(), et), b);
}

/// EyeLike: ones where column - row == k, in `dtype` (default: the
/// input's type).
LogicalResult eyeLike(NodeContext &n) {
  auto in = n.inputType(0);
  if (in.getRank() != 2)
    return n.error("input must be 2-D, got rank " + Twine(in.getRank()));
  Type et = in.getElementType();
  if (const auto *a = n.attr("dtype")) {
    et = convertDataType(n.getContext(), a->i());
    if (!et)
      return n.unsupported("dtype " + dataTypeName(a->i()));
  }
  int64_t rows = in.getDimSize(0), cols = in.getDimSize(1);
  // Beyond the matrix, the diagonal is empty anyway.
  int64_t k = std::clamp<int64_t>(n.getInt("k", 0), -kMaxElements, kMaxElements);
  auto r = indexVector(n, rows, 0, 2, "EyeLike's row count");
  if (failed(r))
    return failure();
  auto c = indexVector(n, cols, 1, 2, "EyeLike's column count");
  if (failed(c))
    return failure();
  Value diag = n.create<EqOp>(n.create<SubOp>(*c, *r), int64Scalar(n, k));
  n.setOutputs(boolAs(n, diag, et));
  return success();
}

/// OneHot: values[1] where indices (cast to int64) equals the position along
/// the new axis, values[0] elsewhere. From version 11 a negative index
/// counts from the end (index + depth); before, it matches nothing.
template <bool wrapNegative>
LogicalResult oneHot(NodeContext &n) {
  auto it = n.inputType(0);
  int64_t rank = it.getRank();
  int64_t axis = n.getInt("axis", -1);
  if (axis < -rank - 1 || axis > rank)
    return n.error("axis " + Twine(axis) + " is out of range for an output of rank " +
                   Twine(rank + 1));
  if (axis < 0)
    axis += rank + 1;
  auto depthV = n.constantScalar(1, "depth");
  if (failed(depthV))
    return failure();
  if (!std::isfinite(*depthV) || *depthV < 1)
    return n.error("depth must be at least 1, got " + std::to_string(*depthV));
  int64_t depth = static_cast<int64_t>(*depthV);
  auto vt = n.inputType(2);
  if (vt.getNumElements() != 2)
    return n.error("values must hold two elements (off, on), got " +
                   Twine(vt.getNumElements()));
  auto range = indexVector(n, depth, axis, rank + 1, "depth");
  if (failed(range))
    return failure();

  Type i64 = IntegerType::get(n.getContext(), 64);
  Value idx = n.input(0);
  if (it.getElementType() != i64)
    idx = n.create<CastOp>(RankedTensorType::get(it.getShape(), i64), idx);
  if (wrapNegative) {
    Value wrapped = n.create<AddOp>(idx, int64Scalar(n, depth));
    idx = where(n, n.create<LtOp>(idx, int64Scalar(n, 0)), wrapped, idx);
  }
  SmallVector<int64_t> shape(it.getShape());
  shape.insert(shape.begin() + axis, 1);
  Value hot = n.create<EqOp>(n.reshape(idx, shape), *range);

  Value values = n.reshape(n.input(2), {2});
  auto pick = [&](int64_t k) {
    SmallVector<int64_t> st{k}, lim{k + 1}, str{1};
    return n.reshape(n.create<SliceOp>(values, st, lim, str), {});
  };
  n.setOutputs(where(n, hot, pick(1), pick(0)));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Activations and normalisations defined by formulas (differentiable as
// their decompositions are).
//===----------------------------------------------------------------------===//

/// alpha * x (x itself for alpha = 1).
Value scaled(NodeContext &n, Value x, double alpha) {
  return alpha == 1.0 ? x : n.create<MulOp>(x, n.scalarLike(x, alpha));
}

/// Swish-24: x * sigmoid(alpha x).
Value swishOf(NodeContext &n, Value x, double alpha) {
  return n.create<MulOp>(x, n.create<SigmoidOp>(scaled(n, x, alpha)));
}
LogicalResult swish(NodeContext &n) {
  n.setOutputs(swishOf(n, n.input(0), n.getFloat("alpha", 1.0)));
  return success();
}

/// SwiGLU-28: Swish_alpha(A) * B, A and B of one shape (no broadcasting).
LogicalResult swiGLU(NodeContext &n) {
  if (n.inputType(0) != n.inputType(1))
    return n.error("A and B must have the same shape and type");
  n.setOutputs(n.create<MulOp>(swishOf(n, n.input(0), n.getFloat("alpha", 1.0)), n.input(1)));
  return success();
}

/// Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
LogicalResult celu(NodeContext &n) {
  Value x = n.input(0);
  double alpha = n.getFloat("alpha", 1.0);
  if (alpha == 0.0)
    return n.error("alpha must be nonzero");
  Value zero = n.scalarLike(x, 0.0);
  Value e = n.create<SubOp>(n.create<ExpOp>(scaled(n, x, 1.0 / alpha)), n.scalarLike(x, 1.0));
  n.setOutputs(n.create<AddOp>(n.create<MaxOp>(x, zero),
                               n.create<MinOp>(scaled(n, e, alpha), zero)));
  return success();
}

/// Mish: x * tanh(softplus(x)).
LogicalResult mish(NodeContext &n) {
  Value x = n.input(0);
  n.setOutputs(n.create<MulOp>(x, n.create<TanhOp>(n.create<SoftplusOp>(x))));
  return success();
}

/// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
LogicalResult shrink(NodeContext &n) {
  Value x = n.input(0);
  double lambd = n.getFloat("lambd", 0.5), bias = n.getFloat("bias", 0.0);
  Value below = n.create<LtOp>(x, n.scalarLike(x, -lambd));
  Value above = n.create<GtOp>(x, n.scalarLike(x, lambd));
  Value b = n.scalarLike(x, bias);
  n.setOutputs(where(n, below, n.create<AddOp>(x, b),
                     where(n, above, n.create<SubOp>(x, b), n.scalarLike(x, 0.0))));
  return success();
}

/// LpNormalization (p = 1 or 2): x / ||x||_p along axis; an all-zero row
/// stays zero (its norm is taken as 1, so the gradient stays finite).
LogicalResult lpNormalization(NodeContext &n) {
  Value x = n.input(0);
  int64_t p = n.getInt("p", 2);
  FailureOr<int64_t> axis = n.axis(n.getInt("axis", -1), n.inputType(0).getRank());
  if (failed(axis))
    return failure();
  if (p != 1 && p != 2)
    return n.unsupported("p = " + Twine(p) + " (1 and 2 are defined)");
  SmallVector<int64_t> axes{*axis};
  Value norm = p == 1 ? n.create<ReduceSumOp>(n.create<AbsOp>(x), axes, true)
                      : n.create<SqrtOp>(n.create<ReduceSumOp>(n.create<MulOp>(x, x), axes, true));
  Value zero = n.create<EqOp>(norm, n.scalarLike(norm, 0.0));
  n.setOutputs(n.create<DivOp>(x, where(n, zero, n.scalarLike(norm, 1.0), norm)));
  return success();
}

/// MeanVarianceNormalization: (x - E x) / (sqrt(E x^2 - (E x)^2) + 1e-9)
/// over `axes`, as ONNX's reference computes it.
LogicalResult meanVarianceNormalization(NodeContext &n) {
  Value x = n.input(0);
  int64_t rank = n.inputType(0).getRank();
  SmallVector<int64_t> axes = n.getInts("axes").value_or(SmallVector<int64_t>{0, 2, 3});
  for (int64_t &a : axes) {
    FailureOr<int64_t> ax = n.axis(a, rank);
    if (failed(ax))
      return failure();
    a = *ax;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  Value mean = n.create<ReduceMeanOp>(x, axes, true);
  Value meanOfSquares = n.create<ReduceMeanOp>(n.create<MulOp>(x, x), axes, true);
  Value var = n.create<SubOp>(meanOfSquares, n.create<MulOp>(mean, mean));
  Value std = n.create<AddOp>(n.create<SqrtOp>(var), n.scalarLike(x, 1e-9));
  n.setOutputs(n.create<DivOp>(n.create<SubOp>(x, mean), std));
  return success();
}

namespace {
/// CumProd-26 along `axis` (a constant input) as a doubling scan: log2(n)
/// steps of y = y * (y shifted by k along the axis, ones in front), so any
/// element type merak multiplies works and the gradient is the products'.
/// exclusive shifts the input by one (a leading 1); reverse flips the axis
/// before and after.
LogicalResult cumProd(NodeContext &n) {
  auto t = n.inputType(0);
  auto ax = n.constantAxis(1, t.getRank());
  if (failed(ax))
    return failure();
  const int64_t d = *ax, len = t.getDimSize(d);
  // v shifted by k along the axis, the first k elements 1.
  auto shifted = [&](Value v, int64_t k) {
    SmallVector<int64_t> shape(t.getShape());
    shape[d] = k;
    Value ones = n.broadcastTo(n.scalarLike(v, 1.0), shape);
    return k >= len ? ones : n.create<ConcatOp>(ValueRange{ones, n.sliceDim(v, d, 0, len - k)}, d);
  };
  const bool reverse = n.getInt("reverse", 0);
  Value y = n.input(0);
  if (len == 0) {
    n.setOutputs(y);
    return success();
  }
  if (reverse)
    y = n.sliceDim(y, d, len - 1, -1, -1);
  if (n.getInt("exclusive", 0))
    y = shifted(y, 1);
  for (int64_t k = 1; k < len && y; k *= 2)
    y = n.create<MulOp>(y, shifted(y, k));
  if (reverse)
    y = n.sliceDim(y, d, len - 1, -1, -1);
  n.setOutputs(y);
  return success();
}

/// Det-11/22 of x [.., n, n]: Gaussian elimination with partial pivoting,
/// unrolled over the n columns. Step k on the remaining [B, m, m] block:
///   p     = argmax |A[:, :, 0]|           (the pivot row; no gradient)
///   A     = A with rows 0 and p swapped   (a gather_elements), sign = -sign
///           where p != 0
///   pivot = A[:, 0, 0];  A = A[:, 1:, 1:] - (A[:, 1:, 0] / pivot) A[:, 0:1, 1:]
/// det = sign * the product of the pivots. A zero pivot (a singular block)
/// divides by 1 instead, its det 0 either way; the gradient is that of the
/// path the pivots took, which is det's own where it is differentiable.
LogicalResult det(NodeContext &n) {
  auto t = n.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return n.error("input must be a floating-point tensor");
  const int64_t rank = t.getRank();
  if (rank < 2 || t.getDimSize(rank - 1) != t.getDimSize(rank - 2))
    return n.error("input must be [.., n, n], square matrices");
  const int64_t m0 = t.getDimSize(rank - 1);
  if (m0 > 256)
    return n.unsupported("the determinant of a " + Twine(m0) + " x " + Twine(m0) +
                         " matrix (it unrolls over its columns; at most 256)");
  SmallVector<int64_t> batchShape(t.getShape().drop_back(2));
  int64_t B = 1;
  for (int64_t d : batchShape)
    B *= d;
  if (m0 == 0) {
    n.setOutputs(n.broadcastTo(n.scalarLike(n.input(0), 1.0), batchShape));
    return success();
  }
  auto i64 = n.builder().getI64Type();
  Value a = n.reshape(n.input(0), {B, m0, m0});
  Value one = n.scalarLike(a, 1.0), det, negatives;
  for (int64_t m = m0; m >= 1 && !n.hasFailed(); --m) {
    if (m > 1) {
      Value col = n.reshape(n.sliceDim(a, 2, 0, 1), {B, m});
      Value p = n.create<ArgMaxOp>(n.create<AbsOp>(col), 1, true, false); // [B, 1]
      HostTensor iota(RankedTensorType::get({1, m}, i64));
      for (int64_t j = 0; j < m; ++j)
        iota.setFromInt(j, j);
      Value rows = n.constant(iota), zero = n.scalarLike(p, 0.0);
      // perm[j] = p for j = 0, 0 for j = p, else j.
      Value perm = n.create<WhereOp>(n.create<EqOp>(rows, zero), p,
                                     n.create<WhereOp>(n.create<EqOp>(rows, p), zero, rows));
      perm = n.broadcastTo(n.reshape(perm, {B, m, 1}), {B, m, m});
      a = n.create<GatherElementsOp>(a, perm, 1);
      Value swapped = n.create<NeOp>(p, zero); // [B, 1]
      negatives = negatives ? n.create<XorOp>(negatives, swapped) : swapped;
    }
    Value pivot = n.reshape(n.sliceDim(n.sliceDim(a, 1, 0, 1), 2, 0, 1), {B, 1});
    det = det ? n.create<MulOp>(det, pivot) : pivot;
    if (m == 1)
      break;
    Value safe = n.create<WhereOp>(n.create<EqOp>(pivot, n.scalarLike(pivot, 0.0)), one, pivot);
    Value below = n.sliceDim(a, 1, 1, m);                                // [B, m-1, m]
    Value factor = n.create<DivOp>(n.sliceDim(below, 2, 0, 1), n.reshape(safe, {B, 1, 1}));
    Value top = n.sliceDim(n.sliceDim(a, 1, 0, 1), 2, 1, m);             // [B, 1, m-1]
    a = n.create<SubOp>(n.sliceDim(below, 2, 1, m), n.create<MulOp>(factor, top));
  }
  if (negatives)
    det = n.create<WhereOp>(negatives, n.create<NegOp>(det), det);
  if (n.hasFailed())
    return failure();
  n.setOutputs(n.reshape(det, batchShape));
  return success();
}
} // namespace

void onnx_import::registerMathOps(OpRegistry &r) {
  r.add("CumProd", 26, cumProd);
  r.add("Det", 11, det);
  r.sameAs("Det", 22, 11); // bfloat16
  r.add("Tan", 7, tan);
  r.add("Sinh", 9, sinh);
  r.add("Cosh", 9, cosh);
  r.add("Asinh", 9, asinh);
  r.add("Acosh", 9, acosh);
  r.add("Atanh", 9, atanh);
  r.add("Asin", 7, floatUnary<AsinOp>);
  r.add("Acos", 7, floatUnary<AcosOp>);
  r.add("Atan", 7, floatUnary<AtanOp>);
  r.add("Round", 11, round);
  r.add("IsInf", 10, isInf);
  r.add("EyeLike", 9, eyeLike);
  r.add("OneHot", 9, oneHot<false>);
  r.add("OneHot", 11, oneHot<true>);
  r.sameAs("OneHot", 28, 11); // bfloat16 values
  r.add("Swish", 24, swish);
  r.add("SwiGLU", 28, swiGLU);
  r.add("Celu", 12, celu);
  r.sameAs("Celu", 28, 12); // float16, double, bfloat16
  r.add("Mish", 18, mish);
  r.sameAs("Mish", 22, 18);
  r.add("Shrink", 9, shrink);
  r.add("LpNormalization", 1, lpNormalization);
  r.sameAs("LpNormalization", 22, 1);
  r.add("MeanVarianceNormalization", 9, meanVarianceNormalization);
  r.sameAs("MeanVarianceNormalization", 13, 9);
  // Versions 20 and 22 only add dtypes (bfloat16, float8), which merak
  // accepts or refuses by dtype.
  for (StringRef op : {"Tan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Asin", "Acos",
                       "Atan", "Round", "EyeLike"})
    r.sameAs(op, 22, OpRegistry::onnxVersions(op).front());
  r.sameAs("IsInf", 20, 10);
}
