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
//             * O_t), dV += P^T dO_t, dS = P * (dO_t V^T - Delta),
//             dQ_t = scale dS K, dK += scale dS^T Q_t.
// Slices run in parallel (a slice's dK/dV accumulate over its tiles in one
// thread); every product is a GEMM of kernels.h.
//
//===----------------------------------------------------------------------===//
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
  /// Keys query row r attends.
  int64_t keysOf(int64_t r, bool causal) const { return causal ? std::min(r + 1, s) : s; }
};

/// A float32 copy of the bf16 tensor x (n elements), or null for null.
std::vector<float> widened(const void *x, int64_t n) {
  std::vector<float> y(x ? n : 0);
  if (x)
    cast(DT::BF16, x, DT::F32, y.data(), n);
  return y;
}
const float *orNull(const std::vector<float> &v) { return v.empty() ? nullptr : v.data(); }
float *orNull(std::vector<float> &v) { return v.empty() ? nullptr : v.data(); }

/// Rounds the float32 results in `f` into the bf16 outputs (skipping null).
void narrowInto(void *out, const std::vector<float> &f) {
  if (out && !f.empty())
    cast(DT::F32, f.data(), DT::BF16, out, int64_t(f.size()));
}

/// The [..., T, D] element counts of q and of k / v (S keys).
void counts(const Dims &dq, int64_t keys, int64_t &nq, int64_t &nk) {
  nq = dq.numel();
  nk = dq.d[dq.rank - 2] ? nq / dq.d[dq.rank - 2] * keys : 0;
}
} // namespace

namespace {
/// seq_major on the CPU: the operands are transposed into heads-first
/// copies, the heads-first kernel runs, the results are transposed back.
struct HeadsFirst {
  DT t;
  Dims seq, heads, perm; // [..., T, H, D] (or S) and [..., H, T, D]
  std::vector<std::vector<char>> bufs;

  HeadsFirst(DT t, const Dims &d) : t(t), seq(d), heads(d) {
    if (d.rank < 3)
      fatal("attention: seq_major needs rank >= 3 ([..., T, H, D])");
    std::swap(heads.d[d.rank - 3], heads.d[d.rank - 2]);
    perm.rank = d.rank;
    for (int32_t i = 0; i < d.rank; ++i)
      perm.d[i] = i;
    std::swap(perm.d[d.rank - 3], perm.d[d.rank - 2]);
  }
  /// Dims of an operand with `rows` sequence positions.
  Dims withRows(Dims d, int64_t rows) const {
    d.d[d.rank - 3] = rows;
    return d;
  }
  /// A heads-first copy of x (laid out as withRows(seq, rows)), or null.
  void *in(const void *x, int64_t rows) {
    if (!x)
      return nullptr;
    const Dims src = withRows(seq, rows);
    bufs.emplace_back(size_t(src.numel() * elemSize(t)));
    transpose(t, x, src, perm, bufs.back().data());
    return bufs.back().data();
  }
  /// A heads-first result buffer for `out` (null stays null).
  void *scratch(void *out, int64_t rows) {
    if (!out)
      return nullptr;
    bufs.emplace_back(size_t(withRows(seq, rows).numel() * elemSize(t)));
    return bufs.back().data();
  }
  /// Writes the heads-first `buf` back into `out` seq-major.
  void back(const void *buf, void *out, int64_t rows) {
    if (!out)
      return;
    Dims h = withRows(seq, rows);
    std::swap(h.d[h.rank - 3], h.d[h.rank - 2]);
    transpose(t, buf, h, perm, out);
  }
};
} // namespace

void attention(DT type, const void *q, const Dims &dq, const void *k, const void *v,
               int64_t keys, double scale, bool causal, void *o, void *lse, bool seqMajor) {
  if (seqMajor) {
    HeadsFirst h(type, dq);
    const int64_t t = dq.d[dq.rank - 3];
    void *hq = h.in(q, t), *hk = h.in(k, keys), *hv = h.in(v, keys), *ho = h.scratch(o, t);
    attention(type, hq, h.heads, hk, hv, keys, scale, causal, ho, lse);
    h.back(ho, o, t);
    return;
  }
  if (type == DT::BF16 && dq.rank >= 2) { // widen, the float32 kernel, round once
    int64_t nq, nk;
    counts(dq, keys, nq, nk);
    std::vector<float> fq = widened(q, nq), fk = widened(k, nk), fv = widened(v, nk), fo(nq);
    attention(DT::F32, fq.data(), dq, fk.data(), fv.data(), keys, scale, causal, fo.data(), lse);
    return narrowInto(o, fo);
  }
  const AttnSizes z("attention", type, dq, keys);
  const float *Q = static_cast<const float *>(q), *K = static_cast<const float *>(k),
              *V = static_cast<const float *>(v);
  float *O = static_cast<float *>(o), *L = static_cast<float *>(lse);
  if (z.slices * z.t * z.d == 0)
    return;
  parallelFor(z.slices, z.t * z.s * z.d, [&](int64_t b0, int64_t b1) {
    float *p = scratch<float, 0>(kTile * z.s);
    for (int64_t b = b0; b < b1; ++b) {
      const float *qb = Q + b * z.t * z.d, *kb = K + b * z.s * z.d, *vb = V + b * z.s * z.d;
      for (int64_t r0 = 0; r0 < z.t; r0 += kTile) {
        const int64_t rows = std::min(kTile, z.t - r0);
        const int64_t seen = causal ? z.keysOf(r0 + rows - 1, true) : z.s;
        gemm(false, true, rows, seen, z.d, static_cast<float>(scale), qb + r0 * z.d, kb, 0.f,
             p);
        for (int64_t i = 0; i < rows; ++i) {
          float *pr = p + i * seen;
          const int64_t n = z.keysOf(r0 + i, causal);
          const float m = rowMaxF32(pr, n);
          const double sum = expSumRowF32(pr, m, pr, n);
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t c = 0; c < n; ++c)
            pr[c] *= inv;
          std::fill(pr + n, pr + seen, 0.f);
          if (L)
            L[b * z.t + r0 + i] = m + static_cast<float>(std::log(sum));
        }
        gemm(false, false, rows, z.d, seen, 1.f, p, vb, 0.f, O + (b * z.t + r0) * z.d);
      }
    }
  });
}

