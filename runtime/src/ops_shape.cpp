//===- ops_shape.cpp - data movement: copies, broadcast, transpose, gather --===//
//
// See merak_rt/ops.h; semantics of lib/Evaluator/EvalShape.cpp. Pure data
// movement is dispatched on the element size only. Strided copies (broadcast,
// transpose, slice) build a coalesced plan; the innermost row is a memcpy
// (stride 1), a fill (stride 0), a reversed or strided loop; a transpose
// whose innermost output dim reads with a stride while the next one reads
// contiguously (e.g. swapping the last two dims) is copied in 32x32 tiles
// (4x4 SSE register transposes into an L1 buffer, then whole rows out).
// Gradient scatters (gatherGrad, gatherElementsGrad) accumulate in double in
// the evaluator's order and are parallelised over output rows/fibres, so
// the result is deterministic and independent of the thread count.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace merak::rt::cpu {
using namespace detail;

void copyBytes(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0 || dst == src)
    return;
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (bytes + kChunk - 1) / kChunk;
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  if (bytes < (int64_t(1) << 20)) {
    std::memcpy(d, s, static_cast<size_t>(bytes));
    return;
  }
  parallelFor(chunks, kChunk, [&](int64_t b, int64_t e) {
    const int64_t lo = b * kChunk, hi = std::min(bytes, e * kChunk);
    std::memcpy(d + lo, s + lo, static_cast<size_t>(hi - lo));
  });
}

namespace {

/// dst (dense, the plan's shape) = src read through the plan's strides.
template <class E> void stridedCopy(const E *src, const Plan<1> &p, E *dst) {
  const int64_t s = p.innerStride(0);
  forRows(p, [&](int64_t o, const int64_t *off, int64_t len) {
    const E *ps = src + off[0];
    E *pd = dst + o;
    if (s == 1) {
      std::memcpy(pd, ps, static_cast<size_t>(len) * sizeof(E));
    } else if (s == 0) {
      const E v = *ps;
      for (int64_t i = 0; i < len; ++i)
        pd[i] = v;
    } else if (s == -1) {
      for (int64_t i = 0; i < len; ++i)
        pd[i] = ps[-i];
    } else {
      for (int64_t i = 0; i < len; ++i)
        pd[i] = ps[i * s];
    }
  });
}

/// One block of a transpose: pd[a * ldd + b] = ps[a + b * sB] for a < na,
/// b < nb.
template <class E>
inline void transposeBlock(const E *ps, int64_t sB, E *pd, int64_t ldd,
                           int64_t na, int64_t nb) {
  int64_t b = 0;
#if defined(__SSE2__)
  if constexpr (sizeof(E) == 4) {
    // 4x4 register transposes (SSE2 is the x86-64 baseline).
    for (; b + 4 <= nb; b += 4) {
      int64_t a = 0;
      for (; a + 4 <= na; a += 4) {
        const float *s0 = reinterpret_cast<const float *>(ps + a + b * sB);
        __m128 r0 = _mm_loadu_ps(s0);
        __m128 r1 = _mm_loadu_ps(s0 + sB);
        __m128 r2 = _mm_loadu_ps(s0 + 2 * sB);
        __m128 r3 = _mm_loadu_ps(s0 + 3 * sB);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        float *d0 = reinterpret_cast<float *>(pd + a * ldd + b);
        _mm_storeu_ps(d0, r0);
        _mm_storeu_ps(d0 + ldd, r1);
        _mm_storeu_ps(d0 + 2 * ldd, r2);
        _mm_storeu_ps(d0 + 3 * ldd, r3);
      }
      for (; a < na; ++a)
        for (int64_t k = 0; k < 4; ++k)
          pd[a * ldd + b + k] = ps[a + (b + k) * sB];
    }
  }
#endif
  for (int64_t a = 0; a < na; ++a)
    for (int64_t bb = b; bb < nb; ++bb)
      pd[a * ldd + bb] = ps[a + bb * sB];
}

/// The tiled case: plan dims r-2 (A, source stride 1) and r-1 (B, source
/// stride sB), i.e. every outer batch is a transpose of a [B, A] matrix.
/// Each TS x TS tile is transposed (4x4 register transposes) into a small
/// contiguous buffer, whose rows are then copied out: the source is read
/// and the destination written a whole cache line at a time, even when
/// both strides are large powers of two (which alias in L1).
template <class E> void tiledTranspose(const E *src, const Plan<1> &p, E *dst) {
  constexpr int64_t TS = 32;
  const int32_t r = p.rank;
  const int64_t A = p.shape[r - 2], B = p.shape[r - 1], sB = p.st[0][r - 1];
  const int64_t batches = p.numel() / (A * B);
  const int64_t tilesA = (A + TS - 1) / TS;
  parallelFor(batches * tilesA, TS * B, [&](int64_t i0, int64_t i1) {
    alignas(64) E buf[TS * TS];
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t bt = it / tilesA, ta = it % tilesA;
      int64_t rem = bt, srcBase = 0;
      for (int32_t d = r - 3; d >= 0; --d) {
        srcBase += (rem % p.shape[d]) * p.st[0][d];
        rem /= p.shape[d];
      }
      const E *ps = src + srcBase;
      E *pd = dst + bt * A * B;
      const int64_t a0 = ta * TS, na = std::min(A - a0, TS);
      for (int64_t b0 = 0; b0 < B; b0 += TS) {
        const int64_t nb = std::min(B - b0, TS);
        transposeBlock(ps + a0 + b0 * sB, sB, buf, TS, na, nb);
        for (int64_t a = 0; a < na; ++a)
          std::memcpy(pd + (a0 + a) * B + b0, buf + a * TS,
                      static_cast<size_t>(nb) * sizeof(E));
      }
    }
  });
}

