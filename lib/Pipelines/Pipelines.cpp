//===- Pipelines.cpp - merak's pass pipelines, phase by phase -------------===//
//
//   import cleanup   merak-fold-constants, canonicalize, cse,
//                    merak-fuse-decomposed, merak-raise-linear-scan,
//                    merak-fuse-experts, canonicalize, merak-drop-unused-params
//   training         merak-split-batch (dp x micro-batches > 1), merak-record-mesh,
//                    merak-record-index-limits, merak-moe-capacity (a capacity
//                    factor), merak-expert-parallel (ep > 1),
//                    merak-tensor-parallel (tp > 1), merak-fuse-attention,
//                    merak-mixed-precision (bf16), merak-attach-loss,
//                    merak-moe-aux-loss (a coefficient),
//                    merak-freeze-gradientless, then
//                    serial:    merak-autodiff, merak-data-parallel, merak-optimizer
//                    pipelined: merak-pipeline, merak-recompute and
//                               merak-split-backward (not at --compile-to=pipeline),
//                               merak-optimizer, merak-record-schedule
//                    canonicalize, cse
//   overlap          merak-overlap, merak-grad-reduce-precision (bf16)
//   lower            merak-fold-transposes, merak-plan-memory (serial) or
//                    merak-plan-pipeline-memory (pipelined)
//
//===----------------------------------------------------------------------===//
#include "merak/Pipelines/Pipelines.h"

#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
constexpr std::pair<CompilePhase, llvm::StringLiteral> kPhaseNames[] = {
    {CompilePhase::Import, "import"},       {CompilePhase::Training, "training"},
    {CompilePhase::Shard, "shard"},         {CompilePhase::Pipeline, "pipeline"},
    {CompilePhase::Recompute, "recompute"}, {CompilePhase::Schedule, "schedule"},
    {CompilePhase::Overlap, "overlap"},     {CompilePhase::Lower, "lower"},
    {CompilePhase::Emit, "emit"},           {CompilePhase::Binary, "binary"}};

/// merak-optimizer with its textual options (one parser and one set of
/// diagnostics with merak-opt's --merak-optimizer).
LogicalResult addOptimizer(OpPassManager &pm, const std::string &options,
                           llvm::raw_ostream &log) {
  std::unique_ptr<Pass> opt = createMerakOptimizer();
  if (failed(opt->initializeOptions(options, [&](const Twine &msg) {
        if (std::string text = msg.str(); !text.empty())
          log << "merak-compile: error: " << text << "\n";
        return failure();
      })))
    return failure();
  pm.addPass(std::move(opt));
  return success();
}

