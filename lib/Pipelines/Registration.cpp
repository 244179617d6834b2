//===- Registration.cpp - dialects, passes and pipelines of merak ---------===//
//
// Everything a merak tool registers: the dialects with every op interface's
// external models, the passes and the named pipelines.
//
//===----------------------------------------------------------------------===//
#include "merak/Pipelines/Registration.h"

#include "merak/Conversion/MerakToEmitC/LowerToRuntimeOpInterface.h"
#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "merak/Dialect/Merak/Interfaces/ShardingModels.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Pipelines/Pipelines.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/Evaluator.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void merak::registerMerakDialects(DialectRegistry &registry) {
  registry.insert<MerakDialect, func::FuncDialect, emitc::EmitCDialect>();
  registerVJPExternalModels(registry);
  registerShardingRuleExternalModels(registry);
  registerEvaluatorExternalModels(registry);
  registerMerakToEmitCExternalModels(registry);
}

void merak::registerAllMerakPasses() {
  registerMerakPasses();
  // Upstream passes merak pipelines use.
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
  registerMerakPipelines();
}
