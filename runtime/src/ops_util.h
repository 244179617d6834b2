//===- ops_util.h - Shared helpers of the ops_*.cpp kernels -----*- C++ -*-===//
//
// Internal to the CPU runtime: element-type dispatch, broadcast strides,
// stride plans with dimension coalescing and a row iterator over them,
// deterministic OpenMP chunking, and grow-only thread-local scratch.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_OPS_UTIL_H
#define MERAK_RT_OPS_UTIL_H

#include "merak_rt/ops.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace merak::rt::cpu::detail {

/// Before an elementwise loop whose output may be the same buffer as an
/// input (never a partial overlap): tells the vectoriser the iterations are
/// independent. Without it clang checks the pointers at run time and runs
/// the scalar loop whenever they overlap, i.e. for every in-place call.
#if defined(__clang__)
#define MERAK_RT_VECTORIZE _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define MERAK_RT_VECTORIZE _Pragma("GCC ivdep")
#else
#define MERAK_RT_VECTORIZE
#endif

/// Work (elements) below which a loop stays serial.
constexpr int64_t kParallelMin = 1 << 15;

template <class T> struct Tag {
  using type = T;
};

/// Calls fn(Tag<T>{}) with T the C++ type of `t`.
template <class Fn> inline void dispatchAll(DT t, Fn &&fn) {
  switch (t) {
  case DT::F32: fn(Tag<float>{}); return;
  case DT::F64: fn(Tag<double>{}); return;
  case DT::I64: fn(Tag<int64_t>{}); return;
  case DT::I32: fn(Tag<int32_t>{}); return;
  case DT::BOOL: fn(Tag<uint8_t>{}); return;
  case DT::BF16: break; // a storage type: the callers that take it convert
  }
  fatal("unknown element type");
}

/// Float types only (F32, F64); `what` names the op for the error.
template <class Fn> inline void dispatchFloat(DT t, const char *what, Fn &&fn) {
  switch (t) {
  case DT::F32: fn(Tag<float>{}); return;
  case DT::F64: fn(Tag<double>{}); return;
  default: fatal(what);
  }
}

/// Numeric types (F32, F64, I64, I32).
template <class Fn>
inline void dispatchNumeric(DT t, const char *what, Fn &&fn) {
  switch (t) {
  case DT::F32: fn(Tag<float>{}); return;
  case DT::F64: fn(Tag<double>{}); return;
  case DT::I64: fn(Tag<int64_t>{}); return;
  case DT::I32: fn(Tag<int32_t>{}); return;
  default: fatal(what);
  }
}

/// Index types (I64, I32).
template <class Fn> inline void dispatchIndex(DT t, const char *what, Fn &&fn) {
  switch (t) {
  case DT::I64: fn(Tag<int64_t>{}); return;
  case DT::I32: fn(Tag<int32_t>{}); return;
  default: fatal(what);
  }
}

/// An unsigned integer type of the element size (for pure data movement).
template <class Fn> inline void dispatchBySize(DT t, Fn &&fn) {
  switch (elemSize(t)) {
  case 1: fn(Tag<uint8_t>{}); return;
  case 2: fn(Tag<uint16_t>{}); return;
  case 4: fn(Tag<uint32_t>{}); return;
  default: fn(Tag<uint64_t>{}); return;
  }
}

inline int64_t normAxis(int64_t axis, int32_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// Row-major strides of d.
inline void rowMajor(const Dims &d, int64_t *s) {
  int64_t acc = 1;
  for (int32_t i = d.rank - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d.d[i];
  }
}

/// Strides (in elements) of `in` read as broadcast to `out` (0 on broadcast
/// dims, right-aligned as numpy).
inline void broadcastStrides(const Dims &in, const Dims &out, int64_t *s) {
  int64_t rm[kMaxRank];
  rowMajor(in, rm);
  int32_t off = out.rank - in.rank;
  for (int32_t d = 0; d < out.rank; ++d)
    s[d] = 0;
  for (int32_t d = 0; d < in.rank; ++d)
    if (off + d >= 0)
      s[off + d] = in.d[d] == 1 ? 0 : rm[d];
}

/// outer x dim x inner split of a shape at `axis`.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
  AxisSplit(const Dims &s, int64_t axis) {
    for (int32_t d = 0; d < s.rank; ++d) {
      if (d < axis)
        outer *= s.d[d];
      else if (d == axis)
        dim = s.d[d];
      else
        inner *= s.d[d];
    }
  }
  /// Where lane `lane` (of the outer * inner runs along the axis, outer
  /// major) starts; its elements are `inner` apart.
  int64_t laneStart(int64_t lane) const { return lane / inner * dim * inner + lane % inner; }
};

