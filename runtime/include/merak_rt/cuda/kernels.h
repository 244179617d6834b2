//===- kernels.h - CUDA kernels of the runtime (sm_90) ------------*- C++ -*-===//
//
// Launchers for the CUDA backend's kernels. Pointers are device pointers
// (usually into the Arena), sizes are elements, tensors are dense row-major;
// element type F32 (float) or BF16 (__nv_bfloat16, stored as uint16_t bits)
// per `DType`; statistics, losses, optimizer state and parameter gradients
// that are reduced across rows are always float32. Every launcher is
// asynchronous on `stream` and returns an error only for bad arguments or a
// failed launch (message names the kernel and the CUDA error). Arithmetic is
// in float32 (bf16 values are widened on load, rounded on store).
//
// Semantics follow the CPU backend's kernels.h / ops.h of the same name,
// which the GPU tests (merak_cuda_kernel_tests) compare against.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_KERNELS_H
#define MERAK_RT_CUDA_KERNELS_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

#include <cstdint>

namespace merak::rt::cuda {

// --- elementwise --------------------------------------------------------------

enum class Unary : int32_t {
  Relu, Gelu, GeluTanh, Tanh, Sigmoid, Exp, Neg, Abs, Sqrt, Rsqrt
};
/// y[i] = op(x[i]) for n elements (as cpu::unary; NaN propagates through
/// Relu); y may alias x.
Status unary(Unary op, DType t, const void *x, void *y, int64_t n,
             StreamHandle stream);

enum class Binary : int32_t { Add, Sub, Mul, Div, Max, Min };
/// out = a op b, a (da) and b (db) broadcast numpy-style to dout (as
/// cpu::binary; Max/Min propagate NaN); out may alias an operand of shape
/// dout.
Status binary(Binary op, DType t, const void *a, const Dims &da, const void *b,
              const Dims &db, void *out, const Dims &dout, StreamHandle stream);

/// dx = dy * gelu'(x) (exact erf form, or tanh form); dx may alias dy.
Status geluBackward(DType t, const void *x, const void *dy, void *dx,
                    int64_t n, bool tanhApprox, StreamHandle stream);

/// Fused bias + GELU (the MLP's first activation): y = gelu(x + bias) over
/// x[rows, cols] with bias[cols] (exact erf form, or tanh form). y may alias
/// x.
Status biasGeluForward(DType t, const void *x, const void *bias, void *y,
                       int64_t rows, int64_t cols, bool tanhApprox,
                       StreamHandle stream);
/// Its backward: dx = dy * gelu'(x + bias) (type t; may alias dy) and, when
/// dbias (float [cols], overwritten) is not null, dbias = sum over rows of dx.
Status biasGeluBackward(DType t, const void *x, const void *bias,
                        const void *dy, void *dx, float *dbias, int64_t rows,
                        int64_t cols, bool tanhApprox, StreamHandle stream);

// --- softmax ------------------------------------------------------------------

/// y = softmax(x) (or log-softmax) along rows of [rows, cols]; y may alias x.
Status softmaxForward(bool isLog, DType t, const void *x, void *y,
                      int64_t rows, int64_t cols, StreamHandle stream);
/// dx = y * (dy - sum(dy*y)) (softmax) or dy - exp(y) * sum(dy) (log), y the
/// forward output; dx may alias dy.
Status softmaxBackward(bool isLog, DType t, const void *y, const void *dy,
                       void *dx, int64_t rows, int64_t cols,
                       StreamHandle stream);

// --- layer norm ---------------------------------------------------------------

/// As cpu::layerNormForward. scale/bias ([cols], type t) may be null; mean
/// and rstd ([rows], float) may be null.
Status layerNormForward(DType t, const void *x, const void *scale,
                        const void *bias, void *y, float *mean, float *rstd,
                        int64_t rows, int64_t cols, float eps,
                        StreamHandle stream);
/// As cpu::layerNormBackward, from the saved mean/rstd (float). dx (type t)
/// may be null; dscale/dbias ([cols], float, overwritten) may be null.
Status layerNormBackward(DType t, const void *x, const void *scale,
                         const float *mean, const float *rstd, const void *dy,
                         void *dx, float *dscale, float *dbias, int64_t rows,
                         int64_t cols, StreamHandle stream);

// --- embedding ----------------------------------------------------------------

/// out[i, :] = table[ids[i], :] for n ids (int64) into table[vocab, dim];
/// an id outside [0, vocab) gives a zero row and increments *badIds (a
/// device int, may be null).
Status embeddingForward(DType t, const void *table, int64_t vocab, int64_t dim,
                        const int64_t *ids, int64_t n, void *out, int *badIds,
                        StreamHandle stream);
/// dtable[ids[i], :] += dy[i, :] (float32 atomics, so the summation order of
/// repeated ids is not deterministic); dtable is zeroed first unless
/// `accumulate`. Out-of-range ids are skipped.
Status embeddingBackward(DType t, const void *dy, const int64_t *ids,
                         int64_t n, int64_t dim, float *dtable, int64_t vocab,
                         bool accumulate, StreamHandle stream);

// --- cross entropy ------------------------------------------------------------

/// Fused log-softmax + NLL over the vocabulary, one online max/sum pass per
/// row: lossPerRow[r] = logsumexp(logits[r]) - logits[r, labels[r]], 0 for
/// ignoreIndex, NaN for a label out of range. When meanOut (device float) is
/// not null it receives the mean over non-ignored rows (0 if none) and
/// countOut (device float, may be null) their number.
Status crossEntropyForward(DType t, const void *logits, const int64_t *labels,
                           float *lossPerRow, float *meanOut, float *countOut,
                           int64_t rows, int64_t classes, int64_t ignoreIndex,
                           StreamHandle stream);
/// dlogits = (softmax(logits) - onehot(label)) * scale, divided by *divisor
/// when divisor (a device float, e.g. the forward's countOut; 0 counts as 1)
/// is not null; 0 on ignored rows. dlogits may alias logits.
Status crossEntropyBackward(DType t, const void *logits, const int64_t *labels,
                            void *dlogits, int64_t rows, int64_t classes,
                            float scale, const float *divisor,
                            int64_t ignoreIndex, StreamHandle stream);

// --- optimizer ----------------------------------------------------------------

/// One AdamW step over a flat float32 parameter buffer, exactly as
/// cpu::adamwStep (step counted from 1). When pBf16 is not null it also
/// receives the updated parameters rounded to bf16 (the compute copy).
Status adamwStep(float *p, const float *g, float *m, float *v, int64_t n,
                 float lr, float beta1, float beta2, float eps,
                 float weightDecay, int64_t step, void *pBf16,
                 StreamHandle stream);

/// Adan hyper-parameters (Xie et al., "Adan: Adaptive Nesterov Momentum",
/// 2022); betas as in the paper's reference implementation (0.98, 0.92,
/// 0.99).
struct AdanParams {
  float lr = 1e-3f;
  float beta1 = 0.98f, beta2 = 0.92f, beta3 = 0.99f;
  float eps = 1e-8f;
  float weightDecay = 0.f;
  /// true: decoupled decay p *= 1 - lr*wd before the update; false: the
  /// proximal form p = (p - lr*update) / (1 + lr*wd).
  bool noProx = false;
};
/// One Adan step over a flat float32 buffer, in place, step counted from 1.
/// m, d (the difference momentum), v and prevG are float32 state of n
/// elements; on step 1 the gradient difference is 0 (prevG is only
/// written). Per element, with diff = g - prevG:
///   m = b1*m + (1-b1)*g;  d = b2*d + (1-b2)*diff
///   u = g + b2*diff;      v = b3*v + (1-b3)*u*u
///   upd = (m/bc1 + b2*d/bc2) / (sqrt(v)/sqrt(bc3) + eps),  bcK = 1-bK^step
///   then the decay/update per noProx, and prevG = g.
/// pBf16 (may be null) receives the new parameters rounded to bf16.
Status adanStep(float *p, const float *g, float *m, float *d, float *v,
                float *prevG, int64_t n, const AdanParams &hp, int64_t step,
                void *pBf16, StreamHandle stream);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_KERNELS_H
