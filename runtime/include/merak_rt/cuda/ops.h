//===- ops.h - The GPU ABI called by generated code (--target cuda) -*- C++ -*-===//
//
// merak::rt::gpu has the entry points of merak::rt::cpu (merak_rt/ops.h) with
// the same names, arguments and semantics, so that merak-to-emitc emits the
// same calls for both targets and only the `using namespace` differs. Here
// every pointer is a device pointer (into the device arena A, parameter
// storage P or constants C) and every call only enqueues work on the current
// compute stream (setStream); nothing synchronises except where noted.
//
// Differences from the CPU ABI (documented in docs/architecture.md "CUDA
// codegen"):
//  - a bad index (gather, gatherElements), an out-of-range cross-entropy
//    label or an integer division by zero cannot stop the program from a
//    kernel: the kernel records the first such error in a device word and
//    writes a harmless value; checkErrors() (the training main calls it
//    after every step) reports it by op name;
//  - gatherGrad / gatherElementsGrad accumulate repeated indices with
//    atomicAdd, so the summation order (and the last bits) of repeated
//    indices is not deterministic;
//  - float reductions accumulate in double as on the CPU, but in a
//    different order (per-thread partial sums, then a tree);
//  - matmul uses cuBLASLt in full FP32 (no TF32) for F32; other types a
//    simple kernel;
//  - conv2d*, maxPool2d*, avgPool2d* have no GPU kernel: merak-compile
//    --target cuda rejects a model using them at compile time.
//  - adamwUpdate, adanUpdate and sgdUpdate take F32 only (fatal otherwise);
//    AdamW's bias corrections use the device's double pow.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_OPS_H
#define MERAK_RT_CUDA_OPS_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/ops.h"
#include "merak_rt/status.h"

#include <cstdint>

