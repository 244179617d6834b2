//===- Registration.cpp - dialects, passes and pipelines of merak ---------===//
#include "merak/Tools/Registration.h"

#include "merak/Conversion/MerakToEmitC/LowerToRuntimeOpInterface.h"
#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void merak::registerMerakDialects(DialectRegistry &registry) {
  registry.insert<MerakDialect, func::FuncDialect, emitc::EmitCDialect>();
  registerVJPExternalModels(registry);
  registerMerakToEmitCExternalModels(registry);
}

void merak::buildImportCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createMerakFoldConstants());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createMerakFuseDecomposed());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createMerakDropUnusedParams());
}

void merak::addForwardToLossPasses(OpPassManager &pm, const TrainingOptions &options) {
  if (options.tp > 1) {
    MerakTensorParallelOptions tensorParallel;
    tensorParallel.tp = options.tp;
    tensorParallel.vocabParallel = options.vocabParallel;
    tensorParallel.vocabParallelFallback = options.vocabParallelFallback;
    pm.addPass(createMerakTensorParallel(tensorParallel));
  }
  if (options.fuseAttention) {
    MerakFuseAttentionOptions attention;
    attention.frozen.assign(options.frozen.begin(), options.frozen.end());
    pm.addPass(createMerakFuseAttention(attention));
    pm.addPass(createCanonicalizerPass());
  }
  if (options.precision != "fp32") {
    MerakMixedPrecisionOptions mixed;
    mixed.precision = options.precision;
    pm.addPass(createMerakMixedPrecision(mixed));
    pm.addPass(createCSEPass());
  }
  MerakAttachLossOptions loss;
  loss.loss = options.loss;
  loss.logits = options.logits;
  loss.labels = options.labels;
  pm.addPass(createMerakAttachLoss(loss));
}

LogicalResult merak::buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options,
                                           llvm::raw_ostream &log) {
  addForwardToLossPasses(pm, options);
  MerakAutodiffOptions autodiff;
  autodiff.entry = "loss";
  autodiff.frozen.assign(options.frozen.begin(), options.frozen.end());
  pm.addPass(createMerakAutodiff(autodiff));
  MerakDataParallelOptions dataParallel;
  dataParallel.dp = options.dp;
  dataParallel.bucketBytes = options.bucketBytes;
  dataParallel.zero = options.zero;
  pm.addPass(createMerakDataParallel(dataParallel));
  // The optimizer's options come as the textual pass options, which gives
  // them one parser and one set of diagnostics with merak-opt.
  std::unique_ptr<Pass> opt = createMerakOptimizer();
  std::string optimizerOptions =
      "bucket-bytes=" + std::to_string(options.bucketBytes) + " " + options.optimizer;
  if (failed(opt->initializeOptions(optimizerOptions, [&](const Twine &msg) {
        log << "merak-compile: error: " << msg << "\n";
        return failure();
      })))
    return failure();
  pm.addPass(std::move(opt));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  return success();
}

void merak::reportTrainableParameters(ModuleOp module, const TrainingOptions &options,
                                      llvm::raw_ostream &os) {
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
  PassPipelineRegistration<>(
      "merak-import-cleanup",
      "Fold shape arithmetic, canonicalise, CSE, fuse decomposed LayerNorm/"
      "GELU and drop unused parameters "
      "(what merak-compile runs after import)",
      [](OpPassManager &pm) { buildImportCleanupPipeline(pm); });
}
