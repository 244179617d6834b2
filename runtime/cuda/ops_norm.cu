//===- ops_norm.cu - GPU ABI: softmax, layer/rms/batch norm and gradients ----===//
//
// Semantics of runtime/src/ops_norm.cpp and ops_backward.cpp. F32 softmax
// (and its gradient) over a contiguous axis and F32 layer norm with
// per-column scale/bias use the existing row kernels (cuda::softmaxForward,
// cuda::softmaxBackward, cuda::layerNormForward: one warp per row up to
// 1024 columns, 16-byte accesses). Everything else is one block per row,
// statistics in double: a row is `dim` elements at stride `inner`. Scale and
// bias that broadcast to the normalised shape are first expanded into
// scratch.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/kernels.h"
#include "ops_common.cuh"

namespace merak::rt::gpu {
using namespace detail;

namespace {

unsigned rowGrid(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 20) ? (rows < 1 ? 1 : rows) : (1 << 20));
}

void must(const Status &s) {
  if (!s.ok())
    fatal(s.message().c_str());
}

template <class T>
__global__ void __launch_bounds__(256)
    softmaxRowKernel(bool isLog, const T *x, T *y, int64_t rows, int64_t dim,
                     int64_t inner) {
  __shared__ double smem[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / inner) * dim * inner + row % inner;
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      m = maxNan(m, double(x[base + j * inner]));
    m = blockMaxD(m, smem);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      s += exp(double(x[base + j * inner]) - m);
    s = blockSumD(s, smem);
    const double ls = log(s);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const double v = double(x[base + j * inner]) - m;
      y[base + j * inner] = T(isLog ? v - ls : exp(v) / s);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    softmaxGradRowKernel(bool isLog, const T *y, const T *dy, T *dx,
                         int64_t rows, int64_t dim, int64_t inner) {
  __shared__ double smem[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / inner) * dim * inner + row % inner;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const int64_t at = base + j * inner;
      s += isLog ? double(dy[at]) : double(dy[at]) * double(y[at]);
    }
    s = blockSumD(s, smem);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const int64_t at = base + j * inner;
      dx[at] = isLog ? T(double(dy[at]) - exp(double(y[at])) * s)
                     : T(double(y[at]) * (double(dy[at]) - s));
    }
  }
}

/// Layer norm (rms = false) or RMS norm of contiguous rows of `cols`;
/// scale/bias null or [cols].
template <class T>
__global__ void __launch_bounds__(256)
    normRowKernel(bool rms, const T *x, const T *scale, const T *bias, T *y,
                  int64_t rows, int64_t cols, double eps) {
  __shared__ double smem[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    double mean = 0.0;
    if (!rms) {
      double s = 0.0;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        s += double(xr[j]);
      mean = blockSumD(s, smem) / double(cols);
    }
    double q = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = double(xr[j]) - mean;
      q += d * d;
    }
    const double rstd = 1.0 / sqrt(blockSumD(q, smem) / double(cols) + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double v = (double(xr[j]) - mean) * rstd;
      if (scale)
        v *= double(scale[j]);
      if (bias)
        v += double(bias[j]);
      yr[j] = T(v);
    }
  }
}

/// merak.layer_norm_grad (ops.h) of contiguous rows.
template <class T>
__global__ void __launch_bounds__(256)
    normGradRowKernel(bool rms, const T *x, const T *dy, const T *scale,
                      T *dxOut, T *xhatOut, int64_t rows, int64_t cols,
                      double eps) {
  __shared__ double smem[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * cols;
    const T *gr = dy + row * cols;
    double mean = 0.0;
    if (!rms) {
      double s = 0.0;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        s += double(xr[j]);
      mean = blockSumD(s, smem) / double(cols);
    }
    double q = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = double(xr[j]) - mean;
      q += d * d;
    }
    const double rstd = 1.0 / sqrt(blockSumD(q, smem) / double(cols) + eps);
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xh = (double(xr[j]) - mean) * rstd;
      const double g = double(gr[j]) * (scale ? double(scale[j]) : 1.0);
      sg += g;
      sgx += g * xh;
    }
    const double mg = rms ? 0.0 : blockSumD(sg, smem) / double(cols);
    const double mgx = blockSumD(sgx, smem) / double(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xh = (double(xr[j]) - mean) * rstd;
      if (xhatOut)
        xhatOut[row * cols + j] = T(xh);
      if (dxOut) {
        const double g = double(gr[j]) * (scale ? double(scale[j]) : 1.0);
        dxOut[row * cols + j] = T(rstd * (g - mg - xh * mgx));
      }
    }
  }
}

