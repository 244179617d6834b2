//===- ops_common.cuh - Shared pieces of the GPU ABI (merak_rt/cuda/ops.h) -===//
//
// Internal to runtime/cuda: the per-process context (stream, error word,
// grow-only scratch), dtype dispatch, broadcast/stride helpers and launch
// shapes used by ops_*.cu. Index loops over the rank are unrolled to
// kMaxRank with a `d < rank` guard so that no kernel indexes a local array
// dynamically (no local memory; runtime.cuda.ptxas_no_spills).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_OPS_COMMON_CUH
#define MERAK_RT_CUDA_OPS_COMMON_CUH

#include "common.cuh"
#include "merak_rt/cuda/gemm.h"
#include "merak_rt/cuda/ops.h"

#include <cstdint>
#include <string>

namespace merak::rt::gpu::detail {

using cuda::detail::st;

/// Error codes kernels record (first one wins) in the context's error word.
enum ErrorCode : int {
  kErrNone = 0,
  kErrGatherIndex = 1,
  kErrGatherElementsIndex = 2,
  kErrLabel = 3,
  kErrIntDivZero = 4,
};

/// The device error word (an int, 0 = none).
int *errorWord();
/// Scratch buffers per context (matmul's bf16 operands use 0 and 1; the
/// expert GEMMs 4 to 7).
constexpr int kScratchSlots = 8;
/// A grow-only device scratch buffer of at least `bytes` (slot 0..7, so
/// that one op can hold several). Allocation happens only when a call needs
/// more than any earlier one.
void *scratch(int slot, uint64_t bytes);
/// DT::BF16 (merak-mixed-precision's storage type): n elements widened to
/// float32 (exact) and rounded back (nearest even), on the context stream
/// (mixed.cu's kernels). Arithmetic on bf16 widens into scratch, computes
/// in float32 and rounds once, as the CPU runtime.
void widenBf16(const void *x, float *y, int64_t n);
void narrowToBf16(const float *x, void *y, int64_t n);

/// cudaStream_t of the context.
inline cudaStream_t cs() { return st(stream()); }
/// The context's cuBLASLt handle (ops_linalg.cu), created on first use;
/// releaseBlas frees it.
cuda::Blas &blas();
void releaseBlas();
/// MERAK_MATMUL_PRECISION (ops_linalg.cu), parsed once; fatal when bad.
cuda::GemmPrecision matmulPrecision();
/// fatal() with the launch error of `kernel` when the launch failed.
void checkLaunch(const char *kernel);

__device__ __forceinline__ void recordError(int *word, int code) {
  atomicCAS(word, 0, code);
}

/// Grid for a grid-stride loop over n items (256 threads).
inline unsigned gridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 132 * 16 ? 132 * 16 : blocks));
}

#define MERAK_GRID_STRIDE(i, n)                                                \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);   \
       i += int64_t(gridDim.x) * blockDim.x)

/// Shapes and element strides of up to three operands walked in the
/// order of `dims` (the iteration space), row-major.
struct Walk {
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t s0[kMaxRank] = {}, s1[kMaxRank] = {}, s2[kMaxRank] = {};
};

/// Offsets of linear iteration index i in operands 0..2.
__device__ __forceinline__ void walkOffsets(const Walk &w, int64_t i,
                                            int64_t &o0, int64_t &o1,
                                            int64_t &o2) {
  o0 = o1 = o2 = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < w.rank) {
      const int64_t k = i % w.dims[d];
      i /= w.dims[d];
      o0 += k * w.s0[d];
      o1 += k * w.s1[d];
      o2 += k * w.s2[d];
    }
  }
}

/// Row-major element strides of shape d.
inline void contiguousStrides(const Dims &d, int64_t *s) {
  int64_t acc = 1;
  for (int32_t i = d.rank - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d.d[i];
  }
}