/// Runs fn(begin, end) over [0, n): one contiguous chunk per OpenMP thread
/// when n * workPerItem is large enough, else serially. Chunks are a pure
/// function of (n, thread count) and each item is processed by exactly one
/// thread, so results do not depend on scheduling.
template <class Fn>
inline void parallelFor(int64_t n, int64_t workPerItem, Fn &&fn) {
  if (n <= 0)
    return;
#ifdef _OPENMP
  if (n > 1 && n * std::max<int64_t>(workPerItem, 1) >= kParallelMin &&
      !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t chunk = (n + nt - 1) / nt;
      const int64_t b = std::min(n, tid * chunk), e = std::min(n, b + chunk);
      if (b < e)
        fn(b, e);
    }
    return;
  }
#endif
  fn(int64_t(0), n);
}

// --- vectorisable float math ---------------------------------------------------
//
// Float-precision exp, log, tanh, erf, sigmoid and GELU (with its
// derivative) for the F32 kernels, written branch-free (selects, bit casts,
// no calls) so that clang vectorises the loops that call them. The
// polynomials are Cephes' (exp, log, tanh) and least-squares fits made for
// the runtime (erf on [0, 1]; erfcx for the tails, evaluated in double for
// GELU). Errors relative to the double-precision function, in ulps of float
// at the exact value, measured over every 7th float bit pattern (6e8
// values, all exponents, both signs), for both the baseline (SSE2) code and
// the AVX2+FMA clone (the AVX-512 one gives the AVX2 bits; see
// MERAK_RT_SIMD_CLONES below):
//   fexp      1.01 ulp   (overflows to inf above 88.72, 0 below -103.97)
//   flog      0.81 ulp   (NaN below 0, -inf at +-0, subnormals included)
//   ftanh     1.31 ulp
//   ferf      1.37 ulp
//   fsigmoid  2.83 ulp
//   fgelu     2.98 ulp   (x Phi(x); where |result| >= FLT_MIN)
//   fgeluGrad 3.3 ulp for x >= -0.5 and 5.7 ulp for x <= -1; in between
//             Phi(x) + x phi(x) crosses 0 (x = -0.75), so the error there is
//             absolute, a few ulp of Phi(x).
// The runtime tests (OpsElementwise.UnaryFloat*) bound exp, log, tanh, erf,
// sigmoid and gelu at 4 ulp. NaN propagates; signed zeros are kept. The F64
// paths keep calling double libm.

// Forced inline, so that the loops calling these vectorise (no calls left).
#if defined(__GNUC__)
#define MERAK_RT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MERAK_RT_ALWAYS_INLINE inline
#endif

