//===- Report.h - merak-compile --report: the parallel plan -----*- C++ -*-===//
//
// What a compiled training program does on each rank, read back from the IR
// the compiler produced: the mesh, per pipeline stage the ONNX nodes,
// parameters, memory, FLOPs and communication, the tensor-parallel splits
// and the data-parallel buckets. Text for people, JSON for scripts (keys in
// docs/user-guide.md, "merak-compile --report").
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_PLANNER_REPORT_H
#define MERAK_PLANNER_REPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::merak {
struct MeasuredOpCosts;
} // namespace mlir::merak

namespace mlir::merak {

/// merak-compile --simulate: the schedule run on the pipeline simulator
/// (PipelineSimulator.h) under a device profile's costs (Simulate.h).
struct SimulatedStep {
  double stepTime = 0.0, bubbleFraction = 0.0, bubbleRatio = 0.0;
  std::vector<int64_t> peakInFlight;
  /// Per stage: parameters + optimizer state + gradient accumulators +
  /// arena peak + stash per micro-batch x peak in-flight micro-batches.
  std::vector<int64_t> peakMemoryBytes;
  /// The profile's name, or "placeholder".
  std::string profile;
  /// The profile's memory size (0: unknown).
  double memoryBytes = 0.0;
  /// --op-costs: the file, and how many of the costed ops (of every
  /// fragment) it had measured seconds for; the others use the roofline.
  std::string opCostsFile;
  int64_t measuredOps = 0, costedOps = 0;
  /// Expert parallelism: the busiest ep rank's rows over the mean under
  /// --moe-skew (1: balanced), and the skew; 0 without expert parallelism.
  double moeImbalance = 0.0, moeSkew = 0.0;
  bool moeHistogram = false; ///< the shares came from --moe-histogram
  /// Dynamic shadowing: the shadow slots per layer, and how many experts
  /// the skew makes the plan shadow (0 without --moe-shadow).
  int64_t moeShadowSlots = 0, moeShadowed = 0;
  /// Token dropping (--moe-capacity-factor): the share of the routed rows
  /// beyond their experts' capacity; < 0 without a capacity.
  double moeDropped = -1.0;
};

/// Traffic of one collective kind and group ("all_reduce tp").
/// The traffic kind of a two-level merak.all_to_all (`hierarchical`).
constexpr llvm::StringLiteral kHierarchicalAllToAll = "all_to_all_2dh";
/// The traffic kind of a started merak.all_to_all_start (merak-overlap's
/// ep-overlap over --moe-chunks): it runs under the other chunks' expert
/// GEMMs.
constexpr llvm::StringLiteral kOverlappedAllToAll = "all_to_all_overlapped";

struct CollectiveTraffic {
  int64_t count = 0, bytes = 0;
};

/// The report's per-rank numbers of one stage that the cost model reads,
/// per optimizer step (all micro-batches).
/// One op for the cost model: FLOPs and bytes accessed (the roofline), and
/// its measured seconds (--op-costs) when its shape key was timed.
struct OpWork {
  int64_t flops = 0, bytes = 0;
  std::optional<double> seconds;
  /// An expert GEMM under expert parallelism: its rows (so its time)
  /// follow the routing, which the simulator's --moe-skew makes uneven.
  bool routed = false;
  /// Its weight's leading dimension (experts, or shadow slots) and its
  /// total_experts: the weight gradient of shadow copies (--moe-shadow) has
  /// total_experts above weightExperts * ep. `withCopies`: an expert GEMM
  /// that also multiplies rows by shadow copies.
  int64_t weightExperts = 0, totalExperts = 0;
  bool withCopies = false;
};

struct StageCosts {
  int64_t forwardFlops = 0, backwardFlops = 0, updateFlops = 0;
  int64_t paramBytes = 0, stateBytes = 0, accumulatorBytes = 0, arenaPeakBytes = 0;
  /// Stashed activations of all micro-batches.
  int64_t stashBytes = 0;
  /// Every op of one micro-batch's forward and backward fragment
  /// (CostOpInterface), and of the stage's update.
  std::vector<OpWork> forwardOps, backwardOps, updateOps;
  /// The backward's ops that depend on no incoming gradient ("cot:" args):
  /// what a shifted-critical-path `rcp` runs ahead of the gradient (the
  /// recomputed forward), a subset of backwardOps; and the bytes of their
  /// results the rest of the backward reads (held from `rcp` to `bwd`).
  std::vector<OpWork> recomputeOps;
  int64_t recomputeHeldBytes = 0;
  /// Bytes the pipeline runner copies into and out of the arena around one
  /// call of the forward, the backward (its parts) and the update
  /// (fragmentCopyBytes).
  int64_t forwardCopyBytes = 0, backwardCopyBytes = 0, updateCopyBytes = 0;
  /// Collectives by "<kind> <group>", of the forward, backward and update
  /// fragments.
  std::map<std::string, CollectiveTraffic> forward, backward, update;
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
  /// With --devices: the planner's JSON (JSON "planner").
  std::string plannerJson;
};

/// Prints the report of `module`, a training program (the training phase
/// or later: @train_step, or the fragments of merak-pipeline). A program
/// that is not memory-planned yet is planned on a copy for the arena sizes.
/// Fails (with a diagnostic) on a module that is not a training program.
LogicalResult printCompileReport(ModuleOp module, const ReportOptions &options,
                                 llvm::raw_ostream &os);

/// Bytes of the arguments and results of a pipeline fragment that the
/// runner copies into the arena before a call and out of it after: the
/// step, the loss, the update's outputs, unused results. The stash, the
/// messages and the micro-batch's inputs are read and written in place
/// (runtime/include/merak_rt/pipeline.h; a device program's messages go
/// through host staging buffers, a transfer this does not count).
int64_t fragmentCopyBytes(func::FuncOp fragment);

/// The ops of backward fragment `f` that no incoming gradient ("cot:"
/// arguments) reaches, in program order (an op with regions counts as
/// reached): what the backward recomputes of the forward. The last stage's
/// backward has no incoming gradient: its sweep starts from the loss's seed,
/// a constant. There an op is also reached when it is none of `forward`'s
/// (the stage's forward fragment) ops by opCostKey (name, operand and result
/// types, inherent attributes: a constant's value included): the seed, and
/// the sweep's ops that read only forward values.
/// One pass over each fragment.
SmallVector<Operation *> recomputedOps(func::FuncOp f, func::FuncOp forward);

/// The per-stage numbers of the report of `module` (a pipelined training
/// program) for the cost model; fails like printCompileReport. With
/// `measured`, each op's measured seconds where its key was timed.
FailureOr<std::vector<StageCosts>> collectStageCosts(ModuleOp module, const ReportOptions &options,
                                                     const MeasuredOpCosts *measured = nullptr);

/// A finished report to where --report-file says: `file` ("-": stdout), or
/// with an empty `file` into `*inMemory` (the library call's result). Fails
/// with `error` when the file cannot be written.
LogicalResult deliverReport(llvm::StringRef text, llvm::StringRef file, std::string *inMemory,
                            std::string &error);

} // namespace mlir::merak

#endif
