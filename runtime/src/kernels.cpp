//===- kernels.cpp - CPU compute kernels (float32) --------------------------===//
//
// See merak_rt/kernels.h. Row reductions accumulate in double; rows are
// independent and run as OpenMP `parallel for` above a size threshold (small
// tensors are not worth waking the thread team).
//
// Exponentials, erf and GELU use the vectorisable float functions of
// ops_util.h (within a few ulp of the double result; the bounds are listed
// there) through the row kernels defined at the end of this file; sums over
// a row accumulate in double in a fixed order (expSumRowF32), so every
// result is independent of the thread count.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/kernels.h"

#include "ops_util.h"

#include <cblas.h>
#if MERAK_RT_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>

namespace merak::rt::cpu {
namespace {

// Work (elements) below which a loop stays serial.
[[maybe_unused]] constexpr int64_t kParallelMin = 1 << 15;

inline float rowMax(const float *x, int64_t cols) {
  return detail::rowMaxF32(x, cols);
}

// log(sum exp(x - max)) + max, with the max returned too.
inline double rowLogSumExp(const float *x, int64_t cols, float &maxOut) {
  float m = rowMax(x, cols);
  maxOut = m;
  if (!std::isfinite(m))
    return m; // all -inf (or +inf/NaN present): propagate
  const double s = detail::expSumRowF32(x, m, nullptr, cols);
  return static_cast<double>(m) + std::log(s);
}

} // namespace

// --- GEMM ---------------------------------------------------------------------
//
// Threads come from OpenMP, not OpenBLAS: OpenBLAS is set to one thread
// once, and each product is cut into blocks (rows of C, or columns when C is
// wider than tall; one block per batch item when the batch is large) that an
// OpenMP loop hands out, each block one single-threaded BLAS call. This
// avoids two thread pools (OpenBLAS's pthreads and OpenMP's spinning
// workers) competing for the cores, lets a batch of small products run in
// parallel, and — since the blocks depend only on the shapes — gives
// bitwise the same C for any number of threads.

namespace {

void blasSingleThreaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

inline void blasGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *A, int64_t lda, const float *B,
                     int64_t ldb, float beta, float *C, int64_t ldc) {
#if MERAK_RT_HAVE_DNNL
  // oneDNN's JIT sgemm, except where OpenBLAS's is the faster (see
  // sgemmPrefersOpenBlas).
  if (!sgemmPrefersOpenBlas(ta, tb, k, lda, ldb)) {
    // oneDNN threads with OpenMP unless called from an active parallel
    // region: outside one, one thread for the call (a block's product is
    // single-threaded, so C does not depend on the thread count).
    const bool outside = !omp_in_parallel();
    const int threads = outside ? omp_get_max_threads() : 1;
    if (outside && threads > 1)
      omp_set_num_threads(1);
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    if (outside && threads > 1)
      omp_set_num_threads(threads);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

inline void blasGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     double alpha, const double *A, int64_t lda,
                     const double *B, int64_t ldb, double beta, double *C,
                     int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

/// `batch` products C_b = alpha op(A_b) op(B_b) + beta C_b (see gemm), in
/// blocks run by an OpenMP loop.
template <class T>
void gemmBlocked(bool transA, bool transB, int64_t batch, int64_t M, int64_t N,
                 int64_t K, T alpha, const T *A, int64_t strideA, const T *B,
                 int64_t strideB, T beta, T *C, int64_t strideC) {
  if (batch <= 0 || M <= 0 || N <= 0)
    return;
  if (K <= 0) {
    // C = beta * C (BLAS semantics), with beta == 0 clearing NaNs.
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < M * N; ++i)
        C[b * strideC + i] = beta == T(0) ? T(0) : beta * C[b * strideC + i];
    return;
  }
  blasSingleThreaded();
  // Blocks per item: about 8 tasks in all (enough for a few threads to
  // share evenly), cutting the longer of M and N into blocks of at least 256
  // rows / 512 columns (each block packs the whole other operand again).
  const bool splitRows = M >= N;
  const int64_t len = splitRows ? M : N, minBlock = splitRows ? 256 : 512;
  const int64_t want = std::max<int64_t>(1, (8 + batch - 1) / batch);
  const int64_t blocks =
      std::max<int64_t>(1, std::min(want, len / minBlock));
  const int64_t step = (len + blocks - 1) / blocks;
  const int64_t tasks = batch * blocks;
  const double flops = 2.0 * static_cast<double>(batch) * M * N * K;
  const int64_t lda = transA ? M : K, ldb = transB ? K : N;
  auto run = [&](int64_t t) {
    const int64_t b = t / blocks, j = t % blocks;
    const int64_t lo = j * step, hi = std::min(len, lo + step);
    if (lo >= hi)
      return;
    const T *a = A + b * strideA;
    const T *bb = B + b * strideB;
    T *c = C + b * strideC;
    if (splitRows)
      blasGemm(transA, transB, hi - lo, N, K, alpha,
               a + (transA ? lo : lo * K), lda, bb, ldb, beta, c + lo * N, N);
    else
      blasGemm(transA, transB, M, hi - lo, K, alpha, a, lda,
               bb + (transB ? lo * K : lo), ldb, beta, c + lo, N);
  };
#pragma omp parallel for schedule(static) if (tasks > 1 && flops >= 4e6)
  for (int64_t t = 0; t < tasks; ++t)
    run(t);
}

} // namespace

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C) {
  gemmBlocked<float>(transA, transB, 1, M, N, K, alpha, A, 0, B, 0, beta, C,
                     0);
}