MERAK_RT_ALWAYS_INLINE float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
MERAK_RT_ALWAYS_INLINE uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// bfloat16 <-> float32: bf16 is the upper half of the float's bits; the
/// narrowing rounds to nearest even and keeps NaNs NaN (a quiet bit set).
MERAK_RT_ALWAYS_INLINE float bf16ToFloat(uint16_t h) {
  return bitsToFloat(static_cast<uint32_t>(h) << 16);
}
MERAK_RT_ALWAYS_INLINE uint16_t floatToBf16(float f) {
  const uint32_t u = floatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// 2^n as (s1, s2) with s1 * s2 == 2^n for n in [-252, 254] (each factor a
/// normal float), so that p * s1 * s2 rounds once into the subnormals.
MERAK_RT_ALWAYS_INLINE void exp2Split(int32_t n, float &s1, float &s2) {
  const int32_t n1 = n >> 1, n2 = n - n1;
  s1 = bitsToFloat(static_cast<uint32_t>(n1 + 127) << 23);
  s2 = bitsToFloat(static_cast<uint32_t>(n2 + 127) << 23);
}

/// exp(x): x = n ln2 + r (Cody-Waite, |r| <= ln2/2), Cephes' expf
/// polynomial, scaled by 2^n.
MERAK_RT_ALWAYS_INLINE float fexp(float x) {
  float xc = x < -104.0f ? -104.0f : x; // NaN stays NaN
  xc = xc > 89.0f ? 89.0f : xc;
  constexpr float kMagic = 12582912.0f; // 1.5 * 2^23: rounds to an integer
  const float t = xc * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  // The integer n from t's low mantissa bits (no float->int conversion, so
  // no undefined behaviour for NaN).
  const int32_t ni =
      static_cast<int32_t>(floatToBits(t) - floatToBits(kMagic));
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r;
  p = p + 1.0f;
  float s1, s2;
  exp2Split(ni, s1, s2);
  return p * s1 * s2;
}

/// log(x) for x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), Cephes'
/// logf polynomial in m - 1; subnormals are scaled first.
MERAK_RT_ALWAYS_INLINE float flog(float x) {
  const bool sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x; // 2^23
  const uint32_t u = floatToBits(xs);
  int32_t e = static_cast<int32_t>((u >> 23) & 0xffu) - 126;
  e = sub ? e - 23 : e;
  const float m = bitsToFloat((u & 0x007fffffu) | 0x3f000000u); // [0.5, 1)
  const bool lo = m < 0.707106781186547524f;
  const float f = lo ? (m + m) - 1.0f : m - 1.0f;
  const float fe = static_cast<float>(lo ? e - 1 : e);
  const float z = f * f;
  float y = 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z;
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  float r = f + y;
  r = r + fe * 0.693359375f;
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  r = x == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  r = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  return x != x ? x : r;
}

/// tanh(x): Cephes' odd polynomial below |x| = 0.625, else
/// 1 - 2 / (exp(2|x|) + 1) with x's sign.
MERAK_RT_ALWAYS_INLINE float ftanh(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (fexp(a + a) + 1.0f);
  return std::copysign(a < 0.625f ? small : big, x);
}

/// 1 / (1 + exp(-x)), as e / (1 + e) with e = exp(x) below 0 (so that
/// exp never overflows and the lower tail keeps its precision).
MERAK_RT_ALWAYS_INLINE float fsigmoid(float x) {
  const float e = fexp(-std::fabs(x));
  const float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

/// softplus(x) = max(x, 0) + log1p(exp(-|x|)), log1p(e) as
/// log(u) e / (u - 1) with u = 1 + e rounded (Goldberg's correction: the
/// rounding of u cancels), and e itself where u rounds to 1.
MERAK_RT_ALWAYS_INLINE float fsoftplus(float x) {
  const float e = fexp(-std::fabs(x));
  const float u = 1.0f + e;
  const float l = u == 1.0f ? e : flog(u) * (e / (u - 1.0f));
  return (x > 0.0f ? x : 0.0f) + l;
}

/// erf(t) / t - 1 as a polynomial in s = t^2, for t in [0, 1].
MERAK_RT_ALWAYS_INLINE float erfSmallQ(float s) {
  float p = 7.842288323445246e-05f;
  p = p * s - 0.0008006793214008212f;
  p = p * s + 0.005187962669879198f;
  p = p * s - 0.026853643357753754f;
  p = p * s + 0.1128358244895935f;
  p = p * s - 0.3761262595653534f;
  p = p * s + 0.12837916612625122f;
  return p;
}

/// erfcx(z) = erfc(z) exp(z^2) as w Q(w) with w = 2 / (2 + z) (the
/// variable of Numerical Recipes' erfccheb), Q fitted (relative error
/// 1e-9) for z in [0.5, 10.5]; T = float or double (GELU's tail).
template <class T> MERAK_RT_ALWAYS_INLINE T erfcx(T z) {
  z = z > T(10.5) ? T(10.5) : z;
  const T w = T(2) / (T(2) + z);
  T q = T(0.06272576004266739f);
  q = q * w - T(0.3288171589374542f);
  q = q * w + T(0.6901832818984985f);
  q = q * w - T(0.6881650686264038f);
  q = q * w + T(0.3054549992084503f);
  q = q * w - T(0.14299757778644562f);
  q = q * w + T(0.12002220749855042f);
  q = q * w + T(0.1698887199163437f);
  q = q * w + T(0.24756765365600586f);
  q = q * w + T(0.28204578161239624f);
  q = q * w + T(0.2820962369441986f);
  return w * q;
}

/// erf(x): x (1 + Q(x^2)) below |x| = 1, else 1 - erfc(|x|) with x's sign.
MERAK_RT_ALWAYS_INLINE float ferf(float x) {
  const float a = std::fabs(x);
  const float s = x * x;
  const float small = x + x * erfSmallQ(s);
  const float big = 1.0f - erfcx(a) * fexp(-s);
  return std::copysign(a < 1.0f ? small : big, x);
}

/// x * x = hi + lo exactly (Dekker's product with Veltkamp's split; exact
/// with or without FMA contraction).
MERAK_RT_ALWAYS_INLINE void exactSquare(float x, float &hi, float &lo) {
  hi = x * x;
  const float c = 4097.0f * x;
  const float xh = c - (c - x);
  const float xl = x - xh;
  lo = ((xh * xh - hi) + 2.0f * xh * xl) + xl * xl;
}

/// The pieces of Phi(x) = (1 + erf(x / sqrt 2)) / 2 (the standard normal
/// CDF) and of x Phi(x) (GELU): `inner` = Phi(x) from the erf polynomial
/// (used for -0.5 <= x / sqrt 2 < 1), and for the tails Phi(-|x|) =
/// erfc(|x| / sqrt 2) / 2 = t * e with t = erfcx(|x| / sqrt 2) / 2 (in
/// double) and e = exp(-x^2 / 2), x^2 taken exactly as hi + lo so that large
/// |x| keep their precision (1 + erf would cancel):
/// exp(-(hi + lo) / 2) = exp(-hi / 2) (1 - lo / 2).
struct NormalCdfParts {
  float inner, t, e;
  float lo; // of x^2 = hi + lo, for the density
  bool lower, upper; // x / sqrt 2 < -0.5, >= 1
};
MERAK_RT_ALWAYS_INLINE NormalCdfParts normalCdfParts(float x) {
  NormalCdfParts r;
  const float u = x * 0.70710678118654752f;
  r.inner = 0.5f + 0.5f * (u + u * erfSmallQ(u * u));
  float hi; // |x| >= 16: the tail is 0 (and no overflow in the split)
  exactSquare(x < -16.0f ? -16.0f : (x > 16.0f ? 16.0f : x), hi, r.lo);
  const double cx =
      erfcx(std::fabs(static_cast<double>(x)) * 0.70710678118654752440);
  r.t = static_cast<float>(0.5 * cx * (1.0 - 0.5 * static_cast<double>(r.lo)));
  r.e = fexp(-0.5f * hi);
  r.lower = u < -0.5f;
  r.upper = u >= 1.0f;
  return r;
}

/// Phi(x).
MERAK_RT_ALWAYS_INLINE float fnormcdf(float x) {
  const NormalCdfParts p = normalCdfParts(x);
  return p.lower ? p.t * p.e : (p.upper ? 1.0f - p.t * p.e : p.inner);
}

/// GELU (exact form): x Phi(x); in the lower tail (x t) e, so that a
/// subnormal Phi does not cost the product its precision.
MERAK_RT_ALWAYS_INLINE float fgelu(float x) {
  const NormalCdfParts p = normalCdfParts(x);
  return p.lower ? (x * p.t) * p.e
                 : x * (p.upper ? 1.0f - p.t * p.e : p.inner);
}

/// d/dx GELU = Phi(x) + x phi(x), phi the standard normal density.
MERAK_RT_ALWAYS_INLINE float fgeluGrad(float x) {
  const NormalCdfParts p = normalCdfParts(x);
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  const float d = kInvSqrt2Pi - kInvSqrt2Pi * 0.5f * p.lo; // phi(x) / e
  // The lower tail as (t + x d) e, so that no factor goes subnormal first.
  return p.lower ? (p.t + x * d) * p.e
                 : (p.upper ? 1.0f - p.t * p.e : p.inner) + x * (d * p.e);
}

// --- float row kernels (kernels.cpp) ----------------------------------------------
//
// Loops over the functions above, compiled three times on x86-64 ELF
// (target clones: AVX-512, AVX2+FMA and the baseline, picked once at load
// time), so a machine always runs the same code and results do not depend
// on how a caller splits the work. The AVX-512 and AVX2 clones give the
// same bits (both contract the same FMAs; checked for every function above
// over every 7th float bit pattern); AVX-512 runs GELU at 1.35 ns/element
// instead of 1.88 on this project's machine in cache (2.67 instead of 3.07
// for 16 MB rows, where memory bandwidth dominates). Rows are plain pointers and
// lengths; y may alias x.

#if defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define MERAK_RT_SIMD_CLONES                                                   \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MERAK_RT_SIMD_CLONES
#endif

enum class RowFn : int32_t { Exp, Log, Tanh, Erf, Sigmoid, Gelu, Softplus };

#if defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define MERAK_RT_INT_CLONES                                                                        \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MERAK_RT_INT_CLONES
#endif

/// merak.dropout's keep decisions of `count` consecutive elements of a
/// whole tensor from index `first`: keep[j] = 1 where element first + j is
/// kept (dropout::kept under bitsBase(key) and the ratio's threshold), else
/// 0. Integer work (64-bit multiplies, which AVX-512 has), the same bits in
/// every clone.
MERAK_RT_INT_CLONES void dropoutKeepRow(uint64_t key, uint64_t first, int64_t count,
                                        uint64_t threshold, uint8_t *keep);

/// y[i] = f(x[i]) for the float functions above.
MERAK_RT_SIMD_CLONES void mapRowF32(RowFn f, const float *x, float *y,
                                    int64_t n);

/// dx[i] = dy[i] * GELU'(x[i]); dx may alias dy or x.
MERAK_RT_SIMD_CLONES void geluGradRowF32(const float *x, const float *dy,
                                         float *dx, int64_t n);

/// The max of x[0..n) (-inf when n == 0); NaNs are skipped, as
/// std::max(m, x[j]) from -inf does.
MERAK_RT_SIMD_CLONES float rowMaxF32(const float *x, int64_t n);

/// sum_j exp(x[j] - m) accumulated in double in a fixed order (8 lanes by
/// j mod 8, then a fixed tree), storing the float exp(x[j] - m) in y when y
/// is not null (y may alias x).
MERAK_RT_SIMD_CLONES double expSumRowF32(const float *x, float m, float *y,
                                         int64_t n);

/// sum_j x[j]^2 accumulated in double in a fixed order (16 lanes by j mod
/// 16, then a fixed tree).
MERAK_RT_SIMD_CLONES double sumSquaresRowF32(const float *x, int64_t n);

/// C = alpha op(A) op(B) + beta C in double, row-major (kernels.h's gemm
/// for F64: OpenMP blocks of single-threaded dgemm calls).
void dgemmBlocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                  double alpha, const double *A, const double *B, double beta,
                  double *C);

/// Grow-only thread-local scratch of n elements of T; `slot` separates
/// buffers live at the same time.
template <class T, int Slot = 0> inline T *scratch(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n)
    buf.resize(n);
  return buf.data();
}

