//===- ops_attention_test.cpp - attention kernels against a direct sum ----===//
//
// cpu::attention / attentionGrad against loops in double written here from
// the definition (the probabilities materialised, the gradient through the
// softmax Jacobian, not the kernels' Delta shortcut): causal and unmasked,
// several query tiles with a partial last one (T = 150 over tiles of 64),
// more keys than queries, results left unwritten (null), zero-sized
// inputs, a score bias broadcast over the batch (and over the query rows:
// ALiBi's per-key bias; its gradient the scores'), a gradient of lse (attention
// sinks'), and probability dropout: the reference
// multiplies each probability by the factor cpu::dropout gives a ones tensor of the probabilities'
// shape (its mask checked against the specification in ops_nn_test.cpp), whole and split over batch
// and heads.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"
#include "ops_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cpu = merak::rt::cpu;
using cpu::Dims;
using cpu::DT;

namespace {

struct Case {
  int64_t slices, t, s, d;
  bool causal;
  double scale;
  int64_t window = 0; // with causal: row i sees keys i - window < j <= i; without: |i - j| < window
  double softcap = 0; // scores s -> softcap * tanh(s / softcap)
  int64_t biasHeads = 0; // > 0: q is [slices / H, H, T, D], a bias [1, H, T, S]
  double dropout = 0;    // probability dropout (seed 21, step 5)
  bool biasPerKey = false; // the bias [1, H, 1, S]: one row for every query (ALiBi's)
  bool lseGrad = false;    // a gradient of lse too (attention sinks' rescaling reads lse)
};

/// The bias's rows per head: T, or 1 for a bias per key.
int64_t biasRows(const Case &c) { return c.biasPerKey ? 1 : c.t; }

constexpr int64_t kSeed = 21, kStep = 5;

/// The dropout factors (0 or 1 / (1 - p)) of probabilities of dims `dp`
/// at `at`: cpu::dropout of ones (empty without dropout).
std::vector<float> dropFactors(double ratio, const Dims &dp, const cpu::TrainingPosition &at,
                               const Dims &batchSplit = Dims{}, const Dims &tpSplit = Dims{}) {
  if (ratio == 0)
    return {};
  std::vector<float> ones(static_cast<size_t>(dp.numel()), 1.0f), y(ones.size());
  cpu::trainingPosition() = at;
  cpu::dropout(DT::F32, ones.data(), dp, ratio, kSeed, batchSplit, tpSplit, y.data(), nullptr);
  cpu::trainingPosition() = cpu::TrainingPosition();
  return y;
}

std::vector<float> randf(int64_t n, std::mt19937_64 &g) {
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = u(g);
  return v;
}

struct Reference {
  std::vector<double> o, lse, dq, dk, dv, dbias;
};

Reference reference(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
                    const std::vector<float> &v, const std::vector<float> &g,
                    const std::vector<float> &bias, const std::vector<float> &factors,
                    const std::vector<float> &dlse = {}) {
  Reference r;
  // The dropout factor of probability (b, i, j).
  auto drop = [&](int64_t b, int64_t i, int64_t j) {
    return factors.empty() ? 1.0 : double(factors[(b * c.t + i) * c.s + j]);
  };
  if (c.biasHeads)
    r.dbias.assign(c.slices * c.t * c.s, 0);
  r.o.assign(c.slices * c.t * c.d, 0);
  r.lse.assign(c.slices * c.t, 0);
  r.dq.assign(c.slices * c.t * c.d, 0);
  r.dk.assign(c.slices * c.s * c.d, 0);
  r.dv.assign(c.slices * c.s * c.d, 0);
  std::vector<double> p(c.s), dp(c.s);
  for (int64_t b = 0; b < c.slices; ++b)
    for (int64_t i = 0; i < c.t; ++i) {
      const int64_t n = c.causal ? i + 1 : c.window > 0 ? std::min(c.s, i + c.window) : c.s;
      const int64_t lo = c.window > 0 ? std::max<int64_t>(0, i - c.window + 1) : 0;
      double m = -INFINITY;
      for (int64_t j = lo; j < n; ++j) {
        double x = 0;
        for (int64_t e = 0; e < c.d; ++e)
          x += double(q[(b * c.t + i) * c.d + e]) * k[(b * c.s + j) * c.d + e];
        p[j] = c.scale * x;
        if (c.softcap > 0)
          p[j] = c.softcap * std::tanh(p[j] / c.softcap);
        if (c.biasHeads)
          p[j] += bias[((b % c.biasHeads) * biasRows(c) + (c.biasPerKey ? 0 : i)) * c.s + j];
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (int64_t j = lo; j < n; ++j)
        sum += std::exp(p[j] - m);
      r.lse[b * c.t + i] = m + std::log(sum);
      for (int64_t j = lo; j < n; ++j)
        p[j] = std::exp(p[j] - m) / sum;
      const float *gi = &g[(b * c.t + i) * c.d];
      double dot = 0;
      for (int64_t j = lo; j < n; ++j) {
        double x = 0;
        for (int64_t e = 0; e < c.d; ++e) {
          r.o[(b * c.t + i) * c.d + e] += p[j] * drop(b, i, j) * v[(b * c.s + j) * c.d + e];
          x += double(gi[e]) * v[(b * c.s + j) * c.d + e];
        }
        dp[j] = x * drop(b, i, j);
        dot += p[j] * dp[j];
      }
      if (!dlse.empty()) // d lse / d s_j = p_j
        dot -= dlse[b * c.t + i];
      for (int64_t j = lo; j < n; ++j) {
        if (c.biasHeads)
          r.dbias[(b * c.t + i) * c.s + j] = p[j] * (dp[j] - dot);
        double ds = p[j] * (dp[j] - dot) * c.scale;
        if (c.softcap > 0) {
          double raw = 0;
          for (int64_t e = 0; e < c.d; ++e)
            raw += double(q[(b * c.t + i) * c.d + e]) * k[(b * c.s + j) * c.d + e];
          const double th = std::tanh(c.scale * raw / c.softcap);
          ds *= 1 - th * th;
        }
        for (int64_t e = 0; e < c.d; ++e) {
          r.dv[(b * c.s + j) * c.d + e] += p[j] * drop(b, i, j) * gi[e];
          r.dq[(b * c.t + i) * c.d + e] += ds * k[(b * c.s + j) * c.d + e];
          r.dk[(b * c.s + j) * c.d + e] += ds * q[(b * c.t + i) * c.d + e];
        }
      }
    }
  return r;
}

void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want)
    scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5 * (1.0 + std::fabs(want[i])) + 1e-6 * scale)
        << what << " at " << i;
}

