//===- FoldConstants.cpp - merak-fold-constants ---------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/Evaluator.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFOLDCONSTANTS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-fold-constants"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakFoldConstantsPass
    : merak::impl::MerakFoldConstantsBase<MerakFoldConstantsPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerEvaluatorExternalModels(registry);
  }

  void runOnOperation() override {
    // One forward walk suffices: operands are folded before their users.
    SmallVector<Operation *> dead;
    getOperation().walk([&](Operation *op) {
      auto folded = foldWithEvaluator(op, maxElements);
      if (failed(folded))
        return;
      OpBuilder b(op);
      for (auto [res, attr] : llvm::zip(op->getResults(), *folded))
        res.replaceAllUsesWith(
            ConstantOp::create(b, op->getLoc(), cast<ElementsAttr>(attr)));
      dead.push_back(op);
    });
    for (Operation *op : dead)
      op->erase();
  }
};
} // namespace
