//===- ops_reduce.cpp - reductions, argmax, scans, dropout, cross entropy --===//
//
// See merak_rt/ops.h; semantics of lib/Evaluator/EvalReduce.cpp and the
// dropout of EvalNN.cpp. (F32 cross entropy over a contiguous class axis
// takes its exps in float, vectorised; see rowLoss.) Every output of a reduction accumulates its
// inputs in the evaluator's (row-major) order, floats in double, integers in wrapping int64, so
// results are bitwise those of the evaluator and do not depend on the thread count.
//
// reduce() drops size-1 dims and merges runs of reduced / kept dims, then:
//  [K.., R]      row reductions (contiguous), parallel over rows;
//  [K.., R, K]   column reductions (e.g. a bias gradient [B*T, C] -> [C]):
//                blocks of 64 columns walk the rows, parallel over blocks;
//  otherwise     per output, an odometer over the reduced dims.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"
#include "merak_rt/dropout_mask.h"

#include "ops_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

namespace merak::rt::cpu {
using namespace detail;

namespace {

/// The accumulator of one reduction kind over element type T.
template <class T, Reduce K> struct Acc {
  static constexpr bool kFloat = std::is_floating_point_v<T>;
  using A = std::conditional_t<kFloat, double, int64_t>;
  static A init() {
    if constexpr (kFloat) {
      if (K == Reduce::Max)
        return -INFINITY;
      if (K == Reduce::Min)
        return INFINITY;
      return K == Reduce::Prod ? 1.0 : 0.0;
    } else {
      if (K == Reduce::Max)
        return std::numeric_limits<T>::min();
      if (K == Reduce::Min)
        return std::numeric_limits<T>::max();
      return K == Reduce::Prod ? 1 : 0;
    }
  }
  static A step(A acc, T v) {
    if constexpr (kFloat) {
      const double d = static_cast<double>(v);
      switch (K) {
      case Reduce::Sum:
      case Reduce::Mean: return acc + d;
      case Reduce::Prod: return acc * d;
      // NaN is sticky (the evaluator: a NaN anywhere gives NaN).
      case Reduce::Max: return (d > acc || std::isnan(d)) && !std::isnan(acc) ? d : acc;
      case Reduce::Min: return (d < acc || std::isnan(d)) && !std::isnan(acc) ? d : acc;
      }
    } else {
      const int64_t w = static_cast<int64_t>(v);
      switch (K) {
      case Reduce::Sum:
      case Reduce::Mean:
        return static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                    static_cast<uint64_t>(w));
      case Reduce::Prod:
        return static_cast<int64_t>(static_cast<uint64_t>(acc) *
                                    static_cast<uint64_t>(w));
      case Reduce::Max: return std::max(acc, w);
      case Reduce::Min: return std::min(acc, w);
      }
    }
    return acc;
  }
  static T finish(A acc, int64_t count) {
    if constexpr (kFloat) {
      return static_cast<T>(K == Reduce::Mean ? acc / count : acc);
    } else {
      const int64_t v = K == Reduce::Mean && count ? acc / count : acc;
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<uint64_t>(v)));
    }
  }
};

struct Group {
  int64_t size;
  bool reduced;
};

