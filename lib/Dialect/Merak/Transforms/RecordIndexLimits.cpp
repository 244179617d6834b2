//===- RecordIndexLimits.cpp - merak-record-index-limits ------------------===//
//
// Sets merak.index_limit on the integer arguments of the model function:
//
//   func @forward(%ids: tensor<8x128xi64>)          ->  {merak.index_limit = 50257}
//     %r = merak.reshape %ids : ... -> tensor<1024xi64>         (forwards elements)
//     %e = merak.gather %wte[%r] axis = 0 : tensor<50257x768xf32>, ...   (limit 50257)
//
// The walk visits each use once (a worklist over values), so it is linear in
// the uses reachable from the arguments.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKRECORDINDEXLIMITS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-record-index-limits"

using namespace mlir;
using namespace mlir::merak;

namespace {

/// The smallest limit that the index-reading uses of `root` (directly or
/// through element-forwarding ops) put on its values; nullopt if none.
std::optional<int64_t> indexLimitOf(Value root) {
  std::optional<int64_t> limit;
  SmallVector<Value> work{root};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto indexed = dyn_cast<IndexOperandOpInterface>(user)) {
        if (std::optional<int64_t> l = indexed.getIndexLimit(use.getOperandNumber()))
          limit = limit ? std::min(*limit, *l) : *l;
        continue;
      }
      if (user->hasTrait<ForwardsElements>() && use.getOperandNumber() == 0 &&
          seen.insert(user).second)
        llvm::append_range(work, user->getResults());
    }
  }
  return limit;
}

struct MerakRecordIndexLimitsPass
    : merak::impl::MerakRecordIndexLimitsBase<MerakRecordIndexLimitsPass> {
  using Base::Base;

  void runOnOperation() override {
    auto fn = getOperation().lookupSymbol<func::FuncOp>(entry);
    if (!fn || fn.isExternal())
      return; // nothing imported yet: the limits are optional
    Builder b(fn.getContext());
    for (BlockArgument arg : fn.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || !type.getElementType().isInteger() || type.getElementType().isInteger(1))
        continue;
      if (std::optional<int64_t> limit = indexLimitOf(arg))
        fn.setArgAttr(arg.getArgNumber(), kIndexLimitAttr, b.getI64IntegerAttr(*limit));
    }
  }
};

} // namespace
