//===- ops_backward_test.cpp - fused backward kernels against references --===//
//
// geluGrad, softmaxGrad, layerNormGrad and crossEntropyGrad (ops.h) against
// loops written here in double from the formulas of the merak ops: every
// axis position (the F32 last-axis fast paths and the outer/axis/inner
// fallback), F32 and F64, broadcast and absent scales, rms, results left
// unwritten, ignored labels and each reduction, and sizes large enough for
// the parallel row loops.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace cpu = merak::rt::cpu;
using cpu::Dims;
using cpu::DT;

namespace {

Dims D(std::initializer_list<int64_t> v) {
  Dims d;
  for (int64_t x : v)
    d.d[d.rank++] = x;
  return d;
}

std::mt19937_64 &rng() {
  static std::mt19937_64 g(0xBAC4u);
  return g;
}

std::vector<double> randd(int64_t n, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto &x : v)
    x = u(rng());
  return v;
}

template <class T> std::vector<T> as(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T> std::vector<double> toD(const std::vector<T> &v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T> constexpr DT dtOf() { return std::is_same_v<T, float> ? DT::F32 : DT::F64; }
template <class T> constexpr double tolOf() { return std::is_same_v<T, float> ? 2e-5 : 1e-12; }

template <class T>
void expectNear(const std::vector<T> &got, const std::vector<double> &want, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = tolOf<T>();
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(static_cast<double>(got[i]), want[i], tol * (1.0 + std::fabs(want[i])))
        << what << " at " << i;
}

/// outer x dim x inner of a shape at `axis`.
struct Split {
  int64_t outer = 1, dim = 1, inner = 1;
  Split(const Dims &d, int64_t axis) {
    for (int32_t k = 0; k < d.rank; ++k)
      (k < axis ? outer : k == axis ? dim : inner) *= d.d[k];
  }
  int64_t at(int64_t o, int64_t j, int64_t k) const { return (o * dim + j) * inner + k; }
};

// --- GELU ---------------------------------------------------------------------

double geluPrimeRef(double x, bool tanhApprox) {
  if (tanhApprox) {
    const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
    const double t = std::tanh(c * (x + a * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

template <class T> void checkGelu(int64_t n, bool tanhApprox) {
  auto x = as<T>(randd(n, -5, 5)), dy = as<T>(randd(n));
  std::vector<T> dx(static_cast<size_t>(n));
  cpu::geluGrad(dtOf<T>(), x.data(), dy.data(), dx.data(), n, tanhApprox);
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    want[i] = static_cast<double>(dy[i]) * geluPrimeRef(static_cast<double>(x[i]), tanhApprox);
  expectNear(dx, want, tanhApprox ? "gelu tanh" : "gelu erf");
}

TEST(OpsBackward, GeluGrad) {
  for (bool tanhApprox : {false, true}) {
    checkGelu<float>(37, tanhApprox);
    checkGelu<float>(70000, tanhApprox); // parallel
    checkGelu<double>(37, tanhApprox);
  }
}

TEST(OpsBackward, GeluGradInPlace) {
  auto x = as<float>(randd(50)), dy = as<float>(randd(50));
  std::vector<double> want;
  for (size_t i = 0; i < x.size(); ++i)
    want.push_back(static_cast<double>(dy[i]) * geluPrimeRef(x[i], true));
  cpu::geluGrad(DT::F32, x.data(), dy.data(), dy.data(), 50, true);
  expectNear(dy, want, "gelu in place");
}

// --- softmax / log-softmax ----------------------------------------------------

template <class T> void checkSoftmax(const Dims &d, int64_t axis, bool isLog) {
  Split s(d, axis);
  const int64_t n = d.numel();
  auto x = randd(n, -3, 3);
  std::vector<double> yd(static_cast<size_t>(n));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < s.inner; ++k) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s.dim; ++j)
        m = std::max(m, x[s.at(o, j, k)]);
      for (int64_t j = 0; j < s.dim; ++j)
        sum += std::exp(x[s.at(o, j, k)] - m);
      for (int64_t j = 0; j < s.dim; ++j) {
        const double v = x[s.at(o, j, k)] - m;
        yd[s.at(o, j, k)] = isLog ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  auto y = as<T>(yd), dy = as<T>(randd(n));
  std::vector<T> dx(static_cast<size_t>(n));
  cpu::softmaxGrad(isLog, dtOf<T>(), y.data(), dy.data(), d, axis, dx.data());
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < s.inner; ++k) {
      double sum = 0;
      for (int64_t j = 0; j < s.dim; ++j) {
        const int64_t at = s.at(o, j, k);
        sum += static_cast<double>(dy[at]) * (isLog ? 1.0 : static_cast<double>(y[at]));
      }
      for (int64_t j = 0; j < s.dim; ++j) {
        const int64_t at = s.at(o, j, k);
        const double yv = y[at], g = dy[at];
        want[at] = isLog ? g - std::exp(yv) * sum : yv * (g - sum);
      }
    }
  expectNear(dx, want, isLog ? "log_softmax_grad" : "softmax_grad");
}

TEST(OpsBackward, SoftmaxGradEveryAxis) {
  for (bool isLog : {false, true})
    for (int64_t axis = 0; axis < 3; ++axis) {
      checkSoftmax<float>(D({3, 5, 7}), axis, isLog);
      checkSoftmax<double>(D({3, 5, 7}), axis, isLog);
    }
}

TEST(OpsBackward, SoftmaxGradLarge) {
  for (bool isLog : {false, true}) {
    checkSoftmax<float>(D({64, 1024}), 1, isLog);   // row kernel, parallel
    checkSoftmax<float>(D({8, 256, 32}), 1, isLog); // strided, parallel
    checkSoftmax<double>(D({64, 1024}), 1, isLog);
  }
}

// --- layer norm / RMS norm ----------------------------------------------------

/// The reference: xhat and dx over dims [axis, rank), scale (or null) given
/// already expanded to the normalised shape.
void normRef(const std::vector<double> &x, const std::vector<double> &dy,
             const double *scale, int64_t outer, int64_t n, double eps, bool rms,
             std::vector<double> &dx, std::vector<double> &xhat) {
  dx.assign(x.size(), 0);
  xhat.assign(x.size(), 0);
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n && !rms; ++j)
      mean += x[o * n + j] / n;
    for (int64_t j = 0; j < n; ++j)
      var += (x[o * n + j] - mean) * (x[o * n + j] - mean) / n;
    const double rstd = 1 / std::sqrt(var + eps);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[o * n + j] = (x[o * n + j] - mean) * rstd;
      const double g = dy[o * n + j] * (scale ? scale[j] : 1.0);
      mg += g / n;
      mgx += g * xhat[o * n + j] / n;
    }
    for (int64_t j = 0; j < n; ++j) {
      const double g = dy[o * n + j] * (scale ? scale[j] : 1.0);
      dx[o * n + j] = rstd * (g - (rms ? 0.0 : mg) - xhat[o * n + j] * mgx);
    }
  }
}

/// scaleShape: the operand's shape (empty rank: none); expanded: its values
/// over the normalised shape, computed by the caller.
template <class T>
void checkNorm(const Dims &d, int64_t axis, bool rms, const std::vector<double> &scaleVals,
               const Dims &scaleShape, const std::vector<double> &expanded, double eps) {
  int64_t outer = 1, n = 1;
  for (int32_t k = 0; k < d.rank; ++k)
    (k < axis ? outer : n) *= d.d[k];
  auto x = as<T>(randd(outer * n, -2, 3)), dy = as<T>(randd(outer * n));
  auto sc = as<T>(scaleVals);
  std::vector<T> dx(x.size()), xh(x.size());
  const bool hasScale = scaleShape.rank > 0;
  cpu::layerNormGrad(dtOf<T>(), x.data(), dy.data(), d, axis, hasScale ? sc.data() : nullptr,
                     scaleShape, eps, rms, dx.data(), xh.data());
  std::vector<double> wantDx, wantXhat, exp = toD(as<T>(expanded));
  normRef(toD(x), toD(dy), hasScale ? exp.data() : nullptr, outer, n, eps, rms, wantDx,
          wantXhat);
  expectNear(dx, wantDx, rms ? "rms dx" : "layer_norm dx");
  expectNear(xh, wantXhat, rms ? "rms xhat" : "layer_norm xhat");
  // Either output alone.
  std::vector<T> only(x.size(), T(7));
  cpu::layerNormGrad(dtOf<T>(), x.data(), dy.data(), d, axis, hasScale ? sc.data() : nullptr,
                     scaleShape, eps, rms, only.data(), nullptr);
  expectNear(only, wantDx, "dx alone");
  cpu::layerNormGrad(dtOf<T>(), x.data(), dy.data(), d, axis, hasScale ? sc.data() : nullptr,
                     scaleShape, eps, rms, nullptr, only.data());
  expectNear(only, wantXhat, "xhat alone");
}

template <class T> void checkNormCases() {
  for (bool rms : {false, true}) {
    // Last axis, full scale [8].
    auto s8 = randd(8);
    checkNorm<T>(D({4, 3, 8}), 2, rms, s8, D({8}), s8, 1e-5);
    // No scale, normalised over the last two dims, large epsilon.
    checkNorm<T>(D({4, 3, 8}), 1, rms, {}, Dims{}, {}, 0.1);
    // Scale [3, 1] broadcast over [3, 8] (the general expansion).
    auto s3 = randd(3);
    std::vector<double> e3;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 8; ++j)
        e3.push_back(s3[i]);
    checkNorm<T>(D({4, 3, 8}), 1, rms, s3, D({3, 1}), e3, 1e-5);
    // One scale value for everything.
    auto s1 = randd(1);
    checkNorm<T>(D({4, 3, 8}), 1, rms, s1, D({1}), std::vector<double>(24, s1[0]), 1e-5);
    // Large rows for the parallel loop.
    auto s512 = randd(512);
    checkNorm<T>(D({128, 512}), 1, rms, s512, D({512}), s512, 1e-5);
  }
}

