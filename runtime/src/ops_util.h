//===- ops_util.h - Shared helpers of the ops_*.cpp kernels -----*- C++ -*-===//
//
// Internal to the CPU runtime: element-type dispatch, broadcast strides,
// stride plans with dimension coalescing and a row iterator over them,
// deterministic OpenMP chunking, and grow-only thread-local scratch.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_OPS_UTIL_H
#define MERAK_RT_OPS_UTIL_H

#include "merak_rt/ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace merak::rt::cpu::detail {

/// Work (elements) below which a loop stays serial.
constexpr int64_t kParallelMin = 1 << 15;

template <class T> struct Tag {
  using type = T;
};

/// Calls fn(Tag<T>{}) with T the C++ type of `t`.
template <class Fn> inline void dispatchAll(DT t, Fn &&fn) {
  switch (t) {
  case DT::F32: fn(Tag<float>{}); return;
  case DT::F64: fn(Tag<double>{}); return;
  case DT::I64: fn(Tag<int64_t>{}); return;
  case DT::I32: fn(Tag<int32_t>{}); return;
  case DT::BOOL: fn(Tag<uint8_t>{}); return;
  }
  fatal("unknown element type");
}

/// Float types only (F32, F64); `what` names the op for the error.
template <class Fn> inline void dispatchFloat(DT t, const char *what, Fn &&fn) {
  switch (t) {
  case DT::F32: fn(Tag<float>{}); return;
  case DT::F64: fn(Tag<double>{}); return;
  default: fatal(what);
  }
}

/// Numeric types (F32, F64, I64, I32).
template <class Fn>
inline void dispatchNumeric(DT t, const char *what, Fn &&fn) {
  switch (t) {
  case DT::F32: fn(Tag<float>{}); return;
  case DT::F64: fn(Tag<double>{}); return;
  case DT::I64: fn(Tag<int64_t>{}); return;
  case DT::I32: fn(Tag<int32_t>{}); return;
  default: fatal(what);
  }
}

/// Index types (I64, I32).
template <class Fn> inline void dispatchIndex(DT t, const char *what, Fn &&fn) {
  switch (t) {
  case DT::I64: fn(Tag<int64_t>{}); return;
  case DT::I32: fn(Tag<int32_t>{}); return;
  default: fatal(what);
  }
}

/// An unsigned integer type of the element size (for pure data movement).
template <class Fn> inline void dispatchBySize(DT t, Fn &&fn) {
  switch (elemSize(t)) {
  case 1: fn(Tag<uint8_t>{}); return;
  case 4: fn(Tag<uint32_t>{}); return;
  default: fn(Tag<uint64_t>{}); return;
  }
}

inline int64_t normAxis(int64_t axis, int32_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// Row-major strides of d.
inline void rowMajor(const Dims &d, int64_t *s) {
  int64_t acc = 1;
  for (int32_t i = d.rank - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d.d[i];
  }
}

/// Strides (in elements) of `in` read as broadcast to `out` (0 on broadcast
/// dims, right-aligned as numpy).
inline void broadcastStrides(const Dims &in, const Dims &out, int64_t *s) {
  int64_t rm[kMaxRank];
  rowMajor(in, rm);
  int32_t off = out.rank - in.rank;
  for (int32_t d = 0; d < out.rank; ++d)
    s[d] = 0;
  for (int32_t d = 0; d < in.rank; ++d)
    if (off + d >= 0)
      s[off + d] = in.d[d] == 1 ? 0 : rm[d];
}

/// outer x dim x inner split of a shape at `axis`.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
  AxisSplit(const Dims &s, int64_t axis) {
    for (int32_t d = 0; d < s.rank; ++d) {
      if (d < axis)
        outer *= s.d[d];
      else if (d == axis)
        dim = s.d[d];
      else
        inner *= s.d[d];
    }
  }
};

/// Runs fn(begin, end) over [0, n): one contiguous chunk per OpenMP thread
/// when n * workPerItem is large enough, else serially. Chunks are a pure
/// function of (n, thread count) and each item is processed by exactly one
/// thread, so results do not depend on scheduling.
template <class Fn>
inline void parallelFor(int64_t n, int64_t workPerItem, Fn &&fn) {
  if (n <= 0)
    return;
#ifdef _OPENMP
  if (n > 1 && n * std::max<int64_t>(workPerItem, 1) >= kParallelMin &&
      !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t chunk = (n + nt - 1) / nt;
      const int64_t b = std::min(n, tid * chunk), e = std::min(n, b + chunk);
      if (b < e)
        fn(b, e);
    }
    return;
  }
