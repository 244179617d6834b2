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
// The entry points, with their documentation, are listed once in
// merak_rt/kernels.def; this header declares the types they take and expands
// the list into declarations, as merak_rt/cuda/ops.h does for the GPU and
// merak-to-emitc into the names it calls, so the three cannot drift apart.
// (The docs live in the list, next to each entry, because it is the one
// place both backends and the compiler read.)
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
#include <vector>

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

// --- the types of the entry points ---------------------------------------------

// clang-format off
/// The op of unary().
enum class Unary : int32_t {
  Exp, Log, Sqrt, Rsqrt, Tanh, Erf, Sigmoid, Reciprocal, Sin, Cos, Floor,
  Ceil, Relu, Neg, Abs, Sign, Not, Gelu, LeakyRelu, Clamp,
  GeluTanh, // gelu with approximate_tanh
  Softplus, // log(1 + e^x) as max(x, 0) + log1p(e^-|x|)
  Asin, Acos, Atan, // NaN outside [-1, 1] for asin and acos
  BitNot,           // integers: ~x
  Expm1, Log1p      // e^x - 1 and log(1 + x), exact near 0
};
// clang-format on

/// The op of binary().
enum class Binary : int32_t {
  Add, Sub, Mul, Div, Pow, Max, Min, Rem, // numeric -> same type
  Eq, Ne, Lt, Le, Gt, Ge,                 // numeric -> BOOL
  And, Or, Xor,                           // BOOL -> BOOL
  BitAnd, BitOr, BitXor, ShiftLeft, ShiftRight // integers -> same type (CPU)
};

/// The op of reduce().
enum class Reduce : int32_t { Sum, Mean, Max, Min, Prod };

/// Conv2D attributes: strides [sh, sw], padding [top, left, bottom, right],
/// dilations [dh, dw], groups.
struct Conv2DAttrs {
  int64_t sh, sw, pt, pl, pb, pr, dh, dw, groups;
};

/// Pool2D attributes: kernel [kh, kw], strides, padding [t, l, b, r],
/// dilations (max pool only; 1 for avg), ceil_mode, count_include_pad (avg).
struct Pool2DAttrs {
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  bool ceilMode, countIncludePad;
};

// --- the entry points (documented in kernels.def) ----------------------------------

#define MERAK_KERNEL(name, ret, params) ret name params;
#define MERAK_KERNEL_OVERLOAD(name, ret, params) ret name params;
#define MERAK_CPU_KERNEL(name, ret, params) ret name params;
#include "merak_rt/kernels.def"

// --- profiling hook (opMark is in kernels.def) ---------------------------------------

/// The recorder opMark calls with its index.
using OpRecorder = void (*)(void *ctx, int64_t index);
void setOpRecorder(OpRecorder recorder, void *ctx);
/// True while a recorder is set (the GPU's opMark synchronises only then).
bool opRecorderSet();

// --- Mixture-of-Experts statistics -------------------------------------------------

/// What expertShadowPlan saw since the last call: how many plans it made
/// and how many experts they shadowed in all. The trainer reads it after
/// each step (the metrics' moe_shadowed) and so resets it.
struct ExpertShadowCounts {
  int64_t plans = 0, shadowed = 0;
};
ExpertShadowCounts takeExpertShadowCounts();

/// The rows routed to each expert that this rank's expert-parallel token
/// dispatches saw (merak.expert_place's logical ids when the program has
/// placement tables, else merak.all_to_all's, or merak.expert_shadow_plan's
/// before it renames them): every layer and pass summed, so a share of it
/// is an expert's share of the routing. Empty without expert parallelism.
/// ./train --moe-histogram writes it (the simulator's --moe-histogram).
const std::vector<int64_t> &expertRowHistogram();
/// Counts `rows` ids; a dispatch or plan (`placed` false) counts only when
/// no merak.expert_place has run, which counts the logical ids instead.
void recordExpertRows(const int64_t *ids, int64_t rows, int64_t experts, bool placed = false);

/// The rows of each logical expert that merak.expert_place saw per table
/// since the last call ([table][expert]; tables never seen are empty), and
/// resets them: the trainer's rebalancing reads them every K steps.
std::vector<std::vector<int64_t>> takeExpertPlaceRows();

/// The rows merak.expert_capacity saw and dropped since the last call
/// (every layer and pass of this rank), and resets the counts: the
/// metrics' moe_dropped and moe_drop_fraction.
struct ExpertDropCounts {
  int64_t rows = 0, dropped = 0;
};
ExpertDropCounts takeExpertDropCounts();

/// Whether the routing kernels count (on by default): the pipeline runner
/// turns it off while a fragment that recomputes forward ops runs (a
/// backward or a recomputation), so that merak.expert_capacity's dropped
/// rows, merak.expert_place's rows and merak.expert_shadow_plan's plans
/// count each forward once. Their results do not depend on it.
void setExpertCounting(bool on);

/// Where the running program is in training, for merak.dropout (whose mask
/// depends on the step and on each element's position in the whole batch):
/// ./train's main sets the step and the rank's coordinates before each
/// step, the pipeline runner the micro-batch before each fragment. Zero in
/// a serial program outside ./train (the evaluator's conventions).
struct TrainingPosition {
  int64_t step = 0;         ///< the step being computed, from 0
  int64_t dpRank = 0;       ///< this rank's data-parallel coordinate
  int64_t microbatches = 1; ///< micro-batches per step
  int64_t microbatch = 0;   ///< the micro-batch being computed
  int64_t tpRank = 0;       ///< this rank's tensor-parallel coordinate
};
TrainingPosition &trainingPosition();

} // namespace merak::rt::cpu

namespace merak::rt::dropout {
struct MaskLayout;
/// merak.dropout's layout (merak_rt/dropout_mask.h) of a local tensor `dx`
/// with the op's recorded splits (each {dim, blocks, parts}, or rank 0 for
/// none) at the training position; a split that does not fit the shape or
/// the position is fatal, naming the op.
MaskLayout layoutAt(const cpu::Dims &dx, const cpu::Dims &batchSplit, const cpu::Dims &tpSplit);
/// The key of seed `seed` at the training position's step.
uint64_t keyAt(int64_t seed);
} // namespace merak::rt::dropout

#endif // MERAK_RT_OPS_H
