//===- Registration.cpp - dialects, passes and pipelines of merak ---------===//
#include "merak/Tools/Registration.h"

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

void merak::reportTrainableParameters(ModuleOp module, llvm::raw_ostream &os) {
  // The gradient function's results name exactly the trainable parameters.
  int64_t trainable = 0, elements = 0, total = 0;
  // Optimizer state (optimizer.<name>.<slot>.<param>) is not a parameter.
  for (ParamOp param : module.getOps<ParamOp>())
    if (!param.getSymName().starts_with("optimizer."))
      ++total;
  // (With ZeRO the gradients are parts: count the parameters' elements.)
  if (auto grad = module.lookupSymbol<func::FuncOp>("loss_grad"))
    for (unsigned i = 1; i < grad.getNumResults(); ++i) {
      ++trainable;
      auto name = grad.getResultAttrOfType<StringAttr>(i, "merak.name");
      ParamOp param = name && name.getValue().starts_with("grad:")
                          ? module.lookupSymbol<ParamOp>(name.getValue().drop_front(5))
                          : ParamOp();
      elements += cast<RankedTensorType>(param ? param.getType() : grad.getResultTypes()[i])
                      .getNumElements();
    }
  os << "merak-compile: " << trainable << " trainable parameters (" << elements
     << " elements), " << total - trainable << " frozen\n";
}

void merak::registerAllMerakPasses() {
  registerMerakPasses();
  // Upstream passes merak pipelines use.
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
  registerMerakPipelines();
}