void copyPlan(DT t, const void *src, const Plan<1> &p, void *dst,
              bool allowTiles) {
  if (p.numel() == 0)
    return;
  dispatchBySize(t, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const int32_t r = p.rank;
    if (allowTiles && r >= 2 && p.st[0][r - 1] != 1 && p.st[0][r - 1] != 0 &&
        p.st[0][r - 2] == 1 && p.shape[r - 2] >= 4)
      tiledTranspose(static_cast<const E *>(src), p, static_cast<E *>(dst));
    else
      stridedCopy(static_cast<const E *>(src), p, static_cast<E *>(dst));
  });
}

} // namespace

void broadcastTo(DT t, const void *x, const Dims &dx, void *y, const Dims &dy) {
  const Dims *ins[1] = {&dx};
  copyPlan(t, x, broadcastPlan<1>(dy, ins), y, false);
}

void transpose(DT t, const void *x, const Dims &dx, const Dims &perm, void *y) {
  int64_t xs[kMaxRank];
  rowMajor(dx, xs);
  Plan<1> p;
  p.rank = dx.rank;
  for (int32_t i = 0; i < dx.rank; ++i) {
    p.shape[i] = dx.d[perm.d[i]];
    p.st[0][i] = xs[perm.d[i]];
  }
  p.coalesce();
  copyPlan(t, x, p, y, true);
}

void slice(DT t, const void *x, const Dims &dx, const Dims &starts,
           const Dims &strides, void *y, const Dims &dy) {
  if (dy.numel() == 0)
    return;
  int64_t xs[kMaxRank];
  rowMajor(dx, xs);
  Plan<1> p;
  p.rank = dy.rank;
  int64_t base = 0;
  for (int32_t i = 0; i < dy.rank; ++i) {
    p.shape[i] = dy.d[i];
    p.st[0][i] = xs[i] * strides.d[i];
    base += starts.d[i] * xs[i];
  }
  p.coalesce();
  const char *src = static_cast<const char *>(x) + base * elemSize(t);
  copyPlan(t, src, p, y, false);
}

void insertAlongAxis(DT t, const void *x, const Dims &dx, int64_t axis,
                     int64_t offset, void *y, const Dims &dy) {
  axis = normAxis(axis, dx.rank);
  AxisSplit sx(dx, axis), sy(dy, axis);
  const int64_t es = elemSize(t);
  const int64_t rowX = sx.dim * sx.inner * es, rowY = sy.dim * sy.inner * es;
  const int64_t at = offset * sx.inner * es;
  auto *py = static_cast<char *>(y);
  auto *px = static_cast<const char *>(x);
  if (sx.outer == 1) {
    copyBytes(py + at, px, rowX);
    return;
  }
  if (rowX < 64) { // short rows (a stack on a new last axis interleaves single
                   // elements): typed element copies, not a memcpy call per row
    dispatchBySize(t, [&](auto tag) {
      using E = typename decltype(tag)::type;
      const int64_t nx = rowX / es, ny = rowY / es, o0 = at / es;
      const E *ex = static_cast<const E *>(x);
      E *ey = static_cast<E *>(y) + o0;
      parallelFor(sx.outer, nx, [&](int64_t b, int64_t e) {
        if (nx == 1) {
          for (int64_t o = b; o < e; ++o)
            ey[o * ny] = ex[o];
          return;
        }
        for (int64_t o = b; o < e; ++o)
          for (int64_t j = 0; j < nx; ++j)
            ey[o * ny + j] = ex[o * nx + j];
      });
    });
    return;
  }
  parallelFor(sx.outer, rowX / es, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      std::memcpy(py + o * rowY + at, px + o * rowX, static_cast<size_t>(rowX));
  });
}