#endif
  fn(int64_t(0), n);
}

/// Grow-only thread-local scratch of n elements of T; `slot` separates
/// buffers live at the same time.
template <class T, int Slot = 0> inline T *scratch(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n)
    buf.resize(n);
  return buf.data();
}

/// An iteration plan over a dense row-major output of shape `shape`, with K
/// source stride vectors. coalesce() drops size-1 dims and merges adjacent
/// dims that are contiguous in every source.
template <int K> struct Plan {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t st[K][kMaxRank] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int32_t i = 0; i < rank; ++i)
      n *= shape[i];
    return n;
  }

  void coalesce() {
    int32_t r = 0;
    for (int32_t d = 0; d < rank; ++d) {
      if (shape[d] == 1)
        continue;
      shape[r] = shape[d];
      for (int k = 0; k < K; ++k)
        st[k][r] = st[k][d];
      ++r;
    }
    int32_t w = 0;
    for (int32_t d = 0; d < r; ++d) {
      bool merge = w > 0;
      for (int k = 0; merge && k < K; ++k)
        merge = st[k][w - 1] == st[k][d] * shape[d];
      if (merge) {
        shape[w - 1] *= shape[d];
        for (int k = 0; k < K; ++k)
          st[k][w - 1] = st[k][d];
      } else {
        shape[w] = shape[d];
        for (int k = 0; k < K; ++k)
          st[k][w] = st[k][d];
        ++w;
      }
    }
    if (w == 0) {
      w = 1;
      shape[0] = 1;
      for (int k = 0; k < K; ++k)
        st[k][0] = 0;
    }
    rank = w;
  }

  int64_t innerLen() const { return shape[rank - 1]; }
  int64_t innerStride(int k) const { return st[k][rank - 1]; }
};

/// Calls fn(outOffset, const int64_t off[K], len) for every innermost row of
/// a (coalesced) plan, in parallel chunks of rows when large.
template <int K, class Fn> inline void forRows(const Plan<K> &p, Fn &&fn) {
  const int64_t inner = p.innerLen();
  const int64_t total = p.numel();
  if (total == 0)
    return;
  const int64_t rows = total / inner;
  const int32_t outerRank = p.rank - 1;
  if (rows == 1) { // one long row (e.g. a scalar broadcast): split it
    constexpr int64_t kChunk = 1 << 14;
    parallelFor((inner + kChunk - 1) / kChunk, kChunk, [&](int64_t c0, int64_t c1) {
      const int64_t b = c0 * kChunk, e = std::min(inner, c1 * kChunk);
      int64_t off[K];
      for (int k = 0; k < K; ++k)
        off[k] = b * p.st[k][outerRank];
      fn(b, static_cast<const int64_t *>(off), e - b);
    });
    return;
  }
  parallelFor(rows, inner, [&](int64_t r0, int64_t r1) {
    int64_t idx[kMaxRank] = {};
    int64_t off[K] = {};
    int64_t rem = r0;
    for (int32_t d = outerRank - 1; d >= 0; --d) {
      idx[d] = rem % p.shape[d];
      rem /= p.shape[d];
    }
    for (int k = 0; k < K; ++k)
      for (int32_t d = 0; d < outerRank; ++d)
        off[k] += idx[d] * p.st[k][d];
    for (int64_t r = r0; r < r1; ++r) {
      fn(r * inner, static_cast<const int64_t *>(off), inner);
      for (int32_t d = outerRank - 1; d >= 0; --d) {
        for (int k = 0; k < K; ++k)
          off[k] += p.st[k][d];
        if (++idx[d] < p.shape[d])
          break;
        for (int k = 0; k < K; ++k)
          off[k] -= p.st[k][d] * p.shape[d];
        idx[d] = 0;
      }
    }
  });
}

/// A plan for reading K operands broadcast to `out`.
template <int K>
inline Plan<K> broadcastPlan(const Dims &out, const Dims *const (&ins)[K]) {
  Plan<K> p;
  p.rank = out.rank;
  for (int32_t d = 0; d < out.rank; ++d)
    p.shape[d] = out.d[d];
  for (int k = 0; k < K; ++k)
    broadcastStrides(*ins[k], out, p.st[k]);
  p.coalesce();
  return p;
}

} // namespace merak::rt::cpu::detail

#endif // MERAK_RT_OPS_UTIL_H
