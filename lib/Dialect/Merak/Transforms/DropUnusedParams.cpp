//===- DropUnusedParams.cpp - merak-drop-unused-params --------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKDROPUNUSEDPARAMS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-drop-unused-params"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakDropUnusedParamsPass
    : merak::impl::MerakDropUnusedParamsBase<MerakDropUnusedParamsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringSet<> used;
    module.walk([&](GetParamOp get) { used.insert(get.getName()); });
    for (ParamOp param : llvm::make_early_inc_range(module.getOps<ParamOp>()))
      if (!used.contains(param.getSymName()))
        param.erase();
  }
};
} // namespace
