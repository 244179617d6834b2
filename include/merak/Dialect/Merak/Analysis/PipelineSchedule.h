//===- PipelineSchedule.h - pipeline plans, fragments, schedules -*- C++ -*-===//
//
// What the pipeline passes record and what every later phase reads back:
// the plan on the module, the fragments in the order the generated program
// and the runtime index them, and the static per-stage instruction lists of
// every schedule (PipelineSchedule.cpp) that the runtime interprets
// (runtime/src/pipeline.cpp) and the simulator times.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_ANALYSIS_PIPELINESCHEDULE_H
#define MERAK_DIALECT_MERAK_ANALYSIS_PIPELINESCHEDULE_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::merak {

/// The module attribute holding the pipeline plan (#merak.pipeline_plan:
/// merak-pipeline's stage assignment, merak-recompute's choice,
/// merak-record-schedule's schedule).
inline constexpr llvm::StringLiteral kPipelineAttr = "merak.pipeline";
/// The module's plan (#merak.pipeline_plan under kPipelineAttr); null when
/// merak-pipeline has not run.
inline PipelinePlanAttr getPipelinePlan(ModuleOp module) {
  return module->getAttrOfType<PipelinePlanAttr>(kPipelineAttr);
}
//===----------------------------------------------------------------------===//
// Schedules
//===----------------------------------------------------------------------===//

enum class PipelineScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved,
  ZeroBubbleH1,
  ZeroBubbleH2,
  ShiftedCriticalPath
};

/// "gpipe" | "1f1b" | "interleaved" | "zb-h1" | "zb-h2" |
/// "shifted-critical-path".
FailureOr<PipelineScheduleKind> parsePipelineSchedule(StringRef name);
StringRef pipelineScheduleName(PipelineScheduleKind kind);

/// One instruction of a stage's program. Sends and receives are
/// non-blocking: `recv-*` posts, `wait-*` completes it; `wait-sends` waits
/// every send of the step. Activations go to stage s+1 and gradients to
/// stage s-1 (tags: 2 * mb for activations, 2 * mb + 1 for gradients).
/// `chunk` is the model chunk (virtual stage) of an interleaved schedule:
/// on stage s, chunk c runs model stage c * stages + s (0 otherwise).
/// `bwd` computes the input gradient and, unless the schedule splits the
/// backward, the weight gradient; `bwd-w` is the split-off weight gradient
/// (zero-bubble schedules). `rcp` runs the part of the backward that does
/// not depend on the incoming gradient (the recomputed forward) ahead of
/// `wait-grad`, and `fwd-keep` is a forward that keeps everything the
/// backward would recompute (that micro-batch gets no `rcp`): the
/// shifted-critical-path schedule.
struct PipelineInstr {
  enum Kind {
    RecvAct,
    WaitAct,
    Forward,
    SendAct,
    RecvGrad,
    WaitGrad,
    Backward,
    BackwardWeight,
    SendGrad,
    WaitSends,
    Update,
    Recompute,
    ForwardKeep
  } kind;
  int64_t mb = -1;
  int64_t chunk = 0;
};
StringRef pipelineInstrName(PipelineInstr::Kind kind);

/// The instruction lists of every stage (index = stage) for `microbatches`
/// micro-batches: GPipe (all forwards, then all backwards), 1F1B (warm-up
/// forwards, one-forward-one-backward, cool-down backwards), interleaved
/// 1F1B over `virtualStages` chunks per stage (microbatches must be a
/// multiple of stages), or ZB-H1 (1F1B with the backward split into `bwd`
/// and `bwd-w`, stage s keeping up to s weight gradients pending), or ZB-H2
/// (the split backward with up to min(m, 2 (p - s) - 1) micro-batches in
/// flight on stage s, from a unit-time list schedule), or Merak's shifted
/// critical path (1F1B where stage s < p - 1 runs `rcp mb` before
/// `wait-grad mb` and its last min(m, p - s - 1) forwards are `fwd-keep`,
/// or `kept[s]` of them when given (merak-recompute's "scp_kept": fewer
/// under a memory budget); the last stage is plain 1F1B). Receives
/// are posted one ahead of their wait; sends are waited before the update.
SmallVector<SmallVector<PipelineInstr>>
buildPipelineSchedule(PipelineScheduleKind kind, int64_t stages, int64_t microbatches,
                      int64_t virtualStages = 1, ArrayRef<int64_t> kept = {});

/// Prints "stage S order: F0 F1 B0 ..." and "stage S: <instructions>" for
/// every stage.
void printPipelineSchedule(PipelineScheduleKind kind, int64_t microbatches,
                           ArrayRef<SmallVector<PipelineInstr>> program,
                           llvm::raw_ostream &os);

//===----------------------------------------------------------------------===//
// Recomputation (merak-recompute, Recompute.cpp)
//===----------------------------------------------------------------------===//

/// What a stage's backward recomputes: nothing (the forward stashes every
/// activation the backward needs), the attention core (selective), the
/// whole forward from the stage inputs (full), or per stage the least
/// recomputation that fits a memory budget (stage-aware).
enum class RecomputeMode { None, Selective, Full, StageAware };
/// "none" | "selective" | "full" | "stage-aware".
FailureOr<RecomputeMode> parseRecomputeMode(StringRef name);
StringRef recomputeModeName(RecomputeMode mode);
/// Micro-batches whose activations `stage` holds at once under `kind`
/// (1F1B, ZB-H1 and shifted critical path: min(m, stages - stage); the
/// others: m).
int64_t inFlightMicrobatches(PipelineScheduleKind kind, int64_t stages, int64_t microbatches,
                             int64_t stage);

/// Under the shifted critical path: the most micro-batches whose forward
/// on `stage` is `fwd-keep` (the paper's: the last min(m, stages - stage -
/// 1)); 0 for the other schedules. merak-recompute keeps fewer when a
/// memory budget needs it ("scp_kept" in merak.pipeline).
int64_t keptMicrobatches(PipelineScheduleKind kind, int64_t stages, int64_t microbatches,
                         int64_t stage);
/// The "scp_kept" counts merak-recompute recorded (empty: the defaults).
SmallVector<int64_t> recordedKeptMicrobatches(ModuleOp module);

/// True when `module` was cut by merak-pipeline.
bool isPipelineModule(ModuleOp module);

/// The fragments in index order: per stage s, @stage<s>_forward, _backward,
/// _update, then those of merak-split-backward it has (_forward_keep,
/// _recompute, _backward_weight) and merak-cache-param-casts' _prepare. The
/// runtime finds them by the manifest's "stage" and "kind".
FailureOr<SmallVector<func::FuncOp>> pipelineFragments(ModuleOp module);

/// (s, "kind") of @stage<s>_<kind>; (-1, "") for another name.
std::pair<int64_t, StringRef> pipelineFragmentStageKind(func::FuncOp fragment);

/// The schedule merak-record-schedule recorded on the module (none without
/// merak.pipeline).
struct RecordedSchedule {
  PipelineScheduleKind kind;
  int64_t stages, microbatches, virtualStages;
};
std::optional<RecordedSchedule> recordedSchedule(ModuleOp module);

/// --compile-to=schedule: every stage's instruction list.
void printPipelineScheduleOf(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