namespace merak::rt::gpu {

using cpu::Binary;
using cpu::Dims;
using cpu::DT;
using cpu::elemSize;
using cpu::kMaxRank;
using cpu::Reduce;
using cpu::Unary;

// --- context -------------------------------------------------------------------

/// The stream every entry point enqueues on (default: the legacy stream).
void setStream(cuda::StreamHandle stream);
cuda::StreamHandle stream();

/// Prints "merak runtime: <what>" to stderr and exits with status 3.
[[noreturn]] void fatal(const char *what);

/// Synchronises the stream, then reports (and clears) the first error a
/// kernel recorded since the last call: "gather: index out of range", ...
/// Also reports a failed kernel launch or a failed earlier call.
Status checkErrors();

/// Frees the context's device resources (cuBLASLt handle, scratch, error
/// word); the next call creates them again.
void releaseContext();

// --- elementwise ----------------------------------------------------------------

void unary(Unary op, DT t, const void *x, void *y, int64_t n, double a = 0,
           double b = 0);
void binary(Binary op, DT t, const void *a, const Dims &da, const void *b,
            const Dims &db, void *out, const Dims &dout);
void where(const void *cond, const Dims &dc, DT t, const void *a,
           const Dims &da, const void *b, const Dims &db, void *out,
           const Dims &dout);
void cast(DT from, const void *x, DT to, void *y, int64_t n);

// --- data movement --------------------------------------------------------------

void copyBytes(void *dst, const void *src, int64_t bytes);
void broadcastTo(DT t, const void *x, const Dims &dx, void *y, const Dims &dy);
void transpose(DT t, const void *x, const Dims &dx, const Dims &perm, void *y);
void slice(DT t, const void *x, const Dims &dx, const Dims &starts,
           const Dims &strides, void *y, const Dims &dy);
void insertAlongAxis(DT t, const void *x, const Dims &dx, int64_t axis,
                     int64_t offset, void *y, const Dims &dy);
void gather(DT t, const void *data, const Dims &dd, DT idxT, const void *idx,
            const Dims &di, int64_t axis, void *y);
void gatherGrad(DT t, const void *g, DT idxT, const void *idx, const Dims &di,
                int64_t axis, void *y, const Dims &dy);
void gatherElements(DT t, const void *data, const Dims &dd, DT idxT,
                    const void *idx, const Dims &di, int64_t axis, void *y);
void gatherElementsGrad(DT t, const void *g, DT idxT, const void *idx,
                        const Dims &di, int64_t axis, void *y, const Dims &dy);

// --- reductions ------------------------------------------------------------------

void reduce(Reduce op, DT t, const void *x, const Dims &dx, const Dims &axes,
            void *y);
void argReduce(bool isMax, DT t, const void *x, const Dims &dx, int64_t axis,
               bool selectLast, int64_t *y);
void cumsum(DT t, const void *x, const Dims &dx, int64_t axis, bool exclusive,
            bool reverse, void *y);

// --- normalisation, activations, losses -------------------------------------------

void softmax(bool isLog, DT t, const void *x, const Dims &dx, int64_t axis,
             void *y);
void layerNorm(DT t, const void *x, const Dims &dx, int64_t axis,
               const void *scale, const Dims &ds, const void *bias,
               const Dims &db, double eps, void *y);
/// Flash attention (attention.cu): keys == queries, head dim 16/32/64/128;
/// seqMajor: operands [..., T, H, D] read in place (AttnOperand::bthd).
void attention(DT t, const void *q, const Dims &dq, const void *k, const void *v,
               int64_t keys, double scale, bool causal, void *o, void *lse,
               bool seqMajor = false);
void attentionGrad(DT t, const void *q, const Dims &dq, const void *k, const void *v,
                   int64_t keys, const void *o, const void *lse, const void *dout,
                   double scale, bool causal, void *dqOut, void *dk, void *dv,
                   bool seqMajor = false);
void rmsNorm(DT t, const void *x, const Dims &dx, int64_t axis,
             const void *scale, const Dims &ds, double eps, void *y);
void batchNorm(DT t, const void *x, const Dims &dx, const void *scale,
               const void *bias, const void *mean, const void *var, double eps,
               bool training, void *y);
/// The CPU's mask bit for bit: the same splitmix64 counter RNG of (seed,
/// element index).
void dropout(DT t, const void *x, int64_t n, double ratio, int64_t seed,
             void *y, void *mask);
void crossEntropy(DT t, const void *logits, const Dims &dl, int64_t axis,
                  DT labT, const void *labels, int32_t reduction,
                  bool hasIgnore, int64_t ignoreIndex, void *y);

// --- fused optimizer updates (F32 only; lr, step and clip are device scalars) -----

void adamwUpdate(DT t, const void *p, const void *g, const void *m, const void *v,
                 const void *lr, const void *step, const void *clip, void *pOut,
                 void *mOut, void *vOut, int64_t n, double beta1, double beta2,
                 double eps, double weightDecay);
void adanUpdate(DT t, const void *p, const void *g, const void *m, const void *d,
                const void *nsq, const void *prev, const void *lr, const void *step,
                const void *clip, void *pOut, void *mOut, void *dOut, void *nOut,
                void *prevOut, int64_t n, double beta1, double beta2, double beta3,
                double eps, double weightDecay);
void sgdUpdate(DT t, const void *p, const void *g, const void *buf, const void *lr,
               const void *clip, void *pOut, void *bufOut, int64_t n, double momentum,
               double weightDecay, bool nesterov);

// --- fused backward ops -------------------------------------------------------------

void geluGrad(DT t, const void *x, const void *dy, void *dx, int64_t n,
              bool tanhApprox);
void softmaxGrad(bool isLog, DT t, const void *y, const void *dy, const Dims &d,
                 int64_t axis, void *dx);
void layerNormGrad(DT t, const void *x, const void *dy, const Dims &dx,
                   int64_t axis, const void *scale, const Dims &ds, double eps,
                   bool rms, void *dxOut, void *xhat);
void crossEntropyGrad(DT t, const void *logits, const Dims &dl, int64_t axis,
                      DT labT, const void *labels, const void *g,
                      int32_t reduction, bool hasIgnore, int64_t ignoreIndex,
                      void *dlogits);

// --- linear algebra ----------------------------------------------------------------

/// transA / transB as the CPU ABI's (merak.matmul_t): F32 or BF16 operands
/// stored with their last two dimensions swapped, read transposed by
/// cuBLASLt. yt: the result type, t or F32 for BF16 operands (cuBLASLt's
/// fp32 output of a bf16 GEMM).
void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db,
            void *y, const Dims &dy, bool transA = false, bool transB = false);
void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db,
            void *y, const Dims &dy, bool transA, bool transB, DT yt);

// --- profiling hook ------------------------------------------------------------------

/// As cpu::opMark, and it reports to the same recorder (cpu::setOpRecorder);
/// while a recorder is set it synchronises the stream first, so that an
/// op's trace event covers its kernels' execution, not just their launch.
void opMark(int64_t index);

} // namespace merak::rt::gpu

#endif // MERAK_RT_CUDA_OPS_H
