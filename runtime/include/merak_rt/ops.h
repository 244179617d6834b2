//===- ops.h - Tensor-level CPU kernels called by generated code -*- C++ -*-===//
//
// The ABI between merak-compile's generated host code and the CPU runtime:
// one entry point per merak dialect op family. The generated code (see
// lib/Conversion/MerakToEmitC) passes buffer pointers into the arena, the
// parameter storage or the constant data, and shapes as `Dims` values built
// in place; every entry point has exactly the semantics of the merak op of
// the same name (docs/dialect.md), which lib/Evaluator implements in double
// precision as the reference.
//
// Conventions:
//  - tensors are dense, row-major, of element type `DType`: F32 (float),
//    I64 (int64_t), I32 (int32_t), BOOL (uint8_t, 0 or 1), F64 (double);
//  - shapes have rank <= kMaxRank; a rank-0 shape is a scalar (1 element);
//  - outputs never alias inputs unless the entry point says so;
//  - no allocation on the hot path except where noted (GEMM packing is
//    OpenBLAS's; conv2d's im2col buffer, gatherGrad's index buckets and a
//    few per-thread accumulators are grow-only thread-local scratch, so
//    they allocate only when a call needs more than any earlier one), no
//    exceptions; a bad index (gather) calls fatal() with the
//    op's name, which prints and exits non-zero;
//  - binary-op operands broadcast numpy-style to the output shape (the
//    compiler has checked the shapes); the kernels special-case equal shapes,
//    scalars and suffix ("row") broadcasting, and fall back to strided loops.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_OPS_H
#define MERAK_RT_OPS_H

#include <cstdint>

namespace merak::rt::cpu {

constexpr int kMaxRank = 8;

/// A shape or a small list of integers (perm, axes, starts, ...), built in
/// place by generated code: `Dims{3, {4, 32, 64}}`.
struct Dims {
  int32_t rank = 0;
  int64_t d[kMaxRank] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int32_t i = 0; i < rank; ++i)
      n *= d[i];
    return n;
  }
};

/// BF16 (bfloat16, stored as the upper 16 bits of a float32) is a storage
/// type of mixed precision (merak-mixed-precision): cast, matmul and the
/// data movement ops take it; arithmetic kernels do not.
enum class DT : int32_t { F32 = 0, F64 = 1, I64 = 2, I32 = 3, BOOL = 4, BF16 = 5 };

/// Bytes per element of `t`.
int64_t elemSize(DT t);

/// Prints "merak runtime: <what>" to stderr and exits with status 3.
[[noreturn]] void fatal(const char *what);

// --- elementwise ----------------------------------------------------------------

enum class Unary : int32_t {
  Exp, Log, Sqrt, Rsqrt, Tanh, Erf, Sigmoid, Reciprocal, Sin, Cos, Floor,
  Ceil, Relu, Neg, Abs, Sign, Not, Gelu, LeakyRelu, Clamp,
  GeluTanh // gelu with approximate_tanh
};

/// y[i] = op(x[i]) for n elements of type t. `a`, `b`: LeakyRelu's alpha;
/// Clamp's min and max (use -inf/+inf for a missing bound). Float ops take
/// F32/F64; Neg, Abs, Sign, Relu, Clamp also I64/I32; Not takes BOOL.
/// y may alias x.
void unary(Unary op, DT t, const void *x, void *y, int64_t n, double a = 0,
           double b = 0);

enum class Binary : int32_t {
  Add, Sub, Mul, Div, Pow, Max, Min, Rem, // numeric -> same type
  Eq, Ne, Lt, Le, Gt, Ge,                 // numeric -> BOOL
  And, Or, Xor                            // BOOL -> BOOL
};

/// out = a op b with numpy broadcasting of da, db to dout. `t` is the
/// operands' type; comparisons write BOOL. Integer Div truncates toward
/// zero, Rem is C fmod-style (sign of the dividend) for floats and integers
/// (as the evaluator's). out may alias an operand whose shape equals dout.
void binary(Binary op, DT t, const void *a, const Dims &da, const void *b,
            const Dims &db, void *out, const Dims &dout);

/// out = cond ? a : b, all three broadcast to dout; cond is BOOL.
void where(const void *cond, const Dims &dc, DT t, const void *a,
           const Dims &da, const void *b, const Dims &db, void *out,
           const Dims &dout);

/// Converts n elements; float -> integer truncates toward zero, anything ->
/// BOOL is x != 0.
void cast(DT from, const void *x, DT to, void *y, int64_t n);

// --- data movement --------------------------------------------------------------

/// Copies n bytes (memcpy, OpenMP-parallel when large).
void copyBytes(void *dst, const void *src, int64_t bytes);

