//===- Autodiff.cpp - merak-autodiff --------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/GlobPattern.h"
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
    for (const std::string &pattern : frozen) {
      auto glob = llvm::GlobPattern::create(pattern);
      if (!glob) {
        module.emitError("merak-autodiff: bad --frozen pattern '")
            << pattern << "': " << llvm::toString(glob.takeError());
        return signalPassFailure();
      }
      frozenGlobs.push_back(std::move(*glob));
    }
    if (failed(differentiate(module, fwd)))
      return signalPassFailure();
  }

  SmallVector<llvm::GlobPattern> frozenGlobs;
  bool isFrozen(StringRef name) const {
    return llvm::any_of(frozenGlobs, [&](const llvm::GlobPattern &g) { return g.match(name); });
  }

  LogicalResult differentiate(ModuleOp module, func::FuncOp fwd) {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointAfter(fwd);
    auto grad = cast<func::FuncOp>(mb.clone(*fwd));
    grad.setSymName(entry + "_grad");
    Block &body = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);

    // Values on a path from a parameter to the loss need gradients.
    llvm::DenseSet<Value> fromParam, toLoss;
    for (Operation &op : body.without_terminator()) {
      auto get = dyn_cast<GetParamOp>(op);
      bool reached = (get && !isFrozen(get.getName())) ||
                     llvm::any_of(op.getOperands(), [&](Value v) { return fromParam.contains(v); });
      if (reached)
        for (Value r : op.getResults())
          if (isFloatTensor(r))
            fromParam.insert(r);
    }
    toLoss.insert(loss);
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (llvm::any_of(op->getResults(), [&](Value r) { return toLoss.contains(r); }))
        for (Value v : op->getOperands())
          if (isFloatTensor(v))
            toLoss.insert(v);
    auto needed = [&](Value v) { return fromParam.contains(v) && toLoss.contains(v); };

    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> grads;
    auto accumulate = [&](Value v, Value g) {
      auto [it, inserted] = grads.try_emplace(v, g);
      if (!inserted)
        it->second = AddOp::create(b, g.getLoc(), it->second, g);
    };
    auto lossType = cast<RankedTensorType>(loss.getType());
    accumulate(loss, ConstantOp::create(
                         b, loss.getLoc(),
                         SplatElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0))));

    llvm::StringMap<Value> paramGrads;
    for (Operation *op : llvm::reverse(ops)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        Value g = needed(r) ? grads.lookup(r) : Value();
        resultGrads.push_back(g);
        any |= (bool)g;
      }
      if (!any)
        continue;
      if (auto get = dyn_cast<GetParamOp>(op)) {
        Value g = resultGrads[0];
        auto [it, inserted] = paramGrads.try_emplace(get.getName(), g);
        if (!inserted)
          it->second = AddOp::create(b, get.getLoc(), it->second, g);
        continue;
      }
      if (!llvm::any_of(op->getOperands(), needed))
        continue;
      auto diff = dyn_cast<DifferentiableOpInterface>(op);
      if (!diff)
        return op->emitError("merak-autodiff: no derivative rule for '")
               << op->getName() << "'";
      SmallVector<Value> operandGrads;
      if (failed(diff.buildVJP(b, resultGrads, operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitError("merak-autodiff: rule returned ")
               << operandGrads.size() << " gradients for " << op->getNumOperands()
               << " operands";
      for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g && needed(v))
          accumulate(v, g);
    }

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
