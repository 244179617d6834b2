//===- RecordSchedule.cpp - merak-record-schedule -------------------------===//
//
// Records the pipeline schedule on the plan merak-pipeline left
// (merak.pipeline's "schedule", and "virtual_stages" for interleaved 1F1B),
// where the simulator, the report and the program writer read it back.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"

#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKRECORDSCHEDULE
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-record-schedule"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakRecordSchedulePass
    : merak::impl::MerakRecordScheduleBase<MerakRecordSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(parsePipelineSchedule(schedule))) {
      module.emitError("merak-record-schedule: unknown schedule '") << schedule << "'";
      return signalPassFailure();
    }
    PipelinePlanAttr plan = getPipelinePlan(module);
    if (!plan) {
      LLVM_DEBUG(llvm::dbgs() << "no merak.pipeline: nothing to record\n");
      return;
    }
    module->setAttr(kPipelineAttr,
                    plan.withSchedule(schedule, virtualStages > 1 ? (int64_t)virtualStages
                                                                  : plan.getVirtualStages()));
  }
};
} // namespace