/// y = x broadcast numpy-style from dx to dy.
void broadcastTo(DT t, const void *x, const Dims &dx, void *y, const Dims &dy);

/// y = x with dimensions permuted: y's dim i is x's dim perm.d[i].
void transpose(DT t, const void *x, const Dims &dx, const Dims &perm, void *y);

/// y[i...] = x[starts + i * strides ...] (strides may be negative); dy is the
/// result shape.
void slice(DT t, const void *x, const Dims &dx, const Dims &starts,
           const Dims &strides, void *y, const Dims &dy);

/// Copies x (shape dx) into y (shape dy) at `offset` along `axis`; every
/// other dimension equal. Concat is one call per input; split is one slice
/// per result.
void insertAlongAxis(DT t, const void *x, const Dims &dx, int64_t axis,
                     int64_t offset, void *y, const Dims &dy);

/// ONNX Gather along `axis`: y = data[i..., idx[j...], k...]; indices of
/// type idxT (I64 or I32), negative ones count from the end.
void gather(DT t, const void *data, const Dims &dd, DT idxT, const void *idx,
            const Dims &di, int64_t axis, void *y);

/// The adjoint of gather (float types): y (shape dy, the data's shape) =
/// zeros, then every slice of g added at its index (repeats accumulate).
void gatherGrad(DT t, const void *g, DT idxT, const void *idx, const Dims &di,
                int64_t axis, void *y, const Dims &dy);

/// torch.gather / ONNX GatherElements: y[p] = data[p with p[axis] =
/// idx[p]]; y has idx's shape di.
void gatherElements(DT t, const void *data, const Dims &dd, DT idxT,
                    const void *idx, const Dims &di, int64_t axis, void *y);

/// Its adjoint: y (data's shape dy) = zeros, then y[p with p[axis]=idx[p]]
/// += g[p].
void gatherElementsGrad(DT t, const void *g, DT idxT, const void *idx,
                        const Dims &di, int64_t axis, void *y, const Dims &dy);

// --- reductions ------------------------------------------------------------------

enum class Reduce : int32_t { Sum, Mean, Max, Min, Prod };

/// Reduces x (shape dx) over the sorted, distinct axes; y holds the result
/// in row-major order of the kept dimensions (keepdims does not change the
/// layout). Float sums accumulate in double. An empty axes list copies.
void reduce(Reduce op, DT t, const void *x, const Dims &dx, const Dims &axes,
            void *y);

/// Index (I64) of the max (isMax) or min along `axis`; the first such index,
/// or the last with selectLast.
void argReduce(bool isMax, DT t, const void *x, const Dims &dx, int64_t axis,
               bool selectLast, int64_t *y);

/// Inclusive (or exclusive) cumulative sum along `axis`, optionally
/// reversed — the merak.cumsum attributes.
void cumsum(DT t, const void *x, const Dims &dx, int64_t axis, bool exclusive,
            bool reverse, void *y);

// --- normalisation and activations ------------------------------------------------

/// softmax (or log-softmax when isLog) of x along `axis`.
void softmax(bool isLog, DT t, const void *x, const Dims &dx, int64_t axis,
             void *y);

/// merak.attention (float32, or bf16: widened, the float32 kernel, results
/// rounded once; lse is float32 either way): q is [..., T, D] (dims dq), k and v
/// [..., keys, D] with the same leading dims; o [..., T, D] and lse
/// [..., T] receive softmax(scale q k^T) v (causal: row r sees keys <= r)
/// and the rows' log-sum-exp (lse may be null: not written). Never holds more than a [64, keys] tile of
/// scores per thread.
/// seqMajor: q, k, v and o are [..., T, H, D] (merak.attention's
/// seq_major; dq is then that shape), lse still [..., H, T].
void attention(DT t, const void *q, const Dims &dq, const void *k, const void *v,
               int64_t keys, double scale, bool causal, void *o, void *lse,
               bool seqMajor = false);

/// merak.attention_grad: dq, dk, dv (shaped like q, k, v) from the
/// forward's operands, its o and lse, and dout, the gradient of o (a null
/// gradient pointer: not written).
void attentionGrad(DT t, const void *q, const Dims &dq, const void *k, const void *v,
                   int64_t keys, const void *o, const void *lse, const void *dout,
                   double scale, bool causal, void *dqOut, void *dk, void *dv,
                   bool seqMajor = false);

/// merak.layer_norm: normalises over dims [axis, rank); scale/bias (null when
/// absent) have ds/db shapes that broadcast to the normalised shape.
void layerNorm(DT t, const void *x, const Dims &dx, int64_t axis,
               const void *scale, const Dims &ds, const void *bias,
               const Dims &db, double eps, void *y);

