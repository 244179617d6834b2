//===- PipelineCompile.cpp - merak-compile's pipeline path ----------------===//
#include "merak/Tools/PipelineCompile.h"

#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::merak;

LogicalResult mlir::merak::buildPipelineTrainingPipeline(OpPassManager &pm,
                                                         const TrainingOptions &training,
                                                         const PipelineCompileOptions &pipeline,
                                                         llvm::raw_ostream &log) {
  // Tensor parallelism rewrites @forward to local shapes first, so the
  // stages hold shards and the tp collectives (differentiated per stage).
  addForwardToLossPasses(pm, training);
  MerakPipelineOptions cut;
  cut.pp = pipeline.pp * pipeline.virtualStages;
  cut.virtualStages = pipeline.virtualStages;
  cut.microbatches = pipeline.microbatches;
  cut.dp = training.dp;
  cut.zero = training.zero;
  cut.boundaries.assign(pipeline.boundaries.begin(), pipeline.boundaries.end());
  cut.frozen.assign(training.frozen.begin(), training.frozen.end());
  pm.addPass(createMerakPipeline(cut));
  if (!pipeline.recompute.empty()) {
    MerakRecomputeOptions rc;
    rc.mode = pipeline.recompute;
    rc.memoryPerDevice = pipeline.memoryPerDevice;
    rc.schedule = pipeline.schedule;
    // Optimizer state per parameter: AdamW's two moments, SGD's momentum.
    StringRef opt = training.optimizer;
    rc.optimizerSlots = opt.contains("optimizer=sgd") ? 1 : 2;
    pm.addPass(createMerakRecompute(rc));
    // Zero-bubble and shifted-critical-path schedules run the backward in
    // parts (weight gradients later; the recomputation earlier).
    if (pipeline.schedule == "zb-h1" || pipeline.schedule == "zb-h2" ||
        pipeline.schedule == "shifted-critical-path") {
      MerakSplitBackwardOptions split;
      split.schedule = pipeline.schedule;
      pm.addPass(createMerakSplitBackward(split));
    }
  }
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

std::optional<int64_t> mlir::merak::parseByteSize(StringRef text) {
  text = text.trim();
  if (text.empty())
    return 0;
  size_t digits = 0;
  while (digits < text.size() && isdigit((unsigned char)text[digits]))
    ++digits;
  uint64_t n = 0;
  if (digits == 0 || text.take_front(digits).getAsInteger(10, n))
    return std::nullopt;
  StringRef suffix = text.drop_front(digits).trim();
  uint64_t scale = 1;
  std::pair<StringRef, uint64_t> units[] = {
      {"", 1},          {"B", 1},           {"KB", 1000ull},          {"MB", 1000000ull},
      {"GB", 1000000000ull}, {"TB", 1000000000000ull}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},   {"TiB", 1ull << 40}};
  bool known = false;
  for (auto &[u, f] : units)
    if (suffix.equals_insensitive(u))
      scale = f, known = true;
  if (!known || n > (uint64_t)INT64_MAX / scale)
    return std::nullopt;
  return (int64_t)(n * scale);
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

std::optional<RecordedSchedule> mlir::merak::recordedSchedule(ModuleOp module) {
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  if (!plan)
    return std::nullopt;
  auto name = plan.getAs<StringAttr>("schedule");
  auto v = plan.getAs<IntegerAttr>("virtual_stages");
  return RecordedSchedule{parsePipelineSchedule(name ? name.getValue() : "1f1b")
                              .value_or(PipelineScheduleKind::OneFOneB),
                          plan.getAs<IntegerAttr>("stages").getInt() / (v ? v.getInt() : 1),
                          plan.getAs<IntegerAttr>("microbatches").getInt(), v ? v.getInt() : 1};
}

void mlir::merak::printPipelineScheduleOf(ModuleOp module, llvm::raw_ostream &os) {
  std::optional<RecordedSchedule> r = recordedSchedule(module);
  if (!r)
    return;
  printPipelineSchedule(
      r->kind, r->microbatches,
      buildPipelineSchedule(r->kind, r->stages, r->microbatches, r->virtualStages,
                            recordedKeptMicrobatches(module)),
      os);
}
