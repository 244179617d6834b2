//===- kernels_test.cpp - CPU compute kernels against double references ---===//
//
// Every kernel is compared with a naive double-precision reference written
// here (normwise relative error max|got - ref| / max|ref| <= 1e-5), on random
// sizes including odd ones; backward kernels are also compared with central
// finite differences of the double forward, and a few numerically hard inputs
// (softmax of [1000, 1001], logits of large magnitude) are checked exactly.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cpu = merak::rt::cpu;

namespace {

using VecD = std::vector<double>;
using VecF = std::vector<float>;

constexpr double kTol = 1e-5;

std::mt19937_64 &rng() {
  static std::mt19937_64 gen(0x5eed1234u);
  return gen;
}

int64_t randSize(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}

VecF randVec(int64_t n, float lo = -2.0f, float hi = 2.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  VecF v(static_cast<size_t>(n));
  for (auto &x : v)
    x = d(rng());
  return v;
}

VecD toD(const VecF &v) { return VecD(v.begin(), v.end()); }

// Normwise relative error max|a - b| / max|b| (absolute when b is ~0).
double relErr(const float *got, const VecD &ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i]))
      return std::numeric_limits<double>::infinity();
    num = std::max(num, std::fabs(got[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return den > 1e-30 ? num / den : num;
}
double relErr(const VecF &got, const VecD &ref) {
  EXPECT_EQ(got.size(), ref.size());
  return relErr(got.data(), ref);
}

// d/dx_i of f(x) by central differences, in double.
VecD finiteDiff(const std::function<double(const VecD &)> &f, VecD x,
                double h = 1e-6) {
  VecD g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

double dotD(const VecD &a, const VecD &b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

// --- double references --------------------------------------------------------

VecD refSoftmax(const VecD &x, int64_t rows, int64_t cols, bool log) {
  VecD y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x[r * cols];
    double m = -INFINITY;
    for (int64_t j = 0; j < cols; ++j)
      m = std::max(m, xr[j]);
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      s += std::exp(xr[j] - m);
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] =
          log ? xr[j] - m - std::log(s) : std::exp(xr[j] - m) / s;
  }
  return y;
}

void refLayerNorm(const VecD &x, const VecD *scale, const VecD *bias,
                  int64_t rows, int64_t cols, double eps, VecD &y, VecD &mean,
                  VecD &rstd) {
  y.assign(x.size(), 0.0);
  mean.assign(rows, 0.0);
  rstd.assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      s += x[r * cols + j];
    const double mu = s / cols;
    double ss = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      ss += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
    const double rs = 1.0 / std::sqrt(ss / cols + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t j = 0; j < cols; ++j)
      y[r * cols + j] = (x[r * cols + j] - mu) * rs * (scale ? (*scale)[j] : 1) +
                        (bias ? (*bias)[j] : 0);
  }
}

double refGelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Per-row losses and the mean over non-ignored rows.
double refCrossEntropy(const VecD &logits, const std::vector<int64_t> &labels,
                       int64_t rows, int64_t classes, int64_t ignore,
                       VecD *perRow = nullptr) {
  double total = 0.0;
  int64_t n = 0;
  if (perRow)
    perRow->assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignore)
      continue;
    const double *lr = &logits[r * classes];
    double m = -INFINITY;
    for (int64_t j = 0; j < classes; ++j)
      m = std::max(m, lr[j]);
    double s = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      s += std::exp(lr[j] - m);
    const double loss = m + std::log(s) - lr[labels[r]];
    if (perRow)
      (*perRow)[r] = loss;
    total += loss;
    ++n;
  }
  return n ? total / n : 0.0;
}

} // namespace

// --- GEMM ---------------------------------------------------------------------

