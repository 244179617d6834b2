//===- PipelineCompile.h - merak-compile's pipeline path --------*- C++ -*-===//
#ifndef MERAK_TOOLS_PIPELINECOMPILE_H
#define MERAK_TOOLS_PIPELINECOMPILE_H

#include "merak/Tools/Registration.h"
#include "merak/Tools/Report.h"

namespace mlir::merak {

/// merak-compile --pp/--microbatches/--schedule/--stage-boundaries.
struct PipelineCompileOptions {
  int64_t pp = 1, microbatches = 1;
  std::vector<int64_t> boundaries;
  std::string schedule = "1f1b";
};

/// The training phase of a pipelined (or gradient-accumulating) program:
/// merak-tensor-parallel (when training.tp > 1), merak-attach-loss,
/// merak-pipeline, merak-optimizer (building every
/// stage's update), canonicalize, CSE. Fails on bad optimizer options
/// (printed to `log`).
LogicalResult buildPipelineTrainingPipeline(OpPassManager &pm, const TrainingOptions &training,
                                            const PipelineCompileOptions &pipeline,
                                            llvm::raw_ostream &log);

/// Records the schedule (and its virtual stages per stage, when more than
/// one) on the module (read when the program is written).
void setPipelineSchedule(ModuleOp module, StringRef schedule, int64_t virtualStages = 1);

/// The placeholder cost model of --simulate, until device profiles exist:
/// every stage computes at `flopsPerSecond` (its estimated forward FLOPs;
/// the backward takes twice the forward, under ZB-H1 half of that is the
/// weight gradient; an interleaved stage's chunks take 1/v of it each);
/// messages take `latency` + bytes / `bandwidth`.
struct PipelineSimulationOptions {
  double flopsPerSecond = 1e11;
  double bandwidth = 10e9; ///< bytes per second
  double latency = 10e-6;  ///< seconds
};

/// --simulate: runs the module's schedule (recorded by setPipelineSchedule)
/// on the pipeline simulator; writes its Chrome trace to `trace` when given.
/// Fails with `error` set.
FailureOr<SimulatedStep> simulatePipelineOf(ModuleOp module,
                                            const PipelineSimulationOptions &options,
                                            std::string &error,
                                            llvm::raw_ostream *trace = nullptr);

/// "simulated step: ..." lines (step time, bubble, per-stage peak
/// in-flight micro-batches), each after `prefix`.
void printSimulatedStep(const SimulatedStep &step, llvm::raw_ostream &os,
                        StringRef prefix = "");

/// --compile-to=schedule: every stage's instruction list.
void printPipelineScheduleOf(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
