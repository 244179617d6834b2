//===- ops_optimizer_test.cpp - fused optimizer updates against references ===//
//
// adamwUpdate, adanUpdate and sgdUpdate (ops.h) against loops written here
// in double from torch.optim's AdamW / SGD code and the Adan paper's
// Algorithm 1: with clipping, weight decay, a step other than the first
// (bias correction), odd sizes, F32 and F64, in place (outputs aliasing
// inputs) and sizes large enough for the parallel loop. A wrong bias
// correction (step instead of step + 1), a weight decay applied the
// coupled way or forgotten, or a dropped clip coefficient moves the
// result far beyond the tolerance (float rounding: 2e-6 x (|want| + 1)).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace cpu = merak::rt::cpu;
using cpu::DT;

namespace {
std::vector<double> randoms(int64_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = u(rng);
  return v;
}

template <class T> std::vector<T> as(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
void expectNear(const std::vector<T> &got, const std::vector<double> &want, double rel,
                const char *what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), want[i], rel * (std::fabs(want[i]) + 1.0))
        << what << " at " << i;
}

/// torch.optim.AdamW's step (torch/optim/adamw.py, single tensor), in double.
void torchAdamW(std::vector<double> &p, const std::vector<double> &g, std::vector<double> &m,
                std::vector<double> &v, double lr, int64_t step, double b1, double b2,
                double eps, double wd) {
  const double t = double(step);
  const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - lr * wd;
    m[i] = m[i] + (g[i] - m[i]) * (1 - b1); // exp_avg.lerp_(grad, 1 - beta1)
    v[i] = v[i] * b2 + (1 - b2) * g[i] * g[i];
    const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
    p[i] += -(lr / bc1) * m[i] / denom;
  }
}

template <class T> void checkAdamW(int64_t n, bool inPlace) {
  const DT dt = std::is_same_v<T, float> ? DT::F32 : DT::F64;
  auto p = randoms(n, -1, 1, 1), g = randoms(n, -2, 2, 2), m = randoms(n, -0.1, 0.1, 3),
       v = randoms(n, 0, 0.05, 4);
  const double lr = 1e-2, clip = 0.5, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  const int64_t step = 4; // the fifth step: t = 5 in the bias corrections
  auto tp = as<T>(p), tg = as<T>(g), tm = as<T>(m), tv = as<T>(v);
  std::vector<T> op(n), om(n), ov(n);
  T tlr = T(lr), tclip = T(clip);
  cpu::adamwUpdate(dt, tp.data(), tg.data(), tm.data(), tv.data(), &tlr, &step, &tclip,
                   inPlace ? tp.data() : op.data(), inPlace ? tm.data() : om.data(),
                   inPlace ? tv.data() : ov.data(), n, b1, b2, eps, wd);
  std::vector<double> gc(n);
  for (int64_t i = 0; i < n; ++i)
    gc[i] = double(T(g[i])) * clip;
  torchAdamW(p, gc, m, v, lr, step + 1, b1, b2, eps, wd);
  expectNear(inPlace ? tp : op, p, 2e-6, "param");
  expectNear(inPlace ? tm : om, m, 2e-6, "exp_avg");
  expectNear(inPlace ? tv : ov, v, 2e-6, "exp_avg_sq");
}

/// Adan, Algorithm 1 of the paper with m0 = g0, v0 = 0, n0 = g0^2 and the
/// proximal decay, betas weighing the new term (merak's convention).
void paperAdan(std::vector<double> &p, const std::vector<double> &g, std::vector<double> &m,
               std::vector<double> &d, std::vector<double> &nsq, std::vector<double> &prev,
               double lr, bool first, double b1, double b2, double b3, double eps, double wd) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (first) {
      m[i] = g[i], d[i] = 0, nsq[i] = g[i] * g[i];
    } else {
      const double diff = g[i] - prev[i];
      m[i] = (1 - b1) * m[i] + b1 * g[i];
      d[i] = (1 - b2) * d[i] + b2 * diff;
      const double u = g[i] + (1 - b2) * diff;
      nsq[i] = (1 - b3) * nsq[i] + b3 * u * u;
    }
    const double eta = lr / (std::sqrt(nsq[i]) + eps);
    p[i] = (p[i] - eta * (m[i] + (1 - b2) * d[i])) / (1 + wd * lr);
    prev[i] = g[i];
  }
}
} // namespace

TEST(OpsOptimizer, AdamWMatchesTorch) {
  checkAdamW<float>(37, false);
  checkAdamW<double>(37, false);
}