TEST(Kernels, GemmMatchesReference) {
  for (int trial = 0; trial < 24; ++trial) {
    const bool tA = trial & 1, tB = trial & 2;
    const int64_t M = randSize(1, 45), N = randSize(1, 45),
                  K = randSize(1, 70);
    const float alpha = 1.3f;
    const float beta = (trial & 4) ? 0.7f : 0.0f;
    VecF A = randVec(M * K), B = randVec(K * N), C = randVec(M * N);
    if (beta == 0.0f)
      std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());
    VecD ref(M * N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0.0;
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<double>(tA ? A[k * M + i] : A[i * K + k]) *
               (tB ? B[j * K + k] : B[k * N + j]);
        ref[i * N + j] =
            alpha * s + (beta == 0.0f ? 0.0 : double(beta) * C[i * N + j]);
      }
    cpu::gemm(tA, tB, M, N, K, alpha, A.data(), B.data(), beta, C.data());
    EXPECT_LE(relErr(C, ref), kTol)
        << "M=" << M << " N=" << N << " K=" << K << " tA=" << tA
        << " tB=" << tB << " beta=" << beta;
  }
}

TEST(Kernels, GemmZeroK) {
  VecF C = {1, 2, 3, 4, 5, 6};
  cpu::gemm(false, false, 2, 3, 0, 1.0f, nullptr, nullptr, 0.5f, C.data());
  EXPECT_EQ(C, (VecF{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  C.assign(6, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm(false, false, 2, 3, 0, 1.0f, nullptr, nullptr, 0.0f, C.data());
  EXPECT_EQ(C, VecF(6, 0.0f));
}

// gemmStrided on sub-matrices of wider row-major buffers (an attention
// head's rows of [T, H, D]) equals the reference product, and bitwise
// gemm() of packed copies (what the attention kernel computed before it
// read heads in place); the padding between rows stays untouched.
TEST(Kernels, GemmStridedReadsSubMatrices) {
  for (int trial = 0; trial < 16; ++trial) {
    const bool tA = trial & 1, tB = trial & 2;
    const float beta = (trial & 4) ? 0.5f : 0.0f;
    const int64_t M = randSize(1, 70), N = randSize(1, 70), K = randSize(1, 40);
    const int64_t ra = tA ? K : M, ca = tA ? M : K, rb = tB ? N : K, cb = tB ? K : N;
    const int64_t lda = ca + randSize(0, 9), ldb = cb + randSize(0, 9), ldc = N + randSize(0, 9);
    VecF A = randVec(ra * lda), B = randVec(rb * ldb), C = randVec(M * ldc);
    VecF pa(ra * ca), pb(rb * cb), pc(M * N);
    for (int64_t i = 0; i < ra; ++i)
      std::copy_n(A.begin() + i * lda, ca, pa.begin() + i * ca);
    for (int64_t i = 0; i < rb; ++i)
      std::copy_n(B.begin() + i * ldb, cb, pb.begin() + i * cb);
    for (int64_t i = 0; i < M; ++i)
      std::copy_n(C.begin() + i * ldc, N, pc.begin() + i * N);
    VecD ref(M * N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<double>(tA ? pa[k * M + i] : pa[i * K + k]) *
                 (tB ? pb[j * K + k] : pb[k * N + j]);
        ref[i * N + j] = 1.5 * acc + beta * double(pc[i * N + j]);
      }
    const VecF before = C;
    cpu::gemmStrided(tA, tB, M, N, K, 1.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
    cpu::gemm(tA, tB, M, N, K, 1.5f, pa.data(), pb.data(), beta, pc.data());
    VecF got(M * N);
    for (int64_t i = 0; i < M; ++i) {
      std::copy_n(C.begin() + i * ldc, N, got.begin() + i * N);
      for (int64_t j = N; j < ldc && i + 1 < M; ++j)
        EXPECT_EQ(C[i * ldc + j], before[i * ldc + j]) << "padding written, trial " << trial;
    }
    EXPECT_LE(relErr(got, ref), kTol) << "trial " << trial;
    EXPECT_EQ(got, pc) << "trial " << trial;
  }
}

TEST(Kernels, BatchedGemmStridesAndBroadcast) {
  for (int trial = 0; trial < 8; ++trial) {
    const bool tA = trial & 1, tB = trial & 2, bcastA = trial & 4;
    const bool bcastB = !bcastA && (trial % 3 == 0);
    const int64_t batch = randSize(1, 5), M = randSize(1, 17),
                  N = randSize(1, 17), K = randSize(1, 23);
    const int64_t sA = bcastA ? 0 : M * K, sB = bcastB ? 0 : K * N,
                  sC = M * N;
    VecF A = randVec(bcastA ? M * K : batch * M * K);
    VecF B = randVec(bcastB ? K * N : batch * K * N);
    VecF C = randVec(batch * M * N);
    const float alpha = 0.9f, beta = 0.25f;
    VecD ref(batch * M * N);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const float *a = A.data() + b * sA, *bb = B.data() + b * sB;
          double s = 0.0;
          for (int64_t k = 0; k < K; ++k)
            s += static_cast<double>(tA ? a[k * M + i] : a[i * K + k]) *
                 (tB ? bb[j * K + k] : bb[k * N + j]);
          ref[b * sC + i * N + j] = alpha * s + beta * double(C[b * sC + i * N + j]);
        }
    cpu::batchedGemm(tA, tB, batch, M, N, K, alpha, A.data(), sA, B.data(),
                     sB, beta, C.data(), sC);
    EXPECT_LE(relErr(C, ref), kTol) << "trial " << trial;
  }
}

TEST(Kernels, GemmLargeBlocked) {
  // Large enough to be cut into blocks (rows when M >= N, columns
  // otherwise) and run in parallel, every transpose combination, beta != 0.
  struct Shape {
    int64_t batch, M, N, K;
  } shapes[] = {{1, 700, 90, 150}, {1, 40, 1100, 130}, {3, 520, 70, 60}};
  for (const Shape &sh : shapes)
    for (int t = 0; t < 4; ++t) {
      const bool tA = t & 1, tB = t & 2;
      const int64_t M = sh.M, N = sh.N, K = sh.K, batch = sh.batch;
      VecF A = randVec(batch * M * K), B = randVec(batch * K * N),
           C = randVec(batch * M * N);
      const float alpha = 0.75f, beta = 0.5f;
      VecD ref(C.size());
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            const float *a = A.data() + b * M * K, *bb = B.data() + b * K * N;
            double acc = 0.0;
            for (int64_t k = 0; k < K; ++k)
              acc += static_cast<double>(tA ? a[k * M + i] : a[i * K + k]) *
                     (tB ? bb[j * K + k] : bb[k * N + j]);
            const size_t o = b * M * N + i * N + j;
            ref[o] = alpha * acc + beta * double(C[o]);
          }
      if (batch == 1)
        cpu::gemm(tA, tB, M, N, K, alpha, A.data(), B.data(), beta, C.data());
      else
        cpu::batchedGemm(tA, tB, batch, M, N, K, alpha, A.data(), M * K,
                         B.data(), K * N, beta, C.data(), M * N);
      EXPECT_LE(relErr(C, ref), kTol)
          << "M=" << M << " N=" << N << " K=" << K << " tA=" << tA << " tB=" << tB;
    }
}

TEST(Kernels, ThreadCountIndependent) {
  // GEMM blocks depend only on the shapes and row sums run in a fixed
  // order, so 1, 2 and 3 threads give the same bits.
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  const int64_t M = 600, N = 300, K = 200, rows = 257, cols = 1031;
  VecF A = randVec(M * K), B = randVec(K * N), X = randVec(rows * cols, -9, 9),
       G = randVec(rows * cols);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 7 == 3 ? -100 : randSize(0, cols - 1);
  auto runAll = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<VecF> out;
    VecF c(M * N);
    cpu::gemm(false, false, M, N, K, 1.0f, A.data(), B.data(), 0.0f, c.data());
    out.push_back(c);
    VecF cw(K * K);
    cpu::gemm(true, false, K, K, M, 1.0f, A.data(), A.data(), 0.0f, cw.data());
    out.push_back(cw);
    VecF y(X.size());
    cpu::softmaxForward(X.data(), y.data(), rows, cols);
    out.push_back(y);
    cpu::logSoftmaxForward(X.data(), y.data(), rows, cols);
    out.push_back(y);
    VecF loss(rows);
    const float mean = cpu::crossEntropyForward(X.data(), labels.data(),
                                                loss.data(), rows, cols);
    loss.push_back(mean);
    out.push_back(loss);
    cpu::crossEntropyBackward(X.data(), labels.data(), y.data(), rows, cols,
                              0.01f);
    out.push_back(y);
    cpu::geluForward(X.data(), y.data(), rows * cols);
    out.push_back(y);
    cpu::geluBackward(X.data(), G.data(), y.data(), rows * cols);
    out.push_back(y);
    return out;
  };
  const auto one = runAll(1);
  for (int threads : {2, 3}) {
    const auto many = runAll(threads);
    for (size_t k = 0; k < one.size(); ++k)
      EXPECT_EQ(std::memcmp(one[k].data(), many[k].data(),
                            one[k].size() * sizeof(float)),
                0)
          << "output " << k << ", " << threads << " threads";
  }
  omp_set_num_threads(saved);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

// --- softmax / log-softmax ----------------------------------------------------

TEST(Kernels, SoftmaxForwardAndBackward) {
  for (bool log : {false, true}) {
    for (int trial = 0; trial < 10; ++trial) {
      const int64_t rows = randSize(1, 33), cols = randSize(1, 131);
      VecF x = randVec(rows * cols, -8, 8), y(x.size()), dy = randVec(x.size()),
           dx(x.size());
      const VecD yRef = refSoftmax(toD(x), rows, cols, log);
      if (log)
        cpu::logSoftmaxForward(x.data(), y.data(), rows, cols);
      else
        cpu::softmaxForward(x.data(), y.data(), rows, cols);
      EXPECT_LE(relErr(y, yRef), kTol) << "log=" << log;

      // Analytic reference (from the double forward) for the backward.
      VecD dxRef(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j)
          s += log ? double(dy[r * cols + j])
                   : double(dy[r * cols + j]) * yRef[r * cols + j];
        for (int64_t j = 0; j < cols; ++j) {
          const size_t i = r * cols + j;
          dxRef[i] = log ? dy[i] - std::exp(yRef[i]) * s
                         : yRef[i] * (dy[i] - s);
        }
      }
      if (log)
        cpu::logSoftmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
      else
        cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
      EXPECT_LE(relErr(dx, dxRef), kTol) << "log=" << log;
    }
  }
}

TEST(Kernels, SoftmaxBackwardFiniteDifferences) {
  for (bool log : {false, true}) {
    const int64_t rows = 3, cols = 7;
    VecF x = randVec(rows * cols, -3, 3), y(x.size()), dy = randVec(x.size()),
         dx(x.size());
    const VecD w = toD(dy);
    const VecD fd = finiteDiff(
        [&](const VecD &xd) {
          return dotD(w, refSoftmax(xd, rows, cols, log));
        },
        toD(x));
    if (log) {
      cpu::logSoftmaxForward(x.data(), y.data(), rows, cols);
      cpu::logSoftmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
    } else {
      cpu::softmaxForward(x.data(), y.data(), rows, cols);
      cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
    }
    EXPECT_LE(relErr(dx, fd), kTol) << "log=" << log;
  }
}

TEST(Kernels, SoftmaxLargeInputs) {
  const double e = std::exp(1.0);
  VecF x = {1000.0f, 1001.0f, -1000.0f, -1001.0f, 3e4f, -3e4f}, y(6);
  cpu::softmaxForward(x.data(), y.data(), 3, 2);
  const VecD ref = {1 / (1 + e), e / (1 + e), e / (1 + e), 1 / (1 + e), 1, 0};
  EXPECT_LE(relErr(y, ref), 1e-6);
  for (float v : y)
    EXPECT_TRUE(std::isfinite(v));

  cpu::logSoftmaxForward(x.data(), y.data(), 3, 2);
  const double l = std::log1p(std::exp(-1.0));
  const VecD lref = {-1 - l, -l, -l, -1 - l, 0, -6e4};
  EXPECT_LE(relErr(y, lref), 1e-6);
  EXPECT_NEAR(y[0], -1 - l, 1e-6);
  EXPECT_NEAR(y[1], -l, 1e-6);

  // In place.
  VecF z = {1000.0f, 1001.0f};
  cpu::softmaxForward(z.data(), z.data(), 1, 2);
  EXPECT_NEAR(z[0], 1 / (1 + e), 1e-7);
  EXPECT_NEAR(z[1], e / (1 + e), 1e-7);
}

// --- layer norm ---------------------------------------------------------------

TEST(Kernels, LayerNormForwardAndBackward) {
  for (int trial = 0; trial < 12; ++trial) {
    const bool withScale = trial & 1, withBias = trial & 2;
    const int64_t rows = randSize(1, 29), cols = randSize(2, 101);
    const float eps = 1e-5f;
    VecF x = randVec(rows * cols, -3, 5), scale = randVec(cols),
         bias = randVec(cols), y(x.size()), mean(rows), rstd(rows),
         dy = randVec(x.size()), dx(x.size()), dscale(cols, 7.0f),
         dbias(cols, 7.0f);
    const VecD xd = toD(x), sd = toD(scale), bd = toD(bias);
    VecD yRef, meanRef, rstdRef;
    refLayerNorm(xd, withScale ? &sd : nullptr, withBias ? &bd : nullptr,
                 rows, cols, eps, yRef, meanRef, rstdRef);
    cpu::layerNormForward(x.data(), withScale ? scale.data() : nullptr,
                          withBias ? bias.data() : nullptr, y.data(),
                          mean.data(), rstd.data(), rows, cols, eps);
    EXPECT_LE(relErr(y, yRef), kTol);
    EXPECT_LE(relErr(mean, meanRef), kTol);
    EXPECT_LE(relErr(rstd, rstdRef), kTol);

    // Analytic backward in double, from the float mean and rstd the kernel
    // is given (the forward's, checked above): with few columns dx is a
    // difference of nearly equal terms (cols = 2: 1 - xhat^2 ~ eps / var),
    // so the forward's rounding of mean and rstd would dominate it.
    VecD dxRef(x.size()), dsRef(cols, 0.0), dbRef(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double mg = 0, mgx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const size_t i = r * cols + j;
        const double xhat = (xd[i] - mean[r]) * double(rstd[r]);
        const double g = dy[i] * (withScale ? sd[j] : 1.0);
        mg += g / cols;
        mgx += g * xhat / cols;
        dsRef[j] += dy[i] * xhat;
        dbRef[j] += dy[i];
      }
      for (int64_t j = 0; j < cols; ++j) {
        const size_t i = r * cols + j;
        const double xhat = (xd[i] - mean[r]) * double(rstd[r]);
        const double g = dy[i] * (withScale ? sd[j] : 1.0);
        dxRef[i] = double(rstd[r]) * (g - mg - xhat * mgx);
      }
    }
    cpu::layerNormBackward(x.data(), withScale ? scale.data() : nullptr,
                           mean.data(), rstd.data(), dy.data(), dx.data(),
                           dscale.data(), dbias.data(), rows, cols);
    EXPECT_LE(relErr(dx, dxRef), kTol);
    EXPECT_LE(relErr(dscale, dsRef), kTol);
    EXPECT_LE(relErr(dbias, dbRef), kTol);
  }
}

TEST(Kernels, LayerNormBackwardFiniteDifferences) {
  const int64_t rows = 4, cols = 9;
  const float eps = 1e-5f;
  VecF x = randVec(rows * cols, -2, 3), scale = randVec(cols),
       bias = randVec(cols), y(x.size()), mean(rows), rstd(rows),
       dy = randVec(x.size()), dx(x.size()), dscale(cols), dbias(cols);
  const VecD w = toD(dy), xd = toD(x), sd = toD(scale), bd = toD(bias);
  auto loss = [&](const VecD &xx, const VecD &ss, const VecD &bb) {
    VecD yy, mm, rr;
    refLayerNorm(xx, &ss, &bb, rows, cols, eps, yy, mm, rr);
    return dotD(w, yy);
  };
  const VecD fdX = finiteDiff([&](const VecD &v) { return loss(v, sd, bd); }, xd);
  const VecD fdS = finiteDiff([&](const VecD &v) { return loss(xd, v, bd); }, sd);
  const VecD fdB = finiteDiff([&](const VecD &v) { return loss(xd, sd, v); }, bd);
  cpu::layerNormForward(x.data(), scale.data(), bias.data(), y.data(),
                        mean.data(), rstd.data(), rows, cols, eps);
  cpu::layerNormBackward(x.data(), scale.data(), mean.data(), rstd.data(),
                         dy.data(), dx.data(), dscale.data(), dbias.data(),
                         rows, cols);
  EXPECT_LE(relErr(dx, fdX), kTol);
  EXPECT_LE(relErr(dscale, fdS), kTol);
  EXPECT_LE(relErr(dbias, fdB), kTol);

  // Null outputs are allowed.
  VecF dx2(x.size());
  cpu::layerNormBackward(x.data(), scale.data(), mean.data(), rstd.data(),
                         dy.data(), dx2.data(), nullptr, nullptr, rows, cols);
  EXPECT_EQ(dx2, dx);
  VecF ds2(cols);
  cpu::layerNormBackward(x.data(), scale.data(), mean.data(), rstd.data(),
                         dy.data(), nullptr, ds2.data(), nullptr, rows, cols);
  EXPECT_EQ(ds2, dscale);
}

TEST(Kernels, LayerNormLargeOffset) {
  // A large common offset must not destroy the variance (two-pass, double).
  const int64_t cols = 8;
  VecF x(cols), y(cols), mean(1), rstd(1);
  for (int64_t j = 0; j < cols; ++j)
    x[j] = 10000.0f + static_cast<float>(j);
  cpu::layerNormForward(x.data(), nullptr, nullptr, y.data(), mean.data(),
                        rstd.data(), 1, cols, 0.0f);
  VecD yRef, mRef, rRef;
  refLayerNorm(toD(x), nullptr, nullptr, 1, cols, 0.0, yRef, mRef, rRef);
  EXPECT_LE(relErr(y, yRef), kTol);
}

// --- GELU ---------------------------------------------------------------------

TEST(Kernels, Gelu) {
  const int64_t n = randSize(1000, 5001) | 1;
  VecF x = randVec(n, -6, 6), y(n), dy = randVec(n), dx(n);
  x[0] = 0.0f;
  x[1] = -30.0f;
  x[2] = 30.0f;
  VecD yRef(n), dxRef(n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    yRef[i] = refGelu(v);
    dxRef[i] = dy[i] * (0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                        v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI));
  }
  cpu::geluForward(x.data(), y.data(), n);
  cpu::geluBackward(x.data(), dy.data(), dx.data(), n);
  EXPECT_LE(relErr(y, yRef), kTol);
  EXPECT_LE(relErr(dx, dxRef), kTol);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 30.0f);

  // Finite differences, elementwise (relative per element where not tiny).
  VecF xs = randVec(64, -4, 4), dys(64, 1.0f), dxs(64);
  cpu::geluBackward(xs.data(), dys.data(), dxs.data(), 64);
  for (int i = 0; i < 64; ++i) {
    const double h = 1e-6, v = xs[i];
    const double fd = (refGelu(v + h) - refGelu(v - h)) / (2 * h);
    EXPECT_NEAR(dxs[i], fd, 1e-5 * std::max(1.0, std::fabs(fd))) << v;
  }
}

