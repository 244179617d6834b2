//===- ops.h - The GPU ABI called by generated code (--target cuda) -*- C++ -*-===//
//
// merak::rt::gpu has the entry points of merak::rt::cpu (merak_rt/ops.h) with
// the same names, arguments and semantics, so that merak-to-emitc emits the
// same calls for both targets and only the `using namespace` differs. Here
// every pointer is a device pointer (into the device arena A, parameter
// storage P or constants C) and every call only enqueues work on the current
// compute stream (setStream); nothing synchronises except where noted.
//
// Differences from the CPU ABI (documented in docs/design/runtime.md "CUDA
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
//    lr, step and clip are device scalars; AdamW's bias corrections use the
//    device's double pow;
//  - attention / attentionGrad are flash kernels (attention.cu): keys ==
//    queries, head dim 16/32/64/128; seqMajor operands [..., T, H, D] are
//    read in place (AttnOperand::bthd);
//  - dropout's mask is the CPU's bit for bit: the same splitmix64 counter
//    RNG of (seed, element index);
//  - matmul's transA / transB take F32 or BF16 operands, read transposed by
//    cuBLASLt; yt is t, or F32 for BF16 operands (cuBLASLt's fp32 output of
//    a bf16 GEMM);
//  - opMark reports to the CPU's recorder (cpu::setOpRecorder); while one is
//    set it synchronises the stream first, so that an op's trace event
//    covers its kernels' execution, not just their launch.
//
// The entry points are declared from merak_rt/kernels.def, the list the CPU
// ABI and merak-to-emitc expand too (kernels.def's MERAK_CPU_KERNEL entries,
// the CPU-only ones, are left out); the GPU-only context functions are
// declared by hand.
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

// --- the entry points (documented in merak_rt/kernels.def) ------------------------

#define MERAK_KERNEL(name, ret, params) ret name params;
#define MERAK_KERNEL_OVERLOAD(name, ret, params) ret name params;
#include "merak_rt/kernels.def"

} // namespace merak::rt::gpu

#endif // MERAK_RT_CUDA_OPS_H