/// Channel c's mean and population variance over the n = outer x inner
/// values of an [outer, channels, inner] tensor, by the whole block (every
/// thread gets them), in double, two passes.
template <class T>
__device__ void channelMoments(const T *x, int64_t outer, int64_t channels, int64_t inner,
                               int64_t c, double *smem, double &m, double &v) {
  const int64_t n = outer * inner;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += double(x[((i / inner) * channels + c) * inner + i % inner]);
  m = blockSumD(s, smem) / double(n);
  double q = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = double(x[((i / inner) * channels + c) * inner + i % inner]) - m;
    q += d * d;
  }
  v = blockSumD(q, smem) / double(n);
}

/// One block per channel of an NC... tensor ([outer, channels, inner]).
template <class T>
__global__ void __launch_bounds__(256)
    batchNormKernel(const T *x, const T *scale, const T *bias, const T *mean,
                    const T *var, T *y, int64_t outer, int64_t channels,
                    int64_t inner, double eps, bool training) {
  __shared__ double smem[32];
  const int64_t n = outer * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double m = 0.0, v = 0.0;
    if (training) {
      channelMoments(x, outer, channels, inner, c, smem, m, v);
    } else {
      m = double(mean[c]);
      v = double(var[c]);
    }
    const double inv = 1.0 / sqrt(v + eps);
    const double g = double(scale[c]), b = double(bias[c]);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int64_t at = ((i / inner) * channels + c) * inner + i % inner;
      y[at] = T((double(x[at]) - m) * inv * g + b);
    }
  }
}

/// The gradients of training-mode batch norm, one block per channel.
template <class T>
__global__ void __launch_bounds__(256)
    batchNormGradKernel(const T *x, const T *dy, const T *scale, T *dx, T *dscale, T *dbias,
                        int64_t outer, int64_t channels, int64_t inner, double eps) {
  __shared__ double smem[32];
  const int64_t n = outer * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double m = 0.0, v = 0.0;
    channelMoments(x, outer, channels, inner, c, smem, m, v);
    const double rstd = 1.0 / sqrt(v + eps);
    double g = 0.0, gx = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int64_t at = ((i / inner) * channels + c) * inner + i % inner;
      const double d = double(dy[at]);
      g += d;
      gx += d * (double(x[at]) - m);
    }
    const double sumG = blockSumD(g, smem);
    const double sumGX = blockSumD(gx, smem) * rstd;
    const double f = double(scale[c]) * rstd, meanG = sumG / double(n), meanGX = sumGX / double(n);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int64_t at = ((i / inner) * channels + c) * inner + i % inner;
      const double xhat = (double(x[at]) - m) * rstd;
      dx[at] = T(f * (double(dy[at]) - meanG - xhat * meanGX));
    }
    if (threadIdx.x == 0) {
      dscale[c] = T(sumGX);
      dbias[c] = T(sumG);
    }
  }
}

