//===- PipelineCompile.h - merak-compile's pipeline path --------*- C++ -*-===//
#ifndef MERAK_TOOLS_PIPELINECOMPILE_H
#define MERAK_TOOLS_PIPELINECOMPILE_H

#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Tools/Registration.h"
#include "merak/Tools/Report.h"

namespace mlir::merak {

/// merak-compile --pp/--microbatches/--schedule/--stage-boundaries.
struct PipelineCompileOptions {
  int64_t pp = 1, microbatches = 1;
  /// Model chunks per pipeline rank (interleaved 1F1B): merak-pipeline cuts
  /// pp x virtualStages model stages.
  int64_t virtualStages = 1;
  std::vector<int64_t> boundaries;
  std::string schedule = "1f1b";
  /// merak-recompute's mode ("": the pass does not run) and budget.
  std::string recompute;
  int64_t memoryPerDevice = 0;
};

/// "80GB" -> 80e9, "512MiB" -> 512 * 2^20, "1000" -> 1000, "" -> 0;
/// nullopt when malformed or overflowing.
std::optional<int64_t> parseByteSize(StringRef text);

/// The training phase of a pipelined (or gradient-accumulating) program:
/// merak-tensor-parallel (when training.tp > 1), merak-attach-loss,
/// merak-pipeline, merak-recompute (unless pipeline.recompute is empty),
/// merak-optimizer (building every
/// stage's update), canonicalize, CSE. Fails on bad optimizer options
/// (printed to `log`).
LogicalResult buildPipelineTrainingPipeline(OpPassManager &pm, const TrainingOptions &training,
                                            const PipelineCompileOptions &pipeline,
                                            llvm::raw_ostream &log);

/// Records the schedule (and its virtual stages per stage, when more than
/// one) on the module (read when the program is written).
void setPipelineSchedule(ModuleOp module, StringRef schedule, int64_t virtualStages = 1);

/// The schedule recorded on the module (none without merak.pipeline).
struct RecordedSchedule {
  PipelineScheduleKind kind;
  int64_t stages, microbatches, virtualStages;
};
std::optional<RecordedSchedule> recordedSchedule(ModuleOp module);

/// --compile-to=schedule: every stage's instruction list.
void printPipelineScheduleOf(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
