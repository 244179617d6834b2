//===- PipelineCompile.cpp - merak-compile's pipeline path ----------------===//
#include "merak/Tools/PipelineCompile.h"

#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Dialect/Merak/Transforms/PipelineSimulator.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::merak;

LogicalResult mlir::merak::buildPipelineTrainingPipeline(OpPassManager &pm,
                                                         const TrainingOptions &training,
                                                         const PipelineCompileOptions &pipeline,
                                                         llvm::raw_ostream &log) {
  // Tensor parallelism rewrites @forward to local shapes first, so the
  // stages hold shards and the tp collectives (differentiated per stage).
  if (training.tp > 1) {
    MerakTensorParallelOptions tensorParallel;
    tensorParallel.tp = training.tp;
    tensorParallel.vocabParallel = training.vocabParallel;
    tensorParallel.vocabParallelFallback = training.vocabParallelFallback;
    pm.addPass(createMerakTensorParallel(tensorParallel));
  }
  MerakAttachLossOptions loss;
  loss.loss = training.loss;
  loss.logits = training.logits;
  loss.labels = training.labels;
  pm.addPass(createMerakAttachLoss(loss));
  MerakPipelineOptions cut;
  cut.pp = pipeline.pp;
  cut.microbatches = pipeline.microbatches;
  cut.dp = training.dp;
  cut.zero = training.zero;
  cut.boundaries.assign(pipeline.boundaries.begin(), pipeline.boundaries.end());
  cut.frozen.assign(training.frozen.begin(), training.frozen.end());
  pm.addPass(createMerakPipeline(cut));
  std::unique_ptr<Pass> opt = createMerakOptimizer();
  if (failed(opt->initializeOptions(training.optimizer, [&](const Twine &msg) {
        log << "merak-compile: error: " << msg << "\n";
        return failure();
      })))
    return failure();
  pm.addPass(std::move(opt));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  return success();
}

void mlir::merak::setPipelineSchedule(ModuleOp module, StringRef schedule, int64_t virtualStages) {
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  if (!plan)
    return;
  NamedAttrList attrs(plan);
  Builder b(module.getContext());
  attrs.set("schedule", b.getStringAttr(schedule));
  if (virtualStages > 1)
    attrs.set("virtual_stages", b.getI64IntegerAttr(virtualStages));
  module->setAttr(kPipelineAttr, attrs.getDictionary(module.getContext()));
}

namespace {
/// The schedule recorded on the module.
struct RecordedSchedule {
  PipelineScheduleKind kind;
  int64_t stages, microbatches, virtualStages;
};

std::optional<RecordedSchedule> recordedSchedule(ModuleOp module) {
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  if (!plan)
    return std::nullopt;
  auto name = plan.getAs<StringAttr>("schedule");
  auto v = plan.getAs<IntegerAttr>("virtual_stages");
  return RecordedSchedule{parsePipelineSchedule(name ? name.getValue() : "1f1b")
                              .value_or(PipelineScheduleKind::OneFOneB),
                          plan.getAs<IntegerAttr>("stages").getInt(),
                          plan.getAs<IntegerAttr>("microbatches").getInt(), v ? v.getInt() : 1};
}

int64_t staticBytes(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return shaped.getNumElements() * ((shaped.getElementTypeBitWidth() + 7) / 8);
}
} // namespace

void mlir::merak::printPipelineScheduleOf(ModuleOp module, llvm::raw_ostream &os) {
  std::optional<RecordedSchedule> r = recordedSchedule(module);
  if (!r)
    return;
  printPipelineSchedule(
      r->kind, r->microbatches,
      buildPipelineSchedule(r->kind, r->stages, r->microbatches, r->virtualStages), os);
}

FailureOr<SimulatedStep> mlir::merak::simulatePipelineOf(ModuleOp module,
                                                         const PipelineSimulationOptions &options,
                                                         std::string &error,
                                                         llvm::raw_ostream *trace) {
  std::optional<RecordedSchedule> r = recordedSchedule(module);
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  auto flops = plan ? plan.getAs<ArrayAttr>("costs") : ArrayAttr();
  if (!r || !flops || (int64_t)flops.size() != r->stages) {
    error = "no pipeline plan to simulate";
    return failure();
  }
  int64_t p = r->stages, v = r->virtualStages;
  const bool split = r->kind == PipelineScheduleKind::ZeroBubbleH1;
  PipelineCostModel costs;
  costs.forward.clear();
  costs.backward.clear();
  costs.weight.clear();
  // Model stage k = c * p + s runs 1/v of stage s's work.
  for (int64_t k = 0; k < p * v; ++k) {
    double f = cast<IntegerAttr>(flops[k % p]).getInt() / options.flopsPerSecond / v;
    costs.forward.push_back(f);
    costs.backward.push_back(split ? f : 2 * f);
    costs.weight.push_back(split ? f : 0.0);
  }
  // Messages: the activations stage c's forward sends ("act:N" results),
  // the same bytes back as gradients. Interleaved chunks have no cuts of
  // their own: every boundary takes the largest cut's bytes.
  SmallVector<double> cut;
  for (int64_t c = 0; c + 1 < p; ++c) {
    double bytes = 0;
    if (auto fwd = module.lookupSymbol<func::FuncOp>(("stage" + Twine(c) + "_forward").str()))
      for (unsigned i = 0; i < fwd.getNumResults(); ++i)
        if (auto n = fwd.getResultAttrOfType<StringAttr>(i, "merak.name");
            n && n.getValue().starts_with("act:"))
          bytes += staticBytes(fwd.getResultTypes()[i]);
    cut.push_back(bytes);
  }
  costs.actBytes.clear();
  if (v == 1) {
    costs.actBytes.assign(cut.begin(), cut.end());
  } else {
    double largest = 0;
    for (double b : cut)
      largest = std::max(largest, b);
    costs.actBytes.assign(p * v - 1, largest);
  }
  if (costs.actBytes.empty())
    costs.actBytes.push_back(0.0);
  costs.gradBytes = costs.actBytes;
  costs.bandwidth = options.bandwidth;
  costs.latency = options.latency;

  auto program = buildPipelineSchedule(r->kind, p, r->microbatches, v);
  FailureOr<PipelineSimulation> sim = simulatePipeline(program, costs, trace, &error);
  if (failed(sim))
    return failure();
  if (trace)
    writePipelineTrace(*sim, *trace);
  SimulatedStep step;
  step.stepTime = sim->stepTime;
  step.bubbleFraction = sim->bubbleFraction;
  step.bubbleRatio = sim->bubbleRatio;
  step.peakInFlight.assign(sim->peakInFlight.begin(), sim->peakInFlight.end());
  return step;
}

void mlir::merak::printSimulatedStep(const SimulatedStep &step, llvm::raw_ostream &os,
                                     StringRef prefix) {
  os << prefix
     << llvm::formatv("simulated step: {0:e3} s; bubble {1:F4} (idle / (stages x step)), "
                      "idle / compute {2:F4}\n",
                      step.stepTime, step.bubbleFraction, step.bubbleRatio);
  os << prefix << "simulated peak in-flight micro-batches per stage:";
  for (int64_t n : step.peakInFlight)
    os << " " << n;
  os << "\n";
}