/// Runs both kernels on (q, k, v, dO) at `at` and compares them with the
/// reference (factors: the dropout the kernels must draw).
void compare(const Case &c, const Dims &dq, const std::vector<float> &q,
             const std::vector<float> &k, const std::vector<float> &v, const std::vector<float> &dO,
             const std::vector<float> &factors, const cpu::TrainingPosition &at,
             const Dims &batchSplit, const Dims &tpSplit) {
  Reference want = reference(c, q, k, v, dO, {}, factors);
  std::vector<float> o(q.size()), lse(c.slices * c.t), gq(q.size()), gk(k.size()), gv(v.size());
  cpu::trainingPosition() = at;
  cpu::attention(DT::F32, q.data(), dq, k.data(), v.data(), c.s, c.scale, c.causal, o.data(),
                 lse.data(), false, c.window, c.softcap, nullptr, Dims{}, c.dropout, kSeed,
                 batchSplit, tpSplit);
  cpu::attentionGrad(DT::F32, q.data(), dq, k.data(), v.data(), c.s, o.data(), lse.data(),
                     dO.data(), c.scale, c.causal, gq.data(), gk.data(), gv.data(), false, c.window,
                     c.softcap, nullptr, Dims{}, nullptr, c.dropout, kSeed, batchSplit, tpSplit);
  cpu::trainingPosition() = cpu::TrainingPosition();
  expectClose(o, want.o, "o");
  expectClose(lse, want.lse, "lse");
  expectClose(gq, want.dq, "dq");
  expectClose(gk, want.dk, "dk");
  expectClose(gv, want.dv, "dv");
}

