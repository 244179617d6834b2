//===- Planner.h - merak-compile --devices: the parallelism planner -*- C++ -*-===//
//
// Chooses dp x tp x pp = N, the micro-batch count, the pipeline schedule,
// recomputation and communication overlap for a model on N devices of a
// device profile: the fastest simulated plan whose peak memory fits. The
// model is compiled once per tensor-parallel degree into the finest
// pipeline (one stage per candidate cut, one micro-batch of the whole
// batch); every candidate is then costed from that table (stages grouped,
// activations scaled to the candidate's micro-batch) and run on the
// pipeline simulator. See docs/parallelism.md, "Planner".
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_PLANNER_PLANNER_H
#define MERAK_PLANNER_PLANNER_H

#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"
#include "merak/Tools/Compile.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/JSON.h"
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::merak {

/// One candidate plan and its simulated cost.
struct PlanCandidate {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1, virtualStages = 1;
  std::string schedule = "1f1b";
  /// "none", "selective", "full" or "stage-aware" (see RecomputeModel in
  /// Planner.cpp).
  std::string recompute = "none";
  /// Data-parallel gradient all-reduce overlapped with the backward and
  /// half of the tensor-parallel communication hidden (modelled only).
  bool overlap = false;
  /// The optimizer state and its update split over dp (--zero 1; Megatron-LM's
  /// distributed optimizer).
  bool zero = false;
  /// Megatron-LM's sequence parallelism between the tp blocks
  /// (--sequence-parallel; tp > 1 only).
  bool sequenceParallel = false;
  double stepTime = 0, bubble = 0;
  int64_t peakMemory = 0;
  /// Empty when the plan fits; otherwise why it was rejected.
  std::string rejected;
  /// Enumeration order (breaks ties between equal step times).
  int64_t order = 0;
  /// With --op-costs: the step the plan's compiled program simulates to
  /// with the measured op costs, and how many of its costed ops they
  /// covered (refinePlanWithOpCosts).
  std::optional<double> measuredStepTime;
  int64_t measuredOps = 0, costedOps = 0;
  /// A Mixture-of-Experts model: expert-parallel ranks (within dp), shadow
  /// slots and the rebalancing period (--ep, --moe-shadow,
  /// --moe-rebalance-every), searched on the compiled programs
  /// (refinePlanForExperts), whose simulated step is simulatedStepTime.
  int64_t ep = 1, moeShadow = 0, moeRebalanceEvery = 0;
  /// --moe-all-to-all: "hierarchical" where the ep group spans nodes and
  /// the simulation prefers it.
  std::string moeAllToAll = "flat";
  /// --moe-chunks: 1, or 0 (auto: chooseExpertChunks at compile time) where
  /// the simulation prefers the all-to-alls in chunks.
  int64_t moeChunks = 1;
  std::optional<double> simulatedStepTime;
  /// Where the program is cut: pp x virtualStages - 1 increasing cut points
  /// (--stage-boundaries), the ends of the planned stages' fine stages.
  std::vector<int64_t> stageBoundaries;
};

struct PlannerResult {
  PlanCandidate chosen;
  /// The next best plans that fit, then the best ones that did not.
  std::vector<PlanCandidate> runnersUp;
  /// Notes on degrees that could not be planned (e.g. a tensor-parallel
  /// degree the model does not accept).
  std::vector<std::string> notes;
  double searchSeconds = 0, probeSeconds = 0;
  int64_t evaluated = 0;
  /// Stages of the finest pipeline the costs were read from.
  int64_t fineStages = 1;
  std::string profile;
  /// The profile's devices per node (whether an ep group spans nodes).
  int64_t devicesPerNode = 8;
  double memoryPerDevice = 0;
  /// --planner-space: "auto", "megatron" or "megatron-best".
  std::string space = "auto";
  /// The experts of the model's expert GEMMs (merak.expert_matmul; 0:
  /// none): ep, shadowing and rebalancing can be searched.
  int64_t experts = 0;
};

/// Plans `options.devices` devices for `options.input` (dp, tp, pp,
/// microbatches unset). With `runtimeOnly` (a program is written), only
/// plans merak compiles are eligible: overlap only without micro-batches
/// (merak-overlap does not overlap a pipeline's gradient all-reduce), dp
/// and micro-batches only when the model's batch splits. Fails with
/// `error` set (no plan
/// fits: the smallest memory any plan needs).
FailureOr<PlannerResult> planParallelism(const CompileOptions &options, bool runtimeOnly,
                                         llvm::raw_ostream &log, std::string &error);

/// The divisors of n, in increasing order (the degrees a mesh axis can take).
SmallVector<int64_t> divisors(int64_t n);

/// The plan table merak-compile --devices prints.
void printPlannerResult(const PlannerResult &result, llvm::raw_ostream &os);

/// --report=json's "planner" object: {chosen, runners_up, search_time_s}.
llvm::json::Value plannerJson(const PlannerResult &result);

/// Reads a model written in merak IR (.mlir); null, with the error on
/// `log`, when it does not parse or has no @forward.
OwningOpRef<ModuleOp> readMerakModule(llvm::StringRef path, MLIRContext &ctx,
                                      llvm::SourceMgr &sourceMgr, llvm::raw_ostream &log);

} // namespace mlir::merak

#endif
