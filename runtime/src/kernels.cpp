//===- kernels.cpp - CPU compute kernels (float32) --------------------------===//
//
// See merak_rt/kernels.h. Row reductions accumulate in double; rows are
// independent and run as OpenMP `parallel for` above a size threshold (small
// tensors are not worth waking the thread team).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace merak::rt::cpu {
namespace {

// Work (elements) below which a loop stays serial.
[[maybe_unused]] constexpr int64_t kParallelMin = 1 << 15;

inline float rowMax(const float *x, int64_t cols) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < cols; ++j)
    m = std::max(m, x[j]);
  return m;
}

// log(sum exp(x - max)) + max, with the max returned too.
inline double rowLogSumExp(const float *x, int64_t cols, float &maxOut) {
  float m = rowMax(x, cols);
  maxOut = m;
  if (!std::isfinite(m))
    return m; // all -inf (or +inf/NaN present): propagate
  double s = 0.0;
  for (int64_t j = 0; j < cols; ++j)
    s += std::exp(static_cast<double>(x[j]) - m);
  return static_cast<double>(m) + std::log(s);
}

} // namespace

// --- GEMM ---------------------------------------------------------------------

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) {
    // C = beta * C (BLAS semantics), with beta == 0 clearing NaNs.
    for (int64_t i = 0; i < M * N; ++i)
      C[i] = beta == 0.0f ? 0.0f : beta * C[i];
    return;
  }
  const blasint lda = static_cast<blasint>(transA ? M : K);
  const blasint ldb = static_cast<blasint>(transB ? K : N);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), alpha, A, lda,
              B, ldb, beta, C, static_cast<blasint>(N));
}

void batchedGemm(bool transA, bool transB, int64_t batch, int64_t M,
                 int64_t N, int64_t K, float alpha, const float *A,
                 int64_t strideA, const float *B, int64_t strideB, float beta,
                 float *C, int64_t strideC) {
  // OpenBLAS parallelizes each GEMM itself; nesting an OpenMP loop over the
  // batch on top of it would oversubscribe the cores.
  for (int64_t b = 0; b < batch; ++b)
    gemm(transA, transB, M, N, K, alpha, A + b * strideA, B + b * strideB,
         beta, C + b * strideC);
}

// --- softmax ------------------------------------------------------------------

void softmaxForward(const float *x, float *y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float m = rowMax(xr, cols);
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const float e = std::exp(xr[j] - m);
      yr[j] = e;
      s += e;
    }
    const float inv = static_cast<float>(1.0 / s);
    for (int64_t j = 0; j < cols; ++j)
      yr[j] *= inv;
  }
}

void softmaxBackward(const float *y, const float *dy, float *dx, int64_t rows,
                     int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    double dot = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      dot += static_cast<double>(dyr[j]) * yr[j];
    for (int64_t j = 0; j < cols; ++j)
      dxr[j] = static_cast<float>(yr[j] * (dyr[j] - dot));
  }
}

void logSoftmaxForward(const float *x, float *y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m;
    const double lse = rowLogSumExp(xr, cols, m);
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = static_cast<float>(xr[j] - lse);
  }
}

void logSoftmaxBackward(const float *y, const float *dy, float *dx,
                        int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      s += dyr[j];
    for (int64_t j = 0; j < cols; ++j)
      dxr[j] = static_cast<float>(dyr[j] - std::exp(static_cast<double>(yr[j])) * s);
  }
}

// --- layer norm ---------------------------------------------------------------

void layerNormForward(const float *x, const float *scale, const float *bias,
                      float *y, float *mean, float *rstd, int64_t rows,
                      int64_t cols, float eps) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      s += xr[j];
    const double mu = cols > 0 ? s / cols : 0.0;
    double ss = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = xr[j] - mu;
      ss += d * d;
    }
    const double var = cols > 0 ? ss / cols : 0.0;
    const double rs = 1.0 / std::sqrt(var + static_cast<double>(eps));
    if (mean)
      mean[r] = static_cast<float>(mu);
    if (rstd)
      rstd[r] = static_cast<float>(rs);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xr[j] - mu) * rs;
      if (scale)
        v *= scale[j];
      if (bias)
        v += bias[j];
      yr[j] = static_cast<float>(v);
    }
  }
}

