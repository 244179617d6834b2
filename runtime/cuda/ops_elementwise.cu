//===- ops_elementwise.cu - GPU ABI: unary, binary, where, cast, dropout ----===//
//
// Semantics of runtime/src/ops_elementwise.cpp (and dropout of
// ops_reduce.cpp): float ops in double rounded to the element type except
// where the F32 fast path uses the CUDA float functions (the existing
// cuda::unary / cuda::binary / cuda::geluBackward kernels with 16-byte
// vector accesses), integers wrapping, comparisons writing BOOL.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/kernels.h"
#include "merak_rt/dropout_mask.h"
#include "merak_rt/ops.h"
#include "merak_rt/cuda/mixed.h"
#include "ops_common.cuh"

#include <type_traits>

namespace merak::rt::gpu {
using namespace detail;

namespace {

// --- unary --------------------------------------------------------------------

template <class T>
__device__ __forceinline__ T unaryFloatOp(int op, T xv, double a, double b) {
  const double v = static_cast<double>(xv);
  constexpr double kPi = 3.14159265358979323846;
  switch (static_cast<Unary>(op)) {
  case Unary::Exp: return T(exp(v));
  case Unary::Log: return T(log(v));
  case Unary::Sqrt: return T(sqrt(v));
  case Unary::Rsqrt: return T(1.0 / sqrt(v));
  case Unary::Tanh: return T(tanh(v));
  case Unary::Erf: return T(erf(v));
  case Unary::Sigmoid: return T(1.0 / (1.0 + exp(-v)));
  case Unary::Softplus: return T(fmax(v, 0.0) + log1p(exp(-fabs(v))));
  case Unary::Expm1: return T(expm1(v));
  case Unary::Log1p: return T(log1p(v));
  case Unary::Reciprocal: return T(1.0 / v);
  // sinpi/cospi of x/pi: CUDA's sin/cos reduce huge arguments with a local
  // array (a stack frame, which runtime.cuda.ptxas_no_spills forbids);
  // x/pi costs ~|x| * 1e-16 absolute, far below F32 rounding.
  case Unary::Sin: return T(sinpi(v * (1.0 / kPi)));
  case Unary::Cos: return T(cospi(v * (1.0 / kPi)));
  case Unary::Asin: return T(asin(v));
  case Unary::Acos: return T(acos(v));
  case Unary::Atan: return T(atan(v));
  case Unary::Floor: return T(floor(v));
  case Unary::Ceil: return T(ceil(v));
  case Unary::Relu: return xv > T(0) ? xv : (isnan(v) ? xv : T(0));
  case Unary::Neg: return -xv;
  case Unary::Abs: return T(fabs(v));
  case Unary::Sign: return T((v > 0) - (v < 0));
  case Unary::GeluTanh:
    return T(0.5 * v * (1.0 + tanh(sqrt(2.0 / kPi) * (v + 0.044715 * v * v * v))));
  case Unary::Gelu: return T(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
  case Unary::LeakyRelu: return T(v >= 0 ? v : a * v);
  case Unary::Clamp: return isnan(v) ? xv : T(fmin(fmax(v, a), b));
  case Unary::Not: break;
  }
  return xv;
}

template <class T>
__global__ void __launch_bounds__(256)
    unaryFloatKernel(int op, const T *x, T *y, int64_t n, double a, double b) {
  MERAK_GRID_STRIDE(i, n) { y[i] = unaryFloatOp(op, x[i], a, b); }
}

template <class T>
__global__ void __launch_bounds__(256)
    unaryIntKernel(int op, const T *x, T *y, int64_t n, double lo, double hi,
                   int64_t loV, int64_t hiV) {
  using U = std::make_unsigned_t<T>;
  MERAK_GRID_STRIDE(i, n) {
    const T v = x[i];
    T r = v;
    switch (static_cast<Unary>(op)) {
    case Unary::Relu: r = v > 0 ? v : T(0); break;
    case Unary::Neg: r = T(U(0) - U(v)); break;
    case Unary::Abs: r = v < 0 ? T(U(0) - U(v)) : v; break;
    case Unary::Sign: r = T((v > 0) - (v < 0)); break;
    case Unary::Clamp: {
      int64_t w = v;
      if (double(w) < lo)
        w = loV;
      if (double(w) > hi)
        w = hiV;
      r = T(U(uint64_t(w)));
      break;
    }
    default: break;
    }
    y[i] = r;
  }
}

__global__ void __launch_bounds__(256)
    notKernel(const uint8_t *x, uint8_t *y, int64_t n) {
  MERAK_GRID_STRIDE(i, n) { y[i] = x[i] == 0; }
}

/// The F32 ops the existing vectorised kernel has.
bool cudaUnary(Unary op, cuda::Unary &k) {
  switch (op) {
  case Unary::Relu: k = cuda::Unary::Relu; return true;
  case Unary::Gelu: k = cuda::Unary::Gelu; return true;
  case Unary::GeluTanh: k = cuda::Unary::GeluTanh; return true;
  case Unary::Tanh: k = cuda::Unary::Tanh; return true;
  case Unary::Sigmoid: k = cuda::Unary::Sigmoid; return true;
  case Unary::Exp: k = cuda::Unary::Exp; return true;
  case Unary::Neg: k = cuda::Unary::Neg; return true;
  case Unary::Abs: k = cuda::Unary::Abs; return true;
  case Unary::Sqrt: k = cuda::Unary::Sqrt; return true;
  default: return false;
  }
}

void must(const Status &s) {
  if (!s.ok())
    fatal(s.message().c_str());
}

// --- binary -------------------------------------------------------------------

__device__ __forceinline__ int64_t ipowD(int64_t base, int64_t e) {
  if (e < 0)
    return base == 1 ? 1 : (base == -1 ? (e % 2 ? -1 : 1) : 0);
  int64_t r = 1;
  while (e) {
    if (e & 1)
      r = int64_t(uint64_t(r) * uint64_t(base));
    base = int64_t(uint64_t(base) * uint64_t(base));
    e >>= 1;
  }
  return r;
}

template <class T>
__device__ __forceinline__ T arith(int op, T x, T y, int *err) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (static_cast<Binary>(op)) {
    case Binary::Add: return x + y;
    case Binary::Sub: return x - y;
    case Binary::Mul: return x * y;
    case Binary::Div: return x / y;
    case Binary::Rem: return T(fmod(double(x), double(y)));
    case Binary::Pow: return T(pow(double(x), double(y)));
    case Binary::Max: return (isnan(x) || isnan(y)) ? T(NAN) : (x > y ? x : y);
    case Binary::Min: return (isnan(x) || isnan(y)) ? T(NAN) : (x < y ? x : y);
    default: return x;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (static_cast<Binary>(op)) {
    case Binary::Add: return T(U(x) + U(y));
    case Binary::Sub: return T(U(x) - U(y));
    case Binary::Mul: return T(U(x) * U(y));
    case Binary::Div:
      if (y == 0) {
        recordError(err, kErrIntDivZero);
        return T(0);
      }
      return y == -1 ? T(U(0) - U(x)) : T(x / y);
    case Binary::Rem:
      if (y == 0) {
        recordError(err, kErrIntDivZero);
        return T(0);
      }
      return y == -1 ? T(0) : T(x % y);
    case Binary::Pow: return T(U(uint64_t(ipowD(int64_t(x), int64_t(y)))));
    case Binary::Max: return x > y ? x : y;
    case Binary::Min: return x < y ? x : y;
    default: return x;
    }
  }
}

template <class T>
__device__ __forceinline__ uint8_t compare(int op, T x, T y) {
  switch (static_cast<Binary>(op)) {
  case Binary::Eq: return x == y;
  case Binary::Ne: return x != y;
  case Binary::Lt: return x < y;
  case Binary::Le: return x <= y;
  case Binary::Gt: return x > y;
  case Binary::Ge: return x >= y;
  case Binary::And: return (x != 0) & (y != 0);
  case Binary::Or: return (x != 0) | (y != 0);
  case Binary::Xor: return (x != 0) != (y != 0);
  default: return 0;
  }
}

/// out = a op b over the walk (s0: out, s1: a, s2: b).
template <class T, class R, bool Cmp>
__global__ void __launch_bounds__(256)
    binaryKernel(int op, const T *a, const T *b, R *out, int64_t n,
                 const __grid_constant__ Walk w, int *err) {
  MERAK_GRID_STRIDE(i, n) {
    int64_t oo, oa, ob;
    walkOffsets(w, i, oo, oa, ob);
    if constexpr (Cmp)
      out[oo] = compare<T>(op, a[oa], b[ob]);
    else
      out[oo] = arith<T>(op, a[oa], b[ob], err);
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    whereKernel(const uint8_t *c, const T *a, const T *b, T *out, int64_t n,
                const __grid_constant__ Walk w) {
  // s0: cond, s1: a, s2: b; out is contiguous (i).
  MERAK_GRID_STRIDE(i, n) {
    int64_t oc, oa, ob;
    walkOffsets(w, i, oc, oa, ob);
    out[i] = c[oc] ? a[oa] : b[ob];
  }
}

/// The walk of dout with the strides of out (contiguous), a and b.
Walk binaryWalk(const Dims &da, const Dims &db, const Dims &dout) {
  Walk w;
  w.rank = dout.rank;
  for (int32_t i = 0; i < dout.rank; ++i)
    w.dims[i] = dout.d[i];
  contiguousStrides(dout, w.s0);
  broadcastStrides(da, dout, w.s1);
  broadcastStrides(db, dout, w.s2);
  coalesce(w);
  return w;
}

template <class F, class T>
__global__ void __launch_bounds__(256)
    castKernel(const F *x, T *y, int64_t n) {
  MERAK_GRID_STRIDE(i, n) {
    if constexpr (std::is_same_v<T, uint8_t>)
      y[i] = x[i] != F(0);
    else
      y[i] = static_cast<T>(x[i]);
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    geluGradKernel(const T *x, const T *dy, T *dx, int64_t n, bool tanhApprox) {
  constexpr double kPi = 3.14159265358979323846;
  MERAK_GRID_STRIDE(i, n) {
    const double v = double(x[i]), g = double(dy[i]);
    double d;
    if (tanhApprox) {
      const double c = sqrt(2.0 / kPi);
      const double u = c * (v + 0.044715 * v * v * v);
      const double t = tanh(u);
      d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * v * v);
    } else {
      d = 0.5 * (1.0 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2.0 * kPi);
    }
    dx[i] = T(g * d);
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    dropoutKernel(const T *x, T *y, uint8_t *mask, int64_t n, double ratio, uint64_t key,
                  dropout::MaskLayout layout) {
  const double scale = 1.0 / (1.0 - ratio);
  const bool identity = layout.identity();
  MERAK_GRID_STRIDE(k, n) {
    const uint64_t i = identity ? uint64_t(k) : layout.globalIndex(k);
    const bool keep = ratio == 0.0 || dropout::uniform(key, i) >= ratio;
    if (mask)
      mask[k] = keep;
    y[k] = keep ? T(double(x[k]) * scale) : T(0);
  }
}

} // namespace

void unary(Unary op, DT t, const void *x, void *y, int64_t n, double a,
           double b) {
  if (n <= 0)
    return;
  if (op == Unary::BitNot)
    fatal("unary: bit_not is not in the CUDA kernels");
  cuda::Unary k;
  const bool native = cudaUnary(op, k);
  if (t == DT::BF16 && native) // bf16 in and out, float32 inside
    return must(cuda::unary(k, cuda::DType::BF16, x, y, n, stream()));
  if (t == DT::BF16) {
    auto *f = static_cast<float *>(scratch(1, static_cast<uint64_t>(n) * sizeof(float)));
    widenBf16(x, f, n);
    gpu::unary(op, DT::F32, f, f, n, a, b);
    return narrowToBf16(f, y, n);
  }
  if (t == DT::F32 && native)
    return must(cuda::unary(k, cuda::DType::F32, x, y, n, stream()));
  switch (t) {
  case DT::F32:
  case DT::F64:
    if (op == Unary::Not)
      fatal("unary: op has no float form");
    dispatchFloat(t, "unary", [&](auto tag) {
      using T = typename decltype(tag)::type;
      unaryFloatKernel<T><<<gridFor(n), 256, 0, cs()>>>(
          int(op), static_cast<const T *>(x), static_cast<T *>(y), n, a, b);
    });
    break;
  case DT::I64:
  case DT::I32: {
    if (op != Unary::Relu && op != Unary::Neg && op != Unary::Abs &&
        op != Unary::Sign && op != Unary::Clamp)
      fatal("unary: op has no integer form");
    auto toInt = [](double v) {
      return v <= -0x1p63  ? INT64_MIN
             : v >= 0x1p63 ? INT64_MAX
                           : static_cast<int64_t>(v);
    };
    const int64_t loV = toInt(std::ceil(a)), hiV = toInt(std::floor(b));
    if (t == DT::I64)
      unaryIntKernel<int64_t><<<gridFor(n), 256, 0, cs()>>>(
          int(op), static_cast<const int64_t *>(x), static_cast<int64_t *>(y), n,
          a, b, loV, hiV);
    else
      unaryIntKernel<int32_t><<<gridFor(n), 256, 0, cs()>>>(
          int(op), static_cast<const int32_t *>(x), static_cast<int32_t *>(y), n,
          a, b, loV, hiV);
    break;
  }
  case DT::BOOL:
    if (op != Unary::Not)
      fatal("unary: only 'not' takes a bool tensor");
    notKernel<<<gridFor(n), 256, 0, cs()>>>(static_cast<const uint8_t *>(x),
                                            static_cast<uint8_t *>(y), n);
    break;
  }
  checkLaunch("unary");
}

void binary(Binary op, DT t, const void *a, const Dims &da, const void *b,
            const Dims &db, void *out, const Dims &dout) {
  const int64_t n = dout.numel();
  if (n == 0)
    return;
  if (op >= Binary::BitAnd)
    fatal("binary: the bitwise ops are not in the CUDA kernels");
  const bool cmp = op >= Binary::Eq;
  const bool arith = op == Binary::Add || op == Binary::Sub || op == Binary::Mul ||
                     op == Binary::Div || op == Binary::Max || op == Binary::Min;
  if ((t == DT::F32 || t == DT::BF16) && arith) {
    cuda::Binary k = op == Binary::Add   ? cuda::Binary::Add
                     : op == Binary::Sub ? cuda::Binary::Sub
                     : op == Binary::Mul ? cuda::Binary::Mul
                     : op == Binary::Div ? cuda::Binary::Div
                     : op == Binary::Max ? cuda::Binary::Max
                                         : cuda::Binary::Min;
    // bf16 natively: loads widened, float32 arithmetic, one rounding.
    return must(cuda::binary(k, t == DT::BF16 ? cuda::DType::BF16 : cuda::DType::F32, a,
                             da, b, db, out, dout, stream()));
  }
  if (t == DT::BF16) {
    const int64_t na = da.numel(), nb = db.numel();
    auto *fa = static_cast<float *>(scratch(1, static_cast<uint64_t>(na) * sizeof(float)));
    auto *fb = static_cast<float *>(scratch(2, static_cast<uint64_t>(nb) * sizeof(float)));
    widenBf16(a, fa, na);
    widenBf16(b, fb, nb);
    if (cmp)
      return gpu::binary(op, DT::F32, fa, da, fb, db, out, dout);
    auto *fo = static_cast<float *>(scratch(3, static_cast<uint64_t>(n) * sizeof(float)));
    gpu::binary(op, DT::F32, fa, da, fb, db, fo, dout);
    return narrowToBf16(fo, out, n);
  }
  if (op >= Binary::And && t != DT::BOOL)
    fatal("binary: logical ops take bool tensors");
  const Walk w = binaryWalk(da, db, dout);
  int *err = errorWord();
  dispatchAll(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (cmp)
      binaryKernel<T, uint8_t, true><<<gridFor(n), 256, 0, cs()>>>(
          int(op), static_cast<const T *>(a), static_cast<const T *>(b),
          static_cast<uint8_t *>(out), n, w, err);
    else if constexpr (!std::is_same_v<T, uint8_t>)
      binaryKernel<T, T, false><<<gridFor(n), 256, 0, cs()>>>(
          int(op), static_cast<const T *>(a), static_cast<const T *>(b),
          static_cast<T *>(out), n, w, err);
    else
      fatal("binary: arithmetic needs a numeric type");
  });
  checkLaunch("binary");
}

void where(const void *cond, const Dims &dc, DT t, const void *a,
           const Dims &da, const void *b, const Dims &db, void *out,
           const Dims &dout) {
  const int64_t n = dout.numel();
  if (n == 0)
    return;
  Walk w;
  w.rank = dout.rank;
  for (int32_t i = 0; i < dout.rank; ++i)
    w.dims[i] = dout.d[i];
  broadcastStrides(dc, dout, w.s0);
  broadcastStrides(da, dout, w.s1);
  broadcastStrides(db, dout, w.s2);
  dispatchBits(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    whereKernel<T><<<gridFor(n), 256, 0, cs()>>>(
        static_cast<const uint8_t *>(cond), static_cast<const T *>(a),
        static_cast<const T *>(b), static_cast<T *>(out), n, w);
  });
  checkLaunch("where");
}

void detail::widenBf16(const void *x, float *y, int64_t n) {
  must(cuda::accumulateBf16ToF32(x, y, n, /*overwrite=*/true, stream()));
}
void detail::narrowToBf16(const float *x, void *y, int64_t n) {
  must(cuda::castF32ToBf16(x, y, n, stream()));
}

void cast(DT from, const void *x, DT to, void *y, int64_t n) {
  if (n <= 0)
    return;
  if (from == to)
    return copyBytes(y, x, n * elemSize(from));
  if (from == DT::BF16 || to == DT::BF16) { // through float32
    if (from == DT::BF16 && to == DT::F32)
      return widenBf16(x, static_cast<float *>(y), n);
    if (from == DT::F32 && to == DT::BF16)
      return narrowToBf16(static_cast<const float *>(x), y, n);
    auto *f = static_cast<float *>(scratch(3, static_cast<uint64_t>(n) * sizeof(float)));
    gpu::cast(from, x, DT::F32, f, n);
    return gpu::cast(DT::F32, f, to, y, n);
  }
  dispatchAll(from, [&](auto ft) {
    using F = typename decltype(ft)::type;
    dispatchAll(to, [&](auto tt) {
      using T = typename decltype(tt)::type;
      castKernel<F, T><<<gridFor(n), 256, 0, cs()>>>(static_cast<const F *>(x),
                                                     static_cast<T *>(y), n);
    });
  });
  checkLaunch("cast");
}

void geluGrad(DT t, const void *x, const void *dy, void *dx, int64_t n,
              bool tanhApprox) {
  if (n <= 0)
    return;
  if (t == DT::F32 || t == DT::BF16)
    return must(cuda::geluBackward(
        t == DT::BF16 ? cuda::DType::BF16 : cuda::DType::F32, x, dy, dx, n,
        tanhApprox, stream()));
  dispatchFloat(t, "gelu_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    geluGradKernel<T><<<gridFor(n), 256, 0, cs()>>>(
        static_cast<const T *>(x), static_cast<const T *>(dy),
        static_cast<T *>(dx), n, tanhApprox);
  });
  checkLaunch("gelu_grad");
}

void dropout(DT t, const void *x, const Dims &dx, double ratio, int64_t seed,
             const Dims &batchSplit, const Dims &tpSplit, void *y, void *mask) {
  const int64_t n = dx.numel();
  if (n <= 0)
    return;
  // Host side: the layout and key from the training position (the CPU's).
  const dropout::MaskLayout layout = dropout::layoutAt(dx, batchSplit, tpSplit);
  const uint64_t key = dropout::keyAt(seed);
  dispatchFloat(t, "dropout: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropoutKernel<T><<<gridFor(n), 256, 0, cs()>>>(
        static_cast<const T *>(x), static_cast<T *>(y),
        static_cast<uint8_t *>(mask), n, ratio, key, layout);
  });
  checkLaunch("dropout");
}

} // namespace merak::rt::gpu