template <class T, Reduce K>
void reduceImpl(const T *x, const Dims &dx, const bool *red, T *y) {
  using R = Acc<T, K>;
  using A = typename R::A;
  int64_t count = 1, nOut = 1;
  for (int32_t d = 0; d < dx.rank; ++d)
    (red[d] ? count : nOut) *= dx.d[d];
  if (nOut == 0)
    return;
  // Groups of adjacent dims (size 1 dropped) of the same kind.
  Group g[kMaxRank];
  int32_t ng = 0;
  int64_t rm[kMaxRank];
  rowMajor(dx, rm);
  for (int32_t d = 0; d < dx.rank; ++d) {
    if (dx.d[d] == 1)
      continue;
    if (ng > 0 && g[ng - 1].reduced == red[d])
      g[ng - 1].size *= dx.d[d];
    else
      g[ng++] = {dx.d[d], red[d]};
  }
  if (count == 0 || ng == 0 || (ng == 1 && !g[0].reduced)) {
    // Nothing to combine (or an empty reduction): one step per output.
    parallelFor(nOut, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        y[i] = R::finish(count ? R::step(R::init(), x[i]) : R::init(), count);
    });
    return;
  }
  if (g[ng - 1].reduced && (ng == 1 || ng == 2)) {
    // Row reductions: [R] or [K, R].
    const int64_t len = g[ng - 1].size, rows = nOut;
    parallelFor(rows, len, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T *xr = x + r * len;
        A acc = R::init();
        for (int64_t j = 0; j < len; ++j)
          acc = R::step(acc, xr[j]);
        y[r] = R::finish(acc, count);
      }
    });
    return;
  }
  if (!g[ng - 1].reduced && g[ng - 2].reduced && ng <= 3) {
    // Column reductions: [R, K] or [K0, R, K].
    constexpr int64_t kBlock = 64;
    const int64_t inner = g[ng - 1].size, mid = g[ng - 2].size;
    const int64_t outer = ng == 3 ? g[0].size : 1;
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    parallelFor(outer * blocks, mid * kBlock, [&](int64_t b, int64_t e) {
      A acc[kBlock];
      for (int64_t it = b; it < e; ++it) {
        const int64_t o = it / blocks, c0 = (it % blocks) * kBlock;
        const int64_t c1 = std::min(inner, c0 + kBlock), w = c1 - c0;
        for (int64_t c = 0; c < w; ++c)
          acc[c] = R::init();
        const T *xo = x + o * mid * inner + c0;
        for (int64_t r = 0; r < mid; ++r) {
          const T *xr = xo + r * inner;
          for (int64_t c = 0; c < w; ++c)
            acc[c] = R::step(acc[c], xr[c]);
        }
        for (int64_t c = 0; c < w; ++c)
          y[o * inner + c0 + c] = R::finish(acc[c], count);
      }
    });
    return;
  }
  // General: kept dims index the outputs; per output an odometer over the
  // reduced dims (innermost last, so the order is row-major).
  int64_t kShape[kMaxRank], kStr[kMaxRank], rShape[kMaxRank], rStr[kMaxRank];
  int32_t nk = 0, nr = 0;
  for (int32_t d = 0; d < dx.rank; ++d) {
    if (dx.d[d] == 1)
      continue;
    if (red[d]) {
      rShape[nr] = dx.d[d];
      rStr[nr++] = rm[d];
    } else {
      kShape[nk] = dx.d[d];
      kStr[nk++] = rm[d];
    }
  }
  const int64_t rInner = rShape[nr - 1], rInnerStr = rStr[nr - 1];
  parallelFor(nOut, count, [&](int64_t b, int64_t e) {
    for (int64_t oIdx = b; oIdx < e; ++oIdx) {
      int64_t base = 0, rem = oIdx;
      for (int32_t d = nk - 1; d >= 0; --d) {
        base += (rem % kShape[d]) * kStr[d];
        rem /= kShape[d];
      }
      A acc = R::init();
      int64_t idx[kMaxRank] = {};
      int64_t off = base;
      const int64_t outerCount = count / rInner;
      for (int64_t q = 0; q < outerCount; ++q) {
        for (int64_t j = 0; j < rInner; ++j)
          acc = R::step(acc, x[off + j * rInnerStr]);
        for (int32_t d = nr - 2; d >= 0; --d) {
          off += rStr[d];
          if (++idx[d] < rShape[d])
            break;
          off -= rStr[d] * rShape[d];
          idx[d] = 0;
        }
      }
      y[oIdx] = R::finish(acc, count);
    }
  });
}

} // namespace

void sumSquares(DT t, const void *x, int64_t n, void *y) {
  if (t == DT::BF16) { // widen (exact), sum in double, round once
    float *fx = scratch<float, 24>(static_cast<size_t>(n));
    float fy = 0.0f;
    cast(DT::BF16, x, DT::F32, fx, n);
    sumSquares(DT::F32, fx, n, &fy);
    cast(DT::F32, &fy, DT::BF16, y, 1);
    return;
  }
  // Chunks of a fixed size (the order depends only on n), in parallel, then
  // their sums in order.
  constexpr int64_t kChunk = int64_t(1) << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(std::max<int64_t>(chunks, 1)), 0.0);
  dispatchFloat(t, "sum_squares: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    parallelFor(chunks, kChunk, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t lo = c * kChunk, len = std::min(kChunk, n - lo);
        if constexpr (std::is_same_v<T, float>) {
          part[c] = detail::sumSquaresRowF32(px + lo, len);
        } else {
          double acc = 0.0;
          for (int64_t k = 0; k < len; ++k)
            acc += static_cast<double>(px[lo + k]) * static_cast<double>(px[lo + k]);
          part[c] = acc;
        }
      }
    });
    double total = 0.0;
    for (double p : part)
      total += p;
    *static_cast<T *>(y) = static_cast<T>(total);
  });
}

