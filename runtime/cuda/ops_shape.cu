//===- ops_shape.cu - GPU ABI: data movement and gathers ---------------------===//
//
// broadcastTo, transpose, slice and insertAlongAxis are one strided copy
// (dst[walk] = src[walk]) over coalesced dims, moving elements by size
// (1, 4 or 8 bytes). gather/gatherElements read one index per output
// element; their gradients scatter with atomicAdd (repeated indices
// accumulate in a nondeterministic order). A bad index is recorded in the
// error word (checkErrors) and yields 0.
//
//===----------------------------------------------------------------------===//
#include "ops_common.cuh"

namespace merak::rt::gpu {
using namespace detail;

namespace {

template <class E>
__global__ void __launch_bounds__(256)
    stridedCopyKernel(E *dst, int64_t dstBase, const E *src, int64_t srcBase,
                      int64_t n, const __grid_constant__ Walk w) {
  MERAK_GRID_STRIDE(i, n) {
    int64_t od, os, unused;
    walkOffsets(w, i, od, os, unused);
    dst[dstBase + od] = src[srcBase + os];
  }
}

/// dst[dstBase + walk . s0] = src[srcBase + walk . s1] over w.dims.
void stridedCopy(DT t, void *dst, int64_t dstBase, const void *src,
                 int64_t srcBase, Walk w, const char *what) {
  int64_t n = 1;
  for (int32_t i = 0; i < w.rank; ++i)
    n *= w.dims[i];
  if (n == 0)
    return;
  coalesce(w);
  if (w.rank == 1 && w.s0[0] == 1 && w.s1[0] == 1) {
    copyBytes(static_cast<char *>(dst) + dstBase * elemSize(t),
              static_cast<const char *>(src) + srcBase * elemSize(t),
              n * elemSize(t));
    return;
  }
  dispatchBits(t, [&](auto tag) {
    using E = typename decltype(tag)::type;
    stridedCopyKernel<E><<<gridFor(n), 256, 0, cs()>>>(
        static_cast<E *>(dst), dstBase, static_cast<const E *>(src), srcBase,
        n, w);
  });
  checkLaunch(what);
}

template <class I>
__device__ __forceinline__ int64_t fixIndex(I raw, int64_t dim, int *err,
                                            int code) {
  int64_t v = int64_t(raw);
  if (v < 0)
    v += dim;
  if (v < 0 || v >= dim) {
    recordError(err, code);
    return -1;
  }
  return v;
}

/// y[o, j, k] = data[o, idx[j], k]: outer x nIdx x inner outputs.
template <class E, class I>
__global__ void __launch_bounds__(256)
    gatherKernel(const E *data, const I *idx, E *y, int64_t outer, int64_t dim,
                 int64_t nIdx, int64_t inner, int *err) {
  const int64_t n = outer * nIdx * inner;
  MERAK_GRID_STRIDE(i, n) {
    const int64_t k = i % inner, j = (i / inner) % nIdx, o = i / (inner * nIdx);
    const int64_t r = fixIndex(idx[j], dim, err, kErrGatherIndex);
    y[i] = r < 0 ? E(0) : data[(o * dim + r) * inner + k];
  }
}

template <class T, class I>
__global__ void __launch_bounds__(256)
    gatherGradKernel(const T *g, const I *idx, T *y, int64_t outer, int64_t dim,
                     int64_t nIdx, int64_t inner, int *err) {
  const int64_t n = outer * nIdx * inner;
  MERAK_GRID_STRIDE(i, n) {
    const int64_t k = i % inner, j = (i / inner) % nIdx, o = i / (inner * nIdx);
    const int64_t r = fixIndex(idx[j], dim, err, kErrGatherIndex);
    if (r >= 0)
      atomicAdd(y + (o * dim + r) * inner + k, g[i]);
  }
}

/// Index shape di walked with data strides (s1) except along axis.
template <class E, class I, bool Grad>
__global__ void __launch_bounds__(256)
    gatherElementsKernel(const E *in, const I *idx, E *out, int64_t n,
                         const __grid_constant__ Walk w, int32_t axis,
                         int64_t axisDim, int64_t axisStride, int *err) {
  MERAK_GRID_STRIDE(i, n) {
    // s0: contiguous (index/grad layout), s1: data strides with 0 on axis.
    int64_t oi, od, unused;
    walkOffsets(w, i, oi, od, unused);
    const int64_t r = fixIndex(idx[i], axisDim, err, kErrGatherElementsIndex);
    if constexpr (Grad) {
      if (r >= 0)
        atomicAdd(out + od + r * axisStride, in[i]);
    } else {
      out[i] = r < 0 ? E(0) : in[od + r * axisStride];
    }
  }
}

} // namespace

void broadcastTo(DT t, const void *x, const Dims &dx, void *y, const Dims &dy) {
  Walk w;
  w.rank = dy.rank;
  for (int32_t i = 0; i < dy.rank; ++i)
    w.dims[i] = dy.d[i];
  contiguousStrides(dy, w.s0);
  broadcastStrides(dx, dy, w.s1);
  stridedCopy(t, y, 0, x, 0, w, "broadcast_to");
}

void transpose(DT t, const void *x, const Dims &dx, const Dims &perm, void *y) {
  int64_t xs[kMaxRank] = {};
  contiguousStrides(dx, xs);
  Walk w;
  w.rank = dx.rank;
  Dims dy;
  dy.rank = dx.rank;
  for (int32_t i = 0; i < dx.rank; ++i) {
    dy.d[i] = dx.d[perm.d[i]];
    w.dims[i] = dy.d[i];
    w.s1[i] = xs[perm.d[i]];
  }
  contiguousStrides(dy, w.s0);
  stridedCopy(t, y, 0, x, 0, w, "transpose");
}

void slice(DT t, const void *x, const Dims &dx, const Dims &starts,
           const Dims &strides, void *y, const Dims &dy) {
  int64_t xs[kMaxRank] = {};
  contiguousStrides(dx, xs);
  Walk w;
  w.rank = dy.rank;
  int64_t base = 0;
  for (int32_t i = 0; i < dy.rank; ++i) {
    w.dims[i] = dy.d[i];
    w.s1[i] = xs[i] * strides.d[i];
    base += starts.d[i] * xs[i];
  }
  contiguousStrides(dy, w.s0);
  stridedCopy(t, y, 0, x, base, w, "slice");
}

void insertAlongAxis(DT t, const void *x, const Dims &dx, int64_t axis,
                     int64_t offset, void *y, const Dims &dy) {
  int64_t ys[kMaxRank] = {};
  contiguousStrides(dy, ys);
  Walk w;
  w.rank = dx.rank;
  for (int32_t i = 0; i < dx.rank; ++i) {
    w.dims[i] = dx.d[i];
    w.s0[i] = ys[i];
  }
  contiguousStrides(dx, w.s1);
  stridedCopy(t, y, offset * ys[axis], x, 0, w, "insert_along_axis");
}

void gather(DT t, const void *data, const Dims &dd, DT idxT, const void *idx,
            const Dims &di, int64_t axis, void *y) {
  AxisSplit s(dd, axis);
  const int64_t nIdx = di.numel(), n = s.outer * nIdx * s.inner;
  if (n == 0)
    return;
  int *err = errorWord();
  dispatchBits(t, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dispatchIndex(idxT, "gather: indices must be i64 or i32", [&](auto itag) {
      using I = typename decltype(itag)::type;
      gatherKernel<E, I><<<gridFor(n), 256, 0, cs()>>>(
          static_cast<const E *>(data), static_cast<const I *>(idx),
          static_cast<E *>(y), s.outer, s.dim, nIdx, s.inner, err);
    });
  });
  checkLaunch("gather");
}