/// An iteration plan over a dense row-major output of shape `shape`, with K
/// source stride vectors. coalesce() drops size-1 dims and merges adjacent
/// dims that are contiguous in every source.
template <int K> struct Plan {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t st[K][kMaxRank] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int32_t i = 0; i < rank; ++i)
      n *= shape[i];
    return n;
  }

  void coalesce() {
    int32_t r = 0;
    for (int32_t d = 0; d < rank; ++d) {
      if (shape[d] == 1)
        continue;
      shape[r] = shape[d];
      for (int k = 0; k < K; ++k)
        st[k][r] = st[k][d];
      ++r;
    }
    int32_t w = 0;
    for (int32_t d = 0; d < r; ++d) {
      bool merge = w > 0;
      for (int k = 0; merge && k < K; ++k)
        merge = st[k][w - 1] == st[k][d] * shape[d];
      if (merge) {
        shape[w - 1] *= shape[d];
        for (int k = 0; k < K; ++k)
          st[k][w - 1] = st[k][d];
      } else {
        shape[w] = shape[d];
        for (int k = 0; k < K; ++k)
          st[k][w] = st[k][d];
        ++w;
      }
    }
    if (w == 0) {
      w = 1;
      shape[0] = 1;
      for (int k = 0; k < K; ++k)
        st[k][0] = 0;
    }
    rank = w;
  }

  int64_t innerLen() const { return shape[rank - 1]; }
  int64_t innerStride(int k) const { return st[k][rank - 1]; }
};

