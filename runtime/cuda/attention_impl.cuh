//===- attention_impl.cuh - Shared pieces of the attention kernels -*- CUDA -*-===//
//
// Internal to runtime/cuda: the argument structs and constants shared by the
// SIMT kernels (attention.cu) and the tensor-core forward (attention_tc.cu).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_ATTENTION_IMPL_CUH
#define MERAK_RT_CUDA_ATTENTION_IMPL_CUH

#include "common.cuh"
#include "merak_rt/cuda/attention.h"

namespace merak::rt::cuda::detail {

constexpr int kTile = 64; // queries and keys per tile
constexpr float kLog2e = 1.4426950408889634f;

/// A read-only [B, H, T, D] view (d stride 1) and its writable twin.
struct AttnView {
  const void *p;
  int64_t sB, sH, sT;
};
struct AttnWView {
  void *p;
  int64_t sB, sH, sT;
};

struct AttnFwdArgs {
  AttnView q, k, v;
  AttnWView o;
  float *lse;
  int H, T;
  float scaleLog2; // scale * log2(e)
  bool causal;
};

struct AttnBwdArgs {
  AttnView q, k, v, dO;
  const float *lse, *delta;
  AttnWView dq, dk, dv;
  int H, T;
  float scale, scaleLog2;
  bool causal;
};

/// The tensor-core kernels (attention_tc.cu): bf16, D 64 or 128. The
/// backward expects Delta already computed (attnDeltaKernel).
bool attentionTcSupported(DType t, int64_t D);
Status attentionForwardTc(const AttnFwdArgs &a, int64_t BH, int D,
                          cudaStream_t stream);
Status attentionBackwardTc(const AttnBwdArgs &a, int64_t BH, int D,
                           cudaStream_t stream);

} // namespace merak::rt::cuda::detail

#endif // MERAK_RT_CUDA_ATTENTION_IMPL_CUH
