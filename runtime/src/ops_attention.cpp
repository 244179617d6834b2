//===- ops_attention.cpp - merak.attention and merak.attention_grad -------===//
//
// See merak_rt/ops.h; semantics of lib/Evaluator/EvalAttention.cpp. Each
// (batch, head) slice is walked in tiles of kTile query rows, so the scores
// in memory are one tile's [kTile, S] (per thread), never [T, S]:
//   forward:  P = scale Q_t K^T (a GEMM over the keys the tile can see),
//             per row the softmax over its keys (max, exp and the sum in
//             double as the softmax kernel; masked keys 0), lse = max +
//             log(sum), O_t = P V;
//   backward: P = exp(scale Q_t K^T - lse) recomputed, Delta = rowsum(dO_t
//             * O_t) (less the lse's gradient, when the program reads the
//             lse), dV += P^T dO_t, dS = P * (dO_t V^T - Delta),
//             dQ_t = scale dS K, dK += scale dS^T Q_t.
// A bias (T5's relative positions; ALiBi's, per key: [..., 1, S]) is added
// to each tile's scores after the capping, read through its broadcast; its
// gradient is dS before the cap's slope and the scale, written per slice.
// Dropout multiplies each probability by its factor M (0, or 1 / (1 - p):
// merak.dropout's mask on the heads-first probabilities, drawn again in the
// backward) before P V; the backward then uses P M for dV and dS = P (M
// dO V^T - Delta), where Delta = rowsum(dO * O) still holds.
// Slices run in parallel (a slice's dK/dV accumulate over its tiles in one
// thread); every product is a strided GEMM of kernels.h, which reads a
// seq_major ([..., T, H, D]) head's rows in place (row stride H * D), so
// neither layout copies its operands.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/dropout_mask.h"
#include "merak_rt/kernels.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace merak::rt::cpu {
using namespace detail;

namespace {
constexpr int64_t kTile = 64;

/// Soft-capping of n scores in place: s -> cap * tanh(s / cap).
void capRow(float *s, int64_t n, float cap) {
  for (int64_t c = 0; c < n; ++c)
    s[c] = cap * std::tanh(s[c] / cap);
}

/// One backward row over keys [lo, n): the probabilities p = exp(cap(s) +
/// bias - lse) from the scaled scores s (in `p`), and in `dp` (holding
/// dO V^T) the scores' gradient dS = p (dp - delta) times the cap's slope;
/// `gb` receives dS before that slope (the bias's gradient). With dropout
/// factors `m`, dp is m dO V^T and `p` receives p m (what dV needs).
/// Instantiated per form so that each loop has no branches and vectorises.
template <bool kCap, bool kBias, bool kDrop>
void gradRow(float *p, float *dp, const float *bias, float *gb, const float *m, int64_t lo,
             int64_t n, float lse, float delta, float cap) {
  for (int64_t c = lo; c < n; ++c) {
    float th = 0.f, x = p[c];
    if constexpr (kCap) {
      th = std::tanh(x / cap);
      x = cap * th;
    }
    if constexpr (kBias)
      x += bias[c];
    const float pc = fexp(x - lse);
    const float ds = pc * ((kDrop ? m[c] * dp[c] : dp[c]) - delta);
    p[c] = kDrop ? pc * m[c] : pc;
    if constexpr (kBias)
      gb[c] = ds;
    dp[c] = kCap ? ds * (1.f - th * th) : ds;
  }
}

using GradRowFn = void (*)(float *, float *, const float *, float *, const float *, int64_t,
                           int64_t, float, float, float);
/// gradRow's form for a call's options (chosen once per call).
template <bool kCap> GradRowFn gradRowFor(bool bias, bool drop) {
  if (bias)
    return drop ? gradRow<kCap, true, true> : gradRow<kCap, true, false>;
  return drop ? gradRow<kCap, false, true> : gradRow<kCap, false, false>;
}

/// Attention-probability dropout of one call: merak.dropout's mask on the
/// heads-first probabilities [..., T, S] (dims `dq` with S keys last) at
/// this rank's training position.
struct ProbDropout {
  double ratio = 0;
  float factor = 1; // a kept probability's 1 / (1 - ratio)
  uint64_t key = 0, threshold = 0;
  dropout::MaskLayout layout;
  int64_t t = 0, s = 0;