TEST(OpsBackward, LayerNormGradF32) { checkNormCases<float>(); }
TEST(OpsBackward, LayerNormGradF64) { checkNormCases<double>(); }

// --- cross entropy ------------------------------------------------------------

template <class T, class I>
void checkCrossEntropy(const Dims &dl, int64_t axis, int32_t reduction, bool hasIgnore) {
  Split s(dl, axis);
  const int64_t nLab = s.outer * s.inner, ignore = -100;
  auto logits = as<T>(randd(dl.numel(), -4, 4));
  std::uniform_int_distribution<int64_t> u(0, s.dim - 1);
  std::vector<I> labels(static_cast<size_t>(nLab));
  int64_t counted = 0;
  for (int64_t i = 0; i < nLab; ++i) {
    labels[i] = static_cast<I>(hasIgnore && i % 3 == 1 ? ignore : u(rng()));
    counted += labels[i] != ignore;
  }
  auto g = as<T>(randd(reduction == 0 ? nLab : 1, 0.5, 2));
  std::vector<T> dlog(logits.size(), T(9));
  cpu::crossEntropyGrad(dtOf<T>(), logits.data(), dl, axis,
                        std::is_same_v<I, int64_t> ? DT::I64 : DT::I32, labels.data(),
                        g.data(), reduction, hasIgnore, ignore, dlog.data());
  std::vector<double> want(logits.size(), 0.0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < s.inner; ++k) {
      const int64_t li = o * s.inner + k, label = labels[li];
      if (hasIgnore && label == ignore)
        continue;
      const double w = reduction == 0   ? static_cast<double>(g[li])
                       : reduction == 1 ? static_cast<double>(g[0]) / counted
                                        : static_cast<double>(g[0]);
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s.dim; ++j)
        m = std::max(m, static_cast<double>(logits[s.at(o, j, k)]));
      for (int64_t j = 0; j < s.dim; ++j)
        sum += std::exp(logits[s.at(o, j, k)] - m);
      for (int64_t j = 0; j < s.dim; ++j)
        want[s.at(o, j, k)] =
            (std::exp(logits[s.at(o, j, k)] - m) / sum - (j == label ? 1.0 : 0.0)) * w;
    }
  expectNear(dlog, want, "cross_entropy_grad");
}