void reduce(Reduce op, DT t, const void *x, const Dims &dx, const Dims &axes,
            void *y) {
  if (axes.rank == 0) {
    copyBytes(y, x, dx.numel() * elemSize(t));
    return;
  }
  if (t == DT::BF16) { // widen, reduce in float32 (sums in double), round once
    int64_t kept = dx.numel();
    for (int32_t i = 0; i < axes.rank; ++i)
      kept = dx.d[axes.d[i]] ? kept / dx.d[axes.d[i]] : 0;
    float *fx = scratch<float, 24>(static_cast<size_t>(dx.numel()));
    float *fy = scratch<float, 26>(static_cast<size_t>(kept));
    cast(DT::BF16, x, DT::F32, fx, dx.numel());
    reduce(op, DT::F32, fx, dx, axes, fy);
    cast(DT::F32, fy, DT::BF16, y, kept);
    return;
  }
  bool red[kMaxRank] = {};
  for (int32_t i = 0; i < axes.rank; ++i)
    red[normAxis(axes.d[i], dx.rank)] = true;
  dispatchNumeric(t, "reduce: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    T *py = static_cast<T *>(y);
    switch (op) {
    case Reduce::Sum: return reduceImpl<T, Reduce::Sum>(px, dx, red, py);
    case Reduce::Mean: return reduceImpl<T, Reduce::Mean>(px, dx, red, py);
    case Reduce::Max: return reduceImpl<T, Reduce::Max>(px, dx, red, py);
    case Reduce::Min: return reduceImpl<T, Reduce::Min>(px, dx, red, py);
    case Reduce::Prod: return reduceImpl<T, Reduce::Prod>(px, dx, red, py);
    }
  });
}

// --- argmax / argmin ----------------------------------------------------------

void argReduce(bool isMax, DT t, const void *x, const Dims &dx, int64_t axis,
               bool selectLast, void *out) {
  int64_t *y = static_cast<int64_t *>(out);
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  dispatchNumeric(t, "argmax/argmin: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    auto better = [isMax](T cur, T top) { return isMax ? cur > top : cur < top; };
    parallelFor(s.outer * s.inner, s.dim, [&](int64_t b, int64_t e) {
      for (int64_t it = b; it < e; ++it) {
        const T *p = px + s.laneStart(it);
        int64_t best = 0;
        for (int64_t j = 1; j < s.dim; ++j) {
          const T cur = p[j * s.inner], top = p[best * s.inner];
          if (better(cur, top) || (selectLast && cur == top))
            best = j;
        }
        y[it] = best;
      }
    });
  });
}

// --- argsort ------------------------------------------------------------------

void argSort(DT t, const void *x, const Dims &dx, int64_t axis, bool descending, void *out) {
  int64_t *y = static_cast<int64_t *>(out);
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  dispatchNumeric(t, "argsort: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    parallelFor(s.outer * s.inner, s.dim * 16, [&](int64_t b, int64_t e) {
      std::vector<int64_t> order(s.dim);
      for (int64_t it = b; it < e; ++it) {
        const T *p = px + s.laneStart(it);
        // NaN (x != x) ranks above every number.
        auto before = [&](int64_t i, int64_t j) {
          const T a = p[i * s.inner], c = p[j * s.inner];
          if (a != a || c != c)
            return descending ? c == c : a == a;
          return descending ? a > c : a < c;
        };
        std::iota(order.begin(), order.end(), int64_t(0));
        std::stable_sort(order.begin(), order.end(), before);
        int64_t *q = y + s.laneStart(it);
        for (int64_t j = 0; j < s.dim; ++j)
          q[j * s.inner] = order[j];
      }
    });
  });
}

// --- cumsum -------------------------------------------------------------------