  ProbDropout(double ratio, int64_t seed, const Dims &dq, int64_t keys, const Dims &batchSplit,
              const Dims &tpSplit)
      : ratio(ratio), t(dq.rank >= 2 ? dq.d[dq.rank - 2] : 0), s(keys) {
    if (ratio <= 0)
      return;
    if (ratio >= 1)
      fatal("attention: dropout must be in [0, 1)");
    Dims probs = dq;
    probs.d[probs.rank - 1] = keys;
    layout = dropout::layoutAt(probs, batchSplit, tpSplit);
    key = dropout::keyAt(seed);
    threshold = dropout::threshold(ratio);
    factor = static_cast<float>(1.0 / (1.0 - ratio));
  }
  bool on() const { return ratio > 0; }
  /// The factors of keys [from, from + count) of row r of slice b into
  /// out[0, count) (splits lie on the leading dims only, so a row is
  /// consecutive in the whole tensor too).
  void row(int64_t b, int64_t r, int64_t from, int64_t count, float *out) const {
    const uint64_t first = layout.globalIndex((b * t + r) * s) + uint64_t(from);
    uint8_t *keep = scratch<uint8_t, 1>(size_t(count));
    dropoutKeepRow(key, first, count, threshold, keep);
    for (int64_t j = 0; j < count; ++j)
      out[j] = keep[j] ? factor : 0.f;
  }
};

/// The sizes of an attention call: `slices` (batch x head) of T queries and
/// S keys, head dim D.
struct AttnSizes {
  int64_t slices = 1, t = 0, s = 0, d = 0;
  AttnSizes(const char *what, DT type, const Dims &dq, int64_t keys) : s(keys) {
    if (type != DT::F32)
      fatal((std::string(what) + ": float32 tensors only").c_str());
    if (dq.rank < 2)
      fatal((std::string(what) + ": query must have rank >= 2").c_str());
    t = dq.d[dq.rank - 2];
    d = dq.d[dq.rank - 1];
    for (int32_t i = 0; i < dq.rank - 2; ++i)
      slices *= dq.d[i];
  }
  /// Keys query row r attends: [firstOf, keysOf) (a window without causal
  /// is a band: |r - c| < window).
  int64_t keysOf(int64_t r, bool causal, int64_t window) const {
    return causal ? std::min(r + 1, s) : window > 0 ? std::min(r + window, s) : s;
  }
  static int64_t firstOf(int64_t r, int64_t window) {
    return window > 0 ? std::max<int64_t>(0, r - window + 1) : 0;
  }
};

/// The offset of each slice's [T, S] block (or [1, S]: a per-key bias,
/// ALiBi's, the same for every query row) in a bias of dims `db`
/// broadcast over the leading (batch, head) dims of the heads-first query
/// dims `dq`; empty without a bias. Checks the shapes.
std::vector<int64_t> biasOffsets(const char *what, const void *bias, const Dims &dq,
                                 const Dims &db, int64_t t, int64_t s) {
  if (!bias)
    return {};
  const int32_t lead = dq.rank - 2;
  bool fits = db.rank == dq.rank && (db.d[lead] == t || db.d[lead] == 1) && db.d[lead + 1] == s;
  for (int32_t d = 0; fits && d < lead; ++d)
    fits = db.d[d] == 1 || db.d[d] == dq.d[d];
  if (!fits)
    fatal((std::string(what) + ": the bias does not broadcast to the scores").c_str());
  int64_t slices = 1;
  for (int32_t d = 0; d < lead; ++d)
    slices *= dq.d[d];
  std::vector<int64_t> offsets(size_t(slices), 0);
  for (int64_t b = 0; b < slices; ++b) {
    int64_t rest = b, stride = db.d[lead] * s;
    for (int32_t d = lead - 1; d >= 0; --d) {
      const int64_t i = rest % dq.d[d];
      rest /= dq.d[d];
      if (db.d[d] != 1)
        offsets[size_t(b)] += i * stride;
      stride *= db.d[d];
    }
  }
  return offsets;
}

// The bf16 wrappers below stage their copies in the grow-only per-thread
// scratch buffers of ops_util.h (slots 50 and up, apart from the kernels'
// own), so a training step reuses them instead of allocating per call.

/// A float32 copy (scratch slot `Slot`) of the bf16 tensor x (n elements),
/// or null for null.
template <int Slot> const float *widened(const void *x, int64_t n) {
  if (!x)
    return nullptr;
  float *y = scratch<float, Slot>(size_t(n));
  cast(DT::BF16, x, DT::F32, y, n);
  return y;
}
/// A float32 result buffer (scratch slot `Slot`) for the bf16 output
/// `out`, or null when `out` is (an unread result).
template <int Slot> float *resultFor(void *out, int64_t n) {
  return out ? scratch<float, Slot>(size_t(n)) : nullptr;
}
/// Rounds the float32 results `f` (n) into the bf16 output (skipping null).
void narrowInto(void *out, const float *f, int64_t n) {
  if (out)
    cast(DT::F32, f, DT::BF16, out, n);
}

/// The [..., T, D] element counts of q and of k / v (S keys).
void counts(const Dims &dq, int64_t keys, int64_t &nq, int64_t &nk) {
  nq = dq.numel();
  nk = dq.d[dq.rank - 2] ? nq / dq.d[dq.rank - 2] * keys : 0;
}

/// Where each (batch, head) slice's rows lie: heads-first [..., H, T, D]
/// (rows D apart, slices T * D apart) or seq_major [..., T, H, D] (rows
/// H * D apart, head h of item i at i * T * H * D + h * D); keys and values
/// likewise with S rows. `heads` holds the heads-first dims of the query.
struct SliceLayout {
  Dims heads;
  int64_t h = 1, t = 0, s = 0, d = 0, ld = 0; // ld: the row stride
  bool seq = false;