TEST(OpsBackward, CrossEntropyGradReductions) {
  for (int32_t red : {0, 1, 2})
    for (bool ignore : {false, true}) {
      checkCrossEntropy<float, int64_t>(D({6, 5}), 1, red, ignore); // row kernel
      checkCrossEntropy<float, int32_t>(D({6, 5}), 1, red, ignore);
      checkCrossEntropy<double, int64_t>(D({6, 5}), 1, red, ignore);
      checkCrossEntropy<float, int64_t>(D({2, 5, 3}), 1, red, ignore); // strided
      checkCrossEntropy<double, int32_t>(D({5, 2, 3}), 0, red, ignore);
    }
}

TEST(OpsBackward, CrossEntropyGradLarge) {
  checkCrossEntropy<float, int64_t>(D({256, 1000}), 1, 1, true);
  checkCrossEntropy<float, int64_t>(D({256, 1000}), 1, 0, true);
  checkCrossEntropy<float, int64_t>(D({16, 1000, 4}), 1, 2, false);
}

TEST(OpsBackward, CrossEntropyGradBadLabel) {
  // The OpenMP workers exist by now: re-exec instead of forking.
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  std::vector<float> logits(10, 0.0f), g(1, 1.0f), d(10);
  std::vector<int64_t> labels{1, 5};
  EXPECT_EXIT(cpu::crossEntropyGrad(DT::F32, logits.data(), D({2, 5}), 1, DT::I64,
                                    labels.data(), g.data(), 1, false, -100, d.data()),
              ::testing::ExitedWithCode(3), "cross_entropy_grad: label 5 out of range");
}

} // namespace