/// Strides of `in` broadcast numpy-style (right-aligned) to `out`: 0 on
/// broadcast dims.
inline void broadcastStrides(const Dims &in, const Dims &out, int64_t *s) {
  int64_t cs[kMaxRank] = {};
  contiguousStrides(in, cs);
  for (int32_t i = 0; i < out.rank; ++i) {
    const int32_t j = i - (out.rank - in.rank);
    s[i] = (j < 0 || in.d[j] == 1) ? 0 : cs[j];
  }
}

/// Drops size-1 dims and merges adjacent dims that are contiguous in every
/// operand (fewer divisions per element).
inline void coalesce(Walk &w) {
  Walk r;
  for (int32_t i = 0; i < w.rank; ++i) {
    if (w.dims[i] == 1)
      continue;
    if (r.rank > 0) {
      const int32_t l = r.rank - 1;
      if (r.s0[l] == w.s0[i] * w.dims[i] && r.s1[l] == w.s1[i] * w.dims[i] &&
          r.s2[l] == w.s2[i] * w.dims[i]) {
        r.dims[l] *= w.dims[i];
        r.s0[l] = w.s0[i];
        r.s1[l] = w.s1[i];
        r.s2[l] = w.s2[i];
        continue;
      }
    }
    r.dims[r.rank] = w.dims[i];
    r.s0[r.rank] = w.s0[i];
    r.s1[r.rank] = w.s1[i];
    r.s2[r.rank] = w.s2[i];
    ++r.rank;
  }
  w = r;
}

/// A dimension split around `axis`: [outer, dim, inner].
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
  AxisSplit(const Dims &d, int64_t axis) {
    for (int32_t i = 0; i < d.rank; ++i)
      (i < axis ? outer : i == axis ? dim : inner) *= d.d[i];
  }
};

inline int64_t normAxis(int64_t axis, int32_t rank) {
  return axis < 0 ? axis + rank : axis;
}

template <class T> struct Tag { using type = T; };

template <class F> void dispatchAll(DT t, F f) {
  switch (t) {
  case DT::F32: return f(Tag<float>{});
  case DT::F64: return f(Tag<double>{});
  case DT::I64: return f(Tag<int64_t>{});
  case DT::I32: return f(Tag<int32_t>{});
  case DT::BOOL: return f(Tag<uint8_t>{});
  }
  fatal("unknown dtype");
}
template <class F> void dispatchNumeric(DT t, const char *what, F f) {
  if (t == DT::BOOL)
    fatal(what);
  dispatchAll(t, f);
}
template <class F> void dispatchFloat(DT t, const char *what, F f) {
  if (t == DT::F32)
    return f(Tag<float>{});
  if (t == DT::F64)
    return f(Tag<double>{});
  fatal(what);
}
template <class F> void dispatchIndex(DT t, const char *what, F f) {
  if (t == DT::I64)
    return f(Tag<int64_t>{});
  if (t == DT::I32)
    return f(Tag<int32_t>{});
  fatal(what);
}
/// By element size only (data movement).
template <class F> void dispatchBits(DT t, F f) {
  switch (elemSize(t)) {
  case 1: return f(Tag<uint8_t>{});
  case 2: return f(Tag<uint16_t>{});
  case 4: return f(Tag<uint32_t>{});
  case 8: return f(Tag<uint64_t>{});
  }
  fatal("unknown dtype");
}

/// Sum of a double over a block (blockDim.x a multiple of 32, <= 1024);
/// every thread gets the result. smem: 32 doubles.
__device__ __forceinline__ double blockSumD(double v, double *smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0)
    smem[warp] = v;
  __syncthreads();
  v = lane < nw ? smem[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Max of a double over a block; NaN is sticky.
__device__ __forceinline__ double maxNan(double a, double b) {
  return (isnan(a) || isnan(b)) ? (isnan(a) ? a : b) : fmax(a, b);
}
__device__ __forceinline__ double blockMaxD(double v, double *smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = maxNan(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0)
    smem[warp] = v;
  __syncthreads();
  v = lane < nw ? smem[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = maxNan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

} // namespace merak::rt::gpu::detail

#endif // MERAK_RT_CUDA_OPS_COMMON_CUH
