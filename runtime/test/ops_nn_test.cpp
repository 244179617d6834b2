//===- ops_nn_test.cpp - normalisation, loss, conv, pool kernels ----------===//
//
// The second half of the ops.h kernel tests (see ops_test.cpp): softmax,
// layer/rms/batch norm, dropout, cross entropy, convolution, pools and
// thread-count independence, against loops written here (matmul:
// ops_matmul_test.cpp; the expert kernels: ops_experts_test.cpp).
//
//===----------------------------------------------------------------------===//
#include "ops_test_util.h"

// --- normalisation --------------------------------------------------------------

TEST(OpsNorm, SoftmaxAndLogSoftmaxAnyAxis) {
  for (bool isLog : {false, true})
    for (int64_t axis : {0, 1, 2}) {
      Dims dx = D({3, 5, 7});
      auto x = randv<double>(dx.numel(), -5, 5);
      x[3] = -INFINITY;
      std::vector<double> w(x.size());
      forEach(dx, [&](int64_t lin, const int64_t *idx) {
        double m = -INFINITY, s = 0;
        auto at = [&](int64_t j) {
          int64_t p[3] = {idx[0], idx[1], idx[2]};
          p[axis] = j;
          return x[(p[0] * 5 + p[1]) * 7 + p[2]];
        };
        for (int64_t j = 0; j < dx.d[axis]; ++j)
          m = std::max(m, at(j));
        for (int64_t j = 0; j < dx.d[axis]; ++j)
          s += std::exp(at(j) - m);
        w[lin] = isLog ? x[lin] - m - std::log(s) : std::exp(x[lin] - m) / s;
      });
      std::vector<double> y(x.size());
      cpu::softmax(isLog, DT::F64, x.data(), dx, axis, y.data());
      for (size_t i = 0; i < y.size(); ++i) {
        if (std::isinf(w[i])) {
          EXPECT_EQ(y[i], w[i]);
          continue;
        }
        EXPECT_NEAR(y[i], w[i], 1e-12 * (1 + std::fabs(w[i])));
      }
      std::vector<float> xf(x.begin(), x.end()), yf(x.size());
      cpu::softmax(isLog, DT::F32, xf.data(), dx, axis, yf.data());
      for (size_t i = 0; i < y.size(); ++i) {
        if (std::isinf(w[i])) {
          EXPECT_EQ(yf[i], static_cast<float>(w[i]));
          continue;
        }
        EXPECT_NEAR(yf[i], w[i], 2e-6 * (1 + std::fabs(w[i])));
      }
    }
}

namespace {
std::vector<double> refNorm(const std::vector<double> &x, int64_t outer, int64_t inner,
                            const std::function<double(int64_t)> &scale,
                            const std::function<double(int64_t)> &bias, double eps, bool rms) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    const double *xr = x.data() + o * inner;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < inner; ++j)
        mean += xr[j];
      mean /= inner;
    }
    for (int64_t j = 0; j < inner; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= inner;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j)
      y[o * inner + j] = (xr[j] - mean) * inv * scale(j) + bias(j);
  }
  return y;
}
} // namespace