void check(const Case &c) {
  std::mt19937_64 g(0xA77Eu + c.t * 131 + c.s);
  auto q = randf(c.slices * c.t * c.d, g), k = randf(c.slices * c.s * c.d, g),
       v = randf(c.slices * c.s * c.d, g), dO = randf(c.slices * c.t * c.d, g);
  std::vector<float> bias;
  Dims dq, db;
  if (c.biasHeads) {
    bias = randf(c.biasHeads * biasRows(c) * c.s, g);
    dq.rank = 4;
    dq.d[0] = c.slices / c.biasHeads, dq.d[1] = c.biasHeads, dq.d[2] = c.t, dq.d[3] = c.d;
    db.rank = 4;
    db.d[0] = 1, db.d[1] = c.biasHeads, db.d[2] = biasRows(c), db.d[3] = c.s;
  } else {
    dq.rank = 3;
    dq.d[0] = c.slices, dq.d[1] = c.t, dq.d[2] = c.d;
  }
  const float *b = c.biasHeads ? bias.data() : nullptr;
  cpu::TrainingPosition at;
  at.step = kStep;
  const std::vector<float> factors = dropFactors(c.dropout, D({c.slices, c.t, c.s}), at);
  const std::vector<float> dlse = c.lseGrad ? randf(c.slices * c.t, g) : std::vector<float>();
  Reference want = reference(c, q, k, v, dO, bias, factors, dlse);
  std::vector<float> o(q.size()), lse(c.slices * c.t);
  cpu::trainingPosition() = at;
  cpu::attention(DT::F32, q.data(), dq, k.data(), v.data(), c.s, c.scale, c.causal, o.data(),
                 lse.data(), false, c.window, c.softcap, b, db, c.dropout, kSeed);
  expectClose(o, want.o, "o");
  expectClose(lse, want.lse, "lse");
  std::vector<float> gq(q.size(), NAN), gk(k.size(), NAN), gv(v.size(), NAN),
      gb(want.dbias.size(), NAN);
  cpu::attentionGrad(DT::F32, q.data(), dq, k.data(), v.data(), c.s, o.data(), lse.data(),
                     dO.data(), c.scale, c.causal, gq.data(), gk.data(), gv.data(), false, c.window,
                     c.softcap, b, db, c.biasHeads ? gb.data() : nullptr, c.dropout, kSeed, Dims{},
                     Dims{}, c.lseGrad ? dlse.data() : nullptr);
  expectClose(gq, want.dq, "dq");
  expectClose(gk, want.dk, "dk");
  expectClose(gv, want.dv, "dv");
  expectClose(gb, want.dbias, "dbias");
  // Unread results (null) do not change the others.
  std::vector<float> o2(q.size()), gk2(k.size());
  cpu::attention(DT::F32, q.data(), dq, k.data(), v.data(), c.s, c.scale, c.causal, o2.data(),
                 nullptr, false, c.window, c.softcap, b, db, c.dropout, kSeed);
  EXPECT_EQ(o2, o);
  cpu::attentionGrad(DT::F32, q.data(), dq, k.data(), v.data(), c.s, o.data(), lse.data(),
                     dO.data(), c.scale, c.causal, nullptr, gk2.data(), nullptr, false, c.window,
                     c.softcap, b, db, nullptr, c.dropout, kSeed, Dims{}, Dims{},
                     c.lseGrad ? dlse.data() : nullptr);
  EXPECT_EQ(gk2, gk);
  cpu::trainingPosition() = cpu::TrainingPosition();
}

TEST(OpsAttention, CausalSeveralTiles) { check({3, 150, 150, 32, true, 0.17}); }
TEST(OpsAttention, CausalOneTile) { check({2, 16, 16, 16, true, 0.25}); }
TEST(OpsAttention, UnmaskedMoreKeysThanQueries) { check({2, 70, 130, 16, false, 0.3}); }
TEST(OpsAttention, CausalExactTiles) { check({1, 128, 128, 64, true, 0.125}); }
// Sliding windows: narrower than a tile (tiles then start past key 0), wider
// than one, and of one key (each row sees itself).
TEST(OpsAttention, WindowNarrowerThanATile) { check({2, 150, 150, 16, true, 0.2, 7}); }
TEST(OpsAttention, WindowWiderThanATile) { check({1, 200, 200, 32, true, 0.15, 90}); }
TEST(OpsAttention, WindowOfOneKey) { check({1, 70, 70, 16, true, 0.3, 1}); }
// Bands (a window on both sides, ModernBERT's local layers): narrower than a
// tile (its keys start past 0 and end before S), wider, and with dropout.
TEST(OpsAttention, BandNarrowerThanATile) { check({2, 150, 150, 16, false, 0.2, 7}); }
TEST(OpsAttention, BandWiderThanATile) { check({1, 200, 200, 32, false, 0.15, 90}); }
TEST(OpsAttention, BandDropout) { check({1, 100, 100, 16, false, 0.3, 20, 0, 0, 0.2}); }
// Soft-capped scores (Gemma 2): unmasked, causal, and with a window.
TEST(OpsAttention, SoftcapUnmasked) { check({2, 40, 90, 16, false, 0.9, 0, 2.5}); }
TEST(OpsAttention, SoftcapCausal) { check({1, 130, 130, 32, true, 0.6, 0, 3.0}); }
TEST(OpsAttention, SoftcapWindow) { check({1, 100, 100, 16, true, 0.5, 20, 1.5}); }
// A bias [1, H, T, S] over [B, H, T, D] (T5's relative positions): unmasked
// with more keys than queries, causal over several tiles, and with a
// window and soft-capping.
TEST(OpsAttention, BiasUnmasked) { check({6, 40, 90, 16, false, 1.0, 0, 0, 3}); }
TEST(OpsAttention, BiasCausal) { check({4, 150, 150, 32, true, 0.2, 0, 0, 2}); }
TEST(OpsAttention, BiasWindowSoftcap) { check({2, 100, 100, 16, true, 0.5, 20, 1.5, 2}); }
// Head dims the CUDA kernel lacks (the CPU target fuses any: Phi-2's 80).
TEST(OpsAttention, HeadDim80Causal) { check({3, 70, 70, 80, true, 0.11}); }
TEST(OpsAttention, HeadDim24Unmasked) { check({4, 33, 33, 24, false, 0.2}); }