  SliceLayout(const char *what, const Dims &dq, int64_t keys, bool seqMajor)
      : heads(dq), s(keys), seq(seqMajor) {
    if (seqMajor) {
      if (dq.rank < 3)
        fatal((std::string(what) + ": seq_major needs rank >= 3 ([..., T, H, D])").c_str());
      std::swap(heads.d[dq.rank - 3], heads.d[dq.rank - 2]);
    }
    if (heads.rank >= 2) {
      t = heads.d[heads.rank - 2];
      d = heads.d[heads.rank - 1];
      h = heads.rank >= 3 ? heads.d[heads.rank - 3] : 1;
    }
    ld = seq ? h * d : d;
  }
  /// The first element of slice b's queries (rows = T) or keys (rows = S).
  int64_t at(int64_t b, int64_t rows) const {
    return seq ? (b / h) * rows * ld + (b % h) * d : b * rows * d;
  }
};
} // namespace

void attention(DT type, const void *q, const Dims &dq, const void *k, const void *v, int64_t keys,
               double scale, bool causal, void *o, void *lse, bool seqMajor, int64_t window,
               double softcap, const void *bias, const Dims &db, double dropout, int64_t seed,
               const Dims &batchSplit, const Dims &tpSplit) {
  const SliceLayout lay("attention", dq, keys, seqMajor);
  if (type == DT::BF16 && dq.rank >= 2) { // widen, the float32 kernel, round once
    int64_t nq, nk;
    counts(lay.heads, keys, nq, nk);
    float *fo = scratch<float, 53>(size_t(nq));
    attention(DT::F32, widened<50>(q, nq), dq, widened<51>(k, nk), widened<52>(v, nk), keys, scale,
              causal, fo, lse, seqMajor, window, softcap, widened<58>(bias, db.numel()), db,
              dropout, seed, batchSplit, tpSplit);
    return narrowInto(o, fo, nq);
  }
  const AttnSizes z("attention", type, lay.heads, keys);
  const float *Q = static_cast<const float *>(q), *K = static_cast<const float *>(k),
              *V = static_cast<const float *>(v);
  float *O = static_cast<float *>(o), *L = static_cast<float *>(lse);
  const float *Bias = static_cast<const float *>(bias);
  const std::vector<int64_t> boff = biasOffsets("attention", bias, lay.heads, db, z.t, z.s);
  const int64_t biasRow = bias && db.d[db.rank - 2] == 1 ? 0 : z.s; // a per-key bias: 0
  if (z.slices * z.t * z.d == 0)
    return;
  const ProbDropout drop(dropout, seed, lay.heads, keys, batchSplit, tpSplit);
  const int64_t ld = lay.ld;
  parallelFor(z.slices, z.t * z.s * z.d, [&](int64_t b0, int64_t b1) {
    float *p = scratch<float, 0>(kTile * z.s);
    float *factors = drop.on() ? scratch<float, 2>(z.s) : nullptr;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t qOff = lay.at(b, z.t), kOff = lay.at(b, z.s);
      for (int64_t r0 = 0; r0 < z.t; r0 += kTile) {
        // The tile's keys [k0, seen): from its first row's window start.
        const int64_t rows = std::min(kTile, z.t - r0);
        const int64_t seen = z.keysOf(r0 + rows - 1, causal, window);
        const int64_t k0 = AttnSizes::firstOf(r0, window), width = seen - k0;
        gemmStrided(false, true, rows, width, z.d, static_cast<float>(scale), Q + qOff + r0 * ld,
                    ld, K + kOff + k0 * ld, ld, 0.f, p, width);
        for (int64_t i = 0; i < rows; ++i) {
          float *pr = p + i * width;
          const int64_t lo = AttnSizes::firstOf(r0 + i, window) - k0,
                        n = z.keysOf(r0 + i, causal, window) - k0;
          if (softcap > 0)
            capRow(pr + lo, n - lo, static_cast<float>(softcap));
          if (Bias) {
            const float *br = Bias + boff[size_t(b)] + (r0 + i) * biasRow + k0;
            for (int64_t c = lo; c < n; ++c)
              pr[c] += br[c];
          }
          const float m = rowMaxF32(pr + lo, n - lo);
          const double sum = expSumRowF32(pr + lo, m, pr + lo, n - lo);
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t c = lo; c < n; ++c)
            pr[c] *= inv;
          if (factors) { // dropped after the row's statistics: lse stays the softmax's
            drop.row(b, r0 + i, k0 + lo, n - lo, factors + lo);
            for (int64_t c = lo; c < n; ++c)
              pr[c] *= factors[c];
          }
          std::fill(pr, pr + lo, 0.f);
          std::fill(pr + n, pr + width, 0.f);
          if (L)
            L[b * z.t + r0 + i] = m + static_cast<float>(std::log(sum));
        }
        gemmStrided(false, false, rows, z.d, width, 1.f, p, width, V + kOff + k0 * ld, ld, 0.f,
                    O + qOff + r0 * ld, ld);
      }
    }
  });
}