/// Calls fn(outOffset, const int64_t off[K], len) for every innermost row of
/// a (coalesced) plan, in parallel chunks of rows when large.
template <int K, class Fn> inline void forRows(const Plan<K> &p, Fn &&fn) {
  const int64_t inner = p.innerLen();
  const int64_t total = p.numel();
  if (total == 0)
    return;
  const int64_t rows = total / inner;
  const int32_t outerRank = p.rank - 1;
  if (rows == 1) { // one long row (e.g. a scalar broadcast): split it
    constexpr int64_t kChunk = 1 << 14;
    parallelFor((inner + kChunk - 1) / kChunk, kChunk, [&](int64_t c0, int64_t c1) {
      const int64_t b = c0 * kChunk, e = std::min(inner, c1 * kChunk);
      int64_t off[K];
      for (int k = 0; k < K; ++k)
        off[k] = b * p.st[k][outerRank];
      fn(b, static_cast<const int64_t *>(off), e - b);
    });
    return;
  }
  parallelFor(rows, inner, [&](int64_t r0, int64_t r1) {
    int64_t idx[kMaxRank] = {};
    int64_t off[K] = {};
    int64_t rem = r0;
    for (int32_t d = outerRank - 1; d >= 0; --d) {
      idx[d] = rem % p.shape[d];
      rem /= p.shape[d];
    }
    for (int k = 0; k < K; ++k)
      for (int32_t d = 0; d < outerRank; ++d)
        off[k] += idx[d] * p.st[k][d];
    for (int64_t r = r0; r < r1; ++r) {
      fn(r * inner, static_cast<const int64_t *>(off), inner);
      for (int32_t d = outerRank - 1; d >= 0; --d) {
        for (int k = 0; k < K; ++k)
          off[k] += p.st[k][d];
        if (++idx[d] < p.shape[d])
          break;
        for (int k = 0; k < K; ++k)
          off[k] -= p.st[k][d] * p.shape[d];
        idx[d] = 0;
      }
    }
  });
}