/// merak.rms_norm: x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale.
void rmsNorm(DT t, const void *x, const Dims &dx, int64_t axis,
             const void *scale, const Dims &ds, double eps, void *y);

/// merak.batch_norm over an NC... input, per channel (dim 1); training uses
/// the batch statistics (biased variance), otherwise mean/var.
void batchNorm(DT t, const void *x, const Dims &dx, const void *scale,
               const void *bias, const void *mean, const void *var, double eps,
               bool training, void *y);

/// merak.dropout: identical mask to the evaluator's for the same seed and
/// element index; y = x * mask / (1 - ratio), mask BOOL.
void dropout(DT t, const void *x, int64_t n, double ratio, int64_t seed,
             void *y, void *mask);

/// merak.cross_entropy: logits (class dim at `axis`), labels of type labT
/// with the logits' shape minus the class dim. reduction: 0 none (y has the
/// labels' shape), 1 mean over non-ignored, 2 sum. hasIgnore selects
/// ignoreIndex.
void crossEntropy(DT t, const void *logits, const Dims &dl, int64_t axis,
                  DT labT, const void *labels, int32_t reduction,
                  bool hasIgnore, int64_t ignoreIndex, void *y);

// --- fused backward ops (built by the compiler's VJP rules) ---------------------

/// merak.gelu_grad: dx = dy * gelu'(x) for n elements, the exact (erf) form
/// or with tanhApprox the tanh form. dx may alias dy.
void geluGrad(DT t, const void *x, const void *dy, void *dx, int64_t n,
              bool tanhApprox);

/// merak.softmax_grad (isLog: merak.log_softmax_grad) along `axis` of shape
/// d, from the forward result y: dx = y * (dy - sum(dy * y)), or
/// dx = dy - exp(y) * sum(dy). Sums in double.
void softmaxGrad(bool isLog, DT t, const void *y, const void *dy, const Dims &d,
                 int64_t axis, void *dx);

/// merak.layer_norm_grad over dims [axis, rank) of x (shape dx): xhat =
/// (x - mean) * rstd (rms: x * rstd), g = dy * scale (scale null: 1, else
/// shape ds broadcast to the normalised shape), dxOut = rstd * (g - mean(g)
/// - xhat * mean(g * xhat)) (rms: no mean(g)). dxOut or xhat may be null
/// (not written).
void layerNormGrad(DT t, const void *x, const void *dy, const Dims &dx,
                   int64_t axis, const void *scale, const Dims &ds, double eps,
                   bool rms, void *dxOut, void *xhat);

/// merak.cross_entropy_grad: dlogits (the logits' shape dl) =
/// (softmax(logits) - onehot(labels)) * w along `axis`, w = g[0] (reduction
/// 2, sum), g[0] / #non-ignored (1, mean) or g at the label's position (0,
/// none; g has the labels' shape); 0 where the label is ignoreIndex (when
/// hasIgnore). A label out of range is fatal.
void crossEntropyGrad(DT t, const void *logits, const Dims &dl, int64_t axis,
                      DT labT, const void *labels, const void *g,
                      int32_t reduction, bool hasIgnore, int64_t ignoreIndex,
                      void *dlogits);

// --- fused optimizer updates (merak-optimizer, one call per parameter) -------

/// merak.adamw_update over n elements of type t (F32, F64): G = g * clip[0]
/// (clip null: g), t = step[0] + 1, bias corrections bc1 = 1 - beta1^t,
/// bc2 = 1 - beta2^t and the step size lr[0] / bc1 in double, then per
/// element in t: mOut = beta1 * m + (1 - beta1) * G, vOut = beta2 * v +
/// (1 - beta2) * (G * G), pOut = p * (1 - lr * weightDecay) - (lr / bc1) *
/// (mOut / (sqrt(vOut) / sqrt(bc2) + eps)). lr and clip are scalars of t,
/// step an int64 scalar. Each output may alias its own input (in place).
void adamwUpdate(DT t, const void *p, const void *g, const void *m, const void *v,
                 const void *lr, const void *step, const void *clip, void *pOut,
                 void *mOut, void *vOut, int64_t n, double beta1, double beta2,
                 double eps, double weightDecay);

