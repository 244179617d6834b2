//===- ops_reduce.cu - GPU ABI: reductions, argmax, argsort, cumsum, loss ---===//
//
// Semantics of runtime/src/ops_reduce.cpp: floats accumulate in double,
// integers in wrapping int64, NaN is sticky in max/min. reduce() walks the
// kept dims (one output each) and the reduced dims (coalesced): one block
// per output when 32 or more elements are reduced into it (a tree of
// per-thread partials), else one thread per output. Cross entropy is one
// block per row (online max, then the sum of exp in double); F32 over a
// contiguous class axis with i64 labels and reduction none/mean uses the
// fused cuda::crossEntropyForward kernel.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/kernels.h"
#include "ops_common.cuh"

#include <type_traits>

namespace merak::rt::gpu {
using namespace detail;

namespace {

template <class T> struct AccOf {
  using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
};

template <class A> __device__ __forceinline__ A initAcc(int op) {
  if constexpr (std::is_same_v<A, double>) {
    switch (static_cast<Reduce>(op)) {
    case Reduce::Max: return -INFINITY;
    case Reduce::Min: return INFINITY;
    case Reduce::Prod: return 1.0;
    default: return 0.0;
    }
  } else {
    return op == int(Reduce::Prod) ? 1 : 0; // max/min: set per type below
  }
}

template <class T, class A> __device__ __forceinline__ A initFor(int op) {
  if constexpr (!std::is_floating_point_v<T>) {
    if (op == int(Reduce::Max))
      return A(std::numeric_limits<T>::min());
    if (op == int(Reduce::Min))
      return A(std::numeric_limits<T>::max());
  }
  return initAcc<A>(op);
}

template <class A> __device__ __forceinline__ A combine(int op, A acc, A d) {
  if constexpr (std::is_same_v<A, double>) {
    switch (static_cast<Reduce>(op)) {
    case Reduce::Sum:
    case Reduce::Mean: return acc + d;
    case Reduce::Prod: return acc * d;
    case Reduce::Max: return (d > acc || isnan(d)) && !isnan(acc) ? d : acc;
    case Reduce::Min: return (d < acc || isnan(d)) && !isnan(acc) ? d : acc;
    }
  } else {
    switch (static_cast<Reduce>(op)) {
    case Reduce::Sum:
    case Reduce::Mean: return A(uint64_t(acc) + uint64_t(d));
    case Reduce::Prod: return A(uint64_t(acc) * uint64_t(d));
    case Reduce::Max: return acc > d ? acc : d;
    case Reduce::Min: return acc < d ? acc : d;
    }
  }
  return acc;
}

template <class T, class A>
__device__ __forceinline__ T finish(int op, A acc, int64_t count) {
  if constexpr (std::is_same_v<A, double>) {
    return T(op == int(Reduce::Mean) ? acc / double(count) : acc);
  } else {
    using U = std::make_unsigned_t<T>;
    const int64_t v = op == int(Reduce::Mean) && count ? acc / count : acc;
    return T(U(uint64_t(v)));
  }
}

/// One thread per output.
template <class T>
__global__ void __launch_bounds__(256)
    reduceThreadKernel(int op, const T *x, T *y, int64_t nOut, int64_t nRed,
                       const __grid_constant__ Walk kept,
                       const __grid_constant__ Walk red) {
  using A = typename AccOf<T>::A;
  MERAK_GRID_STRIDE(o, nOut) {
    int64_t base, u1, u2;
    walkOffsets(kept, o, base, u1, u2);
    A acc = initFor<T, A>(op);
    for (int64_t r = 0; r < nRed; ++r) {
      int64_t off;
      walkOffsets(red, r, off, u1, u2);
      acc = combine<A>(op, acc, A(x[base + off]));
    }
    y[o] = finish<T, A>(op, acc, nRed);
  }
}

/// One block per output (blockDim a multiple of 32).
template <class T>
__global__ void __launch_bounds__(256)
    reduceBlockKernel(int op, const T *x, T *y, int64_t nOut, int64_t nRed,
                      const __grid_constant__ Walk kept,
                      const __grid_constant__ Walk red) {
  using A = typename AccOf<T>::A;
  __shared__ A smem[32];
  for (int64_t o = blockIdx.x; o < nOut; o += gridDim.x) {
    int64_t base, u1, u2;
    walkOffsets(kept, o, base, u1, u2);
    A acc = initFor<T, A>(op);
    for (int64_t r = threadIdx.x; r < nRed; r += blockDim.x) {
      int64_t off;
      walkOffsets(red, r, off, u1, u2);
      acc = combine<A>(op, acc, A(x[base + off]));
    }
#pragma unroll
    for (int s = 16; s > 0; s >>= 1)
      acc = combine<A>(op, acc, __shfl_xor_sync(0xffffffffu, acc, s));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
      smem[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < int(blockDim.x >> 5) ? smem[lane] : initFor<T, A>(op);
#pragma unroll
      for (int s = 16; s > 0; s >>= 1)
        acc = combine<A>(op, acc, __shfl_xor_sync(0xffffffffu, acc, s));
      if (lane == 0)
        y[o] = finish<T, A>(op, acc, nRed);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    argReduceKernel(bool isMax, const T *x, int64_t *y, int64_t outer,
                    int64_t dim, int64_t inner, bool selectLast) {
  MERAK_GRID_STRIDE(it, outer * inner) {
    const int64_t o = it / inner, k = it % inner;
    const T *p = x + o * dim * inner + k;
    int64_t best = 0;
    for (int64_t j = 1; j < dim; ++j) {
      const T cur = p[j * inner], top = p[best * inner];
      if ((isMax ? cur > top : cur < top) || (selectLast && cur == top))
        best = j;
    }
    y[it] = best;
  }
}

/// merak.argsort, one thread per element: its stable rank along the axis
/// (the elements before it in the order, ties at smaller positions
/// included) is where its position goes. O(dim) per element; NaN (x != x)
/// ranks above every number.
template <class T>
__global__ void __launch_bounds__(256) argSortKernel(const T *x, int64_t *y, int64_t outer,
                                                     int64_t dim, int64_t inner, bool descending) {
  MERAK_GRID_STRIDE(it, outer * dim * inner) {
    const int64_t o = it / (dim * inner), j = (it / inner) % dim, k = it % inner;
    const T *p = x + o * dim * inner + k;
    const T v = p[j * inner];
    const bool vNan = !(v == v);
    int64_t rank = 0;
    for (int64_t l = 0; l < dim; ++l) {
      const T u = p[l * inner];
      const bool uNan = !(u == u);
      bool before;
      if (uNan || vNan)
        before = descending ? (uNan && !vNan) : (!uNan && vNan);
      else
        before = descending ? u > v : u < v;
      const bool tie = (uNan == vNan) && (uNan || u == v);
      rank += before || (tie && l < j);
    }
    y[o * dim * inner + rank * inner + k] = j;
  }
}

/// x * y rounded before any add (no fused multiply-add: the CPU kernel and
/// the unrolled mul and add that merak.linear_scan replaces round it).
__device__ __forceinline__ float mulRn(float x, float y) { return __fmul_rn(x, y); }
__device__ __forceinline__ double mulRn(double x, double y) { return __dmul_rn(x, y); }

/// merak.linear_scan, one thread per (outer, inner) position walking the axis.
template <class T>
__global__ void __launch_bounds__(256)
    linearScanKernel(const T *a, const T *b, T *y, int64_t outer, int64_t dim, int64_t inner) {
  MERAK_GRID_STRIDE(it, outer * inner) {
    const int64_t base = (it / inner) * dim * inner + it % inner;
    T h = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const int64_t at = base + j * inner;
      h = mulRn(a[at], h) + b[at];
      y[at] = h;
    }
  }
}

/// merak.linear_scan_grad, the same threads walking the axis from the end.
template <class T>
__global__ void __launch_bounds__(256)
    linearScanGradKernel(const T *a, const T *h, const T *dy, T *da, T *db, int64_t outer,
                         int64_t dim, int64_t inner) {
  MERAK_GRID_STRIDE(it, outer * inner) {
    const int64_t base = (it / inner) * dim * inner + it % inner;
    T g = 0;
    for (int64_t j = dim - 1; j >= 0; --j) {
      const int64_t at = base + j * inner;
      g = j + 1 < dim ? dy[at] + mulRn(a[at + inner], g) : dy[at];
      db[at] = g;
      da[at] = j ? mulRn(g, h[at - inner]) : T(0);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    cumsumKernel(const T *x, T *y, int64_t outer, int64_t dim, int64_t inner,
                 bool exclusive, bool reverse) {
  using A = typename AccOf<T>::A;
  MERAK_GRID_STRIDE(it, outer * inner) {
    const int64_t o = it / inner, k = it % inner;
    const int64_t base = o * dim * inner + k;
    A acc = 0;
    for (int64_t step = 0; step < dim; ++step) {
      const int64_t j = reverse ? dim - 1 - step : step;
      const int64_t at = base + j * inner;
      const T v = x[at];
      if (exclusive)
        y[at] = finish<T, A>(int(Reduce::Sum), acc, 1);
      acc = combine<A>(int(Reduce::Sum), acc, A(v));
      if (!exclusive)
        y[at] = finish<T, A>(int(Reduce::Sum), acc, 1);
    }
  }
}

/// Per row (outer x inner rows, classes at stride inner): the log-sum-exp
/// minus the label's logit in double, 0 for an ignored row; counts the
/// non-ignored rows into *count (double, zeroed by the caller).
template <class T, class I>
__global__ void __launch_bounds__(256)
    ceRowKernel(const T *logits, const I *labels, double *loss, double *count,
                int64_t rows, int64_t dim, int64_t inner, bool hasIgnore,
                int64_t ignoreIndex, int *err) {
  __shared__ double smem[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t l = int64_t(labels[row]);
    const bool ignored = hasIgnore && l == ignoreIndex;
    if (ignored) {
      if (threadIdx.x == 0)
        loss[row] = 0.0;
      continue; // uniform over the block
    }
    const bool bad = l < 0 || l >= dim;
    const T *p = logits + (row / inner) * dim * inner + row % inner;
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      m = fmax(m, double(p[j * inner]));
    m = blockMaxD(m, smem);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      s += exp(double(p[j * inner]) - m);
    s = blockSumD(s, smem);
    if (threadIdx.x == 0) {
      if (bad)
        recordError(err, kErrLabel);
      loss[row] = bad ? double(NAN) : m + log(s) - double(p[l * inner]);
      atomicAdd(count, 1.0);
    }
  }
}

/// y = the per-row losses (reduction 0), their mean over the count (1) or
/// sum (2). One block.
template <class T>
__global__ void __launch_bounds__(256)
    ceReduceKernel(const double *loss, const double *count, T *y, int64_t rows,
                   int reduction) {
  __shared__ double smem[32];
  if (reduction == 0) {
    for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
      y[i] = T(loss[i]);
    return;
  }
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    s += loss[i];
  s = blockSumD(s, smem);
  if (threadIdx.x == 0)
    y[0] = T(reduction == 1 ? s / *count : s);
}

/// dlogits = (softmax - onehot) * w per row, w from g and the reduction.
template <class T, class I>
__global__ void __launch_bounds__(256)
    ceGradKernel(const T *logits, const I *labels, const T *g,
                 const double *count, T *dl, int64_t rows, int64_t dim,
                 int64_t inner, int reduction, bool hasIgnore,
                 int64_t ignoreIndex, int *err) {
  __shared__ double smem[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t l = int64_t(labels[row]);
    const T *p = logits + (row / inner) * dim * inner + row % inner;
    T *q = dl + (row / inner) * dim * inner + row % inner;
    if (hasIgnore && l == ignoreIndex) {
      for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
        q[j * inner] = T(0);
      continue;
    }
    if (l < 0 || l >= dim) {
      if (threadIdx.x == 0)
        recordError(err, kErrLabel);
    }
    const double w = reduction == 2   ? double(g[0])
                     : reduction == 1 ? double(g[0]) / *count
                                      : double(g[row]);
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      m = fmax(m, double(p[j * inner]));
    m = blockMaxD(m, smem);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      s += exp(double(p[j * inner]) - m);
    s = blockSumD(s, smem);
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      q[j * inner] = T((exp(double(p[j * inner]) - m) / s - (j == l ? 1.0 : 0.0)) * w);
  }
}

/// *count = the number of non-ignored labels (one block).
template <class I>
__global__ void __launch_bounds__(256)
    countKernel(const I *labels, int64_t rows, bool hasIgnore,
                int64_t ignoreIndex, double *count) {
  __shared__ double smem[32];
  double c = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    c += (hasIgnore && int64_t(labels[i]) == ignoreIndex) ? 0.0 : 1.0;
  c = blockSumD(c, smem);
  if (threadIdx.x == 0)
    *count = c;
}

unsigned rowGrid(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 20) ? (rows < 1 ? 1 : rows) : (1 << 20));
}

} // namespace

void sumSquares(DT t, const void *x, int64_t n, void *y) {
  // The squares into scratch, then the sum reduction (two passes; the
  // reduction's order is fixed).
  Dims d{1, {n}};
  void *sq = scratch(5, static_cast<uint64_t>(n) * elemSize(t)); // slots 1-3: binary, reduce
  gpu::binary(Binary::Mul, t, x, d, x, d, sq, d);
  gpu::reduce(Reduce::Sum, t, sq, d, Dims{1, {0}}, y);
}

void reduce(Reduce op, DT t, const void *x, const Dims &dx, const Dims &axes,
            void *y) {
  if (axes.rank == 0)
    return copyBytes(y, x, dx.numel() * elemSize(t));
  if (t == DT::BF16) { // widen, reduce in float32, round once
    int64_t kept = dx.numel();
    for (int32_t i = 0; i < axes.rank; ++i)
      kept = dx.d[normAxis(axes.d[i], dx.rank)] ? kept / dx.d[normAxis(axes.d[i], dx.rank)] : 0;
    auto *fx = static_cast<float *>(scratch(1, static_cast<uint64_t>(dx.numel()) * sizeof(float)));
    auto *fy = static_cast<float *>(scratch(3, static_cast<uint64_t>(kept) * sizeof(float)));
    widenBf16(x, fx, dx.numel());
    gpu::reduce(op, DT::F32, fx, dx, axes, fy);
    return narrowToBf16(fy, y, kept);
  }
  bool isRed[kMaxRank] = {};
  for (int32_t i = 0; i < axes.rank; ++i)
    isRed[normAxis(axes.d[i], dx.rank)] = true;
  int64_t xs[kMaxRank] = {};
  contiguousStrides(dx, xs);
  Walk kept, red;
  int64_t nOut = 1, nRed = 1;
  for (int32_t i = 0; i < dx.rank; ++i) {
    Walk &w = isRed[i] ? red : kept;
    w.dims[w.rank] = dx.d[i];
    w.s0[w.rank] = xs[i];
    ++w.rank;
    (isRed[i] ? nRed : nOut) *= dx.d[i];
  }
  if (nOut == 0)
    return;
  // Coalescing the kept walk keeps its row-major output order (s1, s2 = 0).
  coalesce(kept);
  coalesce(red);
  dispatchNumeric(t, "reduce: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (nRed >= 32)
      reduceBlockKernel<T><<<rowGrid(nOut), nRed >= 256 ? 256 : 128, 0, cs()>>>(
          int(op), static_cast<const T *>(x), static_cast<T *>(y), nOut, nRed,
          kept, red);
    else
      reduceThreadKernel<T><<<gridFor(nOut), 256, 0, cs()>>>(
          int(op), static_cast<const T *>(x), static_cast<T *>(y), nOut, nRed,
          kept, red);
  });
  checkLaunch("reduce");
}

void argReduce(bool isMax, DT t, const void *x, const Dims &dx, int64_t axis,
               bool selectLast, void *out) {
  int64_t *y = static_cast<int64_t *>(out);
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  if (s.outer * s.inner == 0)
    return;
  dispatchNumeric(t, "argmax/argmin: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    argReduceKernel<T><<<gridFor(s.outer * s.inner), 256, 0, cs()>>>(
        isMax, static_cast<const T *>(x), y, s.outer, s.dim, s.inner,
        selectLast);
  });
  checkLaunch("argmax/argmin");
}

void argSort(DT t, const void *x, const Dims &dx, int64_t axis, bool descending, void *out) {
  int64_t *y = static_cast<int64_t *>(out);
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  if (s.outer * s.dim * s.inner == 0)
    return;
  dispatchNumeric(t, "argsort: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    argSortKernel<T><<<gridFor(s.outer * s.dim * s.inner), 256, 0, cs()>>>(
        static_cast<const T *>(x), y, s.outer, s.dim, s.inner, descending);
  });
  checkLaunch("argsort");
}

