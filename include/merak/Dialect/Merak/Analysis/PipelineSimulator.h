//===- PipelineSimulator.h - Event-driven pipeline schedule model -*- C++ -*-===//
//
// Runs the per-stage instruction lists of a pipeline schedule
// (buildPipelineSchedule) on a cost model: compute takes a fixed time per
// model stage and kind (forward, backward, weight gradient, recomputation,
// update), a
// message takes latency + bytes / bandwidth on its link. It reports the
// step time, each stage's busy time, the bubble, the peak number of
// micro-batches whose activations a stage holds and the peak activation
// bytes. See docs/parallelism.md,
// "Pipeline simulator".
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_ANALYSIS_PIPELINESIMULATOR_H
#define MERAK_DIALECT_MERAK_ANALYSIS_PIPELINESIMULATOR_H

#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"

#include <string>

namespace mlir::merak {

/// Costs of one schedule run. The per-model-stage vectors are indexed by
/// model stage k = chunk * stages + stage (one entry per stage without
/// virtual stages); a vector of one element applies to every model stage.
struct PipelineCostModel {
  /// Seconds of one micro-batch's forward / backward (input gradient, and
  /// the weight gradient unless the schedule has `bwd-w`) / weight
  /// gradient on each model stage.
  SmallVector<double> forward{1.0}, backward{1.0}, weight{0.0};
  /// Seconds of one micro-batch's `rcp` (the forward the backward
  /// recomputes) on each model stage; `fwd-keep` costs `forward`. When the
  /// schedule runs `rcp`, `backward` excludes the recomputation.
  SmallVector<double> recompute{0.0};
  /// Activation bytes one micro-batch holds between its forward and its
  /// backward on each model stage: `stashed` after a `fwd` (what the
  /// recomputation mode keeps), `kept` after a `fwd-keep` or an `rcp` (every
  /// activation the backward reads). Only for `peakActivationBytes`.
  SmallVector<double> stashed{0.0}, kept{0.0};
  /// Seconds of the optimizer update on each stage (device); `stageUpdate`
  /// (one entry per stage), when not empty, replaces it.
  double update = 0.0;
  SmallVector<double> stageUpdate;
  /// Bytes of one micro-batch's activations sent from model stage k to
  /// k + 1, and of the gradient sent back from k + 1 to k (index k).
  SmallVector<double> actBytes{0.0}, gradBytes{0.0};
  /// Point-to-point link: seconds per message and bytes per second. Each
  /// (sender, receiver) link carries one message at a time, in the
  /// sender's program order.
  double latency = 0.0;
  double bandwidth = 0.0; ///< 0: infinite.
  /// The node of each stage (empty: all on one). A message between stages
  /// on different nodes takes `interLatency` + bytes / `interBandwidth`.
  SmallVector<int64_t> node;
  double interLatency = 0.0, interBandwidth = 0.0;
};

/// One compute interval of the timeline (for traces).
struct PipelineEvent {
  int64_t stage;
  PipelineInstr instr;
  double start, end;
};

struct PipelineSimulation {
  /// Time at which the last stage finished its update.
  double stepTime = 0.0;
  /// Per stage: seconds spent computing, and when it finished.
  SmallVector<double> busy, finish;
  /// Idle seconds summed over stages, over (stages * stepTime): the share
  /// of the step the devices wait.
  double bubbleFraction = 0.0;
  /// Idle seconds over busy seconds (summed over stages): (p - 1) / m for
  /// GPipe and 1F1B with equal stages and free communication.
  double bubbleRatio = 0.0;
  /// Per stage: the most micro-batches (over all chunks) whose forward ran
  /// and whose backward (`bwd`) has not, i.e. stashed activations.
  SmallVector<int64_t> peakInFlight;
  /// Per stage: the most micro-batches holding full activations at once
  /// (after a `fwd-keep`, or after an `rcp` until their `bwd`).
  SmallVector<int64_t> peakKeptInFlight;
  /// Per stage: the most activation bytes held at once (`stashed` per
  /// micro-batch after `fwd`, `kept` per micro-batch after `fwd-keep` or
  /// `rcp`).
  SmallVector<double> peakActivationBytes;
  /// Compute intervals by stage, then start time (when asked for).
  std::vector<PipelineEvent> events;
};

/// Executes `program` (index = stage) under `costs`. Each stage runs its
/// list in order; a `wait-act` / `wait-grad` blocks until the matching
/// message (same micro-batch and model stage) has arrived, `wait-sends`
/// until every message the stage sent has arrived. Linear in the number of
/// instructions. Fails with a message naming the blocked instructions when
/// the lists deadlock or wait for a message nobody sends.
FailureOr<PipelineSimulation> simulatePipeline(ArrayRef<SmallVector<PipelineInstr>> program,
                                               const PipelineCostModel &costs,
                                               bool recordEvents = false,
                                               std::string *error = nullptr);

/// Writes the events as a Chrome trace (chrome://tracing, Perfetto): one
/// thread per stage, times in microseconds.
void writePipelineTrace(const PipelineSimulation &sim, llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
