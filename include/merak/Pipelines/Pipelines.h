//===- Pipelines.h - merak's pass pipelines, phase by phase -----*- C++ -*-===//
//
// One options struct from the command line (merak-compile, the Python
// module, the planner) down to the passes, and one builder that adds the
// passes of every phase in (from, to] to a pass manager. merak-compile runs
// exactly this; merak-opt replays it by name:
//
//   merak-opt model.mlir --merak-import-cleanup
//   merak-opt clean.mlir --merak-training-pipeline='to=lower tp=2 pp=2 microbatches=2'
//
// (each phase's passes are listed in docs/architecture.md).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_PIPELINES_PIPELINES_H
#define MERAK_PIPELINES_PIPELINES_H

#include "merak/Pipelines/Phase.h"
#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace mlir::merak {

/// Everything the passes of the training pipeline are parameterised by; one
/// name per quantity (the flag's, without dashes).
struct PipelineOptions {
  // The training step (merak-attach-loss, merak-autodiff, merak-optimizer).
  std::string loss = "cross-entropy";
  std::string logits;
  std::string labels = "next-token";
  /// merak-moe-aux-loss's coefficient; 0: no load-balancing loss.
  double moeAuxLoss = 0;
  /// merak-moe-capacity's capacity-factor (0: dropless, no pass) and
  /// drop-policy.
  double moeCapacityFactor = 0;
  std::string moeDropPolicy = "probs";
  std::vector<std::string> frozen;
  /// merak-optimizer's textual options (optimizer=adamw lr=... ...).
  std::string optimizer = "optimizer=adamw";
  bool fusedAttention = true;
  /// merak-cache-param-casts in pipelined programs: bf16 weights cast once a
  /// step per stage.
  bool weightCastCache = true;
  /// merak-fuse-grad-accumulation in the lower phase: weight-gradient GEMMs
  /// accumulate into their accumulators.
  bool gradAccumulationFusion = true;
  /// merak-sync-batch-norm: BatchNorm statistics over all dp ranks' rows.
  bool syncBatchNorm = false;
  /// Sliding-window and soft-capped attention fused too (the CPU kernels
  /// have them, the CUDA ones not): false for --target cuda.
  bool attentionCpuForms = true;
  std::string precision = "fp32";
  // The mesh. dp: data-parallel ranks (the module has the per-rank batch);
  // tp: tensor-parallel ranks; pp: pipeline ranks, each holding
  // virtualStages model chunks (pp * virtualStages model stages).
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1, virtualStages = 1;
  // ep: expert-parallel ranks, folded into dp (merak-expert-parallel).
  int64_t ep = 1;
  std::string moeDispatcher = "alltoall"; ///< alltoall or allgather
  int64_t moeShadow = 0, moeShadowMinRows = 0; ///< merak-expert-parallel's shadow options
  int64_t moeRebalanceEvery = 0; ///< merak-expert-parallel's rebalance-every
  int64_t moeChunks = 1; ///< merak-expert-parallel's chunks (> 1: ep-overlap too)
  bool moeHierarchical = false; ///< --moe-all-to-all hierarchical
  bool vocabParallel = false, vocabParallelFallback = false;
  /// merak-sequence-parallel after merak-tensor-parallel (tp > 1).
  bool sequenceParallel = false;
  int64_t zero = 0;
  int64_t bucketBytes = 25 * 1024 * 1024;
  // Pipelines: cut points (empty: balanced), schedule, recomputation.
  std::vector<int64_t> stageBoundaries;
  std::string schedule = "1f1b";
  std::string recompute = "none";
  int64_t memoryPerDevice = 0;
  // Overlap.
  std::string tpOverlap = "none";
  bool dpOverlap = true;
  std::string gradReduce = "fp32";

  /// The pipelined path even for one stage and micro-batch (the planner's
  /// probes of stage costs).
  bool alwaysPipelined = false;

  /// Stages, micro-batches or recomputation: the pipelined path (fragments
  /// per stage, even for one stage).
  bool pipelined() const {
    return alwaysPipelined || pp > 1 || microbatches > 1 || recompute != "none";
  }
};

/// The clean-up that follows import: fold shape arithmetic, canonicalise,
/// CSE, fuse decomposed LayerNorm/GELU, raise unrolled scans (and fuse
/// Mamba's with `fuseSelectiveScan`), fuse MoE expert GEMMs with
/// `fuseExperts`, drop parameters nothing reads (merak-import-cleanup).
void buildImportCleanupPipeline(OpPassManager &pm, bool fuseExperts = true,
                                bool fuseSelectiveScan = true);

/// The GEMMs as the program emits them, the lower phase's first passes:
/// sums of short-contraction products joined into one (merak-fuse-gemm-sums),
/// transposed operands read in place (merak-fold-transposes) and, with
/// `gradAccumulationFusion`, weight gradients added into their accumulators
/// (merak-fuse-grad-accumulation). The cost model reads programs in this
/// form (--simulate, the planner's probe).
void addEmittedGemmPasses(OpPassManager &pm, bool gradAccumulationFusion);

/// Adds the passes of the phases after `from` up to `to` (a module at
/// `from`: Import is the cleaned-up imported module). Fails on bad options
/// (a bad optimizer option is printed to `log`).
LogicalResult buildMerakPipeline(OpPassManager &pm, CompilePhase from, CompilePhase to,
                                 const PipelineOptions &options, llvm::raw_ostream &log);

/// "import", "training", ... (as --compile-to spells them).
StringRef phaseName(CompilePhase phase);
std::optional<CompilePhase> parsePhase(StringRef name);

/// Registers merak-import-cleanup and merak-training-pipeline.
void registerMerakPipelines();

} // namespace mlir::merak

#endif
