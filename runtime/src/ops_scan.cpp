//===- ops_scan.cpp - merak.selective_scan and its gradient ---------------===//
//
// See merak_rt/ops.h; semantics of lib/Evaluator/EvalReduce.cpp.
//
// The work is split into blocks of kLanes channels of one batch row. A
// block's delta and u are gathered token-major ([T][kLanes]) so that each
// step updates kLanes channels of one state with vector instructions; the
// N states of the block live in a [N][kLanes] array. Lanes past the last
// channel read delta = u = 0 (states and gradients 0) and are not stored.
//
// The forward pass (parallel over batch rows x blocks) keeps only the
// states of the current token. The backward pass recomputes a block's
// states and decays for every token (2 T N kLanes values of scratch per
// thread), then walks the tokens back. b's and c's gradients sum over the
// channels: each group of blocks (at most kGroups, fixed by D alone) sums
// its blocks into its own [B, T, N] partial, and the partials are added in
// group order, so results do not depend on the thread count. a's gradient
// sums over the batch and the tokens inside its block's task.
//
// Each state's decay product is rounded before its input is added, as the
// unfused mul and add; F32 exps are fexp (merak.exp's).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace merak::rt::cpu {
using namespace detail;

namespace {
constexpr int64_t kLanes = 16;  // channels per block (one AVX-512 vector of floats)
constexpr int64_t kGroups = 32; // most partial sums of b's and c's gradients

template <class T> struct ScanArgs {
  const T *u, *delta, *a, *b, *c;
  int64_t batch, channels, tokens, states;

  int64_t blocks() const { return (channels + kLanes - 1) / kLanes; }
  int64_t row(int64_t bi, int64_t d) const { return (bi * channels + d) * tokens; }
  const T *perToken(const T *p, int64_t bi, int64_t t) const {
    return p + (bi * tokens + t) * states;
  }
};

template <class T> MERAK_RT_ALWAYS_INLINE T scanExp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fexp(x);
  else
    return std::exp(x);
}

/// Block (bi, d0)'s rows of `src` ([B, D, T]) as [T][kLanes], 0 past the
/// last channel.
template <class T>
void gatherRows(const ScanArgs<T> &s, const T *src, int64_t bi, int64_t d0, T *dst) {
  const int64_t lanes = std::min(kLanes, s.channels - d0);
  std::fill(dst, dst + s.tokens * kLanes, T(0));
  for (int64_t c = 0; c < lanes; ++c) {
    const T *row = src + s.row(bi, d0 + c);
    for (int64_t t = 0; t < s.tokens; ++t)
      dst[t * kLanes + c] = row[t];
  }
}

/// The inverse of gatherRows for the block's real channels.
template <class T>
void scatterRows(const ScanArgs<T> &s, const T *src, int64_t bi, int64_t d0, T *dst) {
  const int64_t lanes = std::min(kLanes, s.channels - d0);
  for (int64_t c = 0; c < lanes; ++c) {
    T *row = dst + s.row(bi, d0 + c);
    for (int64_t t = 0; t < s.tokens; ++t)
      row[t] = src[t * kLanes + c];
  }
}

/// The block's a as [N][kLanes].
template <class T> void gatherRates(const ScanArgs<T> &s, int64_t d0, T *rates) {
  const int64_t lanes = std::min(kLanes, s.channels - d0);
  std::fill(rates, rates + s.states * kLanes, T(0));
  for (int64_t c = 0; c < lanes; ++c)
    for (int64_t n = 0; n < s.states; ++n)
      rates[n * kLanes + c] = s.a[(d0 + c) * s.states + n];
}