// --- gather -------------------------------------------------------------------

namespace {

template <class I>
void checkIndices(const I *idx, int64_t n, int64_t dim, const char *op) {
  for (int64_t j = 0; j < n; ++j)
    if (idx[j] < -dim || idx[j] >= dim) {
      std::string msg = std::string(op) + ": index " +
                        std::to_string(static_cast<int64_t>(idx[j])) +
                        " out of range [" + std::to_string(-dim) + ", " +
                        std::to_string(dim) + ")";
      fatal(msg.c_str());
    }
}

template <class I> inline int64_t wrapIndex(I v, int64_t dim) {
  return v < 0 ? int64_t(v) + dim : int64_t(v);
}

} // namespace

void gather(DT t, const void *data, const Dims &dd, DT idxT, const void *idx,
            const Dims &di, int64_t axis, void *y) {
  axis = normAxis(axis, dd.rank);
  AxisSplit s(dd, axis);
  const int64_t n = di.numel(), es = elemSize(t);
  const int64_t rowBytes = s.inner * es;
  auto *pd = static_cast<const char *>(data);
  auto *py = static_cast<char *>(y);
  dispatchIndex(idxT, "gather: indices must be i64 or i32", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I *ix = static_cast<const I *>(idx);
    checkIndices(ix, n, s.dim, "gather");
    parallelFor(s.outer * n, s.inner, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / n, j = r % n;
        const int64_t k = wrapIndex(ix[j], s.dim);
        std::memcpy(py + r * rowBytes, pd + (o * s.dim + k) * rowBytes,
                    static_cast<size_t>(rowBytes));
      }
    });
  });
}

void gatherGrad(DT t, const void *g, DT idxT, const void *idx, const Dims &di, int64_t axis,
                void *y, const Dims &dy, bool accumulate) {
  axis = normAxis(axis, dy.rank);
  AxisSplit s(dy, axis);
  const int64_t n = di.numel();
  dispatchFloat(t, "gather_grad: float tensors only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(idxT, "gather_grad: indices must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *ix = static_cast<const I *>(idx);
      const T *pg = static_cast<const T *>(g);
      T *py = static_cast<T *>(y);
      checkIndices(ix, n, s.dim, "gather_grad");
      // Bucket the positions j by index (counting sort, stable), so that
      // every output row sums its contributions in increasing j, in double,
      // as the evaluator does; rows are then independent.
      int64_t *start = scratch<int64_t, 1>(static_cast<size_t>(s.dim + 1));
      int64_t *order = scratch<int64_t, 2>(static_cast<size_t>(n));
      std::fill(start, start + s.dim + 1, int64_t(0));
      for (int64_t j = 0; j < n; ++j)
        ++start[wrapIndex(ix[j], s.dim) + 1];
      for (int64_t k = 0; k < s.dim; ++k)
        start[k + 1] += start[k];
      {
        int64_t *fill = scratch<int64_t, 3>(static_cast<size_t>(s.dim));
        std::copy(start, start + s.dim, fill);
        for (int64_t j = 0; j < n; ++j)
          order[fill[wrapIndex(ix[j], s.dim)]++] = j;
      }
      const int64_t inner = s.inner, dim = s.dim;
      parallelFor(s.outer * dim, inner * std::max<int64_t>(1, n / std::max<int64_t>(dim, 1)),
                  [&](int64_t b, int64_t e) {
                    double *sum = scratch<double, 4>(static_cast<size_t>(inner));
                    for (int64_t r = b; r < e; ++r) {
                      const int64_t o = r / dim, k = r % dim;
                      T *dst = py + r * inner;
                      const int64_t j0 = start[k], j1 = start[k + 1];
                      if (j0 == j1) {
                        if (!accumulate)
                          std::fill(dst, dst + inner, T(0));
                        continue;
                      }
                      std::fill(sum, sum + inner, 0.0);
                      for (int64_t q = j0; q < j1; ++q) {
                        const T *src = pg + (o * n + order[q]) * inner;
                        for (int64_t c = 0; c < inner; ++c)
                          sum[c] += static_cast<double>(src[c]);
                      }
                      if (accumulate) // as merak.add of the accumulator and the sum
                        for (int64_t c = 0; c < inner; ++c)
                          dst[c] = static_cast<T>(dst[c] + static_cast<T>(sum[c]));
                      else
                        for (int64_t c = 0; c < inner; ++c)
                          dst[c] = static_cast<T>(sum[c]);
                    }
                  });
    });
  });
}