TEST(OpsNorm, LayerNormAndRmsNorm) {
  Dims dx = D({4, 6, 8});
  auto xf = randv<float>(dx.numel(), -3, 3);
  std::vector<double> xd(xf.begin(), xf.end());
  auto sc = randv<float>(48), bi = randv<float>(48);
  auto one = [](int64_t) { return 1.0; };
  auto zero = [](int64_t) { return 0.0; };
  const double eps = 1e-5;
  // Normalise the last dim with [8] scale/bias.
  {
    std::vector<float> y(xf.size());
    cpu::layerNorm(DT::F32, xf.data(), dx, 2, sc.data(), D({8}), bi.data(), D({8}), eps, y.data());
    auto w = refNorm(xd, 24, 8, [&](int64_t j) { return double(sc[j]); },
                     [&](int64_t j) { return double(bi[j]); }, eps, false);
    std::vector<float> wf(w.begin(), w.end());
    expectBits(y, wf);
  }
  // The last two dims, no scale/bias; F64.
  {
    std::vector<double> y(xd.size());
    cpu::layerNorm(DT::F64, xd.data(), dx, 1, nullptr, Dims{}, nullptr, Dims{}, eps, y.data());
    expectBits(y, refNorm(xd, 4, 48, one, zero, eps, false));
  }
  // Broadcast scale [6, 1] over normalised [6, 8], scalar bias.
  {
    std::vector<float> y(xf.size());
    float b0 = 0.25f;
    cpu::layerNorm(DT::F32, xf.data(), dx, 1, sc.data(), D({6, 1}), &b0, D({1}), eps, y.data());
    auto w = refNorm(xd, 4, 48, [&](int64_t j) { return double(sc[j / 8]); },
                     [&](int64_t) { return 0.25; }, eps, false);
    std::vector<float> wf(w.begin(), w.end());
    expectBits(y, wf);
  }
  // RMS norm with and without scale.
  {
    std::vector<float> y(xf.size());
    cpu::rmsNorm(DT::F32, xf.data(), dx, 2, sc.data(), D({8}), 1e-6, y.data());
    auto w = refNorm(xd, 24, 8, [&](int64_t j) { return double(sc[j]); }, zero, 1e-6, true);
    std::vector<float> wf(w.begin(), w.end());
    expectBits(y, wf);
    std::vector<double> yd(xd.size());
    cpu::rmsNorm(DT::F64, xd.data(), dx, 1, nullptr, Dims{}, 1e-6, yd.data());
    expectBits(yd, refNorm(xd, 4, 48, one, zero, 1e-6, true));
  }
  // Large: parallel rows.
  {
    Dims dl = D({512, 96});
    auto xl = randv<float>(dl.numel());
    std::vector<double> xld(xl.begin(), xl.end());
    std::vector<float> y(xl.size());
    cpu::layerNorm(DT::F32, xl.data(), dl, 1, nullptr, Dims{}, nullptr, Dims{}, eps, y.data());
    auto w = refNorm(xld, 512, 96, one, zero, eps, false);
    expectBits(y, std::vector<float>(w.begin(), w.end()));
  }
}

TEST(OpsNorm, BatchNormTrainingAndInference) {
  Dims dx = D({3, 4, 5, 2});
  auto x = randv<float>(dx.numel(), -2, 2);
  auto sc = randv<float>(4), bi = randv<float>(4), mu = randv<float>(4);
  auto var = randv<float>(4, 0.5, 2);
  for (bool training : {false, true}) {
    std::vector<float> y(x.size()), w(x.size());
    for (int64_t c = 0; c < 4; ++c) {
      double m = mu[c], v = var[c];
      if (training) {
        double s = 0, sq = 0;
        for (int64_t n = 0; n < 3; ++n)
          for (int64_t k = 0; k < 10; ++k)
            s += x[(n * 4 + c) * 10 + k];
        m = s / 30;
        for (int64_t n = 0; n < 3; ++n)
          for (int64_t k = 0; k < 10; ++k)
            sq += (x[(n * 4 + c) * 10 + k] - m) * (x[(n * 4 + c) * 10 + k] - m);
        v = sq / 30;
      }
      double inv = 1.0 / std::sqrt(v + 1e-5);
      for (int64_t n = 0; n < 3; ++n)
        for (int64_t k = 0; k < 10; ++k) {
          int64_t at = (n * 4 + c) * 10 + k;
          w[at] = static_cast<float>((x[at] - m) * inv * sc[c] + bi[c]);
        }
    }
    cpu::batchNorm(DT::F32, x.data(), dx, sc.data(), bi.data(), mu.data(), var.data(), 1e-5,
                   training, y.data());
    expectBits(y, w);
  }
}

TEST(OpsReduce, SumSquaresInDouble) {
  // Over several chunks and a ragged tail; the exact sum in double.
  const int64_t n = (int64_t(1) << 17) + 1000 + 7;
  auto x = randv<float>(n, -3, 3);
  double want = 0;
  for (float v : x)
    want += static_cast<double>(v) * v;
  float got = 0;
  cpu::sumSquares(DT::F32, x.data(), n, &got);
  EXPECT_EQ(got, static_cast<float>(want));
  std::vector<double> xd(x.begin(), x.end());
  double gotD = 0;
  cpu::sumSquares(DT::F64, xd.data(), n, &gotD);
  EXPECT_NEAR(gotD, want, 1e-9 * want);
}

