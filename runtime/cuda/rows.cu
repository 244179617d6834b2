//===- rows.cu - Row kernels: softmax, layer norm, cross entropy -------------===//
//
// One warp per row for rows of up to kWarpRowMax elements (8 rows per
// 256-thread block), one block per row beyond (vocabulary-sized rows), with
// 16-byte vector accesses when the row length and base address allow.
// Reductions are in float32 (warp shuffles, then shared memory across warps).
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "merak_rt/cuda/kernels.h"

#include <cmath>

namespace merak::rt::cuda {
namespace {
using namespace detail;

struct Row {
  int64_t row;
  int tid, nt;
};
template <bool WARP> __device__ __forceinline__ Row rowOf() {
  if constexpr (WARP)
    return {int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5),
            int(threadIdx.x & 31), 32};
  else
    return {int64_t(blockIdx.x), int(threadIdx.x), int(blockDim.x)};
}

/// f(j, x[j]) for this thread's elements of the row.
template <typename T, bool VEC, typename F>
__device__ __forceinline__ void forRow(const T *r, int64_t cols, const Row &c,
                                       F f) {
  if constexpr (VEC) {
    constexpr int N = Vec<T>::N;
    for (int64_t j = c.tid; j * N < cols; j += c.nt) {
      float v[N];
      load16(r + j * N, v);
#pragma unroll
      for (int k = 0; k < N; ++k)
        f(j * N + k, v[k]);
    }
  } else {
    for (int64_t j = c.tid; j < cols; j += c.nt)
      f(j, toF(r[j]));
  }
}
/// f(j, a[j], b[j]).
template <typename T, bool VEC, typename F>
__device__ __forceinline__ void forRow2(const T *a, const T *b, int64_t cols,
                                        const Row &c, F f) {
  if constexpr (VEC) {
    constexpr int N = Vec<T>::N;
    for (int64_t j = c.tid; j * N < cols; j += c.nt) {
      float va[N], vb[N];
      load16(a + j * N, va);
      load16(b + j * N, vb);
#pragma unroll
      for (int k = 0; k < N; ++k)
        f(j * N + k, va[k], vb[k]);
    }
  } else {
    for (int64_t j = c.tid; j < cols; j += c.nt)
      f(j, toF(a[j]), toF(b[j]));
  }
}
/// out[j] = f(j, a[j], b[j]) (b may be null: 0 is passed).
template <typename T, bool VEC, typename F>
__device__ __forceinline__ void mapRow(const T *a, const T *b, T *out,
                                       int64_t cols, const Row &c, F f) {
  if constexpr (VEC) {
    constexpr int N = Vec<T>::N;
    for (int64_t j = c.tid; j * N < cols; j += c.nt) {
      float va[N], vb[N];
      load16(a + j * N, va);
      if (b)
        load16(b + j * N, vb);
#pragma unroll
      for (int k = 0; k < N; ++k)
        va[k] = f(j * N + k, va[k], b ? vb[k] : 0.f);
      store16(out + j * N, va);
    }
  } else {
    for (int64_t j = c.tid; j < cols; j += c.nt)
      out[j] = fromF<T>(f(j, toF(a[j]), b ? toF(b[j]) : 0.f));
  }
}

// --- softmax -------------------------------------------------------------------

template <typename T, bool WARP, bool VEC>
__global__ void __launch_bounds__(1024)
    softmaxFwdKernel(bool isLog, const T *x, T *y, int64_t rows, int64_t cols) {
  __shared__ float smem[64];
  const Row c = rowOf<WARP>();
  if (c.row >= rows)
    return;
  const T *xr = x + c.row * cols;
  T *yr = y + c.row * cols;
  float m = -INFINITY, s = 0.f;
  forRow<T, VEC>(xr, cols, c, [&](int64_t, float v) {
    pushMaxSum(m, s, v);
  });
  groupMaxSum<WARP>(m, s, smem);
  const float logS = logf(s), inv = 1.f / s;
  mapRow<T, VEC>(xr, nullptr, yr, cols, c, [&](int64_t, float v, float) {
    return isLog ? v - m - logS : expf(v - m) * inv;
  });
}

template <typename T, bool WARP, bool VEC>
__global__ void __launch_bounds__(1024)
    softmaxBwdKernel(bool isLog, const T *y, const T *dy, T *dx, int64_t rows,
                     int64_t cols) {
  __shared__ float smem[64];
  const Row c = rowOf<WARP>();
  if (c.row >= rows)
    return;
  const T *yr = y + c.row * cols, *dyr = dy + c.row * cols;
  float acc = 0.f;
  forRow2<T, VEC>(yr, dyr, cols, c, [&](int64_t, float yv, float g) {
    acc += isLog ? g : g * yv;
  });
  const float sum = groupSum<WARP>(acc, smem);
  mapRow<T, VEC>(yr, dyr, dx + c.row * cols, cols, c,
                 [&](int64_t, float yv, float g) {
                   return isLog ? g - expf(yv) * sum : yv * (g - sum);
                 });
}

// --- layer norm ------------------------------------------------------------------

template <typename T, bool WARP, bool VEC>
__global__ void __launch_bounds__(1024)
    layerNormFwdKernel(const T *x, const T *scale, const T *bias, T *y,
                       float *mean, float *rstd, int64_t rows, int64_t cols,
                       float eps) {
  __shared__ float smem[64];
  const Row c = rowOf<WARP>();
  if (c.row >= rows)
    return;
  const T *xr = x + c.row * cols;
  float acc = 0.f;
  forRow<T, VEC>(xr, cols, c, [&](int64_t, float v) { acc += v; });
  const float mu = groupSum<WARP>(acc, smem) / float(cols);
  acc = 0.f;
  forRow<T, VEC>(xr, cols, c, [&](int64_t, float v) {
    const float d = v - mu;
    acc += d * d;
  });
  const float var = groupSum<WARP>(acc, smem) / float(cols);
  const float rs = rsqrtf(var + eps);
  if (c.tid == 0) {
    if (mean)
      mean[c.row] = mu;
    if (rstd)
      rstd[c.row] = rs;
  }
  mapRow<T, VEC>(xr, nullptr, y + c.row * cols, cols, c,
                 [&](int64_t j, float v, float) {
                   float o = (v - mu) * rs;
                   if (scale)
                     o *= toF(scale[j]);
                   if (bias)
                     o += toF(bias[j]);
                   return o;
                 });
}

template <typename T, bool WARP, bool VEC>
__global__ void __launch_bounds__(1024)
    layerNormBwdKernel(const T *x, const T *scale, const float *mean,
                       const float *rstd, const T *dy, T *dx, int64_t rows,
                       int64_t cols) {
  __shared__ float smem[64];
  const Row c = rowOf<WARP>();
  if (c.row >= rows)
    return;
  const T *xr = x + c.row * cols, *dyr = dy + c.row * cols;
  const float mu = mean[c.row], rs = rstd[c.row];
  float sg = 0.f, sgx = 0.f;
  forRow2<T, VEC>(xr, dyr, cols, c, [&](int64_t j, float v, float d) {
    const float g = scale ? d * toF(scale[j]) : d;
    sg += g;
    sgx += g * (v - mu) * rs;
  });
  const float mg = groupSum<WARP>(sg, smem) / float(cols);
  const float mgx = groupSum<WARP>(sgx, smem) / float(cols);
  mapRow<T, VEC>(xr, dyr, dx + c.row * cols, cols, c,
                 [&](int64_t j, float v, float d) {
                   const float g = scale ? d * toF(scale[j]) : d;
                   return rs * (g - mg - (v - mu) * rs * mgx);
                 });
}

/// dscale[j] = sum_r dy * xhat, dbias[j] = sum_r dy: a 32x8 block owns 32
/// columns (coalesced across threadIdx.x); threadIdx.y strides the rows.
template <typename T>
__global__ void __launch_bounds__(256)
    layerNormParamGradKernel(const T *x, const float *mean, const float *rstd,
                             const T *dy, float *dscale, float *dbias,
                             int64_t rows, int64_t cols) {
  __shared__ float ss[8][33], sb[8][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float a = 0.f, b = 0.f;
  if (j < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8) {
      const float d = toF(dy[r * cols + j]);
      a += d * (toF(x[r * cols + j]) - mean[r]) * rstd[r];
      b += d;
    }
  ss[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
#pragma unroll
    for (int k = 1; k < 8; ++k)
      a += ss[k][threadIdx.x], b += sb[k][threadIdx.x];
    if (dscale)
      dscale[j] = a;
    if (dbias)
      dbias[j] = b;
  }
}

// --- cross entropy ---------------------------------------------------------------

template <typename T, bool WARP, bool VEC>
__global__ void __launch_bounds__(1024)
    crossEntropyFwdKernel(const T *logits, const int64_t *labels, float *loss,
                          int64_t rows, int64_t classes, int64_t ignoreIndex) {
  __shared__ float smem[64];
  const Row c = rowOf<WARP>();
  if (c.row >= rows)
    return;
  const int64_t label = labels[c.row];
  if (label == ignoreIndex) {
    if (c.tid == 0)
      loss[c.row] = 0.f;
    return;
  }
  const T *xr = logits + c.row * classes;
  float m = -INFINITY, s = 0.f;
  forRow<T, VEC>(xr, classes, c, [&](int64_t, float v) {
    pushMaxSum(m, s, v);
  });
  groupMaxSum<WARP>(m, s, smem);
  if (c.tid == 0)
    loss[c.row] = (label < 0 || label >= classes)
                      ? NAN
                      : m + logf(s) - toF(xr[label]);
}

/// mean over non-ignored rows; one block of 1024 threads.
__global__ void __launch_bounds__(1024)
    crossEntropyMeanKernel(const float *loss, const int64_t *labels,
                           int64_t rows, int64_t ignoreIndex, float *meanOut,
                           float *countOut) {
  __shared__ float smem[64];
  float s = 0.f, n = 0.f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (labels[r] != ignoreIndex)
      s += loss[r], n += 1.f;
  s = groupSum<false>(s, smem);
  n = groupSum<false>(n, smem);
  if (threadIdx.x == 0) {
    *meanOut = n > 0.f ? s / n : 0.f;
    if (countOut)
      *countOut = n;
  }
}

template <typename T, bool WARP, bool VEC>
__global__ void __launch_bounds__(1024)
    crossEntropyBwdKernel(const T *logits, const int64_t *labels, T *dlogits,
                          int64_t rows, int64_t classes, float scale,
                          const float *divisor, int64_t ignoreIndex) {
  __shared__ float smem[64];
  const Row c = rowOf<WARP>();
  if (c.row >= rows)
    return;
  const int64_t label = labels[c.row];
  const T *xr = logits + c.row * classes;
  T *dr = dlogits + c.row * classes;
  if (label == ignoreIndex) {
    mapRow<T, VEC>(xr, nullptr, dr, classes, c,
                   [](int64_t, float, float) { return 0.f; });
    return;
  }
  float m = -INFINITY, s = 0.f;
  forRow<T, VEC>(xr, classes, c, [&](int64_t, float v) {
    pushMaxSum(m, s, v);
  });
  groupMaxSum<WARP>(m, s, smem);
  float w = scale;
  if (divisor) {
    const float d = *divisor;
    w = d != 0.f ? scale / d : scale;
  }
  const bool bad = label < 0 || label >= classes;
  const float inv = 1.f / s;
  mapRow<T, VEC>(xr, nullptr, dr, classes, c, [&](int64_t j, float v, float) {
    if (bad)
      return NAN;
    return (expf(v - m) * inv - (j == label ? 1.f : 0.f)) * w;
  });
}

// --- launchers -------------------------------------------------------------------

/// Launches K<T, warp, vec> per rowLaunch and the vector test.
#define MERAK_ROW_LAUNCH(KERNEL, T, rows, cols, vecOk, stream, ...)            \
  do {                                                                         \
    const RowLaunch l_ = rowLaunch(rows, cols);                                \
    if (l_.grid == 0)                                                          \
      return Status::success();                                                \
    const bool v_ = (vecOk) && (cols) % Vec<T>::N == 0;                        \
    if (l_.warpPerRow && v_)                                                   \
      KERNEL<T, true, true><<<l_.grid, l_.block, 0, st(stream)>>>(__VA_ARGS__); \
    else if (l_.warpPerRow)                                                    \
      KERNEL<T, true, false><<<l_.grid, l_.block, 0, st(stream)>>>(__VA_ARGS__); \
    else if (v_)                                                               \
      KERNEL<T, false, true><<<l_.grid, l_.block, 0, st(stream)>>>(__VA_ARGS__); \
    else                                                                       \
      KERNEL<T, false, false><<<l_.grid, l_.block, 0, st(stream)>>>(__VA_ARGS__); \
    return launched(#KERNEL);                                                  \
  } while (0)

bool aligned(const void *a, const void *b = nullptr, const void *c = nullptr) {
  return canVectorize(DType::F32, 0, a, b, c);
}

Status checkRows(int64_t rows, int64_t cols, const char *what) {
  if (rows < 0 || cols < 0)
    return Status::error(std::string("cuda ") + what + ": negative size");
  return Status::success();
}

template <typename T>
Status softmaxFwdT(bool isLog, const void *x, void *y, int64_t rows,
                   int64_t cols, StreamHandle s) {
  auto *px = static_cast<const T *>(x);
  auto *py = static_cast<T *>(y);
  MERAK_ROW_LAUNCH(softmaxFwdKernel, T, rows, cols, aligned(x, y), s, isLog,
                   px, py, rows, cols);
}
template <typename T>
Status softmaxBwdT(bool isLog, const void *y, const void *dy, void *dx,
                   int64_t rows, int64_t cols, StreamHandle s) {
  auto *py = static_cast<const T *>(y), *pdy = static_cast<const T *>(dy);
  auto *pdx = static_cast<T *>(dx);
  MERAK_ROW_LAUNCH(softmaxBwdKernel, T, rows, cols, aligned(y, dy, dx), s,
                   isLog, py, pdy, pdx, rows, cols);
}
template <typename T>
Status layerNormFwdT(const void *x, const void *scale, const void *bias,
                     void *y, float *mean, float *rstd, int64_t rows,
                     int64_t cols, float eps, StreamHandle s) {
  auto *px = static_cast<const T *>(x), *ps = static_cast<const T *>(scale),
       *pb = static_cast<const T *>(bias);
  auto *py = static_cast<T *>(y);
  MERAK_ROW_LAUNCH(layerNormFwdKernel, T, rows, cols, aligned(x, y), s, px, ps,
                   pb, py, mean, rstd, rows, cols, eps);
}
template <typename T>
Status layerNormBwdT(const void *x, const void *scale, const float *mean,
                     const float *rstd, const void *dy, void *dx, int64_t rows,
                     int64_t cols, StreamHandle s) {
  auto *px = static_cast<const T *>(x), *ps = static_cast<const T *>(scale),
       *pdy = static_cast<const T *>(dy);
  auto *pdx = static_cast<T *>(dx);
  MERAK_ROW_LAUNCH(layerNormBwdKernel, T, rows, cols, aligned(x, dy, dx), s,
                   px, ps, mean, rstd, pdy, pdx, rows, cols);
}
template <typename T>
Status ceFwdT(const void *logits, const int64_t *labels, float *loss,
              int64_t rows, int64_t classes, int64_t ignoreIndex,
              StreamHandle s) {
  auto *pl = static_cast<const T *>(logits);
  MERAK_ROW_LAUNCH(crossEntropyFwdKernel, T, rows, classes, aligned(logits), s,
                   pl, labels, loss, rows, classes, ignoreIndex);
}
template <typename T>
Status ceBwdT(const void *logits, const int64_t *labels, void *dlogits,
              int64_t rows, int64_t classes, float scale, const float *divisor,
              int64_t ignoreIndex, StreamHandle s) {
  auto *pl = static_cast<const T *>(logits);
  auto *pd = static_cast<T *>(dlogits);
  MERAK_ROW_LAUNCH(crossEntropyBwdKernel, T, rows, classes,
                   aligned(logits, dlogits), s, pl, labels, pd, rows, classes,
                   scale, divisor, ignoreIndex);
}
} // namespace

Status softmaxForward(bool isLog, DType t, const void *x, void *y,
                      int64_t rows, int64_t cols, StreamHandle stream) {
  if (Status c = checkRows(rows, cols, "softmaxForward"); !c)
    return c;
  if (cols == 0)
    return Status::success();
  return t == DType::F32
             ? softmaxFwdT<float>(isLog, x, y, rows, cols, stream)
             : softmaxFwdT<bf16>(isLog, x, y, rows, cols, stream);
}

Status softmaxBackward(bool isLog, DType t, const void *y, const void *dy,
                       void *dx, int64_t rows, int64_t cols,
                       StreamHandle stream) {
  if (Status c = checkRows(rows, cols, "softmaxBackward"); !c)
    return c;
  if (cols == 0)
    return Status::success();
  return t == DType::F32
             ? softmaxBwdT<float>(isLog, y, dy, dx, rows, cols, stream)
             : softmaxBwdT<bf16>(isLog, y, dy, dx, rows, cols, stream);
}

Status layerNormForward(DType t, const void *x, const void *scale,
                        const void *bias, void *y, float *mean, float *rstd,
                        int64_t rows, int64_t cols, float eps,
                        StreamHandle stream) {
  if (Status c = checkRows(rows, cols, "layerNormForward"); !c)
    return c;
  if (cols == 0)
    return Status::success();
  return t == DType::F32 ? layerNormFwdT<float>(x, scale, bias, y, mean, rstd,
                                                rows, cols, eps, stream)
                         : layerNormFwdT<bf16>(x, scale, bias, y, mean, rstd,
                                               rows, cols, eps, stream);
}

Status layerNormBackward(DType t, const void *x, const void *scale,
                         const float *mean, const float *rstd, const void *dy,
                         void *dx, float *dscale, float *dbias, int64_t rows,
                         int64_t cols, StreamHandle stream) {
  if (Status c = checkRows(rows, cols, "layerNormBackward"); !c)
    return c;
  if (!mean || !rstd)
    return Status::error("cuda layerNormBackward: mean and rstd are required");
  if (cols == 0)
    return Status::success();
  if (dx) {
    Status s = t == DType::F32
                   ? layerNormBwdT<float>(x, scale, mean, rstd, dy, dx, rows,
                                          cols, stream)
                   : layerNormBwdT<bf16>(x, scale, mean, rstd, dy, dx, rows,
                                         cols, stream);
    if (!s)
      return s;
  }
  if (dscale || dbias) {
    const dim3 block(32, 8);
    const dim3 grid(static_cast<unsigned>((cols + 31) / 32));
    if (t == DType::F32)
      layerNormParamGradKernel<float><<<grid, block, 0, st(stream)>>>(
          static_cast<const float *>(x), mean, rstd,
          static_cast<const float *>(dy), dscale, dbias, rows, cols);
    else
      layerNormParamGradKernel<bf16><<<grid, block, 0, st(stream)>>>(
          static_cast<const bf16 *>(x), mean, rstd,
          static_cast<const bf16 *>(dy), dscale, dbias, rows, cols);
    return launched("layerNormParamGradKernel");
  }
  return Status::success();
}

Status crossEntropyForward(DType t, const void *logits, const int64_t *labels,
                           float *lossPerRow, float *meanOut, float *countOut,
                           int64_t rows, int64_t classes, int64_t ignoreIndex,
                           StreamHandle stream) {
  if (Status c = checkRows(rows, classes, "crossEntropyForward"); !c)
    return c;
  if (!lossPerRow)
    return Status::error("cuda crossEntropyForward: lossPerRow is required");
  if (classes == 0)
    return Status::error("cuda crossEntropyForward: no classes");
  Status s = t == DType::F32 ? ceFwdT<float>(logits, labels, lossPerRow, rows,
                                             classes, ignoreIndex, stream)
                             : ceFwdT<bf16>(logits, labels, lossPerRow, rows,
                                            classes, ignoreIndex, stream);
  if (!s || !meanOut)
    return s;
  crossEntropyMeanKernel<<<1, 1024, 0, st(stream)>>>(
      lossPerRow, labels, rows, ignoreIndex, meanOut, countOut);
  return launched("crossEntropyMeanKernel");
}

Status crossEntropyBackward(DType t, const void *logits, const int64_t *labels,
                            void *dlogits, int64_t rows, int64_t classes,
                            float scale, const float *divisor,
                            int64_t ignoreIndex, StreamHandle stream) {
  if (Status c = checkRows(rows, classes, "crossEntropyBackward"); !c)
    return c;
  if (classes == 0)
    return Status::success();
  return t == DType::F32
             ? ceBwdT<float>(logits, labels, dlogits, rows, classes, scale,
                             divisor, ignoreIndex, stream)
             : ceBwdT<bf16>(logits, labels, dlogits, rows, classes, scale,
                            divisor, ignoreIndex, stream);
}

} // namespace merak::rt::cuda