// ALiBi's form: one bias row per head for every query row (read with row
// stride 0); its gradient is still the scores' (the caller sums the rows).
TEST(OpsAttention, BiasPerKeyCausal) { check({4, 150, 150, 32, true, 0.2, 0, 0, 2, 0, true}); }
TEST(OpsAttention, BiasPerKeyUnmaskedMoreKeys) {
  check({6, 40, 90, 16, false, 1.0, 0, 0, 3, 0, true});
}

// Probability dropout: a new mask of the probabilities (not of the scores:
// lse stays the softmax's), drawn again by the backward.
TEST(OpsAttention, DropoutCausalSeveralTiles) {
  check({3, 150, 150, 32, true, 0.17, 0, 0, 0, 0.2});
}
TEST(OpsAttention, DropoutUnmaskedMoreKeys) { check({2, 70, 130, 16, false, 0.3, 0, 0, 0, 0.5}); }
TEST(OpsAttention, DropoutWindowSoftcapBias) {
  check({2, 100, 100, 16, true, 0.5, 20, 1.5, 2, 0.1});
}

// A gradient of lse as well (merak-fuse-attention's attention sinks rescale
// the result by sigmoid(lse - sink)): each score's gradient gains p * dlse.
TEST(OpsAttention, LseGradCausalSeveralTiles) {
  check({2, 150, 150, 32, true, 0.2, 0, 0, 0, 0, false, true});
}
TEST(OpsAttention, LseGradWindowSoftcapBiasDropout) {
  check({2, 100, 100, 16, true, 0.5, 20, 1.5, 2, 0.1, false, true});
}

// Split over dp 2 (the batch) and tp 2 (the heads, as merak-tensor-parallel
// splits attention): every rank's output and gradients are the whole
// problem's slices, with the whole problem's mask.
TEST(OpsAttention, DropoutSplitRanksDrawTheWholeMask) {
  const int64_t B = 2, H = 4, T = 70, Dh = 16;
  const Case local{1 * 2, T, T, Dh, true, 0.3, 0, 0, 0, 0.25};
  cpu::TrainingPosition whole;
  whole.step = kStep;
  const std::vector<float> factors = dropFactors(local.dropout, D({B, H, T, T}), whole);
  std::mt19937_64 g(5);
  const int64_t n = B * H * T * Dh;
  auto q = randf(n, g), k = randf(n, g), v = randf(n, g), dO = randf(n, g);
  // Rank (dp, tp) holds batch dp, heads [2 tp, 2 tp + 2).
  auto slice = [&](const std::vector<float> &x, int64_t dp, int64_t tp, int64_t row) {
    std::vector<float> y;
    for (int64_t h = 2 * tp; h < 2 * tp + 2; ++h)
      y.insert(y.end(), x.begin() + (dp * H + h) * T * row, x.begin() + (dp * H + h + 1) * T * row);
    return y;
  };
  for (int64_t dp = 0; dp < 2; ++dp)
    for (int64_t tp = 0; tp < 2; ++tp) {
      cpu::TrainingPosition at = whole;
      at.dpRank = dp, at.tpRank = tp;
      SCOPED_TRACE("dp " + std::to_string(dp) + " tp " + std::to_string(tp));
      compare(local, D({1, 2, T, Dh}), slice(q, dp, tp, Dh), slice(k, dp, tp, Dh),
              slice(v, dp, tp, Dh), slice(dO, dp, tp, Dh), slice(factors, dp, tp, T), at,
              D({0, 1, 2}), D({1, 1, 2}));
    }
}