void cumsum(DT t, const void *x, const Dims &dx, int64_t axis, bool exclusive,
            bool reverse, void *y) {
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  if (s.outer * s.inner == 0)
    return;
  dispatchNumeric(t, "cumsum: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cumsumKernel<T><<<gridFor(s.outer * s.inner), 256, 0, cs()>>>(
        static_cast<const T *>(x), static_cast<T *>(y), s.outer, s.dim,
        s.inner, exclusive, reverse);
  });
  checkLaunch("cumsum");
}

void linearScan(DT t, const void *a, const void *b, const Dims &d, int64_t axis, void *y) {
  AxisSplit s(d, normAxis(axis, d.rank));
  if (s.outer * s.inner * s.dim == 0)
    return;
  dispatchFloat(t, "linear_scan: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    linearScanKernel<T><<<gridFor(s.outer * s.inner), 256, 0, cs()>>>(
        static_cast<const T *>(a), static_cast<const T *>(b), static_cast<T *>(y), s.outer, s.dim,
        s.inner);
  });
  checkLaunch("linear_scan");
}

void linearScanGrad(DT t, const void *a, const void *h, const void *dy, const Dims &d, int64_t axis,
                    void *da, void *db) {
  AxisSplit s(d, normAxis(axis, d.rank));
  if (s.outer * s.inner * s.dim == 0)
    return;
  dispatchFloat(t, "linear_scan_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    linearScanGradKernel<T><<<gridFor(s.outer * s.inner), 256, 0, cs()>>>(
        static_cast<const T *>(a), static_cast<const T *>(h), static_cast<const T *>(dy),
        static_cast<T *>(da), static_cast<T *>(db), s.outer, s.dim, s.inner);
  });
  checkLaunch("linear_scan_grad");
}