/// merak.adan_update (Adan, Algorithm 1, m0 = g0, v0 = 0, n0 = g0^2): with
/// G = g * clip[0] and first = step[0] == 0, per element in t:
/// diff = G - prev, mOut = first ? G : (1-b1) m + b1 G, dOut = first ? 0 :
/// (1-b2) d + b2 diff, u = G + (1-b2) diff, nOut = first ? G^2 : (1-b3) nsq
/// + b3 u^2, pOut = (p - lr / (sqrt(nOut) + eps) * (mOut + (1-b2) dOut)) /
/// (1 + weightDecay * lr), prevOut = G. Outputs may alias their inputs.
void adanUpdate(DT t, const void *p, const void *g, const void *m, const void *d,
                const void *nsq, const void *prev, const void *lr, const void *step,
                const void *clip, void *pOut, void *mOut, void *dOut, void *nOut,
                void *prevOut, int64_t n, double beta1, double beta2, double beta3,
                double eps, double weightDecay);

/// merak.sgd_update: with G = g * clip[0], per element in t: D = G +
/// weightDecay * p (G when weightDecay is 0); with a buffer (buf not null)
/// bufOut = momentum * buf + D and the direction nesterov ? D + momentum *
/// bufOut : bufOut, else D; pOut = p - lr[0] * direction. Outputs may alias
/// their inputs.
void sgdUpdate(DT t, const void *p, const void *g, const void *buf, const void *lr,
               const void *clip, void *pOut, void *bufOut, int64_t n, double momentum,
               double weightDecay, bool nesterov);

// --- linear algebra and convolution -----------------------------------------------

/// numpy.matmul of a (da) and b (db) into y (dy); batch dims broadcast, rank-1
/// operands as numpy. F32 through OpenBLAS GEMM; other types by loops.
/// transA / transB (F32, rank >= 2 only: merak.matmul_t): the operand is
/// stored with its last two dimensions swapped (da = [..., K, M], db =
/// [..., N, K]) and read transposed by the GEMM, never copied.
void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db,
            void *y, const Dims &dy, bool transA = false, bool transB = false);
/// As above with the result's type `yt`: t, or F32 for BF16 operands (the
/// float32 accumulation written without rounding to bf16).
void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db,
            void *y, const Dims &dy, bool transA, bool transB, DT yt);

/// Conv2D attributes: strides [sh, sw], padding [top, left, bottom, right],
/// dilations [dh, dw], groups.
struct Conv2DAttrs {
  int64_t sh, sw, pt, pl, pb, pr, dh, dw, groups;
};

/// merak.conv2d: x NCHW (dx), w OIHW (dw), optional bias [O] (null), y (dy).
void conv2d(DT t, const void *x, const Dims &dx, const void *w, const Dims &dw,
            const void *bias, const Conv2DAttrs &a, void *y, const Dims &dy);
/// Gradient w.r.t. the input: g (the forward result's shape dg), w; dx the
/// input shape.
void conv2dBackwardData(DT t, const void *g, const Dims &dg, const void *w,
                        const Dims &dw, const Conv2DAttrs &a, void *dxOut,
                        const Dims &dx);
/// Gradient w.r.t. the weight: x (dx), g (dg); dwOut has shape dw.
void conv2dBackwardFilter(DT t, const void *x, const Dims &dx, const void *g,
                          const Dims &dg, const Conv2DAttrs &a, void *dwOut,
                          const Dims &dw);

/// Pool2D attributes: kernel [kh, kw], strides, padding [t, l, b, r],
/// dilations (max pool only; 1 for avg), ceil_mode, count_include_pad (avg).
struct Pool2DAttrs {
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  bool ceilMode, countIncludePad;
};
void maxPool2d(DT t, const void *x, const Dims &dx, const Pool2DAttrs &a,
               void *y, const Dims &dy);
void avgPool2d(DT t, const void *x, const Dims &dx, const Pool2DAttrs &a,
               void *y, const Dims &dy);
/// Each window's gradient to its first (row-major) maximum; dxOut = zeros
/// first. dx is the forward input's shape, dg the forward result's.
void maxPool2dGrad(DT t, const void *x, const Dims &dx, const void *g,
                   const Dims &dg, const Pool2DAttrs &a, void *dxOut);
void avgPool2dGrad(DT t, const void *g, const Dims &dg, const Pool2DAttrs &a,
                   void *dxOut, const Dims &dx);

// --- profiling hook ------------------------------------------------------------------

/// Called by generated code before op `index` (the manifest's "ops" list)
/// and with index = -1 after the last one. A no-op unless a recorder is set.
using OpRecorder = void (*)(void *ctx, int64_t index);
void setOpRecorder(OpRecorder recorder, void *ctx);
void opMark(int64_t index);
/// True while a recorder is set (the GPU's opMark synchronises only then).
bool opRecorderSet();

} // namespace merak::rt::cpu

#endif // MERAK_RT_OPS_H