TEST(OpsAttention, ZeroSized) {
  Dims dq;
  dq.rank = 3;
  dq.d[0] = 0, dq.d[1] = 4, dq.d[2] = 16;
  cpu::attention(DT::F32, nullptr, dq, nullptr, nullptr, 4, 1.0, true, nullptr, nullptr);
  cpu::attentionGrad(DT::F32, nullptr, dq, nullptr, nullptr, 4, nullptr, nullptr, nullptr, 1.0,
                     true, nullptr, nullptr, nullptr);
}

} // namespace

namespace {

// bf16 attention (merak-mixed-precision): exactly the float32 kernels on the
// widened operands with each result rounded once (lse float32), for unmasked
// keys != queries and a causal partial tile, with an unread gradient.
TEST(OpsAttention, Bf16IsTheRoundedFloat32Kernel) {
  for (const Case c : {Case{2, 70, 130, 16, false, 0.3}, Case{1, 80, 80, 32, true, 0.2}}) {
    std::mt19937_64 g(7 + c.t);
    auto q = toBf16(randf(c.slices * c.t * c.d, g)), k = toBf16(randf(c.slices * c.s * c.d, g)),
         v = toBf16(randf(c.slices * c.s * c.d, g)), dO = toBf16(randf(c.slices * c.t * c.d, g));
    Dims dq;
    dq.rank = 3;
    dq.d[0] = c.slices, dq.d[1] = c.t, dq.d[2] = c.d;
    std::vector<uint16_t> o(q.size());
    std::vector<float> lse(c.slices * c.t), fo(q.size()), flse(lse.size());
    cpu::attention(DT::BF16, q.data(), dq, k.data(), v.data(), c.s, c.scale, c.causal, o.data(),
                   lse.data());
    auto fq = toF32(q), fk = toF32(k), fv = toF32(v), fdo = toF32(dO);
    cpu::attention(DT::F32, fq.data(), dq, fk.data(), fv.data(), c.s, c.scale, c.causal,
                   fo.data(), flse.data());
    EXPECT_EQ(o, toBf16(fo));
    EXPECT_EQ(lse, flse);
    std::vector<uint16_t> gq(q.size()), gv(v.size());
    cpu::attentionGrad(DT::BF16, q.data(), dq, k.data(), v.data(), c.s, o.data(), lse.data(),
                       dO.data(), c.scale, c.causal, gq.data(), nullptr, gv.data());
    std::vector<float> wq(q.size()), wk(k.size()), wv(v.size()), fob = toF32(o);
    cpu::attentionGrad(DT::F32, fq.data(), dq, fk.data(), fv.data(), c.s, fob.data(),
                       flse.data(), fdo.data(), c.scale, c.causal, wq.data(), wk.data(),
                       wv.data());
    EXPECT_EQ(gq, toBf16(wq));
    EXPECT_EQ(gv, toBf16(wv));
  }
}

// ... and with a bias (bf16 too, widened; its gradient rounded once).
TEST(OpsAttention, Bf16WithBiasIsTheRoundedFloat32Kernel) {
  const int64_t B = 2, H = 2, T = 40, D = 16;
  std::mt19937_64 g(17);
  auto q = toBf16(randf(B * H * T * D, g)), k = toBf16(randf(B * H * T * D, g)),
       v = toBf16(randf(B * H * T * D, g)), dO = toBf16(randf(B * H * T * D, g)),
       bias = toBf16(randf(H * T * T, g));
  Dims dq, db;
  dq.rank = db.rank = 4;
  dq.d[0] = B, dq.d[1] = H, dq.d[2] = T, dq.d[3] = D;
  db.d[0] = 1, db.d[1] = H, db.d[2] = T, db.d[3] = T;
  std::vector<uint16_t> o(q.size()), gb(B * H * T * T);
  std::vector<float> lse(B * H * T), fo(q.size()), flse(lse.size()), fgb(gb.size());
  cpu::attention(DT::BF16, q.data(), dq, k.data(), v.data(), T, 0.3, true, o.data(), lse.data(),
                 false, 0, 0, bias.data(), db);
  auto fq = toF32(q), fk = toF32(k), fv = toF32(v), fdo = toF32(dO), fb = toF32(bias);
  cpu::attention(DT::F32, fq.data(), dq, fk.data(), fv.data(), T, 0.3, true, fo.data(),
                 flse.data(), false, 0, 0, fb.data(), db);
  EXPECT_EQ(o, toBf16(fo));
  EXPECT_EQ(lse, flse);
  std::vector<uint16_t> gq(q.size());
  cpu::attentionGrad(DT::BF16, q.data(), dq, k.data(), v.data(), T, o.data(), lse.data(),
                     dO.data(), 0.3, true, gq.data(), nullptr, nullptr, false, 0, 0,
                     bias.data(), db, gb.data());
  std::vector<float> wq(q.size()), fob = toF32(o);
  cpu::attentionGrad(DT::F32, fq.data(), dq, fk.data(), fv.data(), T, fob.data(), flse.data(),
                     fdo.data(), 0.3, true, wq.data(), nullptr, nullptr, false, 0, 0, fb.data(),
                     db, fgb.data());
  EXPECT_EQ(gq, toBf16(wq));
  EXPECT_EQ(gb, toBf16(fgb));
}
} // namespace

