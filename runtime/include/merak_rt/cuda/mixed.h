//===- mixed.h - Mixed-precision support kernels (sm_90) ----------*- C++ -*-===//
//
// The bf16 policy (docs/design/runtime.md, "Mixed precision"): fp32 master
// weights and optimizer state, bf16 copies of the weights for the forward and
// backward, bf16 activation gradients, parameter gradients accumulated in
// fp32. These kernels move data between the two precisions:
//
//  * castSegments: many (src, dst, n) segments -- e.g. every parameter
//    tensor -- converted in one launch (up to kMaxCastSegments per launch;
//    more are split into several launches), optionally accumulating into an
//    fp32 destination (dst += src): fp32 master -> bf16 compute copy, and
//    bf16 gradients -> fp32 accumulators across micro-batches.
//  * castF32ToBf16 / accumulateBf16ToF32: the flat-buffer forms.
//
// Rounding is round-to-nearest-even (as floatToBf16 on the host); NaN stays
// NaN. Segments must not overlap each other's destinations.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_MIXED_H
#define MERAK_RT_CUDA_MIXED_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

#include <cstdint>
#include <vector>

namespace merak::rt::cuda {

struct CastSegment {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t n = 0; // elements
};
constexpr int kMaxCastSegments = 64;
/// Elements one block of the cast kernel handles.
constexpr int64_t kCastChunk = 8192;

/// Block offsets of a multi-segment launch: entry i is the first block of
/// segment i (ceil(n / kCastChunk) blocks each, 0 for an empty segment); the
/// last entry is the total. Host-only, unit-tested.
std::vector<int64_t> castBlockOffsets(const CastSegment *segs, int count);

/// dst_i = cast<to>(src_i) for every segment, or dst_i += src_i when
/// `accumulate` (then `to` must be F32). Asynchronous on `stream`.
Status castSegments(DType from, DType to, const CastSegment *segs, int count,
                    bool accumulate, StreamHandle stream);

/// dst[n] (bf16) = src[n] (fp32), rounded to nearest even.
Status castF32ToBf16(const float *src, void *dst, int64_t n,
                     StreamHandle stream);
/// dst[n] (bf16) = src[n] * scale computed in fp32, rounded once to nearest
/// even (a bf16 mean: a bf16 sum divided by the group size); in place when
/// dst == src.
Status scaleBf16(const void *src, void *dst, int64_t n, float scale,
                 StreamHandle stream);
/// acc[n] (fp32) += g[n] (bf16), or acc = g when `overwrite`.
Status accumulateBf16ToF32(const void *g, float *acc, int64_t n,
                           bool overwrite, StreamHandle stream);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_MIXED_H
