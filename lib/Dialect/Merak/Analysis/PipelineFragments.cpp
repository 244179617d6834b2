//===- PipelineFragments.cpp - the fragments of a cut module -------------===//
//
// The functions merak-pipeline (and merak-split-backward, merak-optimizer)
// leave in a pipelined module, in the index order the generated program and
// the runtime use, and the schedule merak-record-schedule recorded (see
// PipelineSchedule.h).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::merak;

bool mlir::merak::isPipelineModule(ModuleOp module) { return (bool)getPipelinePlan(module); }

FailureOr<SmallVector<func::FuncOp>> mlir::merak::pipelineFragments(ModuleOp module) {
  PipelinePlanAttr plan = getPipelinePlan(module);
  if (!plan)
    return module.emitError("not a pipeline module (run merak-pipeline)");
  int64_t stages = plan.getStages(), ranks = plan.getRanks();
  SymbolTable symbols(module); // one lookup per fragment
  SmallVector<func::FuncOp> out;
  for (int64_t s = 0; s < stages; ++s) {
    for (StringRef kind : {"forward", "backward", "update"}) {
      if (kind == "update" && s >= ranks)
        continue; // interleaved: one update per rank, on its first chunk
      std::string name = ("stage" + Twine(s) + "_" + kind).str();
      auto fn = symbols.lookup<func::FuncOp>(name);
      if (!fn)
        return module.emitError("pipeline module without @") << name << " (run merak-optimizer)";
      out.push_back(fn);
    }
    // The parts of a split backward (merak-split-backward), when present.
    for (StringRef kind : {"forward_keep", "recompute", "backward_weight", "backward_last",
                           "backward_weight_last", "prepare"})
      if (auto fn = symbols.lookup<func::FuncOp>(("stage" + Twine(s) + "_" + kind).str()))
        out.push_back(fn);
  }
  return out;
}

std::pair<int64_t, StringRef> mlir::merak::pipelineFragmentStageKind(func::FuncOp fragment) {
  StringRef name = fragment.getSymName();
  auto [head, kind] = name.split('_');
  int64_t s = -1;
  if (!head.consume_front("stage") || head.getAsInteger(10, s))
    return {-1, ""};
  return {s, kind};
}

std::optional<RecordedSchedule> mlir::merak::recordedSchedule(ModuleOp module) {
  PipelinePlanAttr plan = getPipelinePlan(module);
  if (!plan)
    return std::nullopt;
  StringAttr name = plan.getSchedule();
  return RecordedSchedule{parsePipelineSchedule(name ? name.getValue() : "1f1b")
                              .value_or(PipelineScheduleKind::OneFOneB),
                          plan.getRanks(), plan.getMicrobatches(), plan.getVirtualStages()};
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