TEST(OpsOptimizer, AdamWInPlaceAndParallel) {
  checkAdamW<float>(37, true);
  checkAdamW<float>(100003, true); // above the parallel threshold
  checkAdamW<float>(100003, false);
}

TEST(OpsOptimizer, AdamWWithoutClipIsUnscaled) {
  const int64_t n = 5, step = 0;
  std::vector<float> p{1, -2, 3, -4, 5}, g{0.5f, 0.25f, -1, 2, -3}, m(n), v(n);
  const float lr = 0.1f;
  cpu::adamwUpdate(DT::F32, p.data(), g.data(), m.data(), v.data(), &lr, &step, nullptr,
                   p.data(), m.data(), v.data(), n, 0.9, 0.999, 1e-8, 0.0);
  // The first AdamW step without decay moves every parameter by about
  // lr * sign(g) (m / sqrt(v) = g / |g| after bias correction).
  const float want[] = {1 - 0.1f, -2 - 0.1f, 3 + 0.1f, -4 - 0.1f, 5 + 0.1f};
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(p[i], want[i], 1e-6) << i;
}

TEST(OpsOptimizer, AdanMatchesPaper) {
  const int64_t n = 41;
  const double lr = 2e-2, clip = 0.75, b1 = 0.02, b2 = 0.08, b3 = 0.01, eps = 1e-8, wd = 0.05;
  auto p = randoms(n, -1, 1, 5), g0 = randoms(n, -1, 1, 6), g1 = randoms(n, -1, 1, 7);
  std::vector<double> m(n), d(n), nsq(n), prev(n);
  auto tp = as<float>(p);
  std::vector<float> tm(n), td(n), tn(n), tprev(n);
  const float tlr = float(lr), tclip = float(clip);
  for (int64_t step = 0; step < 2; ++step) {
    const auto &g = step == 0 ? g0 : g1;
    auto tg = as<float>(g);
    cpu::adanUpdate(DT::F32, tp.data(), tg.data(), tm.data(), td.data(), tn.data(),
                    tprev.data(), &tlr, &step, &tclip, tp.data(), tm.data(), td.data(),
                    tn.data(), tprev.data(), n, b1, b2, b3, eps, wd);
    std::vector<double> gc(n);
    for (int64_t i = 0; i < n; ++i)
      gc[i] = double(tg[i]) * clip;
    paperAdan(p, gc, m, d, nsq, prev, lr, step == 0, b1, b2, b3, eps, wd);
    expectNear(tp, p, 2e-6, "param");
    expectNear(tm, m, 2e-6, "exp_avg");
    expectNear(td, d, 2e-5, "exp_avg_diff");
    expectNear(tn, nsq, 2e-6, "exp_avg_sq");
    expectNear(tprev, gc, 1e-7, "prev_grad");
  }
}

TEST(OpsOptimizer, SgdMatchesTorch) {
  const int64_t n = 29;
  const double lr = 0.05, clip = 0.5, mom = 0.9, wd = 0.01;
  for (bool nesterov : {false, true}) {
    auto p = randoms(n, -1, 1, 8), buf = randoms(n, -0.5, 0.5, 9), g = randoms(n, -1, 1, 10);
    auto tp = as<float>(p), tb = as<float>(buf), tg = as<float>(g);
    std::vector<float> op(n), ob(n);
    const float tlr = float(lr), tclip = float(clip);
    cpu::sgdUpdate(DT::F32, tp.data(), tg.data(), tb.data(), &tlr, &tclip, op.data(), ob.data(),
                   n, mom, wd, nesterov);
    // torch/optim/sgd.py: d_p = grad + wd * p; buf = mom * buf + d_p;
    // d_p = d_p + mom * buf (nesterov) or buf; p -= lr * d_p.
    for (int64_t i = 0; i < n; ++i) {
      double dp = double(tg[i]) * clip + wd * p[i];
      buf[i] = mom * buf[i] + dp;
      dp = nesterov ? dp + mom * buf[i] : buf[i];
      p[i] -= lr * dp;
    }
    expectNear(op, p, 2e-6, "param");
    expectNear(ob, buf, 2e-6, "momentum_buffer");
  }
  // Without momentum (no buffer) and without decay: p - lr * g, in place.
  std::vector<float> p{1, 2, 3}, g{1, -1, 0.5f};
  const float tlr = 0.5f;
  cpu::sgdUpdate(DT::F32, p.data(), g.data(), nullptr, &tlr, nullptr, p.data(), nullptr, 3,
                 0.0, 0.0, false);
  EXPECT_EQ(p, (std::vector<float>{0.5f, 2.5f, 2.75f}));
}