/// PyTorch's running-statistics update, one block per channel (new* may
/// alias mean/var: thread 0 reads its channel's old values, then writes).
template <class T>
__global__ void __launch_bounds__(256)
    batchNormStatsKernel(const T *x, const T *mean, const T *var, T *newMean, T *newVar,
                         int64_t outer, int64_t channels, int64_t inner, double momentum) {
  __shared__ double smem[32];
  const double n = double(outer * inner);
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double m = 0.0, v = 0.0;
    channelMoments(x, outer, channels, inner, c, smem, m, v);
    if (threadIdx.x == 0) {
      const double oldMean = double(mean[c]), oldVar = double(var[c]);
      newMean[c] = T(momentum * oldMean + (1.0 - momentum) * m);
      newVar[c] = T(momentum * oldVar + (1.0 - momentum) * v * n / (n - 1.0));
    }
  }
}

/// `p` (shape dp) broadcast to the normalised shape [axis, rank) of dx as
/// `cols` contiguous elements: p itself when it already has cols elements,
/// else a copy in scratch `slot`.
const void *expandToRow(DT t, const void *p, const Dims &dp, const Dims &dx,
                        int64_t axis, int64_t cols, int slot) {
  if (!p || dp.numel() == cols)
    return p;
  Dims norm;
  norm.rank = static_cast<int32_t>(dx.rank - axis);
  for (int32_t i = 0; i < norm.rank; ++i)
    norm.d[i] = dx.d[axis + i];
  void *row = scratch(slot, cols * elemSize(t));
  gpu::broadcastTo(t, p, dp, row, norm);
  return row;
}

} // namespace

void softmax(bool isLog, DT t, const void *x, const Dims &dx, int64_t axis,
             void *y) {
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  const int64_t rows = s.outer * s.inner;
  if (rows * s.dim == 0)
    return;
  if (t == DT::F32 && s.inner == 1)
    return must(cuda::softmaxForward(isLog, cuda::DType::F32, x, y, rows, s.dim,
                                     stream()));
  dispatchFloat(t, "softmax: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmaxRowKernel<T><<<rowGrid(rows), 256, 0, cs()>>>(
        isLog, static_cast<const T *>(x), static_cast<T *>(y), rows, s.dim,
        s.inner);
  });
  checkLaunch("softmax");
}

void softmaxGrad(bool isLog, DT t, const void *y, const void *dy, const Dims &d,
                 int64_t axis, void *dx) {
  axis = normAxis(axis, d.rank);
  AxisSplit s(d, axis);
  const int64_t rows = s.outer * s.inner;
  if (rows * s.dim == 0)
    return;
  if (t == DT::F32 && s.inner == 1)
    return must(cuda::softmaxBackward(isLog, cuda::DType::F32, y, dy, dx, rows,
                                      s.dim, stream()));
  dispatchFloat(t, "softmax_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmaxGradRowKernel<T><<<rowGrid(rows), 256, 0, cs()>>>(
        isLog, static_cast<const T *>(y), static_cast<const T *>(dy),
        static_cast<T *>(dx), rows, s.dim, s.inner);
  });
  checkLaunch("softmax_grad");
}

void layerNorm(DT t, const void *x, const Dims &dx, int64_t axis,
               const void *scale, const Dims &ds, const void *bias,
               const Dims &db, double eps, void *y) {
  axis = normAxis(axis, dx.rank);
  int64_t rows = 1, cols = 1;
  for (int32_t i = 0; i < dx.rank; ++i)
    (i < axis ? rows : cols) *= dx.d[i];
  if (rows * cols == 0)
    return;
  const void *sc = expandToRow(t, scale, ds, dx, axis, cols, 2);
  const void *bi = expandToRow(t, bias, db, dx, axis, cols, 3);
  if (t == DT::F32)
    return must(cuda::layerNormForward(cuda::DType::F32, x, sc, bi, y, nullptr,
                                       nullptr, rows, cols, float(eps),
                                       stream()));
  dispatchFloat(t, "layer_norm: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normRowKernel<T><<<rowGrid(rows), 256, 0, cs()>>>(
        false, static_cast<const T *>(x), static_cast<const T *>(sc),
        static_cast<const T *>(bi), static_cast<T *>(y), rows, cols, eps);
  });
  checkLaunch("layer_norm");
}

