//===- Compile.h - merak-compile as a library call --------------*- C++ -*-===//
//
// The compiler driver behind merak-compile, callable in process: an options
// struct in, a status, the diagnostics and the report out. merak-compile
// parses its command line into CompileOptions; the Python module
// (python-bindings/) fills them from keyword arguments.
//
// This header uses only the standard library, so that code built with
// exceptions and RTTI (pybind11) can include it; nothing thrown crosses it.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TOOLS_COMPILE_H
#define MERAK_TOOLS_COMPILE_H

#include "merak/Pipelines/Phase.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir::merak {

/// Every merak-compile option (docs/user-guide.md describes each flag).
struct CompileOptions {
  std::string input;        ///< model.onnx or model.onnxtxt
  std::string output = "-"; ///< -o ("-": stdout; with Binary: ./train)
  CompilePhase compileTo = CompilePhase::Binary;
  /// Whether compileTo was chosen; if not, merak-compile builds the
  /// executable (Binary), and a report alone implies Training.
  bool compileToGiven = false;
  std::vector<std::string> inputShapes; ///< --input-shape NAME=D0xD1...
  int64_t batchSize = 0;                ///< --batch-size N (0: unset)
  std::string loss = "cross-entropy";
  std::string logits;
  std::string labels = "next-token";
  std::vector<std::string> frozen; ///< --frozen GLOB
  std::string optimizer = "adamw";
  std::vector<std::string> optimizerOptions; ///< --opt KEY=VALUE
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  /// --ep: expert-parallel ranks, folded into dp (divides it).
  int64_t ep = 1;
  /// --moe-dispatcher: alltoall (merak.all_to_all) or allgather.
  std::string moeDispatcher = "alltoall";
  /// --moe-shadow: dynamic shadowing's slots per layer (0: off), and
  /// --moe-shadow-min-rows: its threshold (0: from the cost of the weights).
  int64_t moeShadow = 0, moeShadowMinRows = 0;
  /// --moe-rebalance-every: the trainer's default K for dynamic placement
  /// (0: no placement tables).
  int64_t moeRebalanceEvery = 0;
  /// --moe-chunks: the expert GEMMs' all-to-alls in this many pipelined
  /// chunks (1: whole; 0: auto, chosen by chooseExpertChunks; < 0: bad).
  int64_t moeChunks = 1;
  /// --moe-histogram: with --simulate (or --devices), the experts' shares
  /// of the rows from ./train --moe-histogram instead of --moe-skew.
  std::string moeHistogram;
  /// --moe-all-to-all: flat (one exchange) or hierarchical (two-level).
  std::string moeAllToAll = "flat";
  /// --moe-skew: with --simulate, the Zipf exponent of the experts' loads.
  double moeSkew = 0.0;
  /// --target: "cpu" (merak::rt::cpu, OpenBLAS + MPI) or "cuda"
  /// (merak::rt::gpu, a GPU per rank; --dp/--tp/--zero, no pipelines yet).
  std::string target = "cpu";
  /// --vocab-parallel: -1 the default (when the model qualifies), 0 off,
  /// 1 required.
  int vocabParallel = -1;
  std::string schedule = "1f1b";
  /// --virtual-stages: model chunks per stage (--schedule interleaved).
  int64_t virtualStages = 1;
  /// --simulate: run the schedule on the pipeline simulator and print the
  /// step time, bubble, in-flight micro-batches and peak memory.
  bool simulate = false;
  /// --simulate-trace / --trace-sim: also write the simulated timeline as a Chrome trace.
  std::string simulateTrace;
  /// --device-profile: the device profile JSON --simulate uses (empty:
  /// placeholder costs).
  std::string deviceProfile;
  /// --op-costs: an op-cost file (./train --profile-ops) whose measured op
  /// seconds --simulate uses instead of the roofline (empty: none).
  std::string opCosts;
  std::vector<int64_t> stageBoundaries;
  /// --recompute: none, full, selective or stage-aware; "" the default
  /// (stage-aware with a memory budget, none without).
  std::string recompute;
  /// --memory-per-device: bytes, with an optional suffix (KB, MB, GB, KiB,
  /// MiB, GiB); "" none.
  std::string memoryPerDevice;
  int64_t zero = 0;
  double bucketMb = 25.0;
  /// --tp-overlap: "none" or "sub-pipeline" (merak-overlap).
  std::string tpOverlap = "none";
  /// --dp-overlap: start the dp collectives early, wait for them late.
  bool dpOverlap = true;
  /// --fused-attention: merak-fuse-attention (see Passes.td).
  bool fusedAttention = true;
  /// --weight-cast-cache: merak-cache-param-casts (see Passes.td).
  bool weightCastCache = true;
  /// --grad-accumulation-fusion: merak-fuse-grad-accumulation (see Passes.td).
  bool gradAccumulationFusion = true;
  /// --sequence-parallel: merak-sequence-parallel with --tp > 1; -1 (not
  /// given): off for a given mesh, searched with --devices.
  int sequenceParallel = -1;
  /// --sync-batchnorm: merak-sync-batch-norm (see Passes.td).
  bool syncBatchNorm = false;
  /// --fused-experts: merak-fuse-experts (MoE expert GEMMs) in the import
  /// clean-up.
  bool fusedExperts = true;
  /// --fused-scan: merak-raise-linear-scan fuses Mamba's selective scan
  /// (merak.selective_scan) in the import clean-up.
  bool fusedScan = true;
  /// --moe-aux-loss: the MoE load-balancing loss coefficient
  /// (merak-moe-aux-loss); 0: none.
  double moeAuxLoss = 0;
  /// --moe-capacity-factor: each expert's capacity in rows over S / E
  /// (merak-moe-capacity; 0: dropless), and --moe-drop-policy: probs or
  /// position.
  double moeCapacityFactor = 0;
  std::string moeDropPolicy = "probs";
  /// --precision: fp32 or bf16 (merak-mixed-precision).
  std::string precision = "fp32";
  /// --grad-reduce: fp32 or bf16 (merak-grad-reduce-precision).
  std::string gradReduce = "fp32";
  bool verbose = false, emitBytecode = false, noCleanup = false;
  /// The parallel plan: "" none, "text" or "json".
  std::string report;
  /// Where the report goes: a file, "-" for stdout, or "" for
  /// CompileResult::report.
  std::string reportFile = "-";
  /// A runtime installed by `cmake --install` (its include/ and lib/); empty:
  /// the build tree's, recorded when merak was configured.
  std::string runtimeDir;
  /// --devices N: the planner (lib/Planner/Planner.cpp) chooses dp, tp, pp,
  /// the micro-batches and the schedule for N devices, then compiles that
  /// plan; 0: the mesh is given by dp/tp/pp. meshGiven: any of --dp, --tp,
  /// --pp, --microbatches, --schedule was given (an error with --devices).
  int64_t devices = 0;
  bool meshGiven = false;
  /// --planner-space: "auto" (everything the planner knows) or "megatron"
  /// (the Megatron-LM hand policy: 1F1B, full recomputation, layers split
  /// uniformly, no overlap; only dp/tp/pp and micro-batches searched).
  std::string plannerSpace = "auto";
  /// The planner's JSON, put into --report=json as "planner" (internal).
  std::string plannerJson;
  /// Apply MLIR's pass-manager command-line options (merak-compile
  /// registers them; a library caller does not).
  bool commandLinePassOptions = false;
};