TEST(OpsNorm, BatchNormGradMatchesTheFormula) {
  // d/dx of scale * (x - m) / sqrt(v + eps) + bias with batch statistics,
  // written out: dx = scale rstd (dy - mean(dy) - xhat mean(dy xhat)),
  // dscale = sum(dy xhat), dbias = sum(dy); n = 3 x 5 = 15 per channel.
  Dims dx = D({3, 4, 5});
  auto x = randv<float>(dx.numel(), -2, 3), g = randv<float>(dx.numel(), -1, 1);
  auto sc = randv<float>(4, 0.5, 2);
  std::vector<float> want(x.size()), wantS(4), wantB(4);
  for (int64_t c = 0; c < 4; ++c) {
    double m = 0, v = 0, sg = 0, sgx = 0;
    auto at = [&](int64_t n, int64_t k) { return (n * 4 + c) * 5 + k; };
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 5; ++k)
        m += x[at(n, k)] / 15.0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 5; ++k)
        v += (x[at(n, k)] - m) * (x[at(n, k)] - m) / 15.0;
    double rstd = 1.0 / std::sqrt(v + 1e-5);
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 5; ++k) {
        sg += g[at(n, k)];
        sgx += g[at(n, k)] * (x[at(n, k)] - m) * rstd;
      }
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 5; ++k)
        want[at(n, k)] = static_cast<float>(
            sc[c] * rstd * (g[at(n, k)] - sg / 15 - (x[at(n, k)] - m) * rstd * sgx / 15));
    wantS[c] = static_cast<float>(sgx);
    wantB[c] = static_cast<float>(sg);
  }
  std::vector<float> got(x.size()), gotS(4), gotB(4);
  cpu::batchNormGrad(DT::F32, x.data(), g.data(), dx, sc.data(), 1e-5, got.data(), gotS.data(),
                     gotB.data());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << i;
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(gotS[c], wantS[c], 1e-5) << c;
    EXPECT_NEAR(gotB[c], wantB[c], 1e-5) << c;
  }
}

TEST(OpsNorm, BatchNormStatsIsTorchsRunningUpdate) {
  // nn.BatchNorm2d(momentum=0.25) in a training forward: running =
  // 0.75 * running + 0.25 * batch, the variance unbiased (n = 3 x 7 = 21),
  // written in place (new* alias the old statistics, as the program does).
  Dims dx = D({3, 4, 7});
  auto x = randv<float>(dx.numel(), -1, 3);
  auto mu = randv<float>(4), var = randv<float>(4, 0.5, 2);
  std::vector<float> wm(4), wv(4);
  for (int64_t c = 0; c < 4; ++c) {
    double s = 0, sq = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 7; ++k)
        s += x[(n * 4 + c) * 7 + k];
    double m = s / 21;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 7; ++k)
        sq += (x[(n * 4 + c) * 7 + k] - m) * (x[(n * 4 + c) * 7 + k] - m);
    wm[c] = static_cast<float>(0.75 * mu[c] + 0.25 * m);
    wv[c] = static_cast<float>(0.75 * var[c] + 0.25 * sq / 20);
  }
  cpu::batchNormStats(DT::F32, x.data(), dx, mu.data(), var.data(), 0.75, mu.data(), var.data());
  expectBits(mu, wm);
  expectBits(var, wv);
}

// --- dropout and cross entropy --------------------------------------------------

namespace {
// merak.dropout's specification (docs/dialect.md), written out again: the
// kernels and the evaluator share merak_rt/dropout_mask.h, this does not.
uint64_t specMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
bool specKeep(int64_t seed, int64_t step, uint64_t index, double ratio) {
  uint64_t key = specMix(uint64_t(seed) ^ specMix(uint64_t(step) + 0xD1B54A32D192ED03ull));
  uint64_t z = specMix(key * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull);
  return ratio == 0.0 || double(z >> 11) * 0x1.0p-53 >= ratio;
}

/// Runs dropout at `position`, restoring the default afterwards.
void dropoutAt(const cpu::TrainingPosition &position, DT t, const void *x, const Dims &dx,
               double ratio, int64_t seed, const Dims &batchSplit, const Dims &tpSplit, void *y,
               void *mask) {
  cpu::trainingPosition() = position;
  cpu::dropout(t, x, dx, ratio, seed, batchSplit, tpSplit, y, mask);
  cpu::trainingPosition() = cpu::TrainingPosition();
}
} // namespace