// --- cross entropy ------------------------------------------------------------

TEST(Kernels, CrossEntropyForwardAndBackward) {
  const int64_t ignore = -100;
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t rows = randSize(1, 40), classes = randSize(2, 257);
    VecF logits = randVec(rows * classes, -10, 10), loss(rows, 99.0f),
         dlogits(rows * classes, 99.0f);
    std::vector<int64_t> labels(rows);
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
      labels[r] = (r % 5 == 3) ? ignore : randSize(0, classes - 1);
      counted += labels[r] != ignore;
    }
    VecD lossRef;
    const double meanRef =
        refCrossEntropy(toD(logits), labels, rows, classes, ignore, &lossRef);
    const float mean = cpu::crossEntropyForward(
        logits.data(), labels.data(), loss.data(), rows, classes, ignore);
    EXPECT_NEAR(mean, meanRef, kTol * std::max(1.0, std::fabs(meanRef)));
    EXPECT_LE(relErr(loss, lossRef), kTol);
    EXPECT_EQ(cpu::crossEntropyForward(logits.data(), labels.data(), nullptr,
                                       rows, classes, ignore),
              mean);

    const float scale = counted ? 1.0f / counted : 0.0f;
    cpu::crossEntropyBackward(logits.data(), labels.data(), dlogits.data(),
                              rows, classes, scale, ignore);
    const VecD sm = refSoftmax(toD(logits), rows, classes, false);
    VecD dRef(rows * classes, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[r] == ignore)
        continue;
      for (int64_t j = 0; j < classes; ++j)
        dRef[r * classes + j] =
            (sm[r * classes + j] - (j == labels[r])) * double(scale);
    }
    EXPECT_LE(relErr(dlogits, dRef), kTol);
    for (int64_t r = 0; r < rows; ++r)
      if (labels[r] == ignore)
        for (int64_t j = 0; j < classes; ++j)
          EXPECT_EQ(dlogits[r * classes + j], 0.0f);
  }
}