void cumsum(DT t, const void *x, const Dims &dx, int64_t axis, bool exclusive,
            bool reverse, void *y) {
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  dispatchNumeric(t, "cumsum: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename Acc<T, Reduce::Sum>::A;
    const T *px = static_cast<const T *>(x);
    T *py = static_cast<T *>(y);
    parallelFor(s.outer * s.inner, s.dim, [&](int64_t b, int64_t e) {
      for (int64_t it = b; it < e; ++it) {
        const int64_t base = s.laneStart(it);
        A acc = 0;
        for (int64_t step = 0; step < s.dim; ++step) {
          const int64_t j = reverse ? s.dim - 1 - step : step;
          const int64_t at = base + j * s.inner;
          const T v = px[at];
          if (exclusive)
            py[at] = Acc<T, Reduce::Sum>::finish(acc, 1);
          acc = Acc<T, Reduce::Sum>::step(acc, v);
          if (!exclusive)
            py[at] = Acc<T, Reduce::Sum>::finish(acc, 1);
        }
      }
    });
  });
}

// --- linear_scan ----------------------------------------------------------------

namespace {
/// Runs fn(o, k0, k1) over every row o of the [outer, dim, inner] view and
/// blocks [k0, k1) of at most 256 inner positions, in parallel: the
/// recurrence walks t inside, the block's positions vectorise.
template <class Fn> void scanBlocks(const AxisSplit &s, Fn &&fn) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
  parallelFor(s.outer * blocks, s.dim * std::min(s.inner, kBlock), [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / blocks, k0 = (it % blocks) * kBlock;
      fn(o, k0, std::min(s.inner, k0 + kBlock));
    }
  });
}
} // namespace

void linearScan(DT t, const void *a, const void *b, const Dims &d, int64_t axis, void *y) {
  AxisSplit s(d, normAxis(axis, d.rank));
  if (s.dim == 0)
    return; // nothing to write (the first step below assumes one)
  dispatchFloat(t, "linear_scan: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a), *pb = static_cast<const T *>(b);
    T *py = static_cast<T *>(y);
    scanBlocks(s, [&](int64_t o, int64_t k0, int64_t k1) {
      const int64_t row = o * s.dim * s.inner;
      for (int64_t k = k0; k < k1; ++k) {
        const T decayed = pa[row + k] * T(0); // the zero state (NaN where a[0] is)
        py[row + k] = decayed + pb[row + k];
      }
      for (int64_t j = 1; j < s.dim; ++j) {
        const int64_t at = row + j * s.inner, prev = at - s.inner;
        for (int64_t k = k0; k < k1; ++k) {
          const T decayed = pa[at + k] * py[prev + k]; // rounded, as the mul and add it replaces
          py[at + k] = decayed + pb[at + k];
        }
      }
    });
  });
}

void linearScanGrad(DT t, const void *a, const void *h, const void *dy, const Dims &d, int64_t axis,
                    void *da, void *db) {
  AxisSplit s(d, normAxis(axis, d.rank));
  dispatchFloat(t, "linear_scan_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a), *ph = static_cast<const T *>(h);
    const T *pg = static_cast<const T *>(dy);
    T *pda = static_cast<T *>(da), *pdb = static_cast<T *>(db);
    scanBlocks(s, [&](int64_t o, int64_t k0, int64_t k1) {
      const int64_t row = o * s.dim * s.inner;
      for (int64_t j = s.dim - 1; j >= 0; --j) {
        const int64_t at = row + j * s.inner, next = at + s.inner, prev = at - s.inner;
        for (int64_t k = k0; k < k1; ++k) {
          T g = pg[at + k];
          if (j + 1 < s.dim) {
            const T carried = pa[next + k] * pdb[next + k];
            g = g + carried;
          }
          pdb[at + k] = g;
          pda[at + k] = j ? g * ph[prev + k] : T(0);
        }
      }
    });
  });
}

// --- dropout ------------------------------------------------------------------

MERAK_RT_INT_CLONES void detail::dropoutKeepRow(uint64_t key, uint64_t first, int64_t count,
                                                uint64_t threshold, uint8_t *keep) {
  const uint64_t base = dropout::bitsBase(key) + first;
  for (int64_t j = 0; j < count; ++j)
    keep[j] = dropout::kept(base, uint64_t(j), threshold);
}

