//===- GradReducePrecision.cpp - merak-grad-reduce-precision --------------===//
//
// Gradients reduced over the data-parallel group in bf16 (see Passes.td):
// every "dp" mean reduction of float32 gradients, blocking or started,
// communicates bf16 copies and widens the results back to float32.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "PrecisionUtil.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKGRADREDUCEPRECISION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-grad-reduce-precision"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// A data-parallel gradient reduction: group "dp", a mean, every operand
/// float32 and not all of them scalars (the reported loss is one; it stays
/// float32, like the metrics).
bool isGradientReduction(ValueRange inputs, StringRef group, StringRef reduction) {
  if ((group != "dp" && group != "edp") || reduction != "mean" || inputs.empty())
    return false;
  bool tensor = false;
  for (Value v : inputs) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!t.getElementType().isF32())
      return false;
    tensor |= t.getRank() > 0;
  }
  return tensor;
}

SmallVector<Value> narrow(OpBuilder &b, Location loc, ValueRange inputs, Type bf16) {
  SmallVector<Value> out;
  for (Value v : inputs)
    out.push_back(CastOp::create(b, loc, withElement(v.getType(), bf16), v));
  return out;
}

/// Replaces each old result by the float32 cast of the new one (right
/// after `after`, the op that yields the new results).
void widen(OpBuilder &b, Operation *after, ValueRange oldResults, ValueRange newResults) {
  b.setInsertionPointAfter(after);
  for (auto [from, to] : llvm::zip(oldResults, newResults))
    from.replaceAllUsesWith(CastOp::create(b, after->getLoc(), from.getType(), to));
}

/// The collective `op` (inputs `inputs`) rebuilt by `rebuild` on their bf16
/// casts; for a started one, its wait rebuilt to yield bf16.
template <typename OpT, typename Rebuild>
void convert(OpT op, Type bf16, Rebuild rebuild) {
  OpBuilder b(op);
  SmallVector<Value> in = narrow(b, op.getLoc(), op.getInputs(), bf16);
  Operation *created = rebuild(b, in);
  if constexpr (std::is_same_v<OpT, AllReduceStartOp> ||
                std::is_same_v<OpT, ReduceScatterStartOp>) {
    WaitOp wait = op.getWait();
    SmallVector<Type> types;
    for (Type t : wait.getResultTypes())
      types.push_back(withElement(t, bf16));
    b.setInsertionPoint(wait);
    auto nw = WaitOp::create(b, wait.getLoc(), types, created->getResult(0));
    widen(b, nw, wait.getResults(), nw.getResults());
    wait.erase();
  } else {
    widen(b, created, op->getResults(), created->getResults());
  }
  op.erase();
}

SmallVector<Type> bf16Types(TypeRange types, Type bf16) {
  SmallVector<Type> out;
  for (Type t : types)
    out.push_back(withElement(t, bf16));
  return out;
}

struct MerakGradReducePrecisionPass
    : merak::impl::MerakGradReducePrecisionBase<MerakGradReducePrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<bool> bf16Wanted = bf16Requested(module, "merak-grad-reduce-precision", precision);
    if (failed(bf16Wanted))
      return signalPassFailure();
    if (!*bf16Wanted)
      return;
    Type bf16 = BFloat16Type::get(&getContext());
    SmallVector<Operation *> work;
    module.walk([&](Operation *op) {
      bool match =
          TypeSwitch<Operation *, bool>(op)
              .Case<AllReduceOp, ReduceScatterOp, AllReduceStartOp, ReduceScatterStartOp>(
                  [](auto c) {
                    return isGradientReduction(c.getInputs(), c.getGroup(), c.getReduction());
                  })
              .Default(false);
      if (match)
        work.push_back(op);
    });
    for (Operation *op : work) {
      if (auto ar = dyn_cast<AllReduceOp>(op))
        convert(ar, bf16, [&](OpBuilder &b, ValueRange in) {
          return AllReduceOp::create(b, ar.getLoc(), in, ar.getGroup(), ar.getReduction())
              .getOperation();
        });
      else if (auto rs = dyn_cast<ReduceScatterOp>(op))
        convert(rs, bf16, [&](OpBuilder &b, ValueRange in) {
          return ReduceScatterOp::create(b, rs.getLoc(), bf16Types(rs.getResultTypes(), bf16),
                                         in, rs.getGroup(), rs.getReduction())
              .getOperation();
        });
      else if (auto ars = dyn_cast<AllReduceStartOp>(op))
        convert(ars, bf16, [&](OpBuilder &b, ValueRange in) {
          return AllReduceStartOp::create(b, ars.getLoc(), ars.getType(), in, ars.getGroup(),
                                          ars.getReduction())
              .getOperation();
        });
      else if (auto rss = dyn_cast<ReduceScatterStartOp>(op))
        convert(rss, bf16, [&](OpBuilder &b, ValueRange in) {
          return ReduceScatterStartOp::create(b, rss.getLoc(), rss.getType(), in,
                                              rss.getGroup(), rss.getReduction(),
                                              rss.getParts())
              .getOperation();
        });
    }
  }
};
} // namespace