TEST(Kernels, CrossEntropyBackwardFiniteDifferences) {
  const int64_t rows = 5, classes = 6, ignore = -1;
  VecF logits = randVec(rows * classes, -3, 3), d(rows * classes);
  const std::vector<int64_t> labels = {2, -1, 0, 5, 3};
  const VecD fd = finiteDiff(
      [&](const VecD &l) {
        return refCrossEntropy(l, labels, rows, classes, ignore);
      },
      toD(logits));
  cpu::crossEntropyBackward(logits.data(), labels.data(), d.data(), rows,
                            classes, 1.0f / 4, ignore);
  EXPECT_LE(relErr(d, fd), kTol);
}

TEST(Kernels, CrossEntropyLargeLogits) {
  // Rows: near-equal huge logits, a huge gap, huge negative logits.
  VecF logits = {10000.0f, 10001.0f, 9999.0f, -2e4f, 2e4f, 0.0f,
                 -1e4f,    -1e4f,    -1e4f};
  std::vector<int64_t> labels = {1, 0, 2};
  VecF loss(3), d(9);
  const float mean = cpu::crossEntropyForward(logits.data(), labels.data(),
                                              loss.data(), 3, 3, -100);
  const double l0 = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  EXPECT_NEAR(loss[0], l0, 1e-6);
  EXPECT_NEAR(loss[1], 4e4, 1e-2);
  EXPECT_NEAR(loss[2], std::log(3.0), 1e-6);
  EXPECT_NEAR(mean, (l0 + 4e4 + std::log(3.0)) / 3, 1e-2);
  cpu::crossEntropyBackward(logits.data(), labels.data(), d.data(), 3, 3,
                            1.0f, -100);
  for (float v : d)
    EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(d[3], -1.0f, 1e-7);
  EXPECT_NEAR(d[4], 1.0f, 1e-7);
  EXPECT_NEAR(d[8], 1.0 / 3 - 1, 1e-6);

  // Every row ignored: mean 0, zero gradient.
  std::vector<int64_t> none = {-100, -100, -100};
  EXPECT_EQ(cpu::crossEntropyForward(logits.data(), none.data(), loss.data(),
                                     3, 3, -100),
            0.0f);
  cpu::crossEntropyBackward(logits.data(), none.data(), d.data(), 3, 3, 1.0f,
                            -100);
  EXPECT_EQ(d, VecF(9, 0.0f));
  // An out-of-range label is reported as NaN.
  std::vector<int64_t> bad = {1, 3, 0};
  EXPECT_TRUE(std::isnan(cpu::crossEntropyForward(
      logits.data(), bad.data(), nullptr, 3, 3, -100)));
}

