//===- FreezeGradientless.cpp - merak-freeze-gradientless -----------------===//
//
// PyTorch's optimizers skip a parameter whose `.grad` is None; merak's
// gave it a zero gradient, so AdamW's weight decay still shrank it and its
// moments took memory. Such a parameter reaches the loss only through
// values without a derivative:
//
//   scores = matmul(x, W_indexer)      // W_indexer: no gradient
//   idx    = topk(scores, k).indices   // integer: the sweep stops here
//   y      = gather(kv, idx) ...       // the loss depends on idx alone
//
// A trial reverse sweep of @loss (the VJP rules merak-autodiff and
// merak-pipeline use), discarded afterwards, tells which trainable
// parameters receive a gradient; the others become kind "frozen".
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/Autodiff/ReverseSweep.h"
#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFREEZEGRADIENTLESS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakFreezeGradientlessPass
    : merak::impl::MerakFreezeGradientlessBase<MerakFreezeGradientlessPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerVJPExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || fn.isDeclaration() || fn.getNumResults() == 0)
      return; // merak-autodiff names what is missing
    std::string error;
    FailureOr<FrozenParams> fixed = FrozenParams::get(module, *frozen, error);
    if (failed(fixed))
      return; // merak-autodiff reports the bad pattern
    auto trainable = [&](StringRef name) { return !fixed->contains(name); };
    std::optional<llvm::StringSet<>> graded = trialSweep(module, fn, trainable);
    if (!graded)
      return;
    SmallVector<StringRef> names;
    for (ParamOp param : module.getOps<ParamOp>()) {
      StringRef name = param.getSymName();
      if (!trainable(name) || graded->contains(name) ||
          !isa<FloatType>(param.getTensorType().getElementType()))
        continue;
      param->setAttr(kKindAttr, StringAttr::get(&getContext(), "frozen"));
      names.push_back(name);
    }
    if (names.empty())
      return;
    InFlightDiagnostic d = fn.emitRemark("merak-freeze-gradientless: ")
                           << names.size()
                           << " parameter(s) get no gradient from the loss (they reach it only "
                              "through values without a derivative, such as TopK's indices) and "
                              "stay as they are, as PyTorch's optimizers skip a parameter whose "
                              ".grad is None: ";
    llvm::interleaveComma(names, d);
  }

  /// The parameters a reverse sweep of a copy of `fn` (seeded with 1 on
  /// its first result) gives a gradient; nullopt when the sweep fails (its
  /// diagnostics are dropped: the real sweep reports them). The copy is
  /// erased.
  std::optional<llvm::StringSet<>> trialSweep(ModuleOp module, func::FuncOp fn,
                                              llvm::function_ref<bool(StringRef)> trainable) {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointAfter(fn);
    auto copy = cast<func::FuncOp>(mb.clone(*fn));
    copy.setSymName((fn.getSymName() + "_gradient_trial").str());
    Block &body = copy.getBody().front();
    Operation *ret = body.getTerminator();
    Value loss = ret->getOperand(0);
    auto lossType = dyn_cast<RankedTensorType>(loss.getType());
    std::optional<llvm::StringSet<>> result;
    if (lossType && isa<FloatType>(lossType.getElementType())) {
      OpBuilder b(ret);
      Value one = ConstantOp::create(
          b, loss.getLoc(),
          SplatElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));
      llvm::DenseMap<Value, Value> argGrads;
      llvm::StringMap<Value> paramGrads;
      ScopedDiagnosticHandler quiet(module.getContext(), [](Diagnostic &) { return success(); });
      if (succeeded(buildReverseSweep(b, body, {{loss, one}}, {}, "merak-freeze-gradientless",
                                      trainable, argGrads, paramGrads)))
        result.emplace(llvm::from_range, paramGrads.keys());
    }
    copy.erase();
    return result;
  }
};
} // namespace
