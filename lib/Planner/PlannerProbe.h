//===- PlannerProbe.h - the planner's cost tables (internal) ---*- C++ -*-===//
//
// Compiling the model once per tensor-parallel degree into the finest
// pipeline and reading every fine stage's op costs (PlannerProbe.cpp); the
// search over plans is Planner.cpp's.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_PLANNER_PLANNERPROBE_H
#define MERAK_LIB_PLANNER_PLANNERPROBE_H

#include "merak/Tools/Compile.h"
#include "merak/Planner/Report.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OwningOpRef.h"
#include <string>
#include <vector>

namespace mlir::merak::planner {

/// One op of a fragment: FLOPs and activation bytes scale with the rows of
/// the micro-batch, parameter bytes do not.
struct OpCost {
  int64_t flops = 0, actBytes = 0, paramBytes = 0;
};

/// A fine stage of the probe (one micro-batch = the whole batch).
struct FineStage {
  /// `recompute`: the backward's ops no incoming gradient reaches (what it
  /// recomputes of the forward).
  std::vector<OpCost> forward, backward, recompute, attention;
  StageCosts costs;
  /// Bytes of the activations leaving the stage at its cut.
  int64_t actOut = 0;
  /// Stashed per micro-batch: the stage's inputs (full recomputation,
  /// what merak-pipeline does), every float result of the forward (none),
  /// and the attention core's share of the latter.
  int64_t stashInputs = 0, stashAll = 0, stashAttention = 0;
};

struct Probe {
  int64_t tp = 1;
  /// The cut point (merak-pipeline's numbering, --stage-boundaries) that
  /// ends each fine stage but the last.
  std::vector<int64_t> cuts;
  /// Compiled with --sequence-parallel on (tp > 1).
  bool sequenceParallel = false;
  std::vector<FineStage> stages;
  std::string dtype = "f32";
  /// The experts of the model's expert GEMMs (a Mixture-of-Experts model;
  /// the most of any layer), 0 without.
  int64_t experts = 0;
};

/// Compiles the model with tensor parallelism `tp` (and `o`'s
/// sequenceParallel) into `pp` pipeline stages of one micro-batch (the
/// whole batch); diagnostics go to `diag`.
/// Optionally returns the batch, the GEMMs' dtype (computeDtype, read
/// after --precision), whether merak-split-batch splits the batch, and
/// whether the model could be read at all.
OwningOpRef<ModuleOp> compileProbe(const CompileOptions &o, int64_t tp, int64_t pp,
                                   MLIRContext &ctx, llvm::raw_ostream &diag, int64_t *batch,
                                   std::string *dtype, bool *splits = nullptr,
                                   bool *imported = nullptr);

/// The cost table of a probe compiled with `pp` stages, costed as the
/// program is emitted (merak-fold-transposes, and with
/// `gradAccumulationFusion` merak-fuse-grad-accumulation, run on `module`).
FailureOr<Probe> readProbe(ModuleOp module, int64_t tp, int64_t pp, bool gradAccumulationFusion);

} // namespace mlir::merak::planner

#endif