void attentionGrad(DT type, const void *q, const Dims &dq, const void *k, const void *v,
                   int64_t keys, const void *o, const void *lse, const void *dout, double scale,
                   bool causal, void *gq, void *gk, void *gv, bool seqMajor, int64_t window,
                   double softcap, const void *bias, const Dims &db, void *gbias, double dropout,
                   int64_t seed, const Dims &batchSplit, const Dims &tpSplit, const void *lseGrad) {
  const SliceLayout lay("attention_grad", dq, keys, seqMajor);
  if (type == DT::BF16 && dq.rank >= 2) { // widen, the float32 kernel, round once
    int64_t nq, nk;
    counts(lay.heads, keys, nq, nk);
    float *rq = resultFor<55>(gq, nq), *rk = resultFor<56>(gk, nk), *rv = resultFor<57>(gv, nk);
    int64_t ns = keys; // the scores: every query row's keys
    for (int32_t i = 0; i + 1 < dq.rank; ++i)
      ns *= dq.d[i];
    float *rb = resultFor<59>(gbias, ns);
    attentionGrad(DT::F32, widened<50>(q, nq), dq, widened<51>(k, nk), widened<52>(v, nk), keys,
                  widened<53>(o, nq), lse, widened<54>(dout, nq), scale, causal, rq, rk, rv,
                  seqMajor, window, softcap, widened<58>(bias, db.numel()), db, rb, dropout, seed,
                  batchSplit, tpSplit, lseGrad);
    narrowInto(gq, rq, nq);
    narrowInto(gk, rk, nk);
    narrowInto(gv, rv, nk);
    narrowInto(gbias, rb, ns);
    return;
  }
  const AttnSizes z("attention_grad", type, lay.heads, keys);
  const float *Q = static_cast<const float *>(q), *K = static_cast<const float *>(k),
              *V = static_cast<const float *>(v), *O = static_cast<const float *>(o),
              *L = static_cast<const float *>(lse), *G = static_cast<const float *>(dout),
              *GL = static_cast<const float *>(lseGrad);
  // A gradient nobody reads (null) still takes part in the sums.
  std::vector<float> unread[3];
  auto out = [&](void *ptr, int64_t n, int i) {
    if (ptr)
      return static_cast<float *>(ptr);
    unread[i].resize(n);
    return unread[i].data();
  };
  float *GQ = out(gq, z.slices * z.t * z.d, 0), *GK = out(gk, z.slices * z.s * z.d, 1),
        *GV = out(gv, z.slices * z.s * z.d, 2);
  std::fill(GK, GK + z.slices * z.s * z.d, 0.f);
  std::fill(GV, GV + z.slices * z.s * z.d, 0.f);
  const float *Bias = static_cast<const float *>(bias);
  float *GB = static_cast<float *>(gbias);
  const std::vector<int64_t> boff = biasOffsets("attention_grad", bias, lay.heads, db, z.t, z.s);
  const int64_t biasRow = bias && db.d[db.rank - 2] == 1 ? 0 : z.s;
  if (GB) // masked scores (outside each row's keys) have gradient 0
    std::fill(GB, GB + z.slices * z.t * z.s, 0.f);
  if (z.slices * z.t * z.d == 0)
    return;
  const float sc = static_cast<float>(scale);
  const ProbDropout drop(dropout, seed, lay.heads, keys, batchSplit, tpSplit);
  const int64_t ld = lay.ld;
  const GradRowFn gradRowOf = softcap > 0 ? gradRowFor<true>(Bias != nullptr, drop.on())
                                          : gradRowFor<false>(Bias != nullptr, drop.on());
  parallelFor(z.slices, 2 * z.t * z.s * z.d, [&](int64_t b0, int64_t b1) {
    float *p = scratch<float, 0>(kTile * z.s);
    float *dp = scratch<float, 1>(kTile * z.s);
    float *m = drop.on() ? scratch<float, 2>(z.s) : nullptr;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t qOff = lay.at(b, z.t), kOff = lay.at(b, z.s);
      for (int64_t r0 = 0; r0 < z.t; r0 += kTile) {
        const int64_t rows = std::min(kTile, z.t - r0);
        const int64_t seen = z.keysOf(r0 + rows - 1, causal, window);
        const int64_t k0 = AttnSizes::firstOf(r0, window), width = seen - k0;
        const int64_t kw = kOff + k0 * ld; // the tile's first key
        const float *qt = Q + qOff + r0 * ld, *gt = G + qOff + r0 * ld, *ot = O + qOff + r0 * ld;
        gemmStrided(false, true, rows, width, z.d, sc, qt, ld, K + kw, ld, 0.f, p, width);
        gemmStrided(false, true, rows, width, z.d, 1.f, gt, ld, V + kw, ld, 0.f, dp, width);
        for (int64_t i = 0; i < rows; ++i) {
          float *pr = p + i * width, *dpr = dp + i * width;
          const int64_t lo = AttnSizes::firstOf(r0 + i, window) - k0,
                        n = z.keysOf(r0 + i, causal, window) - k0;
          const float l = L[b * z.t + r0 + i];
          double delta = 0;
          for (int64_t j = 0; j < z.d; ++j)
            delta += static_cast<double>(gt[i * ld + j]) * ot[i * ld + j];
          if (GL) // d lse / d s = P: the scores' gradient gains P * lseGrad
            delta -= GL[b * z.t + r0 + i];
          const float dl = static_cast<float>(delta);
          const float *br = Bias ? Bias + boff[size_t(b)] + (r0 + i) * biasRow + k0 : nullptr;
          float *gbr = GB ? GB + (b * z.t + r0 + i) * z.s + k0 : nullptr;
          const float cap = static_cast<float>(softcap);
          // A bias without a gradient buffer writes its gradient to dp
          // first, which the cap's slope (or nothing) then overwrites.
          float *gb = gbr ? gbr : dpr;
          if (m) // the factors, indexed like the tile's row (from key k0)
            drop.row(b, r0 + i, k0 + lo, n - lo, m + lo);
          gradRowOf(pr, dpr, br, gb, m, lo, n, l, dl, cap);
          std::fill(pr, pr + lo, 0.f);
          std::fill(dpr, dpr + lo, 0.f);
          std::fill(pr + n, pr + width, 0.f);
          std::fill(dpr + n, dpr + width, 0.f);
        }
        gemmStrided(true, false, width, z.d, rows, 1.f, p, width, gt, ld, 1.f, GV + kw, ld);
        gemmStrided(false, false, rows, z.d, width, sc, dp, width, K + kw, ld, 0.f,
                    GQ + qOff + r0 * ld, ld);
        gemmStrided(true, false, width, z.d, rows, sc, dp, width, qt, ld, 1.f, GK + kw, ld);
      }
    }
  });
}

} // namespace merak::rt::cpu