TEST(OpsDropout, MaskFollowsTheSpecification) {
  const int64_t n = 100003;
  auto x = randv<float>(n);
  for (int64_t seed : {int64_t(0), int64_t(42), int64_t(-7)})
    for (double ratio : {0.0, 0.1, 0.5})
      for (int64_t step : {0, 5}) {
        std::vector<float> y(n);
        std::vector<uint8_t> m(n);
        cpu::TrainingPosition at;
        at.step = step;
        dropoutAt(at, DT::F32, x.data(), D({n}), ratio, seed, Dims{}, Dims{}, y.data(), m.data());
        const double scale = 1.0 / (1.0 - ratio);
        int64_t kept = 0;
        for (int64_t k = 0; k < n; ++k) {
          bool keep = specKeep(seed, step, uint64_t(k), ratio);
          ASSERT_EQ(m[k], keep) << k;
          ASSERT_EQ(y[k], keep ? static_cast<float>(x[k] * scale) : 0.0f) << k;
          kept += keep;
        }
        EXPECT_NEAR(double(kept) / n, 1.0 - ratio, 0.01);
      }
  std::vector<double> xd{1, 2, 3, 4}, yd(4);
  std::vector<uint8_t> md(4);
  cpu::dropout(DT::F64, xd.data(), D({4}), 0.5, 42, Dims{}, Dims{}, yd.data(), md.data());
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(md[k], specKeep(42, 0, k, 0.5));
}

TEST(OpsDropout, StepsDrawIndependentMasks) {
  // Two steps agree on a fraction p^2 + (1-p)^2 of the elements, as
  // independent masks do (not 1: the same mask every step).
  const int64_t n = 200000;
  std::vector<float> x(n, 1.0f), y(n);
  std::vector<uint8_t> m0(n), m1(n);
  cpu::TrainingPosition at;
  dropoutAt(at, DT::F32, x.data(), D({n}), 0.3, 9, Dims{}, Dims{}, y.data(), m0.data());
  at.step = 1;
  dropoutAt(at, DT::F32, x.data(), D({n}), 0.3, 9, Dims{}, Dims{}, y.data(), m1.data());
  int64_t same = 0;
  for (int64_t k = 0; k < n; ++k)
    same += m0[k] == m1[k];
  EXPECT_NEAR(double(same) / n, 0.3 * 0.3 + 0.7 * 0.7, 0.01);
}

TEST(OpsDropout, SplitPartsTileTheWholeMask) {
  // The whole [4, 6, 12] tensor's mask at step 3, and every rank's local
  // mask: the batch (dim 0) over dp 2 x 2 micro-batches, and tp 2 over
  // dim 2 in 2 blocks ([2 blocks, 2 parts, 3]) or over dim 0 as well.
  const int64_t B = 4, S = 6, C = 12;
  std::vector<float> x(B * S * C, 1.0f), y(x.size());
  std::vector<uint8_t> whole(x.size());
  cpu::TrainingPosition at;
  at.step = 3;
  dropoutAt(at, DT::F32, x.data(), D({B, S, C}), 0.4, 11, Dims{}, Dims{}, y.data(), whole.data());
  for (int64_t i = 0; i < B * S * C; ++i)
    ASSERT_EQ(whole[i], specKeep(11, 3, uint64_t(i), 0.4)) << i;
  // Different dims: parts dp * 2 + mb of the batch (1 row each), tp's half
  // of each block of 6 columns. The same dim: dp 2 (no micro-batches)
  // splits the batch into halves of 2 rows, tp 2 each half into rows.
  for (bool sameDim : {false, true})
    for (int64_t dp = 0; dp < 2; ++dp)
      for (int64_t mb = 0; mb < (sameDim ? 1 : 2); ++mb)
        for (int64_t tp = 0; tp < 2; ++tp) {
          at.dpRank = dp, at.microbatches = sameDim ? 1 : 2, at.microbatch = mb, at.tpRank = tp;
          const Dims local = sameDim ? D({1, S, C}) : D({1, S, C / 2});
          const Dims batch = sameDim ? D({0, 1, 2}) : D({0, 1, 4});
          const Dims tpSplit = sameDim ? D({0, 1, 2}) : D({2, 2, 2});
          std::vector<float> xl(local.numel(), 1.0f), yl(xl.size());
          std::vector<uint8_t> ml(xl.size());
          dropoutAt(at, DT::F32, xl.data(), local, 0.4, 11, batch, tpSplit, yl.data(), ml.data());
          const int64_t wb = sameDim ? dp * 2 + tp : dp * 2 + mb;
          for (int64_t s2 = 0; s2 < S; ++s2)
            for (int64_t c = 0; c < local.d[2]; ++c) {
              int64_t wc = sameDim ? c : (c / 3) * 6 + tp * 3 + c % 3;
              ASSERT_EQ(ml[s2 * local.d[2] + c], whole[(wb * S + s2) * C + wc])
                  << "dp " << dp << " mb " << mb << " tp " << tp << " sameDim " << sameDim;
            }
        }
}