/// From the imported @forward to @loss: every training pipeline starts so.
void addForwardToLossPasses(OpPassManager &pm, const PipelineOptions &o) {
  if (int64_t parts = o.dp * o.microbatches; parts > 1) {
    MerakSplitBatchOptions batch;
    batch.parts = parts;
    pm.addPass(createMerakSplitBatch(batch));
  }
  MerakRecordMeshOptions mesh;
  mesh.dp = o.dp;
  mesh.tp = o.tp;
  mesh.pp = o.pp;
  mesh.ep = o.ep;
  pm.addPass(createMerakRecordMesh(mesh));
  pm.addPass(createMerakRecordIndexLimits());
  if (o.moeCapacityFactor > 0) {
    MerakMoeCapacityOptions capacity;
    capacity.capacityFactor = o.moeCapacityFactor;
    capacity.policy = o.moeDropPolicy;
    pm.addPass(createMerakMoeCapacity(capacity));
  }
  if (o.ep > 1) {
    MerakExpertParallelOptions expertParallel;
    expertParallel.ep = o.ep;
    expertParallel.tp = o.tp;
    expertParallel.dispatcher = o.moeDispatcher;
    expertParallel.shadow = o.moeShadow;
    expertParallel.shadowMinRows = o.moeShadowMinRows;
    expertParallel.hierarchical = o.moeHierarchical;
    expertParallel.rebalanceEvery = o.moeRebalanceEvery;
    expertParallel.chunks = o.moeChunks;
    pm.addPass(createMerakExpertParallel(expertParallel));
  }
  if (o.tp > 1) {
    MerakTensorParallelOptions tensorParallel;
    tensorParallel.tp = o.tp;
    tensorParallel.vocabParallel = o.vocabParallel;
    tensorParallel.vocabParallelFallback = o.vocabParallelFallback;
    pm.addPass(createMerakTensorParallel(tensorParallel));
  }
  if (o.fusedAttention) {
    MerakFuseAttentionOptions attention;
    attention.frozen.assign(o.frozen.begin(), o.frozen.end());
    attention.cpuForms = o.attentionCpuForms;
    pm.addPass(createMerakFuseAttention(attention));
  }
  // Also moves each tp_identity above the views it reads (a MoE layer's
  // top-k copies of its tokens), before the autodiff sums its gradient.
  if (o.fusedAttention || o.tp > 1)
    pm.addPass(createCanonicalizerPass());
  if (o.tp > 1 && o.sequenceParallel) {
    MerakSequenceParallelOptions sequenceParallel;
    sequenceParallel.tp = o.tp;
    pm.addPass(createMerakSequenceParallel(sequenceParallel));
  }
  if (o.precision != "fp32") {
    MerakMixedPrecisionOptions mixed;
    mixed.precision = o.precision;
    pm.addPass(createMerakMixedPrecision(mixed));
    pm.addPass(createCSEPass());
  }
  if (o.syncBatchNorm)
    pm.addPass(createMerakSyncBatchNorm());
  pm.addPass(createMerakBatchNormStats());
  MerakAttachLossOptions loss;
  loss.loss = o.loss;
  loss.logits = o.logits;
  loss.labels = o.labels;
  // Split over dp ranks and micro-batches, the pieces' means weighed by
  // their label counts average to the whole step's mean.
  loss.globalMean = o.dp * o.microbatches > 1;
  pm.addPass(createMerakAttachLoss(loss));
  if (o.moeAuxLoss > 0) {
    MerakMoeAuxLossOptions aux;
    aux.coefficient = o.moeAuxLoss;
    pm.addPass(createMerakMoeAuxLoss(aux));
  }
  MerakFreezeGradientlessOptions gradientless;
  gradientless.frozen.assign(o.frozen.begin(), o.frozen.end());
  pm.addPass(createMerakFreezeGradientless(gradientless));
}

/// The serial training step: autodiff, data parallelism, the update.
LogicalResult addSerialTrainingPasses(OpPassManager &pm, const PipelineOptions &o,
                                      llvm::raw_ostream &log) {
  MerakAutodiffOptions autodiff;
  autodiff.entry = "loss";
  autodiff.frozen.assign(o.frozen.begin(), o.frozen.end());
  pm.addPass(createMerakAutodiff(autodiff));
  MerakDataParallelOptions dataParallel;
  dataParallel.dp = o.dp;
  dataParallel.bucketBytes = o.bucketBytes;
  dataParallel.zero = o.zero;
  pm.addPass(createMerakDataParallel(dataParallel));
  return addOptimizer(pm, "bucket-bytes=" + std::to_string(o.bucketBytes) + " " + o.optimizer,
                      log);
}

/// The pipelined training step: stages (fragments), recomputation unless
/// `withRecompute` is false, the split backward of the zero-bubble and
/// shifted-critical-path schedules, every stage's update, the schedule.
LogicalResult addPipelinedTrainingPasses(OpPassManager &pm, const PipelineOptions &o,
                                         bool withRecompute, llvm::raw_ostream &log) {
  MerakPipelineOptions cut;
  cut.pp = o.pp * o.virtualStages;
  cut.virtualStages = o.virtualStages;
  cut.microbatches = o.microbatches;
  cut.dp = o.dp;
  cut.zero = o.zero;
  cut.boundaries.assign(o.stageBoundaries.begin(), o.stageBoundaries.end());
  cut.frozen.assign(o.frozen.begin(), o.frozen.end());
  pm.addPass(createMerakPipeline(cut));
  if (withRecompute) {
    MerakRecomputeOptions rc;
    rc.mode = o.recompute;
    rc.memoryPerDevice = o.memoryPerDevice;
    rc.schedule = o.schedule;
    // Optimizer state per parameter: AdamW's two moments, SGD's momentum.
    rc.optimizerSlots = StringRef(o.optimizer).contains("optimizer=sgd") ? 1 : 2;
    rc.castCache = o.weightCastCache; // merak-cache-param-casts' bf16 weights
    pm.addPass(createMerakRecompute(rc));
    // Zero-bubble and shifted-critical-path schedules run the backward in
    // parts (weight gradients later; the recomputation earlier).
    if (o.schedule == "zb-h1" || o.schedule == "zb-h2" || o.schedule == "shifted-critical-path") {
      MerakSplitBackwardOptions split;
      split.schedule = o.schedule;
      pm.addPass(createMerakSplitBackward(split));
    }
  }
  // Sequence parallelism's tp sums of gradients, once a step.
  if (o.tp > 1)
    pm.addPass(createMerakTpGradSumsPerStep());
  if (failed(addOptimizer(pm, o.optimizer, log)))
    return failure();
  // bf16 weights: cast once a step (@stage<s>_prepare), not per micro-batch.
  if (o.weightCastCache)
    pm.addPass(createMerakCacheParamCasts());
  MerakRecordScheduleOptions record;
  record.schedule = o.schedule;
  record.virtualStages = o.virtualStages;
  pm.addPass(createMerakRecordSchedule(record));
  return success();
}
} // namespace