/// A plan for reading K operands broadcast to `out`.
template <int K>
inline Plan<K> broadcastPlan(const Dims &out, const Dims *const (&ins)[K]) {
  Plan<K> p;
  p.rank = out.rank;
  for (int32_t d = 0; d < out.rank; ++d)
    p.shape[d] = out.d[d];
  for (int k = 0; k < K; ++k)
    broadcastStrides(*ins[k], out, p.st[k]);
  p.coalesce();
  return p;
}

// --- row statistics in the evaluator's order ---------------------------------

/// Rows normalised together (layer_norm, rms_norm and their gradient): each
/// row's sums run in double in the evaluator's order (element by element),
/// which is a chain of dependent additions; `kRowLanes` rows side by side
/// overlap their chains. Every row's order, so its bits, is unchanged.
constexpr int64_t kRowLanes = 8;

/// s[r] = sum over j of f(r, j) for `lanes` (<= kRowLanes) rows of `inner`
/// elements, each in order of j.
template <class Fn>
inline void laneSums(int64_t lanes, int64_t inner, double *s, Fn &&f) {
  double acc[kRowLanes] = {};
  if (lanes == kRowLanes) { // a constant trip count: unrolled
    for (int64_t j = 0; j < inner; ++j)
      for (int64_t r = 0; r < kRowLanes; ++r)
        acc[r] += f(r, j);
  } else {
    for (int64_t j = 0; j < inner; ++j)
      for (int64_t r = 0; r < lanes; ++r)
        acc[r] += f(r, j);
  }
  for (int64_t r = 0; r < lanes; ++r)
    s[r] = acc[r];
}

} // namespace merak::rt::cpu::detail

#endif // MERAK_RT_OPS_UTIL_H
