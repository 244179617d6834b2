//===- Report.h - merak-compile --report: the parallel plan -----*- C++ -*-===//
//
// What a compiled training program does on each rank, read back from the IR
// the compiler produced: the mesh, per pipeline stage the ONNX nodes,
// parameters, memory, FLOPs and communication, the tensor-parallel splits
// and the data-parallel buckets. Text for people, JSON for scripts (keys in
// docs/user-guide.md, "merak-compile --report").
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TOOLS_REPORT_H
#define MERAK_TOOLS_REPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>
#include <vector>

namespace mlir::merak {

/// merak-compile --simulate: the schedule run on the pipeline simulator
/// (PipelineSimulator.h) with placeholder costs.
struct SimulatedStep {
  double stepTime = 0.0, bubbleFraction = 0.0, bubbleRatio = 0.0;
  std::vector<int64_t> peakInFlight;
};

/// What the report cannot read from the module: the command line's mesh.
struct ReportOptions {
  std::string model;
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  /// The pipeline schedule; empty for a program without micro-batches.
  std::string schedule;
  std::string optimizer;
  bool json = false;
  /// With --simulate: the simulated step (JSON "simulated").
  std::optional<SimulatedStep> simulated;
};

/// Prints the report of `module`, a training program (the training phase
/// or later: @train_step, or the fragments of merak-pipeline). A program
/// that is not memory-planned yet is planned on a copy for the arena sizes.
/// Fails (with a diagnostic) on a module that is not a training program.
LogicalResult printCompileReport(ModuleOp module, const ReportOptions &options,
                                 llvm::raw_ostream &os);

/// printCompileReport to `file` ("-": stdout), written only when it
/// succeeds.
LogicalResult writeCompileReport(ModuleOp module, const ReportOptions &options,
                                 llvm::StringRef file);

} // namespace mlir::merak

#endif
