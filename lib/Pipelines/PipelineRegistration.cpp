//===- PipelineRegistration.cpp - merak's named pipelines -----------------===//
//
// merak-opt replays what merak-compile runs: --merak-import-cleanup after
// import, then --merak-training-pipeline='from=import to=<phase> ...' with
// the same quantities as merak-compile's flags (pipeline option names are
// the flags' names).
//
//===----------------------------------------------------------------------===//
#include "merak/Pipelines/Pipelines.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct TrainingPipelineOptions : public PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> from{*this, "from", llvm::cl::desc("The phase of the input module"),
                           llvm::cl::init("import")};
  Option<std::string> to{*this, "to",
                         llvm::cl::desc("The last phase to run (training, shard, pipeline, "
                                        "recompute, schedule, overlap, lower)"),
                         llvm::cl::init("lower")};
  Option<std::string> loss{*this, "loss", llvm::cl::init("cross-entropy")};
  Option<std::string> logits{*this, "logits", llvm::cl::init("")};
  Option<std::string> labels{*this, "labels", llvm::cl::init("next-token")};
  ListOption<std::string> frozen{*this, "frozen", llvm::cl::desc("Globs of frozen params")};
  Option<std::string> optimizer{
      *this, "optimizer", llvm::cl::desc("merak-optimizer's options, e.g. {optimizer=sgd lr=0.1}"),
      llvm::cl::init("optimizer=adamw")};
  Option<bool> fusedAttention{*this, "fused-attention", llvm::cl::init(true)};
  Option<bool> weightCastCache{*this, "weight-cast-cache", llvm::cl::init(true)};
  Option<bool> gradAccumulationFusion{*this, "grad-accumulation-fusion", llvm::cl::init(true)};
  Option<bool> syncBatchNorm{*this, "sync-batchnorm", llvm::cl::init(false)};
  Option<std::string> precision{*this, "precision", llvm::cl::init("fp32")};
  Option<int64_t> dp{*this, "dp", llvm::cl::init(1)};
  Option<int64_t> tp{*this, "tp", llvm::cl::init(1)};
  Option<int64_t> pp{*this, "pp", llvm::cl::init(1)};
  Option<int64_t> microbatches{*this, "microbatches", llvm::cl::init(1)};
  Option<int64_t> virtualStages{*this, "virtual-stages", llvm::cl::init(1)};
  Option<bool> vocabParallel{*this, "vocab-parallel", llvm::cl::init(false)};
  Option<bool> vocabParallelFallback{*this, "vocab-parallel-fallback", llvm::cl::init(false)};
  Option<bool> sequenceParallel{*this, "sequence-parallel", llvm::cl::init(false)};
  Option<int64_t> zero{*this, "zero", llvm::cl::init(0)};
  Option<int64_t> bucketBytes{*this, "bucket-bytes", llvm::cl::init(25 * 1024 * 1024)};
  ListOption<int64_t> stageBoundaries{*this, "stage-boundaries"};
  Option<std::string> schedule{*this, "schedule", llvm::cl::init("1f1b")};
  Option<std::string> recompute{*this, "recompute", llvm::cl::init("none")};
  Option<int64_t> memoryPerDevice{*this, "memory-per-device", llvm::cl::init(0)};
  Option<std::string> tpOverlap{*this, "tp-overlap", llvm::cl::init("none")};
  Option<bool> dpOverlap{*this, "dp-overlap", llvm::cl::init(true)};
  Option<std::string> gradReduce{*this, "grad-reduce", llvm::cl::init("fp32")};

  PipelineOptions options() const {
    PipelineOptions o;
    o.loss = loss, o.logits = logits, o.labels = labels;
    o.frozen.assign(frozen.begin(), frozen.end());
    o.optimizer = optimizer, o.fusedAttention = fusedAttention, o.precision = precision;
    o.syncBatchNorm = syncBatchNorm;
    o.weightCastCache = weightCastCache;
    o.gradAccumulationFusion = gradAccumulationFusion;
    o.dp = dp, o.tp = tp, o.pp = pp, o.microbatches = microbatches;
    o.virtualStages = virtualStages, o.vocabParallel = vocabParallel;
    o.vocabParallelFallback = vocabParallelFallback, o.zero = zero;
    o.sequenceParallel = sequenceParallel;
    o.bucketBytes = bucketBytes;
    o.stageBoundaries.assign(stageBoundaries.begin(), stageBoundaries.end());
    o.schedule = schedule, o.recompute = recompute, o.memoryPerDevice = memoryPerDevice;
    o.tpOverlap = tpOverlap, o.dpOverlap = dpOverlap, o.gradReduce = gradReduce;
    return o;
  }
};
} // namespace

void mlir::merak::registerMerakPipelines() {
  PassPipelineRegistration<>(
      "merak-import-cleanup",
      "Fold shape arithmetic, canonicalise, CSE, fuse decomposed LayerNorm/"
      "GELU and drop unused parameters (what merak-compile runs after import)",
      [](OpPassManager &pm) { buildImportCleanupPipeline(pm); });
  registerPassPipeline(
      "merak-training-pipeline",
      "The phases merak-compile runs after import, from `from` to `to` "
      "(training, shard, pipeline, recompute, schedule, overlap, lower), with "
      "merak-compile's quantities as options",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> error) -> LogicalResult {
        TrainingPipelineOptions cl;
        if (failed(cl.parseFromString(text)))
          return failure();
        std::optional<CompilePhase> from = parsePhase(cl.from), to = parsePhase(cl.to);
        if (!from || !to || *from > *to || *to > CompilePhase::Lower)
          return error("merak-training-pipeline: bad phases from=" + cl.from + " to=" + cl.to +
                       " (expected import <= from <= to <= lower, as --compile-to spells "
                       "them)");
        std::string log;
        llvm::raw_string_ostream os(log);
        if (failed(buildMerakPipeline(pm, *from, *to, cl.options(), os)))
          return error(log);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(TrainingPipelineOptions());
      });
}