TEST(OpsCrossEntropy, ReductionsIgnoreIndexAxis) {
  useThreadsafeDeathTests();
  // logits [N=3, C=5, T=4] with the class dim at axis 1; labels [3, 4].
  Dims dl = D({3, 5, 4});
  auto lg = randv<float>(dl.numel(), -4, 4);
  std::vector<int64_t> lab{0, 4, -100, 2, 1, 1, 3, -100, 4, 0, 2, 3};
  std::vector<double> loss(12, 0.0);
  int64_t counted = 0;
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t t = 0; t < 4; ++t) {
      int64_t l = lab[n * 4 + t];
      if (l == -100)
        continue;
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < 5; ++c)
        m = std::max(m, double(lg[(n * 5 + c) * 4 + t]));
      for (int64_t c = 0; c < 5; ++c)
        s += std::exp(lg[(n * 5 + c) * 4 + t] - m);
      loss[n * 4 + t] = m + std::log(s) - lg[(n * 5 + l) * 4 + t];
      ++counted;
    }
  double total = 0;
  for (double v : loss)
    total += v;
  std::vector<float> none(12);
  cpu::crossEntropy(DT::F32, lg.data(), dl, 1, DT::I64, lab.data(), 0, true, -100, none.data());
  expectBits(none, std::vector<float>(loss.begin(), loss.end()));
  float mean = 0, sum = 0;
  cpu::crossEntropy(DT::F32, lg.data(), dl, 1, DT::I64, lab.data(), 1, true, -100, &mean);
  cpu::crossEntropy(DT::F32, lg.data(), dl, 1, DT::I64, lab.data(), 2, true, -100, &sum);
  EXPECT_EQ(mean, static_cast<float>(total / counted));
  EXPECT_EQ(sum, static_cast<float>(total));
  // Without ignore_index a -100 label is out of range: fatal.
  EXPECT_EXIT(cpu::crossEntropy(DT::F32, lg.data(), dl, 1, DT::I64, lab.data(), 1, false, 0, &mean),
              ::testing::ExitedWithCode(3), "label -100 out of range");
  // Last axis (GPT layout), int32 labels, large enough to be parallel, F64.
  const int64_t rows = 300, C = 257;
  auto big = randv<double>(rows * C, -6, 6);
  auto bl = randi(rows, 0, C - 1);
  bl[5] = 3; // ignore index 3
  std::vector<int32_t> bl32(bl.begin(), bl.end());
  double want = 0;
  int64_t cnt = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (bl[r] == 3)
      continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c)
      m = std::max(m, big[r * C + c]);
    for (int64_t c = 0; c < C; ++c)
      s += std::exp(big[r * C + c] - m);
    want += m + std::log(s) - big[r * C + bl[r]];
    ++cnt;
  }
  double got = 0;
  cpu::crossEntropy(DT::F64, big.data(), D({rows, C}), 1, DT::I32, bl32.data(), 1, true, 3, &got);
  EXPECT_EQ(got, want / cnt);
  // F32 with the classes last takes its exps in float (vectorised, within
  // ~1 ulp of the double exp) and sums them in double: each loss is within
  // a few float ulps of the double reference rather than bitwise equal.
  std::vector<float> bigf(big.begin(), big.end());
  std::vector<double> wantRow(rows, 0.0);
  double wantSum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (bl[r] == 3)
      continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c)
      m = std::max(m, double(bigf[r * C + c]));
    for (int64_t c = 0; c < C; ++c)
      s += std::exp(double(bigf[r * C + c]) - m);
    wantRow[r] = m + std::log(s) - bigf[r * C + bl[r]];
    wantSum += wantRow[r];
  }
  std::vector<float> rowsF(rows);
  cpu::crossEntropy(DT::F32, bigf.data(), D({rows, C}), 1, DT::I32, bl32.data(), 0, true, 3,
                    rowsF.data());
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_NEAR(rowsF[r], wantRow[r], 4 * 0x1p-23 * (1 + std::fabs(wantRow[r]))) << r;
  float sumF = 0;
  cpu::crossEntropy(DT::F32, bigf.data(), D({rows, C}), 1, DT::I32, bl32.data(), 2, true, 3, &sumF);
  EXPECT_NEAR(sumF, wantSum, 4 * 0x1p-23 * std::fabs(wantSum));
}

