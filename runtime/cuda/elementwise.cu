//===- elementwise.cu - Unary, broadcasting binary and GELU backward --------===//
//
// Grid-stride loops over 16-byte vectors (4 floats / 8 bf16) when sizes and
// alignment allow, scalar otherwise; the op is a uniform runtime switch.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "merak_rt/cuda/kernels.h"

namespace merak::rt::cuda {
namespace {
using namespace detail;

constexpr float kSqrt1_2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kTanhC = 0.79788456080286536f; // sqrt(2/pi)

__device__ __forceinline__ float applyUnary(int op, float x) {
  switch (static_cast<Unary>(op)) {
  case Unary::Relu:
    return x > 0.f ? x : (isnan(x) ? x : 0.f); // NaN propagates (ops.h)
  case Unary::Gelu:
    return 0.5f * x * (1.f + erff(x * kSqrt1_2));
  case Unary::GeluTanh:
    return 0.5f * x * (1.f + tanhf(kTanhC * (x + 0.044715f * x * x * x)));
  case Unary::Tanh:
    return tanhf(x);
  case Unary::Sigmoid:
    return 1.f / (1.f + expf(-x));
  case Unary::Exp:
    return expf(x);
  case Unary::Neg:
    return -x;
  case Unary::Abs:
    return fabsf(x);
  case Unary::Sqrt:
    return sqrtf(x);
  case Unary::Rsqrt:
    return rsqrtf(x);
  }
  return x;
}

__device__ __forceinline__ float applyBinary(int op, float a, float b) {
  switch (static_cast<Binary>(op)) {
  case Binary::Add:
    return a + b;
  case Binary::Sub:
    return a - b;
  case Binary::Mul:
    return a * b;
  case Binary::Div:
    return a / b;
  case Binary::Max: // NaN propagates, as ops.h (fmaxf would drop it)
    return (isnan(a) || isnan(b)) ? NAN : fmaxf(a, b);
  case Binary::Min:
    return (isnan(a) || isnan(b)) ? NAN : fminf(a, b);
  }
  return a;
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(256)
    unaryKernel(int op, const T *x, T *y,
                int64_t items) {
  constexpr int N = VEC ? Vec<T>::N : 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (VEC) {
      float v[N];
      load16(x + i * N, v);
#pragma unroll
      for (int k = 0; k < N; ++k)
        v[k] = applyUnary(op, v[k]);
      store16(y + i * N, v);
    } else {
      y[i] = fromF<T>(applyUnary(op, toF(x[i])));
    }
  }
}

struct BinParams {
  int32_t kind, rank;
  int64_t inner;
  int64_t dims[kMaxRank], sa[kMaxRank], sb[kMaxRank];
};

template <typename T, int N>
__device__ __forceinline__ void loadOperand(const T *p, int64_t idx,
                                            bool scalar, float (&v)[N]) {
  if (scalar) {
    const float s = toF(p[0]);
#pragma unroll
    for (int k = 0; k < N; ++k)
      v[k] = s;
  } else if constexpr (N > 1) {
    load16(p + idx, v);
  } else {
    v[0] = toF(p[idx]);
  }
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(256)
    binaryKernel(int op, const T *a, const T *b,
                 T *out, int64_t items, BinParams p) {
  constexpr int N = VEC ? Vec<T>::N : 1;
  const auto kind = static_cast<BroadcastKind>(p.kind);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * N; // first element
    int64_t ia = e, ib = e;
    switch (kind) {
    case BroadcastKind::Same:
    case BroadcastKind::ScalarA:
    case BroadcastKind::ScalarB:
      break;
    case BroadcastKind::RowB:
      ib = e % p.inner;
      break;
    case BroadcastKind::RowA:
      ia = e % p.inner;
      break;
    case BroadcastKind::General: {
      int64_t rem = e;
      ia = ib = 0;
      for (int d = p.rank - 1; d >= 0; --d) {
        const int64_t c = rem % p.dims[d];
        rem /= p.dims[d];
        ia += c * p.sa[d];
        ib += c * p.sb[d];
      }
      break;
    }
    }
    float va[N], vb[N];
    loadOperand<T, N>(a, ia, kind == BroadcastKind::ScalarA, va);
    loadOperand<T, N>(b, ib, kind == BroadcastKind::ScalarB, vb);
#pragma unroll
    for (int k = 0; k < N; ++k)
      va[k] = applyBinary(op, va[k], vb[k]);
    if constexpr (VEC)
      store16(out + e, va);
    else
      out[e] = fromF<T>(va[0]);
  }
}

__device__ __forceinline__ float geluDerivative(float v, bool tanhApprox) {
  if (tanhApprox) {
    const float t = tanhf(kTanhC * (v + 0.044715f * v * v * v));
    return 0.5f * (1.f + t) +
           0.5f * v * (1.f - t * t) * kTanhC * (1.f + 3.f * 0.044715f * v * v);
  }
  return 0.5f * (1.f + erff(v * kSqrt1_2)) +
         v * kInvSqrt2Pi * expf(-0.5f * v * v);
}
__device__ __forceinline__ float gelu(float v, bool tanhApprox) {
  return tanhApprox ? applyUnary(int(Unary::GeluTanh), v)
                    : applyUnary(int(Unary::Gelu), v);
}

/// y = gelu(x + bias[col]) (BWD: dx = dy * gelu'(x + bias[col])) over
/// vectors (VEC: cols is a multiple of the width) or elements.
template <typename T, bool VEC, bool BWD>
__global__ void __launch_bounds__(256)
    biasGeluKernel(const T *x, const T *__restrict__ bias, const T *dy, T *out,
                   int64_t items, int64_t cols, bool tanhApprox) {
  constexpr int N = VEC ? Vec<T>::N : 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * N, c = e % cols;
    float xv[N], bv[N], g[N];
    if constexpr (VEC) {
      load16(x + e, xv);
      load16(bias + c, bv);
      if (BWD)
        load16(dy + e, g);
    } else {
      xv[0] = toF(x[e]);
      bv[0] = toF(bias[c]);
      if (BWD)
        g[0] = toF(dy[e]);
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float v = xv[k] + bv[k];
      xv[k] = BWD ? g[k] * geluDerivative(v, tanhApprox) : gelu(v, tanhApprox);
    }
    if constexpr (VEC)
      store16(out + e, xv);
    else
      out[e] = fromF<T>(xv[0]);
  }
}

/// out[j] = sum over rows of x[r, j] (float); a 32x8 block owns 32 columns.
template <typename T>
__global__ void __launch_bounds__(256)
    columnSumKernel(const T *x, float *out, int64_t rows, int64_t cols) {
  __shared__ float sm[8][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float a = 0.f;
  if (j < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8)
      a += toF(x[r * cols + j]);
  sm[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
#pragma unroll
    for (int k = 1; k < 8; ++k)
      a += sm[k][threadIdx.x];
    out[j] = a;
  }
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(256)
    geluBackwardKernel(const T *x, const T *dy, T *dx,
                       int64_t items, bool tanhApprox) {
  constexpr int N = VEC ? Vec<T>::N : 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    float xv[N], g[N];
    if constexpr (VEC) {
      load16(x + i * N, xv);
      load16(dy + i * N, g);
    } else {
      xv[0] = toF(x[i]);
      g[0] = toF(dy[i]);
    }
#pragma unroll
    for (int k = 0; k < N; ++k)
      g[k] *= geluDerivative(xv[k], tanhApprox);
    if constexpr (VEC)
      store16(dx + i * N, g);
    else
      dx[i] = fromF<T>(g[0]);
  }
}

template <typename T>
Status unaryT(Unary op, const void *x, void *y, int64_t n, StreamHandle s) {
  const bool vec = canVectorize(DType::F32, 0, x, y) &&
                   n % Vec<T>::N == 0;
  const int64_t items = vec ? n / Vec<T>::N : n;
  const Launch l = elementwiseLaunch(items);
  if (l.grid == 0)
    return Status::success();
  if (vec)
    unaryKernel<T, true><<<l.grid, l.block, 0, st(s)>>>(
        int(op), static_cast<const T *>(x), static_cast<T *>(y), items);
  else
    unaryKernel<T, false><<<l.grid, l.block, 0, st(s)>>>(
        int(op), static_cast<const T *>(x), static_cast<T *>(y), items);
  return launched("unaryKernel");
}

template <typename T>
Status binaryT(Binary op, const void *a, const void *b, void *out,
               const BroadcastPlan &plan, StreamHandle s) {
  BinParams p = {};
  p.kind = int32_t(plan.kind);
  p.rank = plan.rank;
  p.inner = plan.inner;
  for (int i = 0; i < plan.rank; ++i)
    p.dims[i] = plan.dims[i], p.sa[i] = plan.strideA[i],
    p.sb[i] = plan.strideB[i];
  constexpr int N = Vec<T>::N;
  bool vec = plan.numel % N == 0 && canVectorize(DType::F32, 0, out);
  switch (plan.kind) {
  case BroadcastKind::Same:
    vec = vec && canVectorize(DType::F32, 0, a, b);
    break;
  case BroadcastKind::ScalarA:
    vec = vec && canVectorize(DType::F32, 0, b);
    break;
  case BroadcastKind::ScalarB:
    vec = vec && canVectorize(DType::F32, 0, a);
    break;
  case BroadcastKind::RowA:
  case BroadcastKind::RowB:
    vec = vec && plan.inner % N == 0 && canVectorize(DType::F32, 0, a, b);
    break;
  case BroadcastKind::General:
    vec = false;
    break;
  }
  const int64_t items = vec ? plan.numel / N : plan.numel;
  const Launch l = elementwiseLaunch(items);
  if (l.grid == 0)
    return Status::success();
  auto *pa = static_cast<const T *>(a), *pb = static_cast<const T *>(b);
  auto *po = static_cast<T *>(out);
  if (vec)
    binaryKernel<T, true><<<l.grid, l.block, 0, st(s)>>>(int(op), pa, pb, po,
                                                         items, p);
  else
    binaryKernel<T, false><<<l.grid, l.block, 0, st(s)>>>(int(op), pa, pb, po,
                                                          items, p);
  return launched("binaryKernel");
}

template <typename T>
Status geluBackwardT(const void *x, const void *dy, void *dx, int64_t n,
                     bool tanhApprox, StreamHandle s) {
  const bool vec = n % Vec<T>::N == 0 && canVectorize(DType::F32, 0, x, dy, dx);
  const int64_t items = vec ? n / Vec<T>::N : n;
  const Launch l = elementwiseLaunch(items);
  if (l.grid == 0)
    return Status::success();
  auto *px = static_cast<const T *>(x), *pdy = static_cast<const T *>(dy);
  auto *pdx = static_cast<T *>(dx);
  if (vec)
    geluBackwardKernel<T, true>
        <<<l.grid, l.block, 0, st(s)>>>(px, pdy, pdx, items, tanhApprox);
  else
    geluBackwardKernel<T, false>
        <<<l.grid, l.block, 0, st(s)>>>(px, pdy, pdx, items, tanhApprox);
  return launched("geluBackwardKernel");
}
template <typename T>
Status biasGeluT(const void *x, const void *bias, const void *dy, void *out,
                 float *dbias, int64_t rows, int64_t cols, bool tanhApprox,
                 bool bwd, StreamHandle s) {
  const int64_t n = rows * cols;
  const bool vec = cols % Vec<T>::N == 0 &&
                   canVectorize(DType::F32, 0, x, bias, dy, out);
  const int64_t items = vec ? n / Vec<T>::N : n;
  const Launch l = elementwiseLaunch(items);
  auto *px = static_cast<const T *>(x), *pb = static_cast<const T *>(bias),
       *pdy = static_cast<const T *>(dy);
  auto *po = static_cast<T *>(out);
  if (l.grid > 0) {
    if (bwd && vec)
      biasGeluKernel<T, true, true><<<l.grid, l.block, 0, st(s)>>>(
          px, pb, pdy, po, items, cols, tanhApprox);
    else if (bwd)
      biasGeluKernel<T, false, true><<<l.grid, l.block, 0, st(s)>>>(
          px, pb, pdy, po, items, cols, tanhApprox);
    else if (vec)
      biasGeluKernel<T, true, false><<<l.grid, l.block, 0, st(s)>>>(
          px, pb, pdy, po, items, cols, tanhApprox);
    else
      biasGeluKernel<T, false, false><<<l.grid, l.block, 0, st(s)>>>(
          px, pb, pdy, po, items, cols, tanhApprox);
    if (Status e = launched("biasGeluKernel"); !e)
      return e;
  }
  if (bwd && dbias && cols > 0) {
    const dim3 block(32, 8), grid(static_cast<unsigned>((cols + 31) / 32));
    columnSumKernel<T><<<grid, block, 0, st(s)>>>(po, dbias, rows, cols);
    return launched("columnSumKernel");
  }
  return Status::success();
}
} // namespace

Status biasGeluForward(DType t, const void *x, const void *bias, void *y,
                       int64_t rows, int64_t cols, bool tanhApprox,
                       StreamHandle stream) {
  if (rows < 0 || cols < 0)
    return Status::error("cuda biasGeluForward: negative size");
  return t == DType::F32 ? biasGeluT<float>(x, bias, nullptr, y, nullptr, rows,
                                            cols, tanhApprox, false, stream)
                         : biasGeluT<bf16>(x, bias, nullptr, y, nullptr, rows,
                                           cols, tanhApprox, false, stream);
}

Status biasGeluBackward(DType t, const void *x, const void *bias,
                        const void *dy, void *dx, float *dbias, int64_t rows,
                        int64_t cols, bool tanhApprox, StreamHandle stream) {
  if (rows < 0 || cols < 0)
    return Status::error("cuda biasGeluBackward: negative size");
  return t == DType::F32 ? biasGeluT<float>(x, bias, dy, dx, dbias, rows, cols,
                                            tanhApprox, true, stream)
                         : biasGeluT<bf16>(x, bias, dy, dx, dbias, rows, cols,
                                           tanhApprox, true, stream);
}

Status unary(Unary op, DType t, const void *x, void *y, int64_t n,
             StreamHandle stream) {
  if (n < 0)
    return Status::error("cuda unary: negative size");
  return t == DType::F32 ? unaryT<float>(op, x, y, n, stream)
                         : unaryT<bf16>(op, x, y, n, stream);
}

Status binary(Binary op, DType t, const void *a, const Dims &da, const void *b,
              const Dims &db, void *out, const Dims &dout,
              StreamHandle stream) {
  Result<BroadcastPlan> plan = planBroadcast(da, db, dout);
  if (!plan)
    return plan.status();
  return t == DType::F32 ? binaryT<float>(op, a, b, out, *plan, stream)
                         : binaryT<bf16>(op, a, b, out, *plan, stream);
}

Status geluBackward(DType t, const void *x, const void *dy, void *dx,
                    int64_t n, bool tanhApprox, StreamHandle stream) {
  if (n < 0)
    return Status::error("cuda geluBackward: negative size");
  return t == DType::F32
             ? geluBackwardT<float>(x, dy, dx, n, tanhApprox, stream)
             : geluBackwardT<bf16>(x, dy, dx, n, tanhApprox, stream);
}

} // namespace merak::rt::cuda