namespace {

/// The fibres of gather_elements: every position of `di` with its axis
/// coordinate left out. fn(fibre offset in idx/g, offset in data/y) is
/// called per fibre; the axis strides are returned through the view.
struct FibreView {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {}, si[kMaxRank] = {}, sd[kMaxRank] = {};
  int64_t count = 1, len = 1, axisStrideI = 1, axisStrideD = 1, dimD = 1;
  FibreView(const Dims &di, const Dims &dd, int64_t axis) {
    int64_t rmI[kMaxRank], rmD[kMaxRank];
    rowMajor(di, rmI);
    rowMajor(dd, rmD);
    for (int32_t d = 0; d < di.rank; ++d) {
      if (d == axis) {
        len = di.d[d];
        axisStrideI = rmI[d];
        axisStrideD = rmD[d];
        dimD = dd.d[d];
        continue;
      }
      shape[rank] = di.d[d];
      si[rank] = rmI[d];
      sd[rank] = rmD[d];
      count *= di.d[d];
      ++rank;
    }
  }
  void offsets(int64_t f, int64_t &oi, int64_t &od) const {
    oi = od = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      const int64_t c = f % shape[d];
      f /= shape[d];
      oi += c * si[d];
      od += c * sd[d];
    }
  }
};

} // namespace

void gatherElements(DT t, const void *data, const Dims &dd, DT idxT,
                    const void *idx, const Dims &di, int64_t axis, void *y) {
  axis = normAxis(axis, dd.rank);
  const int64_t n = di.numel();
  if (n == 0)
    return;
  FibreView v(di, dd, axis);
  dispatchBySize(t, [&](auto etag) {
    using E = typename decltype(etag)::type;
    dispatchIndex(idxT, "gather_elements: indices must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *ix = static_cast<const I *>(idx);
      const E *pd = static_cast<const E *>(data);
      E *py = static_cast<E *>(y);
      checkIndices(ix, n, v.dimD, "gather_elements");
      if (v.axisStrideI == 1 && v.len > 1) {
        // Axis is the innermost dim of idx: fibres are contiguous rows.
        parallelFor(v.count, v.len, [&](int64_t b, int64_t e) {
          for (int64_t f = b; f < e; ++f) {
            int64_t oi, od;
            v.offsets(f, oi, od);
            for (int64_t j = 0; j < v.len; ++j)
              py[oi + j] = pd[od + wrapIndex(ix[oi + j], v.dimD) * v.axisStrideD];
          }
        });
        return;
      }
      parallelFor(v.count, v.len, [&](int64_t b, int64_t e) {
        for (int64_t f = b; f < e; ++f) {
          int64_t oi, od;
          v.offsets(f, oi, od);
          for (int64_t j = 0; j < v.len; ++j) {
            const int64_t p = oi + j * v.axisStrideI;
            py[p] = pd[od + wrapIndex(ix[p], v.dimD) * v.axisStrideD];
          }
        }
      });
    });
  });
}

void gatherElementsGrad(DT t, const void *g, DT idxT, const void *idx,
                        const Dims &di, int64_t axis, void *y, const Dims &dy) {
  axis = normAxis(axis, dy.rank);
  const int64_t n = di.numel(), ny = dy.numel();
  dispatchFloat(t, "gather_elements_grad: float tensors only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    T *py = static_cast<T *>(y);
    parallelFor(ny, 1, [&](int64_t b, int64_t e) {
      std::fill(py + b, py + e, T(0));
    });
    if (n == 0)
      return;
    FibreView v(di, dy, axis);
    dispatchIndex(idxT, "gather_elements_grad: indices must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *ix = static_cast<const I *>(idx);
      const T *pg = static_cast<const T *>(g);
      checkIndices(ix, n, v.dimD, "gather_elements_grad");
      // Every fibre owns the y positions it scatters to (the other
      // coordinates are fixed), so fibres run in parallel; each sums in
      // double in increasing position, as the evaluator.
      parallelFor(v.count, v.len, [&](int64_t b, int64_t e) {
        double *acc = scratch<double, 5>(static_cast<size_t>(v.dimD));
        uint8_t *hit = scratch<uint8_t, 6>(static_cast<size_t>(v.dimD));
        for (int64_t f = b; f < e; ++f) {
          int64_t oi, od;
          v.offsets(f, oi, od);
          std::fill(acc, acc + v.dimD, 0.0);
          std::fill(hit, hit + v.dimD, uint8_t(0));
          for (int64_t j = 0; j < v.len; ++j) {
            const int64_t p = oi + j * v.axisStrideI;
            const int64_t k = wrapIndex(ix[p], v.dimD);
            acc[k] += static_cast<double>(pg[p]);
            hit[k] = 1;
          }
          for (int64_t k = 0; k < v.dimD; ++k)
            if (hit[k])
              py[od + k * v.axisStrideD] = static_cast<T>(acc[k]);
        }
      });
    });
  });
}

} // namespace merak::rt::cpu