void rmsNorm(DT t, const void *x, const Dims &dx, int64_t axis,
             const void *scale, const Dims &ds, double eps, void *y) {
  axis = normAxis(axis, dx.rank);
  int64_t rows = 1, cols = 1;
  for (int32_t i = 0; i < dx.rank; ++i)
    (i < axis ? rows : cols) *= dx.d[i];
  if (rows * cols == 0)
    return;
  const void *sc = expandToRow(t, scale, ds, dx, axis, cols, 2);
  dispatchFloat(t, "rms_norm: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normRowKernel<T><<<rowGrid(rows), 256, 0, cs()>>>(
        true, static_cast<const T *>(x), static_cast<const T *>(sc), nullptr,
        static_cast<T *>(y), rows, cols, eps);
  });
  checkLaunch("rms_norm");
}

void layerNormGrad(DT t, const void *x, const void *dy, const Dims &dx,
                   int64_t axis, const void *scale, const Dims &ds, double eps,
                   bool rms, void *dxOut, void *xhat) {
  axis = normAxis(axis, dx.rank);
  int64_t rows = 1, cols = 1;
  for (int32_t i = 0; i < dx.rank; ++i)
    (i < axis ? rows : cols) *= dx.d[i];
  if (rows * cols == 0 || (!dxOut && !xhat))
    return;
  const void *sc = expandToRow(t, scale, ds, dx, axis, cols, 2);
  dispatchFloat(t, "layer_norm_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normGradRowKernel<T><<<rowGrid(rows), 256, 0, cs()>>>(
        rms, static_cast<const T *>(x), static_cast<const T *>(dy),
        static_cast<const T *>(sc), static_cast<T *>(dxOut),
        static_cast<T *>(xhat), rows, cols, eps);
  });
  checkLaunch("layer_norm_grad");
}

void batchNorm(DT t, const void *x, const Dims &dx, const void *scale,
               const void *bias, const void *mean, const void *var, double eps,
               bool training, void *y) {
  AxisSplit s(dx, 1);
  if (s.outer * s.dim * s.inner == 0)
    return;
  dispatchFloat(t, "batch_norm: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batchNormKernel<T><<<rowGrid(s.dim), 256, 0, cs()>>>(
        static_cast<const T *>(x), static_cast<const T *>(scale),
        static_cast<const T *>(bias), static_cast<const T *>(mean),
        static_cast<const T *>(var), static_cast<T *>(y), s.outer, s.dim,
        s.inner, eps, training);
  });
  checkLaunch("batch_norm");
}

void batchNormGrad(DT t, const void *x, const void *dy, const Dims &dx, const void *scale,
                   double eps, void *dxOut, void *dscale, void *dbias) {
  AxisSplit s(dx, 1);
  if (s.dim == 0)
    return;
  dispatchFloat(t, "batch_norm_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batchNormGradKernel<T><<<rowGrid(s.dim), 256, 0, cs()>>>(
        static_cast<const T *>(x), static_cast<const T *>(dy), static_cast<const T *>(scale),
        static_cast<T *>(dxOut), static_cast<T *>(dscale), static_cast<T *>(dbias), s.outer, s.dim,
        s.inner, eps);
  });
  checkLaunch("batch_norm_grad");
}

void batchNormStats(DT t, const void *x, const Dims &dx, const void *mean, const void *var,
                    double momentum, void *newMean, void *newVar) {
  AxisSplit s(dx, 1);
  if (s.dim == 0)
    return;
  dispatchFloat(t, "batch_norm_stats: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batchNormStatsKernel<T><<<rowGrid(s.dim), 256, 0, cs()>>>(
        static_cast<const T *>(x), static_cast<const T *>(mean), static_cast<const T *>(var),
        static_cast<T *>(newMean), static_cast<T *>(newVar), s.outer, s.dim, s.inner, momentum);
  });
  checkLaunch("batch_norm_stats");
}

} // namespace merak::rt::gpu
