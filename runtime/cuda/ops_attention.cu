//===- ops_attention.cu - gpu::attention / attentionGrad ------------------===//
//
// The GPU ABI's merak.attention: the flash-attention kernels of
// attention.cu on dense [B, H, T, D] float32 or bf16 operands (the leading dims
// before the last one fold into B, the last one is H). The kernels need
// keys == queries, a head dim of 16, 32, 64 or 128 and 16-byte aligned
// operands, which merak-fuse-attention only forms (and the arena's 256-byte
// offsets give); anything else is a fatal error naming the operand. The
// log-sum-exp (when not read), Delta and unread gradients use the
// context's scratch.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/attention.h"
#include "ops_common.cuh"

#include <cstdlib>

namespace merak::rt::gpu {
using namespace detail;

namespace {
cuda::AttnShape attnShape(const char *what, DT t, const Dims &dq, int64_t keys, double scale,
                          bool causal, bool seqMajor) {
  if (t != DT::F32 && t != DT::BF16)
    fatal((std::string(what) + ": float32 or bf16 tensors only").c_str());
  if (dq.rank < (seqMajor ? 3 : 2))
    fatal((std::string(what) + ": query must have rank >= 2 (3 when seq_major)").c_str());
  cuda::AttnShape s;
  s.T = dq.d[dq.rank - (seqMajor ? 3 : 2)];
  s.D = dq.d[dq.rank - 1];
  if (keys != s.T)
    fatal((std::string(what) + ": " + std::to_string(keys) + " keys for " +
           std::to_string(s.T) + " queries (the CUDA kernel needs as many)")
              .c_str());
  if (scale == 0)
    fatal((std::string(what) + ": scale 0 is not supported on CUDA").c_str());
  s.B = 1;
  for (int32_t i = 0; i + 3 < dq.rank; ++i)
    s.B *= dq.d[i];
  s.H = seqMajor ? dq.d[dq.rank - 2] : dq.rank >= 3 ? dq.d[dq.rank - 3] : 1;
  s.scale = static_cast<float>(scale);
  s.causal = causal;
  return s;
}

/// A dense operand: [B, H, T, D], or [B, T, H, D] (seq_major) read with
/// strides in place.
cuda::AttnOperand dense(const cuda::AttnShape &s, const void *p, bool seqMajor) {
  return seqMajor ? cuda::AttnOperand::bthd(p, s.H, s.T, s.D)
                  : cuda::AttnOperand::bhtd(p, s.H, s.T, s.D);
}

/// `p`, or a scratch buffer of `bytes` when p is null (an unread result).
void *orScratch(void *p, int slot, uint64_t bytes) { return p ? p : scratch(slot, bytes); }

/// MERAK_ATTENTION_TC=1: bf16 attention on the WMMA tensor-core kernels
/// (attention_tc.cu; opt-in until measured against the SIMT ones).
bool tensorCores(DT t) {
  static const bool on = [] {
    const char *e = std::getenv("MERAK_ATTENTION_TC");
    return e && e[0] == '1';
  }();
  return on && t == DT::BF16;
}

/// The kernels' element type (lse and Delta are float32 either way).
cuda::DType kernelType(DT t) { return t == DT::BF16 ? cuda::DType::BF16 : cuda::DType::F32; }
} // namespace

/// The CUDA kernels mask causally only, do not soft-cap, add no bias and
/// drop no probabilities; merak-fuse-attention does not form those for
/// --target cuda.
static void noWindow(const char *what, int64_t window, double softcap, const void *bias,
                     double dropout) {
  if (dropout > 0)
    fatal(
        (std::string(what) + ": attention-probability dropout is not in the CUDA kernels").c_str());
  if (bias)
    fatal((std::string(what) + ": attention with a score bias is not in the CUDA kernels")
              .c_str());
  if (window)
    fatal((std::string(what) + ": sliding-window attention (window " + std::to_string(window) +
           ") is not in the CUDA kernels")
              .c_str());
  if (softcap != 0)
    fatal((std::string(what) + ": soft-capped attention is not in the CUDA kernels").c_str());
}

void attention(DT t, const void *q, const Dims &dq, const void *k, const void *v, int64_t keys,
               double scale, bool causal, void *o, void *lse, bool seqMajor, int64_t window,
               double softcap, const void *bias, const Dims &, double dropout, int64_t,
               const Dims &, const Dims &) {
  noWindow("attention", window, softcap, bias, dropout);
  cuda::AttnShape s = attnShape("attention", t, dq, keys, scale, causal, seqMajor);
  s.tensorCores = tensorCores(t);
  const uint64_t rows = static_cast<uint64_t>(s.B * s.H * s.T);
  float *l = static_cast<float *>(orScratch(lse, 0, rows * sizeof(float)));
  if (Status st = cuda::attentionForward(kernelType(t), s, dense(s, q, seqMajor),
                                         dense(s, k, seqMajor), dense(s, v, seqMajor),
                                         dense(s, o, seqMajor), l, stream());
      !st.ok())
    fatal(("attention: " + st.message()).c_str());
}

void attentionGrad(DT t, const void *q, const Dims &dq, const void *k, const void *v, int64_t keys,
                   const void *o, const void *lse, const void *dout, double scale, bool causal,
                   void *dqOut, void *dk, void *dv, bool seqMajor, int64_t window, double softcap,
                   const void *bias, const Dims &, void *, double dropout, int64_t, const Dims &,
                   const Dims &, const void *lseGrad) {
  noWindow("attention_grad", window, softcap, bias, dropout);
  cuda::AttnShape s = attnShape("attention_grad", t, dq, keys, scale, causal, seqMajor);
  s.tensorCores = tensorCores(t);
  const uint64_t rows = static_cast<uint64_t>(s.B * s.H * s.T);
  const uint64_t bytes = rows * static_cast<uint64_t>(s.D) * (t == DT::BF16 ? 2 : 4);
  auto *delta = static_cast<float *>(scratch(0, rows * sizeof(float)));
  if (Status st = cuda::attentionBackward(
          kernelType(t), s, dense(s, q, seqMajor), dense(s, k, seqMajor), dense(s, v, seqMajor),
          dense(s, o, seqMajor), dense(s, dout, seqMajor), static_cast<const float *>(lse), delta,
          dense(s, orScratch(dqOut, 1, bytes), seqMajor),
          dense(s, orScratch(dk, 2, bytes), seqMajor), dense(s, orScratch(dv, 3, bytes), seqMajor),
          stream(), static_cast<const float *>(lseGrad));
      !st.ok())
    fatal(("attention_grad: " + st.message()).c_str());
}

} // namespace merak::rt::gpu