// --- convolution ----------------------------------------------------------------

namespace {
struct ConvCase {
  Dims x, w;
  cpu::Conv2DAttrs a;
};

Dims convOut(const ConvCase &c) {
  int64_t H = c.x.d[2], W = c.x.d[3], KH = c.w.d[2], KW = c.w.d[3];
  int64_t OH = (H + c.a.pt + c.a.pb - c.a.dh * (KH - 1) - 1) / c.a.sh + 1;
  int64_t OW = (W + c.a.pl + c.a.pr - c.a.dw * (KW - 1) - 1) / c.a.sw + 1;
  return D({c.x.d[0], c.w.d[0], OH, OW});
}

/// fn(outIndex, inIndex, weightIndex) for every tap (the evaluator's loop).
void forEachTap(const ConvCase &c, const Dims &dy,
                const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  int64_t N = c.x.d[0], C = c.x.d[1], H = c.x.d[2], W = c.x.d[3];
  int64_t O = c.w.d[0], CG = c.w.d[1], KH = c.w.d[2], KW = c.w.d[3];
  int64_t OH = dy.d[2], OW = dy.d[3], OG = O / c.a.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * c.a.sh - c.a.pt + kh * c.a.dh;
              if (ih < 0 || ih >= H)
                continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * c.a.sw - c.a.pl + kw * c.a.dw;
                if (iw < 0 || iw >= W)
                  continue;
                fn(((n * O + o) * OH + oh) * OW + ow, ((n * C + (o / OG) * CG + ci) * H + ih) * W + iw,
                   ((o * CG + ci) * KH + kh) * KW + kw);
              }
            }
}

double dotD(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}
} // namespace