void mlir::merak::addEmittedGemmPasses(OpPassManager &pm, bool gradAccumulationFusion) {
  // A sum of short-contraction products is one GEMM (a recurrent weight's
  // gradient over the time steps).
  pm.addPass(createMerakFuseGemmSums());
  // GEMMs read transposed operands in place (BLAS / cuBLASLt trans flags).
  pm.addPass(createMerakFoldTransposes());
  // Weight-gradient GEMMs add into their accumulators (beta = 1).
  if (gradAccumulationFusion)
    pm.addPass(createMerakFuseGradAccumulation());
}

void mlir::merak::buildImportCleanupPipeline(OpPassManager &pm, bool fuseExperts,
                                             bool fuseSelectiveScan) {
  pm.addPass(createMerakFoldConstants());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createMerakFuseDecomposed());
  pm.addPass(createMerakRaiseLinearScan(MerakRaiseLinearScanOptions{fuseSelectiveScan}));
  if (fuseExperts)
    pm.addPass(createMerakFuseExperts());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createMerakDropUnusedParams());
}

LogicalResult mlir::merak::buildMerakPipeline(OpPassManager &pm, CompilePhase from,
                                              CompilePhase to, const PipelineOptions &o,
                                              llvm::raw_ostream &log) {
  // Emit and binary translate the lowered module.
  if (to > CompilePhase::Lower)
    to = CompilePhase::Lower;
  auto runs = [&](CompilePhase first) { return from < first && first <= to; };
  if (runs(CompilePhase::Training)) {
    addForwardToLossPasses(pm, o);
    if (failed(o.pipelined()
                   ? addPipelinedTrainingPasses(pm, o, to != CompilePhase::Pipeline, log)
                   : addSerialTrainingPasses(pm, o, log)))
      return failure();
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (runs(CompilePhase::Overlap)) {
    MerakOverlapOptions overlap;
    overlap.tpOverlap = o.tpOverlap;
    overlap.dpOverlap = o.dpOverlap;
    overlap.epOverlap = o.moeChunks > 1;
    overlap.bucketBytes = o.bucketBytes;
    pm.addPass(createMerakOverlap(overlap));
    if (o.gradReduce != "fp32") {
      MerakGradReducePrecisionOptions gradReduce;
      gradReduce.precision = o.gradReduce;
      pm.addPass(createMerakGradReducePrecision(gradReduce));
    }
  }
  if (runs(CompilePhase::Lower)) {
    addEmittedGemmPasses(pm, o.gradAccumulationFusion);
    if (o.pipelined())
      pm.addPass(createMerakPlanPipelineMemory());
    else
      pm.addPass(createMerakPlanMemory());
  }
  return success();
}

StringRef mlir::merak::phaseName(CompilePhase phase) {
  for (auto &[p, name] : kPhaseNames)
    if (p == phase)
      return name;
  return "";
}

std::optional<CompilePhase> mlir::merak::parsePhase(StringRef name) {
  for (auto &[p, n] : kPhaseNames)
    if (n == name)
      return p;
  return std::nullopt;
}