void layerNormBackward(const float *x, const float *scale, const float *mean,
                       const float *rstd, const float *dy, float *dx,
                       float *dscale, float *dbias, int64_t rows,
                       int64_t cols) {
  if (dx) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * cols;
      const float *dyr = dy + r * cols;
      float *dxr = dx + r * cols;
      const double mu = mean[r], rs = rstd[r];
      double sg = 0.0, sgx = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        const double g = scale ? static_cast<double>(dyr[j]) * scale[j]
                               : static_cast<double>(dyr[j]);
        sg += g;
        sgx += g * ((xr[j] - mu) * rs);
      }
      const double mg = cols > 0 ? sg / cols : 0.0;
      const double mgx = cols > 0 ? sgx / cols : 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        const double g = scale ? static_cast<double>(dyr[j]) * scale[j]
                               : static_cast<double>(dyr[j]);
        const double xhat = (xr[j] - mu) * rs;
        dxr[j] = static_cast<float>(rs * (g - mg - xhat * mgx));
      }
    }
  }
  if (!dscale && !dbias)
    return;
  // Parameter gradients: a sum over rows per column. Columns are split into
  // blocks, each thread owns whole blocks and walks every row over its block
  // (contiguous within a row), with a double accumulator on the stack.
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kBlock;
    const int64_t c1 = std::min(cols, c0 + kBlock);
    double accS[kBlock] = {0.0};
    double accB[kBlock] = {0.0};
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * cols;
      const float *dyr = dy + r * cols;
      const double mu = mean[r], rs = rstd[r];
      for (int64_t j = c0; j < c1; ++j) {
        accS[j - c0] += static_cast<double>(dyr[j]) * ((xr[j] - mu) * rs);
        accB[j - c0] += dyr[j];
      }
    }
    for (int64_t j = c0; j < c1; ++j) {
      if (dscale)
        dscale[j] = static_cast<float>(accS[j - c0]);
      if (dbias)
        dbias[j] = static_cast<float>(accB[j - c0]);
    }
  }
}

// --- GELU ---------------------------------------------------------------------

void geluForward(const float *x, float *y, int64_t n) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
  }
}

void geluBackward(const float *x, const float *dy, float *dx, int64_t n) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
    const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
    dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
  }
}

// --- cross entropy ------------------------------------------------------------

float crossEntropyForward(const float *logits, const int64_t *labels,
                          float *lossPerRow, int64_t rows, int64_t classes,
                          int64_t ignoreIndex) {
  double total = 0.0;
  int64_t counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, counted)      \
    if (rows * classes >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = labels[r];
    double loss;
    if (label == ignoreIndex) {
      loss = 0.0;
    } else if (label < 0 || label >= classes) {
      loss = std::numeric_limits<double>::quiet_NaN();
      ++counted;
    } else {
      const float *lr = logits + r * classes;
      float m;
      loss = rowLogSumExp(lr, classes, m) - static_cast<double>(lr[label]);
      ++counted;
    }
    if (lossPerRow)
      lossPerRow[r] = static_cast<float>(loss);
    total += loss;
  }
  return counted > 0 ? static_cast<float>(total / counted) : 0.0f;
}

void crossEntropyBackward(const float *logits, const int64_t *labels,
                          float *dlogits, int64_t rows, int64_t classes,
                          float scale, int64_t ignoreIndex) {
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = labels[r];
    const float *lr = logits + r * classes;
    float *dr = dlogits + r * classes;
    if (label == ignoreIndex) {
      for (int64_t j = 0; j < classes; ++j)
        dr[j] = 0.0f;
      continue;
    }
    float m;
    const double lse = rowLogSumExp(lr, classes, m);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(static_cast<double>(lr[j]) - lse);
      dr[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * scale);
    }
  }
}

// --- optimizer ----------------------------------------------------------------

void adamwStep(float *p, const float *g, float *m, float *v, int64_t n,
               float lr, float beta1, float beta2, float eps,
               float weightDecay, int64_t step) {
  const double s = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), s);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), s);
  const float decay = 1.0f - lr * weightDecay;
  const float stepSize = static_cast<float>(lr / bc1);
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const float omb1 = 1.0f - beta1, omb2 = 1.0f - beta2;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + omb1 * gi;
    const float vi = beta2 * v[i] + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2Sqrt + eps;
    p[i] = p[i] * decay - stepSize * (mi / denom);
  }
}

} // namespace merak::rt::cpu