/// One token of the block: the states h [N][kLanes] from the token
/// before's, prev (h itself in the forward pass). The forward pass reads
/// them out into y; the backward's recompute (kRecompute) keeps each
/// state's decay in `decays` instead (c and y unused).
template <bool kRecompute, class T>
MERAK_RT_ALWAYS_INLINE void step(int64_t states, const T *dt, const T *u, const T *rates,
                                 const T *b, const T *c, const T *prev, T *h, T *decays, T *y) {
  if constexpr (!kRecompute)
    for (int64_t k = 0; k < kLanes; ++k)
      y[k] = T(0);
  for (int64_t n = 0; n < states; ++n) {
    const int64_t o = n * kLanes;
    const T bn = b[n];
    MERAK_RT_VECTORIZE // h is prev (forward) or apart from it
        for (int64_t k = 0; k < kLanes; ++k) {
      const T decay = scanExp(dt[k] * rates[o + k]);
      const T input = (dt[k] * bn) * u[k];
      const T decayed = decay * prev[o + k]; // rounded, as the mul and add it replaces
      h[o + k] = decayed + input;
      if constexpr (kRecompute)
        decays[o + k] = decay;
      else
        y[k] += h[o + k] * c[n];
    }
  }
}

/// A thread's buffers for one block: [T][kLanes] rows, [N][kLanes] states
/// (the backward's states and decays for every token: [T][N][kLanes]).
/// Taken outside the cloned functions (thread-local vectors inside
/// target_clones bodies do not link).
template <class T> struct BlockScratch {
  T *dt, *u, *gy, *gdt, *gu, *out, *rates, *h, *decays, *carry, *rateGrad, *zeros;

  BlockScratch(const ScanArgs<T> &s, bool backward) {
    const int64_t tk = s.tokens * kLanes, nk = s.states * kLanes;
    const int64_t states = backward ? nk * s.tokens : nk;
    dt = scratch<T, 0>(tk), u = scratch<T, 1>(tk), out = scratch<T, 2>(tk);
    rates = scratch<T, 3>(nk), h = scratch<T, 4>(states);
    if (!backward)
      return;
    gy = scratch<T, 5>(tk), gdt = scratch<T, 6>(tk), gu = scratch<T, 7>(tk);
    decays = scratch<T, 8>(states), carry = scratch<T, 9>(nk), rateGrad = scratch<T, 10>(nk);
    zeros = scratch<T, 11>(nk);
    std::fill(zeros, zeros + nk, T(0));
  }
};

/// y of block (bi, d0).
template <class T>
MERAK_RT_ALWAYS_INLINE void forwardBlock(const ScanArgs<T> &s, const BlockScratch<T> &w, int64_t bi,
                                         int64_t d0, T *y) {
  const int64_t nk = s.states * kLanes;
  gatherRows(s, s.delta, bi, d0, w.dt);
  gatherRows(s, s.u, bi, d0, w.u);
  gatherRates(s, d0, w.rates);
  std::fill(w.h, w.h + nk, T(0));
  for (int64_t t = 0; t < s.tokens; ++t)
    step<false>(s.states, w.dt + t * kLanes, w.u + t * kLanes, w.rates, s.perToken(s.b, bi, t),
                s.perToken(s.c, bi, t), w.h, w.h, static_cast<T *>(nullptr), w.out + t * kLanes);
  scatterRows(s, w.out, bi, d0, y);
}

MERAK_RT_SIMD_CLONES void forwardBlockF32(const ScanArgs<float> &s, const BlockScratch<float> &w,
                                          int64_t bi, int64_t d0, float *y) {
  forwardBlock(s, w, bi, d0, y);
}

/// The gradients a task owns: du, ddelta rows, da rows of its channels.
template <class T> struct ScanGrads { T *du, *ddelta, *da; };

/// v[0] = the sum of v[0..kLanes) by a fixed tree (halves added lane-wise).
template <class T> MERAK_RT_ALWAYS_INLINE T laneSum(T *v) {
  for (int64_t half = kLanes / 2; half > 0; half /= 2) {
    MERAK_RT_VECTORIZE
    for (int64_t k = 0; k < half; ++k)
      v[k] += v[k + half];
  }
  return v[0];
}