TEST(OpsConv, ForwardBackwardAgainstDirectLoops) {
  const ConvCase cases[] = {
      {D({2, 3, 7, 6}), D({4, 3, 3, 3}), {1, 1, 1, 1, 1, 1, 1, 1, 1}}, // same padding
      {D({2, 4, 9, 8}),
       D({6, 2, 3, 2}),
       {2, 1, 1, 0, 2, 1, 1, 2, 2}}, // stride, asym pad, dilation, groups
      {D({1, 6, 5, 5}), D({6, 1, 3, 3}), {1, 2, 0, 1, 0, 1, 2, 1, 6}},  // depthwise, dilation 2
      {D({2, 5, 1, 16}), D({5, 1, 1, 4}), {1, 1, 0, 3, 0, 3, 1, 1, 5}}, // Mamba's causal conv1d
      {D({2, 40, 9, 11}),
       D({40, 1, 3, 3}),
       {2, 2, 1, 1, 1, 1, 1, 1, 40}}, // depthwise, stride 2, parallel
      {D({1, 3, 4, 5}),
       D({3, 1, 2, 7}),
       {1, 3, 0, 2, 1, 2, 1, 1, 3}}, // kernel wider than the input
      {D({3, 5, 4, 6}), D({7, 5, 1, 1}), {1, 1, 0, 0, 0, 0, 1, 1, 1}}, // 1x1 direct
      {D({2, 8, 6, 6}), D({4, 4, 1, 1}), {2, 2, 0, 0, 0, 0, 1, 1, 2}}, // 1x1 strided, groups
  };
  for (const ConvCase &c : cases) {
    Dims dy = convOut(c);
    SCOPED_TRACE(::testing::Message() << "y " << dy.d[1] << "x" << dy.d[2] << "x" << dy.d[3]);
    auto x = randv<double>(c.x.numel()), w = randv<double>(c.w.numel());
    auto bias = randv<double>(c.w.d[0]), g = randv<double>(dy.numel());
    std::vector<double> yRef(dy.numel()), dxRef(x.size(), 0.0), dwRef(w.size(), 0.0);
    for (int64_t k = 0; k < dy.numel(); ++k)
      yRef[k] = bias[(k / (dy.d[2] * dy.d[3])) % dy.d[1]];
    forEachTap(c, dy, [&](int64_t o, int64_t i, int64_t k) {
      yRef[o] += x[i] * w[k];
      dxRef[i] += g[o] * w[k];
      dwRef[k] += g[o] * x[i];
    });
    std::vector<double> y(dy.numel()), dx(x.size(), 7.0), dw(w.size(), 7.0);
    cpu::conv2d(DT::F64, x.data(), c.x, w.data(), c.w, bias.data(), c.a, y.data(), dy);
    cpu::conv2dBackwardData(DT::F64, g.data(), dy, w.data(), c.w, c.a, dx.data(), c.x);
    cpu::conv2dBackwardFilter(DT::F64, x.data(), c.x, g.data(), dy, c.a, dw.data(), c.w);
    expectNear(y, yRef, 1e-12);
    expectNear(dx, dxRef, 1e-12);
    expectNear(dw, dwRef, 1e-12);
    // The adjoint identity <conv(x,w), g> = <x, dX(g,w)> = <w, dW(x,g)>, no bias.
    std::vector<double> y0(dy.numel());
    cpu::conv2d(DT::F64, x.data(), c.x, w.data(), c.w, nullptr, c.a, y0.data(), dy);
    double lhs = dotD(y0, g);
    EXPECT_NEAR(lhs, dotD(x, dx), 1e-10 * (1 + std::fabs(lhs)));
    EXPECT_NEAR(lhs, dotD(w, dw), 1e-10 * (1 + std::fabs(lhs)));
    // F32 through sgemm.
    std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(bias.begin(), bias.end()),
        gf(g.begin(), g.end());
    std::vector<float> yf(dy.numel()), dxf(x.size()), dwf(w.size());
    cpu::conv2d(DT::F32, xf.data(), c.x, wf.data(), c.w, bf.data(), c.a, yf.data(), dy);
    cpu::conv2dBackwardData(DT::F32, gf.data(), dy, wf.data(), c.w, c.a, dxf.data(), c.x);
    cpu::conv2dBackwardFilter(DT::F32, xf.data(), c.x, gf.data(), dy, c.a, dwf.data(), c.w);
    expectNear(yf, yRef, 1e-5);
    expectNear(dxf, dxRef, 1e-5);
    expectNear(dwf, dwRef, 1e-5);
  }
}

// --- pooling --------------------------------------------------------------------

namespace {
int64_t poolOut(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, bool ceil) {
  int64_t span = in + p0 + p1 - d * (k - 1) - 1;
  int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (o - 1) * s >= in + p0) // the last window must start inside
    --o;
  return o;
}

/// The evaluator's window walk: fn(out, in indices, padded count).
void forEachWindow(const Dims &dx, const Dims &dy, const cpu::Pool2DAttrs &a,
                   const std::function<void(int64_t, const std::vector<int64_t> &, int64_t)> &fn) {
  int64_t NC = dx.d[0] * dx.d[1], H = dx.d[2], W = dx.d[3], OH = dy.d[2], OW = dy.d[3];
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        std::vector<int64_t> idx;
        int64_t padded = 0;
        for (int64_t kh = 0; kh < a.kh; ++kh) {
          int64_t ih = oh * a.sh - a.pt + kh * a.dh;
          for (int64_t kw = 0; kw < a.kw; ++kw) {
            int64_t iw = ow * a.sw - a.pl + kw * a.dw;
            if (ih < H + a.pb && iw < W + a.pr)
              ++padded;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
              idx.push_back((nc * H + ih) * W + iw);
          }
        }
        fn((nc * OH + oh) * OW + ow, idx, padded);
      }
}
} // namespace