struct CompileResult {
  bool ok = false;
  /// Everything the compiler printed to stderr: errors with their
  /// locations, remarks, the trainable-parameter and memory summaries.
  std::string diagnostics;
  /// The report, when CompileOptions::reportFile is "".
  std::string report;
};

/// Compiles `options.input` as merak-compile would, in this process, with
/// the diagnostics captured. Safe to call repeatedly (each call has its own
/// MLIRContext; no command-line state is read).
CompileResult compileModel(const CompileOptions &options);

/// compileModel with the diagnostics written to `log` as they happen and
/// the report (when reportFile is "") to `*report`; merak-compile's body.
/// Returns the exit status: 0 on success.
int runCompile(const CompileOptions &options, llvm::raw_ostream &log, std::string *report);

/// With options.devices set: plans (Planner.h) and prints the plan. Returns
/// the exit status when nothing is left to compile (an error, or a .mlir
/// model, which is planned only); otherwise nullopt with `planned` the
/// options of the chosen plan, which runCompile then compiles.
std::optional<int> planCompile(const CompileOptions &options, llvm::raw_ostream &log,
                               std::string *report, CompileOptions &planned);

struct PlanCandidate;
struct PlannerResult;
/// The options that compile candidate `c` (from the --devices options):
/// its mesh, schedule, recomputation, ZeRO and overlap.
CompileOptions candidateOptions(const CompileOptions &options, const PlanCandidate &c,
                                double memoryPerDevice);

/// With --op-costs (and a pipelined plan): the chosen plan and its fitting
/// runners-up are compiled to the schedule phase and simulated with the
/// measured op costs (what the planner's probes, compiled at the whole
/// batch, cannot look up for the candidates' micro-batch shapes); the
/// fastest of them becomes the plan. Candidates that are not pipelined, or
/// that fail to compile, keep their estimate and are not re-ranked; a
/// chosen plan that is not pipelined is kept (with a note).
void refinePlanWithOpCosts(const CompileOptions &options, PlannerResult &plan,
                           llvm::raw_ostream &log);

/// A Mixture-of-Experts model (plan.experts): compiles the chosen plan and
/// the best runners-up that fit (with a pipeline schedule, which --simulate
/// needs) with every ep dividing their dp, --moe-shadow 0, 1 and 2 and,
/// where each rank holds several experts, --moe-rebalance-every 0 and
/// kPlannedRebalanceEvery and, where the ep group spans nodes,
/// --moe-all-to-all flat and hierarchical, simulates each
/// program (--moe-skew from `options`), and makes the fastest that fits the
/// plan, ranked by those simulations alone.
void refinePlanForExperts(const CompileOptions &options, PlannerResult &plan,
                          llvm::raw_ostream &log);
/// The rebalancing period the planner gives a plan that rebalances
/// (FlexMoE re-plans every few hundred steps; the move is taken only when
/// it pays, so a shorter period costs only the counts' all-reduce).
constexpr int64_t kPlannedRebalanceEvery = 50;

} // namespace mlir::merak

#endif
