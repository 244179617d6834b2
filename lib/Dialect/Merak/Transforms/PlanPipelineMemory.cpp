//===- PlanPipelineMemory.cpp - merak-plan-pipeline-memory ----------------===//
//
// merak-plan-memory's plan for every fragment of a pipelined module (see
// Passes.td): one arena per fragment, one parameter and one constant
// storage for the module.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKPLANPIPELINEMEMORY
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-plan-pipeline-memory"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakPlanPipelineMemoryPass
    : merak::impl::MerakPlanPipelineMemoryBase<MerakPlanPipelineMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<SmallVector<func::FuncOp>> frags = pipelineFragments(module);
    if (failed(frags) || failed(planMemory(module, *frags)))
      return signalPassFailure();
  }
};
} // namespace
