//===- attention.h - Fused causal attention (sm_90) ---------------*- C++ -*-===//
//
// Flash-attention style scaled dot-product attention: the T x T scores are
// never written to global memory. Per (batch b, head h) and query row r:
//
//   O[r] = sum_c softmax_c(scale * Q[r].K[c], c <= r when causal) V[c]
//   L[r] = logsumexp_c(scale * Q[r].K[c])            (natural log, float32)
//
// Layout: every operand is a [B, H, T, D] view given by a base pointer and
// element strides for b, h and t (the d stride is 1). Two layouts matter:
//  * AttnOperand::bhtd: dense [B, H, T, D] (what a separate q/k/v gives);
//  * AttnOperand::packedQKV: GPT-2's fused projection output [B, T, 3*C]
//    (C = H*D; q at column 0, k at C, v at 2C) read in place, and
//    AttnOperand::bthd: [B, T, H*D] (the output layout the out-projection
//    reads), so no transpose kernel is needed around attention.
// L (and the backward's Delta workspace) is dense float32 [B, H, T].
//
// Element types F32 and BF16 (values widened to float32; every product,
// softmax statistic and accumulator is float32; outputs rounded once).
// Head dims D in {16, 32, 64, 128}; any T >= 1. Pointers must be 16-byte
// aligned and the b/h/t strides multiples of 16 bytes' worth of elements
// (4 fp32, 8 bf16) so that tiles load with 16-byte vector loads.
//
// Implementation (attention.cu): SIMT, float32 FMA (tensor cores only for
// the opt-in bf16 kernels, AttnShape::tensorCores).
// 64-query x 64-key tiles, 256 threads, each thread a 4x4 block of scores
// and a 4 x D/16 block of the accumulator; tiles are stored transposed in
// shared memory ([d][token], token contiguous) so the inner loops read
// 16-byte vectors; online softmax in the exp2 domain. The backward is
// FlashAttention-2's split: one kernel per key tile accumulates dK and dV
// over the query tiles, one per query tile accumulates dQ (no atomics, so it
// is deterministic), each recomputing P from L.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_ATTENTION_H
#define MERAK_RT_CUDA_ATTENTION_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

#include <cstdint>
#include <initializer_list>
#include <utility>

namespace merak::rt::cuda {

/// A [B, H, T, D] view: element (b, h, t, d) is
/// data[b*strideB + h*strideH + t*strideT + d].
struct AttnOperand {
  void *data = nullptr;
  int64_t strideB = 0, strideH = 0, strideT = 0;

  /// Dense [B, H, T, D].
  static AttnOperand bhtd(const void *p, int64_t H, int64_t T, int64_t D);
  /// [B, T, H*D] (heads side by side in a row).
  static AttnOperand bthd(const void *p, int64_t H, int64_t T, int64_t D);
  /// Part `which` (0 q, 1 k, 2 v) of a packed [B, T, 3*H*D] qkv tensor of
  /// element type t.
  static AttnOperand packedQKV(const void *p, DType t, int which, int64_t H,
                               int64_t T, int64_t D);
};

struct AttnShape {
  int64_t B = 1, H = 1, T = 1, D = 64;
  /// Multiplies Q.K; 0 means 1/sqrt(D).
  float scale = 0.f;
  bool causal = true;
  /// bf16, D 64 or 128: the tensor-core kernels (attention_tc.cu: WMMA
  /// 16x16x16 bf16 products with fp32 accumulation for S = QK^T, O += PV
  /// and the backward's S, dP, dV, dK and dQ products; softmax and dS in
  /// fp32 on shared memory, P and dS rounded to bf16 for the products).
  /// Opt-in while they have not been measured against the SIMT kernels on
  /// a GPU; ignored for fp32 and other head dims.
  bool tensorCores = false;
};

/// Host-side check of a call's arguments (no device needed): sizes, the
/// supported head dims, null pointers, 16-byte alignment of every operand's
/// base and strides. The message names the operand ("attention: k: stride
/// 3 (elements) is not a multiple of 8 (16 bytes of bf16)").
Status checkAttention(DType t, const AttnShape &s,
                      std::initializer_list<std::pair<const char *,
                                                      AttnOperand>> ops);

/// Forward: O and L (float32 [B, H, T]) from Q, K, V.
Status attentionForward(DType t, const AttnShape &s, const AttnOperand &q,
                        const AttnOperand &k, const AttnOperand &v,
                        const AttnOperand &o, float *lse, StreamHandle stream);

/// Backward: dQ, dK, dV (type t, overwritten) from Q, K, V, O, dO and the
/// forward's L. `delta` is a float32 [B, H, T] workspace that first receives
/// Delta[r] = sum_d dO[r,d] * O[r,d] (a small kernel; less lseGrad[r], the
/// gradient of L, when not null), then feeds both gradient kernels.
Status attentionBackward(DType t, const AttnShape &s, const AttnOperand &q, const AttnOperand &k,
                         const AttnOperand &v, const AttnOperand &o, const AttnOperand &dO,
                         const float *lse, float *delta, const AttnOperand &dq,
                         const AttnOperand &dk, const AttnOperand &dv, StreamHandle stream,
                         const float *lseGrad = nullptr);

/// FLOPs of one forward (4*B*H*D * number of (query, key) pairs attended:
/// T*(T+1)/2 causal, T*T otherwise); the backward is 2.5x that (5 GEMM-like
/// products instead of 2; the recomputation of P in the dQ kernel is not
/// counted, as in FlashAttention's reporting).
double attentionForwardFlops(const AttnShape &s);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_ATTENTION_H
