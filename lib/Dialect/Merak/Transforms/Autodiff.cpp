//===- Autodiff.cpp - merak-autodiff --------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/Autodiff/ReverseSweep.h"
#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKAUTODIFF
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-autodiff"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakAutodiffPass : merak::impl::MerakAutodiffBase<MerakAutodiffPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerVJPExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fwd = module.lookupSymbol<func::FuncOp>(entry);
    if (!fwd) {
      module.emitError("merak-autodiff: no func.func @") << entry;
      return signalPassFailure();
    }
    if (fwd.isDeclaration()) {
      fwd.emitError("merak-autodiff: @") << entry << " has no body";
      return signalPassFailure();
    }
    std::string gradName = entry + "_grad";
    if (module.lookupSymbol(gradName)) {
      module.emitError("merak-autodiff: the module already has a @") << gradName;
      return signalPassFailure();
    }
    if (fwd.getNumResults() == 0 || !isFloatTensor(fwd.getBody().front().getTerminator()->getOperand(0)) ||
        cast<RankedTensorType>(fwd.getResultTypes()[0]).getRank() != 0) {
      fwd.emitError("merak-autodiff: the first result of @")
          << entry << " must be a scalar floating-point loss";
      return signalPassFailure();
    }
    std::string error;
    FailureOr<FrozenParams> frozenParams = FrozenParams::get(module, *frozen, error);
    if (failed(frozenParams)) {
      module.emitError("merak-autodiff: ") << error;
      return signalPassFailure();
    }
    fixed = std::move(*frozenParams);
    if (failed(differentiate(module, fwd)))
      return signalPassFailure();
  }

  FrozenParams fixed;
  bool isFrozen(StringRef name) const { return fixed.contains(name); }

  LogicalResult differentiate(ModuleOp module, func::FuncOp fwd) {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointAfter(fwd);
    auto grad = cast<func::FuncOp>(mb.clone(*fwd));
    grad.setSymName(entry + "_grad");
    Block &body = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);

    // The sweep from the loss (seeded with 1) to every trainable parameter.
    OpBuilder b(ret);
    auto lossType = cast<RankedTensorType>(loss.getType());
    Value one = ConstantOp::create(
        b, loss.getLoc(),
        SplatElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));
    llvm::DenseMap<Value, Value> argGrads;
    llvm::StringMap<Value> paramGrads;
    if (failed(buildReverseSweep(
            b, body, {{loss, one}}, {}, "merak-autodiff",
            [&](StringRef name) { return !isFrozen(name); }, argGrads, paramGrads)))
      return failure();

    // Return the loss and one gradient per parameter (zeros when the loss
    // does not depend on it).
    SmallVector<Value> results{loss};
    SmallVector<Attribute> names{b.getDictionaryAttr(
        b.getNamedAttr("merak.name", b.getStringAttr("loss")))};
    for (ParamOp param : module.getOps<ParamOp>()) {
      if (isFrozen(param.getSymName()))
        continue;
      Value g = paramGrads.lookup(param.getSymName());
      if (!g)
        g = ConstantOp::create(
            b, param.getLoc(),
            SplatElementsAttr::get(param.getTensorType(),
                                   b.getZeroAttr(param.getTensorType().getElementType())));
      results.push_back(g);
      names.push_back(b.getDictionaryAttr(b.getNamedAttr(
          "merak.name", b.getStringAttr("grad:" + param.getSymName().str()))));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    grad.setType(FunctionType::get(module.getContext(), grad.getArgumentTypes(), types));
    grad.setAllResultAttrs(names);
    return success();
  }
};
} // namespace