void gemmStrided(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) { // C = beta * C, beta == 0 clearing NaNs (as gemm)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  blasSingleThreaded();
  blasGemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void batchedGemm(bool transA, bool transB, int64_t batch, int64_t M,
                 int64_t N, int64_t K, float alpha, const float *A,
                 int64_t strideA, const float *B, int64_t strideB, float beta,
                 float *C, int64_t strideC) {
  gemmBlocked<float>(transA, transB, batch, M, N, K, alpha, A, strideA, B,
                     strideB, beta, C, strideC);
}

namespace detail {
void dgemmBlocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                  double alpha, const double *A, const double *B, double beta,
                  double *C) {
  gemmBlocked<double>(transA, transB, 1, M, N, K, alpha, A, 0, B, 0, beta, C,
                      0);
}
} // namespace detail

// --- softmax ------------------------------------------------------------------

void softmaxForward(const float *x, float *y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const float m = rowMax(xr, cols);
    const double s = detail::expSumRowF32(xr, m, yr, cols);
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
  detail::parallelFor(n, 4, [&](int64_t b, int64_t e) {
    detail::mapRowF32(detail::RowFn::Gelu, x + b, y + b, e - b);
  });
}

void geluBackward(const float *x, const float *dy, float *dx, int64_t n) {
  detail::parallelFor(n, 4, [&](int64_t b, int64_t e) {
    detail::geluGradRowF32(x + b, dy + b, dx + b, e - b);
  });
}

// --- cross entropy ------------------------------------------------------------

