//===- common.cuh - Device helpers shared by the CUDA kernels ---*- CUDA -*-===//
//
// Internal to runtime/cuda: 16-byte vector loads/stores widening bf16 to
// float, warp/block reductions, and the launch-error check.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_COMMON_CUH
#define MERAK_RT_CUDA_COMMON_CUH

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace merak::rt::cuda::detail {

using bf16 = __nv_bfloat16;

template <typename T> struct Vec;
template <> struct Vec<float> {
  static constexpr int N = 4;
};
template <> struct Vec<bf16> {
  static constexpr int N = 8;
};

__device__ __forceinline__ float toF(float x) { return x; }
__device__ __forceinline__ float toF(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T fromF(float x);
template <> __device__ __forceinline__ float fromF<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 fromF<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Loads Vec<T>::N elements (16 bytes, 16-byte aligned) as floats.
__device__ __forceinline__ void load16(const float *p, float (&v)[4]) {
  const float4 f = *reinterpret_cast<const float4 *>(p);
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
}
__device__ __forceinline__ void load16(const bf16 *p, float (&v)[8]) {
  const uint4 u = *reinterpret_cast<const uint4 *>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 h;
    *reinterpret_cast<uint32_t *>(&h) = w[i];
    const float2 f = __bfloat1622float2(h);
    v[2 * i] = f.x, v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void store16(float *p, const float (&v)[4]) {
  *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store16(bf16 *p, const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    w[i] = *reinterpret_cast<uint32_t *>(&h);
  }
  *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
/// Online softmax state (running max m, sum s of exp(x - m)) merge.
__device__ __forceinline__ void mergeMaxSum(float &m, float &s, float m2,
                                            float s2) {
  const float nm = fmaxf(m, m2);
  if (nm == -INFINITY) {
    m = nm;
    s = 0.f;
    return;
  }
  s = s * expf(m - nm) + s2 * expf(m2 - nm);
  m = nm;
}
/// Adds one element x to the online state (one exp per element).
__device__ __forceinline__ void pushMaxSum(float &m, float &s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else if (x != -INFINITY) {
    s += expf(x - m);
  }
}
__device__ __forceinline__ void warpMaxSum(float &m, float &s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    mergeMaxSum(m, s, m2, s2);
  }
}

/// Sum over a "group": a warp (GroupIsWarp) or the whole block (up to 32
/// warps; smem holds 32 floats). Every thread of the group gets the result.
template <bool GroupIsWarp>
__device__ __forceinline__ float groupSum(float v, float *smem) {
  v = warpSum(v);
  if constexpr (GroupIsWarp) {
    return v;
  } else {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    __syncthreads(); // smem may still be read from a previous reduction
    if (lane == 0)
      smem[warp] = v;
    __syncthreads();
    v = lane < nw ? smem[lane] : 0.f;
    return warpSum(v);
  }
}
template <bool GroupIsWarp>
__device__ __forceinline__ void groupMaxSum(float &m, float &s, float *smem) {
  warpMaxSum(m, s);
  if constexpr (!GroupIsWarp) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) {
      smem[warp] = m;
      smem[32 + warp] = s;
    }
    __syncthreads();
    m = lane < nw ? smem[lane] : -INFINITY;
    s = lane < nw ? smem[32 + lane] : 0.f;
    warpMaxSum(m, s);
  }
}

/// Status for the kernel launched just before (names the kernel).
inline Status launched(const char *kernel) {
  return cudaCheck(static_cast<int>(cudaGetLastError()), kernel);
}

inline cudaStream_t st(StreamHandle s) { return static_cast<cudaStream_t>(s); }

} // namespace merak::rt::cuda::detail

#endif // MERAK_RT_CUDA_COMMON_CUH
