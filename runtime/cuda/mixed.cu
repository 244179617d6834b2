//===- mixed.cu - fp32 <-> bf16 casts over many segments in one launch -----===//
#include "common.cuh"
#include "merak_rt/cuda/mixed.h"

#include <string>

namespace merak::rt::cuda {
namespace {
using namespace detail;

struct CastArgs {
  CastSegment seg[kMaxCastSegments];
  int64_t blockStart[kMaxCastSegments + 1];
  int count;
  bool accumulate;
};

/// Eight elements as floats (two 16-byte loads for fp32, one for bf16).
__device__ __forceinline__ void load8(const float *p, float (&v)[8]) {
  float a[4], b[4];
  load16(p, a);
  load16(p + 4, b);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    v[i] = a[i], v[4 + i] = b[i];
}
__device__ __forceinline__ void load8(const bf16 *p, float (&v)[8]) {
  load16(p, v);
}
__device__ __forceinline__ void store8(float *p, const float (&v)[8]) {
  const float a[4] = {v[0], v[1], v[2], v[3]};
  const float b[4] = {v[4], v[5], v[6], v[7]};
  store16(p, a);
  store16(p + 4, b);
}
__device__ __forceinline__ void store8(bf16 *p, const float (&v)[8]) {
  store16(p, v);
}

template <typename S, typename D>
__global__ void __launch_bounds__(256) castKernel(const CastArgs a) {
  // The segment of this block: the last start <= blockIdx.x.
  int lo = 0, hi = a.count - 1;
  const int64_t blk = blockIdx.x;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.blockStart[mid] <= blk)
      lo = mid;
    else
      hi = mid - 1;
  }
  const CastSegment sg = a.seg[lo];
  const int64_t begin = (blk - a.blockStart[lo]) * kCastChunk;
  const int64_t end = min(sg.n, begin + kCastChunk);
  const S *src = static_cast<const S *>(sg.src);
  D *dst = static_cast<D *>(sg.dst);
  const bool vec =
      ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) &
       15) == 0;
  int64_t i = begin;
  if (vec) {
    const int64_t vend = begin + ((end - begin) / 8) * 8;
    for (int64_t j = begin + 8 * int64_t(threadIdx.x); j < vend;
         j += 8 * int64_t(blockDim.x)) {
      float v[8];
      load8(src + j, v);
      if (a.accumulate) {
        float o[8];
        load8(dst + j, o);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          v[e] += o[e];
      }
      store8(dst + j, v);
    }
    i = vend;
  }
  for (int64_t j = i + threadIdx.x; j < end; j += blockDim.x) {
    float v = toF(src[j]);
    if (a.accumulate)
      v += toF(dst[j]);
    dst[j] = fromF<D>(v);
  }
}

template <typename S, typename D>
Status launchCast(const CastArgs &a, int64_t blocks, cudaStream_t stream) {
  castKernel<S, D><<<unsigned(blocks), 256, 0, stream>>>(a);
  return launched("cast kernel");
}

} // namespace

std::vector<int64_t> castBlockOffsets(const CastSegment *segs, int count) {
  std::vector<int64_t> off(size_t(count) + 1, 0);
  for (int i = 0; i < count; ++i)
    off[i + 1] = off[i] + (segs[i].n + kCastChunk - 1) / kCastChunk;
  return off;
}

Status castSegments(DType from, DType to, const CastSegment *segs, int count,
                    bool accumulate, StreamHandle stream) {
  if (count < 0 || (count > 0 && !segs))
    return Status::error("cast: bad segment list");
  if (accumulate && to != DType::F32)
    return Status::error("cast: accumulation needs an fp32 destination");
  for (int i = 0; i < count; ++i) {
    if (segs[i].n < 0)
      return Status::error("cast: segment " + std::to_string(i) +
                           " has a negative size");
    if (segs[i].n > 0 && (!segs[i].src || !segs[i].dst))
      return Status::error("cast: segment " + std::to_string(i) +
                           " has a null pointer");
  }
  for (int first = 0; first < count; first += kMaxCastSegments) {
    CastArgs a{};
    int n = 0;
    // Empty segments are dropped (they own no block).
    for (int i = first; i < count && i < first + kMaxCastSegments; ++i)
      if (segs[i].n > 0)
        a.seg[n++] = segs[i];
    if (n == 0)
      continue;
    a.count = n;
    a.accumulate = accumulate;
    const std::vector<int64_t> off = castBlockOffsets(a.seg, n);
    for (int i = 0; i <= n; ++i)
      a.blockStart[i] = off[i];
    const int64_t blocks = off[n];
    if (blocks > int64_t(INT32_MAX))
      return Status::error("cast: too many elements for one launch");
    cudaStream_t s = st(stream);
    const Status r =
        from == DType::F32 && to == DType::BF16
            ? launchCast<float, bf16>(a, blocks, s)
        : from == DType::BF16 && to == DType::F32
            ? launchCast<bf16, float>(a, blocks, s)
        : from == DType::F32 ? launchCast<float, float>(a, blocks, s)
                             : launchCast<bf16, bf16>(a, blocks, s);
    if (!r.ok())
      return r;
  }
  return Status::success();
}

namespace {
__global__ void __launch_bounds__(256)
    scaleBf16Kernel(const bf16 *x, bf16 *y, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromF<bf16>(toF(x[i]) * s);
}
} // namespace

Status scaleBf16(const void *src, void *dst, int64_t n, float scale,
                 StreamHandle stream) {
  if (n <= 0)
    return Status::success();
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535);
  scaleBf16Kernel<<<int(blocks), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const bf16 *>(src), static_cast<bf16 *>(dst), n, scale);
  return cudaCheck(int(cudaGetLastError()), "scaleBf16 launch");
}

Status castF32ToBf16(const float *src, void *dst, int64_t n,
                     StreamHandle stream) {
  const CastSegment s{src, dst, n};
  return castSegments(DType::F32, DType::BF16, &s, 1, false, stream);
}

Status accumulateBf16ToF32(const void *g, float *acc, int64_t n,
                           bool overwrite, StreamHandle stream) {
  const CastSegment s{g, acc, n};
  return castSegments(DType::BF16, DType::F32, &s, 1, !overwrite, stream);
}

} // namespace merak::rt::cuda
