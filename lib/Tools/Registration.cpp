//===- Registration.cpp - dialects, passes and pipelines of merak ---------===//
#include "merak/Tools/Registration.h"

#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void merak::registerMerakDialects(DialectRegistry &registry) {
  registry.insert<MerakDialect, func::FuncDialect>();
  registerVJPExternalModels(registry);
}

void merak::buildImportCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createMerakFoldConstants());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createMerakFuseDecomposed());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createMerakDropUnusedParams());
}

void merak::registerAllMerakPasses() {
  registerMerakPasses();
  // Upstream passes merak pipelines use.
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
  PassPipelineRegistration<>(
      "merak-import-cleanup",
      "Fold shape arithmetic, canonicalise, CSE, fuse decomposed LayerNorm/"
      "GELU and drop unused parameters "
      "(what merak-compile runs after import)",
      [](OpPassManager &pm) { buildImportCleanupPipeline(pm); });
}