void dropout(DT t, const void *x, const Dims &dx, double ratio, int64_t seed,
             const Dims &batchSplit, const Dims &tpSplit, void *y, void *mask) {
  constexpr int64_t kBlock = 1024; // keep decisions per call
  const double scale = 1.0 / (1.0 - ratio);
  const int64_t n = dx.numel();
  const uint64_t key = dropout::keyAt(seed), threshold = dropout::threshold(ratio);
  const dropout::MaskLayout layout = dropout::layoutAt(dx, batchSplit, tpSplit);
  // Runs of local elements consecutive in the whole tensor: one index
  // computation per run (and per block of it).
  const bool identity = layout.identity();
  const int64_t run = identity ? std::max<int64_t>(n, 1) : layout.runLength();
  uint8_t *m = static_cast<uint8_t *>(mask);
  dispatchFloat(t, "dropout: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    T *py = static_cast<T *>(y);
    parallelFor(n, 4, [&](int64_t b, int64_t e) {
      uint8_t *own = m ? nullptr : scratch<uint8_t, 0>(kBlock);
      for (int64_t k = b; k < e;) {
        const int64_t end = std::min({e, (k / run + 1) * run, k + kBlock});
        const int64_t start = k - k % run;
        const uint64_t first =
            (identity ? uint64_t(start) : layout.globalIndex(start)) + uint64_t(k % run);
        uint8_t *keep = m ? m + k : own;
        dropoutKeepRow(key, first, end - k, threshold, keep);
        for (int64_t j = 0; j < end - k; ++j)
          py[k + j] = keep[j] ? static_cast<T>(static_cast<double>(px[k + j]) * scale) : T(0);
        k = end;
      }
    });
  });
}

// --- cross entropy ------------------------------------------------------------

namespace {
/// logsumexp(p[0..dim) at stride st) - p[label], as the evaluator: the max
/// in double (NaN ignored), the sum of exp(x - max) in double.
template <class T>
inline double rowLoss(const T *p, int64_t dim, int64_t st, int64_t label) {
  if constexpr (std::is_same_v<T, float>) {
    // F32, contiguous classes: the float exp of ops_util.h (vectorised),
    // summed in double in a fixed order; within an ulp or so of the above.
    if (st == 1) {
      const float m = rowMaxF32(p, dim);
      if (std::isfinite(m))
        return static_cast<double>(m) +
               std::log(expSumRowF32(p, m, nullptr, dim)) -
               static_cast<double>(p[label]);
    }
  }
  double m = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < dim; ++j)
    m = std::max(m, static_cast<double>(p[j * st]));
  for (int64_t j = 0; j < dim; ++j)
    sum += std::exp(static_cast<double>(p[j * st]) - m);
  return m + std::log(sum) - static_cast<double>(p[label * st]);
}
} // namespace

void crossEntropy(DT t, const void *logits, const Dims &dl, int64_t axis,
                  DT labT, const void *labels, int32_t reduction,
                  bool hasIgnore, int64_t ignoreIndex, void *y) {
  axis = normAxis(axis, dl.rank);
  AxisSplit s(dl, axis);
  const int64_t nLab = s.outer * s.inner;
  dispatchFloat(t, "cross_entropy: float logits only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(labT, "cross_entropy: labels must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *lab = static_cast<const I *>(labels);
      const T *px = static_cast<const T *>(logits);
      T *py = static_cast<T *>(y);
      int64_t counted = 0;
      for (int64_t i = 0; i < nLab; ++i) {
        const int64_t l = lab[i];
        if (hasIgnore && l == ignoreIndex)
          continue;
        if (l < 0 || l >= s.dim) {
          std::string msg = "cross_entropy: label " + std::to_string(l) +
                            " out of range [0, " + std::to_string(s.dim) + ")";
          fatal(msg.c_str());
        }
        ++counted;
      }
      double *loss = reduction == 0 ? nullptr
                                    : scratch<double, 7>(static_cast<size_t>(nLab));
      parallelFor(nLab, s.dim, [&](int64_t b, int64_t e) {
        for (int64_t li = b; li < e; ++li) {
          const int64_t l = lab[li];
          double v = 0.0;
          if (!(hasIgnore && l == ignoreIndex)) {
            const T *p = px + s.laneStart(li);
            v = s.inner == 1 ? rowLoss(p, s.dim, 1, l) : rowLoss(p, s.dim, s.inner, l);
          }
          if (loss)
            loss[li] = v;
          else
            py[li] = static_cast<T>(v);
        }
      });
      if (!loss)
        return;
      double total = 0.0;
      for (int64_t i = 0; i < nLab; ++i)
        total += loss[i];
      py[0] = static_cast<T>(reduction == 1 ? total / counted : total);
    });
  });
}

} // namespace merak::rt::cpu