/// One token of the reverse pass: with the block's states h and prev (the
/// token before; zeros at the first), its decays and the state gradients
/// carried from the next token (carry, updated for this token's), adds
/// to a's gradient (rateGrad) and the partial sums of b's and c's
/// (pb, pc: [N]), and stores delta's and u's gradients (gdt, gu).
template <class T>
MERAK_RT_ALWAYS_INLINE void backwardToken(int64_t states, const T *dt, const T *u, const T *gy,
                                          const T *rates, const T *b, const T *c, const T *h,
                                          const T *prev, const T *decays, T *carry, T *rateGrad,
                                          T *gdt, T *gu, T *pb, T *pc) {
  T gdtAcc[kLanes] = {}, guAcc[kLanes] = {}, bTerms[kLanes], cTerms[kLanes];
  for (int64_t n = 0; n < states; ++n) {
    const int64_t o = n * kLanes;
    const T bn = b[n], cn = c[n];
    MERAK_RT_VECTORIZE
    for (int64_t k = 0; k < kLanes; ++k) {
      const T gs = gy[k] * cn + carry[o + k]; // the state's gradient
      const T decayGrad = gs * prev[o + k] * decays[o + k];
      rateGrad[o + k] += decayGrad * dt[k];
      gdtAcc[k] += decayGrad * rates[o + k] + gs * bn * u[k];
      guAcc[k] += gs * dt[k] * bn;
      bTerms[k] = gs * dt[k] * u[k];
      cTerms[k] = gy[k] * h[o + k];
      carry[o + k] = decays[o + k] * gs;
    }
    pb[n] += laneSum(bTerms);
    pc[n] += laneSum(cTerms);
  }
  for (int64_t k = 0; k < kLanes; ++k) {
    gdt[k] = gdtAcc[k];
    gu[k] = guAcc[k];
  }
}

/// Block d0's gradients over every batch row: du, ddelta and da stored,
/// db and dc added to the group's partials pb, pc ([B, T, N]).
template <class T>
MERAK_RT_ALWAYS_INLINE void backwardBlock(const ScanArgs<T> &s, const BlockScratch<T> &w,
                                          const T *dy, int64_t d0, const ScanGrads<T> &g, T *pb,
                                          T *pc) {
  const int64_t nk = s.states * kLanes, N = s.states;
  T *dt = w.dt, *u = w.u, *gy = w.gy, *rates = w.rates, *h = w.h, *decays = w.decays;
  T *carry = w.carry, *rateGrad = w.rateGrad, *gdt = w.gdt, *gu = w.gu;
  gatherRates(s, d0, rates);
  std::fill(rateGrad, rateGrad + nk, T(0));
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    gatherRows(s, s.delta, bi, d0, dt);
    gatherRows(s, s.u, bi, d0, u);
    gatherRows(s, dy, bi, d0, gy);
    // The states and decays of every token, recomputed.
    for (int64_t t = 0; t < s.tokens; ++t)
      step<true>(N, dt + t * kLanes, u + t * kLanes, rates, s.perToken(s.b, bi, t),
                 static_cast<const T *>(nullptr), t ? h + (t - 1) * nk : w.zeros, h + t * nk,
                 decays + t * nk, static_cast<T *>(nullptr));
    std::fill(carry, carry + nk, T(0));
    for (int64_t t = s.tokens - 1; t >= 0; --t)
      backwardToken(N, dt + t * kLanes, u + t * kLanes, gy + t * kLanes, rates,
                    s.perToken(s.b, bi, t), s.perToken(s.c, bi, t), h + t * nk,
                    t ? h + (t - 1) * nk : w.zeros, decays + t * nk, carry, rateGrad,
                    gdt + t * kLanes, gu + t * kLanes, pb + (bi * s.tokens + t) * N,
                    pc + (bi * s.tokens + t) * N);
    scatterRows(s, gdt, bi, d0, g.ddelta);
    scatterRows(s, gu, bi, d0, g.du);
  }
  const int64_t lanes = std::min(kLanes, s.channels - d0);
  for (int64_t k = 0; k < lanes; ++k)
    for (int64_t n = 0; n < N; ++n)
      g.da[(d0 + k) * N + n] = rateGrad[n * kLanes + k];
}