float crossEntropyForward(const float *logits, const int64_t *labels,
                          float *lossPerRow, int64_t rows, int64_t classes,
                          int64_t ignoreIndex) {
  // Per-row losses in double, then one sum in row order (independent of the
  // thread count).
  double *loss = detail::scratch<double, 30>(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (rows * classes >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = labels[r];
    double l;
    if (label == ignoreIndex) {
      l = 0.0;
    } else if (label < 0 || label >= classes) {
      l = std::numeric_limits<double>::quiet_NaN();
    } else {
      const float *lr = logits + r * classes;
      float m;
      l = rowLogSumExp(lr, classes, m) - static_cast<double>(lr[label]);
    }
    if (lossPerRow)
      lossPerRow[r] = static_cast<float>(l);
    loss[r] = l;
  }
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    total += loss[r];
    counted += labels[r] != ignoreIndex;
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
    const float m = rowMax(lr, classes);
    if (!std::isfinite(m)) { // +-inf or NaN in the row: the double form
      const double lse = m;
      for (int64_t j = 0; j < classes; ++j) {
        const double p = std::exp(static_cast<double>(lr[j]) - lse);
        dr[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * scale);
      }
      continue;
    }
    // dr = exp(x - m) (dr may alias lr), then (dr / sum - onehot) * scale.
    const double s = detail::expSumRowF32(lr, m, dr, classes);
    const float inv = static_cast<float>(1.0 / s);
    const bool inRange = label >= 0 && label < classes;
    const float eLabel = inRange ? dr[label] : 0.0f;
    for (int64_t j = 0; j < classes; ++j)
      dr[j] = dr[j] * inv * scale;
    if (inRange)
      dr[label] = (eLabel * inv - 1.0f) * scale;
  }
}

// --- float row kernels (declared in ops_util.h) ----------------------------

namespace detail {

MERAK_RT_SIMD_CLONES void mapRowF32(RowFn f, const float *x, float *y,
                                    int64_t n) {
  switch (f) {
  case RowFn::Exp:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = fexp(x[i]);
    return;
  case RowFn::Log:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = flog(x[i]);
    return;
  case RowFn::Tanh:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = ftanh(x[i]);
    return;
  case RowFn::Erf:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = ferf(x[i]);
    return;
  case RowFn::Sigmoid:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = fsigmoid(x[i]);
    return;
  case RowFn::Gelu:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = fgelu(x[i]);
    return;
  case RowFn::Softplus:
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < n; ++i)
      y[i] = fsoftplus(x[i]);
    return;
  }
}

MERAK_RT_SIMD_CLONES void geluGradRowF32(const float *x, const float *dy,
                                         float *dx, int64_t n) {
  MERAK_RT_VECTORIZE
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * fgeluGrad(x[i]);
}

MERAK_RT_SIMD_CLONES float rowMaxF32(const float *x, int64_t n) {
  constexpr int L = 16;
  float m[L];
  for (int l = 0; l < L; ++l)
    m[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l)
      m[l] = m[l] < x[j + l] ? x[j + l] : m[l];
  for (int l = 0; j + l < n; ++l)
    m[l] = m[l] < x[j + l] ? x[j + l] : m[l];
  float r = m[0];
  for (int l = 1; l < L; ++l)
    r = r < m[l] ? m[l] : r;
  return r;
}

MERAK_RT_SIMD_CLONES double sumSquaresRowF32(const float *x, int64_t n) {
  constexpr int L = 16;
  double acc[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l)
      acc[l] += static_cast<double>(x[i + l]) * static_cast<double>(x[i + l]);
  for (int l = 0; i + l < n; ++l)
    acc[l] += static_cast<double>(x[i + l]) * static_cast<double>(x[i + l]);
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}

MERAK_RT_SIMD_CLONES double expSumRowF32(const float *x, float m, float *y,
                                         int64_t n) {
  // Blocks of kB: the exps (vectorised) into y or a stack buffer, then
  // added to 8 double lanes (lane j mod 8); the lanes are combined in a
  // fixed tree. The order depends only on n.
  constexpr int64_t kB = 256;
  constexpr int L = 8;
  float buf[kB];
  double acc[L] = {};
  for (int64_t j0 = 0; j0 < n; j0 += kB) {
    const int64_t len = std::min(kB, n - j0);
    float *e = y ? y + j0 : buf;
    const float *xs = x + j0;
    MERAK_RT_VECTORIZE
    for (int64_t i = 0; i < len; ++i)
      e[i] = fexp(xs[i] - m);
    int64_t i = 0;
    for (; i + L <= len; i += L)
      for (int l = 0; l < L; ++l)
        acc[l] += static_cast<double>(e[i + l]);
    for (int l = 0; i + l < len; ++l)
      acc[l] += static_cast<double>(e[i + l]);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

} // namespace detail

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