void attentionGrad(DT type, const void *q, const Dims &dq, const void *k, const void *v,
                   int64_t keys, const void *o, const void *lse, const void *dout,
                   double scale, bool causal, void *gq, void *gk, void *gv, bool seqMajor) {
  if (seqMajor) {
    HeadsFirst h(type, dq);
    const int64_t t = dq.d[dq.rank - 3];
    void *hq = h.in(q, t), *hk = h.in(k, keys), *hv = h.in(v, keys), *ho = h.in(o, t),
         *hg = h.in(dout, t);
    void *rq = h.scratch(gq, t), *rk = h.scratch(gk, keys), *rv = h.scratch(gv, keys);
    attentionGrad(type, hq, h.heads, hk, hv, keys, ho, lse, hg, scale, causal, rq, rk, rv);
    h.back(rq, gq, t);
    h.back(rk, gk, keys);
    h.back(rv, gv, keys);
    return;
  }
  if (type == DT::BF16 && dq.rank >= 2) { // widen, the float32 kernel, round once
    int64_t nq, nk;
    counts(dq, keys, nq, nk);
    std::vector<float> fq = widened(q, nq), fk = widened(k, nk), fv = widened(v, nk),
                       fo = widened(o, nq), fg = widened(dout, nq);
    std::vector<float> rq(gq ? nq : 0), rk(gk ? nk : 0), rv(gv ? nk : 0);
    attentionGrad(DT::F32, fq.data(), dq, fk.data(), fv.data(), keys, fo.data(), lse,
                  orNull(fg), scale, causal, orNull(rq), orNull(rk), orNull(rv));
    narrowInto(gq, rq);
    narrowInto(gk, rk);
    narrowInto(gv, rv);
    return;
  }
  const AttnSizes z("attention_grad", type, dq, keys);
  const float *Q = static_cast<const float *>(q), *K = static_cast<const float *>(k),
              *V = static_cast<const float *>(v), *O = static_cast<const float *>(o),
              *L = static_cast<const float *>(lse), *G = static_cast<const float *>(dout);
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
  if (z.slices * z.t * z.d == 0)
    return;
  const float sc = static_cast<float>(scale);
  parallelFor(z.slices, 2 * z.t * z.s * z.d, [&](int64_t b0, int64_t b1) {
    float *p = scratch<float, 0>(kTile * z.s);
    float *dp = scratch<float, 1>(kTile * z.s);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t qOff = b * z.t * z.d, kOff = b * z.s * z.d;
      for (int64_t r0 = 0; r0 < z.t; r0 += kTile) {
        const int64_t rows = std::min(kTile, z.t - r0);
        const int64_t seen = causal ? z.keysOf(r0 + rows - 1, true) : z.s;
        const float *qt = Q + qOff + r0 * z.d, *gt = G + qOff + r0 * z.d,
                    *ot = O + qOff + r0 * z.d;
        gemm(false, true, rows, seen, z.d, sc, qt, K + kOff, 0.f, p);
        gemm(false, true, rows, seen, z.d, 1.f, gt, V + kOff, 0.f, dp);
        for (int64_t i = 0; i < rows; ++i) {
          float *pr = p + i * seen, *dpr = dp + i * seen;
          const int64_t n = z.keysOf(r0 + i, causal);
          const float l = L[b * z.t + r0 + i];
          double delta = 0;
          for (int64_t j = 0; j < z.d; ++j)
            delta += static_cast<double>(gt[i * z.d + j]) * ot[i * z.d + j];
          const float dl = static_cast<float>(delta);
          for (int64_t c = 0; c < n; ++c) {
            pr[c] = fexp(pr[c] - l);
            dpr[c] = pr[c] * (dpr[c] - dl);
          }
          std::fill(pr + n, pr + seen, 0.f);
          std::fill(dpr + n, dpr + seen, 0.f);
        }
        gemm(true, false, seen, z.d, rows, 1.f, p, gt, 1.f, GV + kOff);
        gemm(false, false, rows, z.d, seen, sc, dp, K + kOff, 0.f, GQ + qOff + r0 * z.d);
        gemm(true, false, seen, z.d, rows, sc, dp, qt, 1.f, GK + kOff);
      }
    }
  });
}

} // namespace merak::rt::cpu