// --- AdamW --------------------------------------------------------------------

TEST(Kernels, AdamwMatchesTorchFormula) {
  const int64_t n = randSize(100, 3001) | 1;
  const float lr = 6e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  VecF p = randVec(n, -1, 1), m(n, 0.0f), v(n, 0.0f);
  VecD pd = toD(p), md(n, 0.0), vd(n, 0.0);
  for (int64_t step = 1; step <= 6; ++step) {
    VecF g = randVec(n, -0.5f, 0.5f);
    cpu::adamwStep(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps,
                   wd, step);
    // torch.optim.AdamW (_single_tensor_adamw), in double.
    const double bc1 = 1 - std::pow(double(b1), double(step));
    const double bc2 = 1 - std::pow(double(b2), double(step));
    for (int64_t i = 0; i < n; ++i) {
      pd[i] *= 1 - double(lr) * wd;
      md[i] = b1 * md[i] + (1 - double(b1)) * g[i];
      vd[i] = b2 * vd[i] + (1 - double(b2)) * double(g[i]) * g[i];
      const double denom = std::sqrt(vd[i]) / std::sqrt(bc2) + eps;
      pd[i] -= (lr / bc1) * md[i] / denom;
    }
    EXPECT_LE(relErr(p, pd), kTol) << "step " << step;
    EXPECT_LE(relErr(m, md), kTol) << "step " << step;
    EXPECT_LE(relErr(v, vd), kTol) << "step " << step;
  }
  // The first step moves each parameter by ~lr * sign(g) (plus decay).
  VecF p1 = {1.0f, -1.0f}, g1 = {0.3f, -2.0f}, m1(2, 0.0f), v1(2, 0.0f);
  cpu::adamwStep(p1.data(), g1.data(), m1.data(), v1.data(), 2, 0.01f, 0.9f,
                 0.999f, 1e-8f, 0.0f, 1);
  EXPECT_NEAR(p1[0], 0.99f, 1e-6);
  EXPECT_NEAR(p1[1], -0.99f, 1e-6);
}

TEST(Kernels, LargeParallelShapes) {
  // Sizes above the OpenMP threshold: the parallel paths agree with the
  // reference too.
  const int64_t rows = 300, cols = 257;
  VecF x = randVec(rows * cols, -5, 5), y(x.size());
  cpu::softmaxForward(x.data(), y.data(), rows, cols);
  EXPECT_LE(relErr(y, refSoftmax(toD(x), rows, cols, false)), kTol);
  VecF mean(rows), rstd(rows), dy = randVec(x.size()), dx(x.size()),
       ds(cols), db(cols);
  cpu::layerNormForward(x.data(), nullptr, nullptr, y.data(), mean.data(),
                        rstd.data(), rows, cols, 1e-5f);
  VecD yRef, mRef, rRef;
  refLayerNorm(toD(x), nullptr, nullptr, rows, cols, 1e-5, yRef, mRef, rRef);
  EXPECT_LE(relErr(y, yRef), kTol);
  cpu::layerNormBackward(x.data(), nullptr, mean.data(), rstd.data(),
                         dy.data(), dx.data(), ds.data(), db.data(), rows,
                         cols);
  VecD dbRef(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      dbRef[j] += dy[r * cols + j];
  EXPECT_LE(relErr(db, dbRef), kTol);
}