namespace {
/// [S, A, B, D] -> [S, B, A, D].
std::vector<float> swapMid(const std::vector<float> &x, int64_t s, int64_t a, int64_t b, int64_t d) {
  std::vector<float> y(x.size());
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t k = 0; k < b; ++k)
        for (int64_t e = 0; e < d; ++e)
          y[((i * b + k) * a + j) * d + e] = x[((i * a + j) * b + k) * d + e];
  return y;
}

// seq_major ([B, T, H, D] operands) is exactly the heads-first kernel on
// the transposed operands, forward and backward, for both element types
// of the float32 kernel (f32 here), with and without a bias (heads-first
// [1, H, T, T] either way, and so is its gradient).
TEST(OpsAttention, SeqMajorIsTheTransposedKernel) {
  const int64_t B = 2, T = 70, H = 3, D = 16;
  std::mt19937_64 g(11);
  const int64_t n = B * T * H * D;
  auto q = randf(n, g), k = randf(n, g), v = randf(n, g), dO = randf(n, g),
       bias = randf(H * T * T, g);
  Dims seq, heads, db;
  seq.rank = heads.rank = db.rank = 4;
  seq.d[0] = heads.d[0] = B, seq.d[1] = T, seq.d[2] = H, seq.d[3] = D;
  heads.d[1] = H, heads.d[2] = T, heads.d[3] = D;
  db.d[0] = 1, db.d[1] = H, db.d[2] = T, db.d[3] = T;
  for (const float *b : {static_cast<const float *>(nullptr), std::as_const(bias).data()}) {
    std::vector<float> o(n), lse(B * H * T), ho(n), hlse(B * H * T);
    cpu::attention(DT::F32, q.data(), seq, k.data(), v.data(), T, 0.25, true, o.data(),
                   lse.data(), true, 0, 0, b, db);
    auto hq = swapMid(q, B, T, H, D), hk = swapMid(k, B, T, H, D), hv = swapMid(v, B, T, H, D),
         hdo = swapMid(dO, B, T, H, D);
    cpu::attention(DT::F32, hq.data(), heads, hk.data(), hv.data(), T, 0.25, true, ho.data(),
                   hlse.data(), false, 0, 0, b, db);
    EXPECT_EQ(swapMid(o, B, T, H, D), ho);
    EXPECT_EQ(lse, hlse);
    std::vector<float> gq(n), gk(n), gv(n), hgq(n), hgk(n), hgv(n), gb(B * H * T * T),
        hgb(gb.size());
    cpu::attentionGrad(DT::F32, q.data(), seq, k.data(), v.data(), T, o.data(), lse.data(),
                       dO.data(), 0.25, true, gq.data(), gk.data(), gv.data(), true, 0, 0, b,
                       db, b ? gb.data() : nullptr);
    cpu::attentionGrad(DT::F32, hq.data(), heads, hk.data(), hv.data(), T, ho.data(),
                       hlse.data(), hdo.data(), 0.25, true, hgq.data(), hgk.data(), hgv.data(),
                       false, 0, 0, b, db, b ? hgb.data() : nullptr);
    EXPECT_EQ(swapMid(gq, B, T, H, D), hgq);
    EXPECT_EQ(swapMid(gk, B, T, H, D), hgk);
    EXPECT_EQ(swapMid(gv, B, T, H, D), hgv);
    EXPECT_EQ(gb, hgb);
  }
}
} // namespace