TEST(OpsPool, MaxAndAvgWithCeilModeAndPadding) {
  struct Case {
    Dims x;
    cpu::Pool2DAttrs a;
  } cases[] = {
      {D({2, 3, 7, 7}), {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}},   // ceil, pad, include pad
      {D({2, 3, 7, 7}), {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false}},  // ceil, exclude pad
      {D({1, 2, 8, 9}), {2, 3, 2, 2, 0, 1, 0, 1, 1, 1, false, true}},  // asymmetric
      {D({1, 2, 6, 6}), {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, false}},  // plain
      {D({1, 1, 9, 9}), {3, 3, 1, 1, 2, 2, 2, 2, 1, 1, false, false}}, // overlapping windows
  };
  for (const Case &c : cases) {
    for (bool dilated : {false, true}) {
      cpu::Pool2DAttrs a = c.a;
      if (dilated) { // max pool only
        a.dh = 2;
        a.dw = 2;
      }
      Dims dy = D({c.x.d[0], c.x.d[1],
                   poolOut(c.x.d[2], a.kh, a.sh, a.pt, a.pb, a.dh, a.ceilMode),
                   poolOut(c.x.d[3], a.kw, a.sw, a.pl, a.pr, a.dw, a.ceilMode)});
      SCOPED_TRACE(::testing::Message() << "out " << dy.d[2] << "x" << dy.d[3] << " dil " << dilated);
      auto x = randv<float>(c.x.numel());
      x[4] = x[5]; // ties: first maximum wins
      auto g = randv<float>(dy.numel());
      std::vector<float> yMax(dy.numel()), wMax(dy.numel());
      std::vector<double> gMax(c.x.numel(), 0.0);
      forEachWindow(c.x, dy, a, [&](int64_t o, const std::vector<int64_t> &idx, int64_t) {
        double m = -INFINITY;
        for (int64_t i : idx)
          m = std::max(m, double(x[i]));
        wMax[o] = static_cast<float>(m);
        if (idx.empty())
          return;
        int64_t best = idx[0];
        for (int64_t i : idx)
          if (x[i] > x[best])
            best = i;
        gMax[best] += g[o];
      });
      cpu::maxPool2d(DT::F32, x.data(), c.x, a, yMax.data(), dy);
      expectBits(yMax, wMax);
      std::vector<float> dxMax(c.x.numel(), 5.f);
      cpu::maxPool2dGrad(DT::F32, x.data(), c.x, g.data(), dy, a, dxMax.data());
      expectBits(dxMax, std::vector<float>(gMax.begin(), gMax.end()));
      if (dilated)
        continue;
      std::vector<float> yAvg(dy.numel()), wAvg(dy.numel());
      std::vector<double> gAvg(c.x.numel(), 0.0);
      forEachWindow(c.x, dy, a, [&](int64_t o, const std::vector<int64_t> &idx, int64_t padded) {
        double s = 0;
        for (int64_t i : idx)
          s += x[i];
        int64_t n = a.countIncludePad ? padded : static_cast<int64_t>(idx.size());
        wAvg[o] = static_cast<float>(n ? s / n : 0.0);
        for (int64_t i : idx)
          gAvg[i] += g[o] / double(n);
      });
      cpu::avgPool2d(DT::F32, x.data(), c.x, a, yAvg.data(), dy);
      expectBits(yAvg, wAvg);
      std::vector<float> dxAvg(c.x.numel(), 5.f);
      cpu::avgPool2dGrad(DT::F32, g.data(), dy, a, dxAvg.data(), c.x);
      expectBits(dxAvg, std::vector<float>(gAvg.begin(), gAvg.end()));
    }
  }
}

TEST(OpsDeterminism, ThreadCountIndependent) {
#ifdef _OPENMP
  Dims dx = D({256, 384});
  auto x = randv<float>(dx.numel());
  auto run = [&](int threads) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> cols(384), rows(256), ln(x.size()), sm(x.size());
    cpu::reduce(cpu::Reduce::Sum, DT::F32, x.data(), dx, D({0}), cols.data());
    cpu::reduce(cpu::Reduce::Mean, DT::F32, x.data(), dx, D({1}), rows.data());
    cpu::layerNorm(DT::F32, x.data(), dx, 1, nullptr, Dims{}, nullptr, Dims{}, 1e-5, ln.data());
    cpu::softmax(false, DT::F32, x.data(), dx, 0, sm.data());
    omp_set_num_threads(saved);
    std::vector<float> all;
    for (auto *v : {&cols, &rows, &ln, &sm})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  };
  auto a = run(1), b = run(2), c = run(4);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}