MERAK_RT_SIMD_CLONES void backwardBlockF32(const ScanArgs<float> &s, const BlockScratch<float> &w,
                                           const float *dy, int64_t d0, const ScanGrads<float> &g,
                                           float *pb, float *pc) {
  backwardBlock(s, w, dy, d0, g, pb, pc);
}

template <class T>
ScanArgs<T> scanArgs(const void *u, const void *delta, const void *a, const void *b, const void *c,
                     const Dims &du, const Dims &da) {
  if (du.rank != 3 || da.rank != 2)
    fatal("selective_scan: expects u [B, D, T] and a [D, N]");
  return {static_cast<const T *>(u),
          static_cast<const T *>(delta),
          static_cast<const T *>(a),
          static_cast<const T *>(b),
          static_cast<const T *>(c),
          du.d[0],
          du.d[1],
          du.d[2],
          da.d[1]};
}
} // namespace

void selectiveScan(DT t, const void *u, const void *delta, const void *a, const void *b,
                   const void *c, const Dims &du, const Dims &da, void *y) {
  dispatchFloat(t, "selective_scan: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ScanArgs<T> s = scanArgs<T>(u, delta, a, b, c, du, da);
    const int64_t blocks = s.blocks();
    parallelFor(s.batch * blocks, s.tokens * s.states * kLanes, [&](int64_t i0, int64_t i1) {
      const BlockScratch<T> w(s, /*backward=*/false);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t bi = i / blocks, d0 = (i % blocks) * kLanes;
        if constexpr (std::is_same_v<T, float>)
          forwardBlockF32(s, w, bi, d0, static_cast<float *>(y));
        else
          forwardBlock(s, w, bi, d0, static_cast<T *>(y));
      }
    });
  });
}

void selectiveScanGrad(DT t, const void *u, const void *delta, const void *a, const void *b,
                       const void *c, const void *dy, const Dims &du, const Dims &da, void *gu,
                       void *gdelta, void *ga, void *gb, void *gc) {
  dispatchFloat(t, "selective_scan_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ScanArgs<T> s = scanArgs<T>(u, delta, a, b, c, du, da);
    const ScanGrads<T> g{static_cast<T *>(gu), static_cast<T *>(gdelta), static_cast<T *>(ga)};
    const int64_t blocks = s.blocks(), groups = std::min(blocks, kGroups);
    const int64_t per = s.batch * s.tokens * s.states; // one partial of b's (c's) gradient
    std::vector<T> partials(2 * groups * per, T(0));
    // Group j holds blocks [j * blocks / groups, (j + 1) * blocks / groups).
    parallelFor(
        groups, s.batch * s.tokens * s.states * kLanes * blocks / std::max<int64_t>(groups, 1),
        [&](int64_t j0, int64_t j1) {
          const BlockScratch<T> w(s, /*backward=*/true);
          for (int64_t j = j0; j < j1; ++j) {
            T *pb = partials.data() + 2 * j * per, *pc = pb + per;
            for (int64_t k = j * blocks / groups; k < (j + 1) * blocks / groups; ++k) {
              if constexpr (std::is_same_v<T, float>)
                backwardBlockF32(s, w, static_cast<const float *>(dy), k * kLanes, g, pb, pc);
              else
                backwardBlock(s, w, static_cast<const T *>(dy), k * kLanes, g, pb, pc);
            }
          }
        });
    T *pgb = static_cast<T *>(gb), *pgc = static_cast<T *>(gc);
    parallelFor(per, groups * 2, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T sb = T(0), sc = T(0);
        for (int64_t j = 0; j < groups; ++j) {
          sb += partials[2 * j * per + i];
          sc += partials[(2 * j + 1) * per + i];
        }
        pgb[i] = sb;
        pgc[i] = sc;
      }
    });
  });
}

} // namespace merak::rt::cpu