void crossEntropy(DT t, const void *logits, const Dims &dl, int64_t axis,
                  DT labT, const void *labels, int32_t reduction,
                  bool hasIgnore, int64_t ignoreIndex, void *y) {
  axis = normAxis(axis, dl.rank);
  AxisSplit s(dl, axis);
  const int64_t rows = s.outer * s.inner;
  if (rows == 0)
    return;
  if (t == DT::F32 && labT == DT::I64 && s.inner == 1 && reduction != 2) {
    // The fused kernel: NaN (not an error) for a label out of range.
    const int64_t ignore = hasIgnore ? ignoreIndex : INT64_MIN;
    float *perRow = reduction == 0
                        ? static_cast<float *>(y)
                        : static_cast<float *>(scratch(0, rows * sizeof(float)));
    Status st = cuda::crossEntropyForward(
        cuda::DType::F32, logits, static_cast<const int64_t *>(labels), perRow,
        reduction == 1 ? static_cast<float *>(y) : nullptr, nullptr, rows,
        s.dim, ignore, stream());
    if (!st.ok())
      fatal(st.message().c_str());
    return;
  }
  auto *loss = static_cast<double *>(scratch(0, rows * sizeof(double)));
  auto *count = static_cast<double *>(scratch(1, sizeof(double)));
  cudaMemsetAsync(count, 0, sizeof(double), cs());
  int *err = errorWord();
  dispatchFloat(t, "cross_entropy: float logits only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(labT, "cross_entropy: labels must be i64 or i32", [&](auto itag) {
      using I = typename decltype(itag)::type;
      ceRowKernel<T, I><<<rowGrid(rows), 256, 0, cs()>>>(
          static_cast<const T *>(logits), static_cast<const I *>(labels), loss,
          count, rows, s.dim, s.inner, hasIgnore, ignoreIndex, err);
    });
    ceReduceKernel<T><<<1, 256, 0, cs()>>>(loss, count, static_cast<T *>(y),
                                           rows, reduction);
  });
  checkLaunch("cross_entropy");
}

void crossEntropyGrad(DT t, const void *logits, const Dims &dl, int64_t axis,
                      DT labT, const void *labels, const void *g,
                      int32_t reduction, bool hasIgnore, int64_t ignoreIndex,
                      void *dlogits) {
  axis = normAxis(axis, dl.rank);
  AxisSplit s(dl, axis);
  const int64_t rows = s.outer * s.inner;
  if (rows == 0)
    return;
  auto *count = static_cast<double *>(scratch(1, sizeof(double)));
  int *err = errorWord();
  dispatchFloat(t, "cross_entropy_grad: float logits only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(labT, "cross_entropy_grad: labels must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      countKernel<I><<<1, 256, 0, cs()>>>(static_cast<const I *>(labels), rows,
                                          hasIgnore, ignoreIndex, count);
      ceGradKernel<T, I><<<rowGrid(rows), 256, 0, cs()>>>(
          static_cast<const T *>(logits), static_cast<const I *>(labels),
          static_cast<const T *>(g), count, static_cast<T *>(dlogits), rows,
          s.dim, s.inner, reduction, hasIgnore, ignoreIndex, err);
    });
  });
  checkLaunch("cross_entropy_grad");
}

} // namespace merak::rt::gpu
