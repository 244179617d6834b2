//===- kernels.h - CPU compute kernels (float32) -----------------*- C++ -*-===//
//
// The CPU backend's compute kernels: GEMM (OpenBLAS), softmax, log-softmax,
// layer norm, GELU, cross entropy and the AdamW update, each forward and
// backward where a training program needs it.
//
// Conventions for every kernel:
//  - plain float32 pointers and int64 sizes; tensors are dense and row-major;
//    a "row" is the last (contiguous) dimension, `rows` the product of the
//    others;
//  - no allocation, no exceptions, no virtual calls; the caller owns every
//    buffer, and input and output buffers must not overlap unless a kernel
//    says so;
//  - reductions (sums over a row or over rows) are accumulated in double;
//  - row loops run as OpenMP `parallel for` when the work is large enough
//    (when the runtime is built with OpenMP); GEMM runs single-threaded
//    OpenBLAS calls on shape-determined blocks under OpenMP, so results do
//    not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_KERNELS_H
#define MERAK_RT_KERNELS_H

#include <cstdint>

namespace merak::rt::cpu {

// --- GEMM ---------------------------------------------------------------------

/// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, where op(A) is
/// [M,K] (A stored [M,K], or [K,M] when transA) and op(B) is [K,N] (B stored
/// [K,N], or [N,K] when transB). beta == 0 overwrites C (NaNs in C do not
/// propagate). M, N or K may be 0.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C);

/// Whether a float GEMM call runs in OpenBLAS's sgemm where oneDNN's is
/// present too. On the x86 cores measured (bench/README.md, "Which sgemm";
/// bench/sgemm_choice.cpp checks it) oneDNN 2.6's is the faster or even
/// except in two places, where it ran at about half OpenBLAS's rate:
///  - it reads A transposed over a long contraction (A^T B or A^T B^T with
///    K >= 512: weight gradients over many tokens, a convolution's input
///    gradient over many channels);
///  - A B, A^T B or A^T B^T with a stored operand whose rows are a multiple
///    of 512 floats (2 KiB) apart: a 256-row block of an activation
///    gradient dY W with W [., 1024], an attention tile of a [T, H*D]
///    tensor with H*D = 1024 or 4096. (A B^T, both operands read along
///    their rows, was not slowed; below K = 32, a recurrent step's product
///    over the batch, OpenBLAS's is the slower one either way.)
/// lda and ldb are the stored operands' row strides in elements. By shape
/// alone, so C does not depend on the thread count.
inline bool sgemmPrefersOpenBlas(bool transA, bool transB, int64_t K, int64_t lda, int64_t ldb) {
  if (transA && K >= 512)
    return true;
  const bool productWithBt = !transA && transB;
  return !productWithBt && K >= 32 && (lda % 512 == 0 || ldb % 512 == 0);
}

/// One GEMM as above on strided rows: row i of the stored A starts at
/// A + i*lda (likewise B, ldb and C, ldc), so a product can read and write
/// a sub-matrix of a larger row-major tensor (an attention head's rows of
/// a [T, H, D] tensor, ld H*D) in place. One single-threaded call, for use
/// inside a parallel loop; the same result as gemm() of the packed copies.
void gemmStrided(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc);

/// `batch` independent GEMMs as above; operand i of batch b starts at
/// A + b*strideA, B + b*strideB, C + b*strideC (in elements). A stride of 0
/// broadcasts that operand (must not be 0 for C when batch > 1).
void batchedGemm(bool transA, bool transB, int64_t batch, int64_t M,
                 int64_t N, int64_t K, float alpha, const float *A,
                 int64_t strideA, const float *B, int64_t strideB, float beta,
                 float *C, int64_t strideC);

// --- softmax ------------------------------------------------------------------

/// y = softmax(x) along each row of [rows, cols] (max-subtracted, so any
/// finite input is safe). y may alias x.
void softmaxForward(const float *x, float *y, int64_t rows, int64_t cols);

/// dx = y * (dy - sum_j(dy_j * y_j)) per row, y the forward output.
/// dx may alias dy.
void softmaxBackward(const float *y, const float *dy, float *dx, int64_t rows,
                     int64_t cols);

/// y = x - max - log(sum exp(x - max)) per row. y may alias x.
void logSoftmaxForward(const float *x, float *y, int64_t rows, int64_t cols);

/// dx = dy - exp(y) * sum_j(dy_j) per row, y the forward output.
/// dx may alias dy.
void logSoftmaxBackward(const float *y, const float *dy, float *dx,
                        int64_t rows, int64_t cols);

// --- layer norm ---------------------------------------------------------------

/// Normalizes each row of x[rows, cols]:
///   mean = sum(x)/cols, var = sum((x-mean)^2)/cols (biased),
///   rstd = 1/sqrt(var + eps), y = (x - mean) * rstd * scale + bias.
/// scale and bias ([cols]) may be null (meaning 1 and 0). mean and rstd
/// ([rows]) receive the saved statistics for the backward; either may be null.
void layerNormForward(const float *x, const float *scale, const float *bias,
                      float *y, float *mean, float *rstd, int64_t rows,
                      int64_t cols, float eps);

/// The backward of layerNormForward, from the saved mean and rstd:
///   xhat = (x - mean) * rstd, g = dy * scale,
///   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),
///   dscale[j] = sum_rows(dy * xhat), dbias[j] = sum_rows(dy).
/// dscale and dbias are overwritten (not added to); each may be null, and
/// scale may be null (meaning 1). dx may be null (only parameter grads).
void layerNormBackward(const float *x, const float *scale, const float *mean,
                       const float *rstd, const float *dy, float *dx,
                       float *dscale, float *dbias, int64_t rows,
                       int64_t cols);

// --- GELU ---------------------------------------------------------------------

/// y = 0.5 * x * (1 + erf(x / sqrt(2))) (the exact form), n elements.
/// y may alias x.
void geluForward(const float *x, float *y, int64_t n);

/// dx = dy * (Phi(x) + x * phi(x)), Phi/phi the standard normal CDF/density.
/// dx may alias dy.
void geluBackward(const float *x, const float *dy, float *dx, int64_t n);

// --- cross entropy ------------------------------------------------------------

/// Per row r of logits[rows, classes] with target labels[r]:
///   loss[r] = logsumexp(logits[r, :]) - logits[r, labels[r]],
/// 0 where labels[r] == ignoreIndex. Writes lossPerRow[r] when it is not
/// null and returns the mean over the non-ignored rows (0 when every row is
/// ignored; PyTorch would give NaN). A label outside [0, classes) that is not
/// ignoreIndex gives NaN for that row (and so for the mean).
float crossEntropyForward(const float *logits, const int64_t *labels,
                          float *lossPerRow, int64_t rows, int64_t classes,
                          int64_t ignoreIndex = -100);

/// dlogits = (softmax(logits) - onehot(labels)) * scale per row, and 0 on
/// rows whose label is ignoreIndex. For the mean loss pass
/// scale = upstream_grad / (number of non-ignored rows). dlogits may alias
/// logits.
void crossEntropyBackward(const float *logits, const int64_t *labels,
                          float *dlogits, int64_t rows, int64_t classes,
                          float scale, int64_t ignoreIndex = -100);

// --- optimizer ----------------------------------------------------------------

/// One AdamW step on n parameters, in place, exactly as torch.optim.AdamW
/// (non-amsgrad, non-maximize) with step counted from 1 (the first call
/// passes step = 1):
///   p *= 1 - lr * weightDecay
///   m = beta1 * m + (1 - beta1) * g
///   v = beta2 * v + (1 - beta2) * g^2
///   p -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
void adamwStep(float *p, const float *g, float *m, float *v, int64_t n,
               float lr, float beta1, float beta2, float eps,
               float weightDecay, int64_t step);

} // namespace merak::rt::cpu

#endif // MERAK_RT_KERNELS_H