void gatherGrad(DT t, const void *g, DT idxT, const void *idx, const Dims &di, int64_t axis,
                void *y, const Dims &dy, bool accumulate) {
  AxisSplit s(dy, axis);
  const int64_t nIdx = di.numel(), n = s.outer * nIdx * s.inner;
  if (cudaError_t e =
          accumulate ? cudaSuccess : cudaMemsetAsync(y, 0, dy.numel() * elemSize(t), cs());
      e != cudaSuccess)
    fatal("gather_grad: cudaMemsetAsync failed");
  if (n == 0)
    return;
  int *err = errorWord();
  dispatchFloat(t, "gather_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatchIndex(idxT, "gather_grad: indices must be i64 or i32", [&](auto itag) {
      using I = typename decltype(itag)::type;
      gatherGradKernel<T, I><<<gridFor(n), 256, 0, cs()>>>(
          static_cast<const T *>(g), static_cast<const I *>(idx),
          static_cast<T *>(y), s.outer, s.dim, nIdx, s.inner, err);
    });
  });
  checkLaunch("gather_grad");
}

namespace {
/// The walk over the index shape di: s0 contiguous, s1 the data's (shape
/// dd) strides with 0 along axis.
Walk elementsWalk(const Dims &dd, const Dims &di, int64_t axis,
                  int64_t &axisStride) {
  int64_t ds[kMaxRank] = {};
  contiguousStrides(dd, ds);
  Walk w;
  w.rank = di.rank;
  for (int32_t i = 0; i < di.rank; ++i) {
    w.dims[i] = di.d[i];
    w.s1[i] = i == axis ? 0 : ds[i];
  }
  contiguousStrides(di, w.s0);
  axisStride = ds[axis];
  return w;
}
} // namespace

void gatherElements(DT t, const void *data, const Dims &dd, DT idxT,
                    const void *idx, const Dims &di, int64_t axis, void *y) {
  const int64_t n = di.numel();
  if (n == 0)
    return;
  int64_t axisStride = 0;
  const Walk w = elementsWalk(dd, di, axis, axisStride);
  int *err = errorWord();
  dispatchBits(t, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dispatchIndex(idxT, "gather_elements: indices must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      gatherElementsKernel<E, I, false><<<gridFor(n), 256, 0, cs()>>>(
          static_cast<const E *>(data), static_cast<const I *>(idx),
          static_cast<E *>(y), n, w, int32_t(axis), dd.d[axis], axisStride,
          err);
    });
  });
  checkLaunch("gather_elements");
}

void gatherElementsGrad(DT t, const void *g, DT idxT, const void *idx,
                        const Dims &di, int64_t axis, void *y, const Dims &dy) {
  if (cudaError_t e = cudaMemsetAsync(y, 0, dy.numel() * elemSize(t), cs());
      e != cudaSuccess)
    fatal("gather_elements_grad: cudaMemsetAsync failed");
  const int64_t n = di.numel();
  if (n == 0)
    return;
  int64_t axisStride = 0;
  const Walk w = elementsWalk(dy, di, axis, axisStride);
  int *err = errorWord();
  dispatchFloat(t, "gather_elements_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatchIndex(idxT, "gather_elements_grad: indices must be i64 or i32",
                  [&](auto itag) {
      using I = typename decltype(itag)::type;
      gatherElementsKernel<T, I, true><<<gridFor(n), 256, 0, cs()>>>(
          static_cast<const T *>(g), static_cast<const I *>(idx),
          static_cast<T *>(y), n, w, int32_t(axis), dy.d[axis], axisStride,
          err);
    });
  });
  checkLaunch("gather_elements_grad");
}

} // namespace merak::rt::gpu
