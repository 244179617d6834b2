//===- TpGradSumsPerStep.cpp - merak-tp-grad-sums-per-step ----------------===//
//
// The tp sums of parameter gradients, once a step (see ShardingPasses.td):
//
//   backward fragment:  set_param @acc (add(get_param @acc, all_reduce(g) {tp, sum}))
//                    -> set_param @acc (add(get_param @acc, g))
//   @stage<s>_grads:    return ..., m, ...         (m: acc's gradient, dp mean)
//                    -> return ..., all_reduce(m) {tp, sum}, ...
//
// for the accumulators that every write sums so.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKTPGRADSUMSPERSTEP
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {

/// A write `set_param @acc (add(get_param @acc, x))`, with `sum` the tp sum
/// that x is (read by nothing else), or null.
struct Accumulation {
  OpOperand *term;
  AllReduceOp sum;
};

std::optional<Accumulation> accumulationOf(SetParamOp set) {
  auto add = set.getValue().getDefiningOp<AddOp>();
  if (!add || !add->hasOneUse() || add.getType() != add->getOperand(0).getType() ||
      add->getOperand(0).getType() != add->getOperand(1).getType())
    return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    auto get = add->getOperand(i).getDefiningOp<GetParamOp>();
    if (!get || get.getName() != set.getName())
      continue;
    OpOperand &term = add->getOpOperand(1 - i);
    auto sum = term.get().getDefiningOp<AllReduceOp>();
    if (sum && (sum.getGroup() != "tp" || sum.getReduction() != "sum" ||
                sum.getNumOperands() != 1 || !term.get().hasOneUse()))
      sum = {};
    return Accumulation{&term, sum};
  }
  return std::nullopt;
}

/// The accumulator whose step gradient result `i` of a @stage<s>_grads is
/// ("grad:<param>" -> "pipeline.grad.<param>"), or empty.
std::string accumulatorOf(func::FuncOp grads, unsigned i) {
  auto label = grads.getResultAttrOfType<StringAttr>(i, "merak.name");
  if (!label || !label.getValue().starts_with("grad:"))
    return {};
  return (kGradAccumulatorPrefix + label.getValue().drop_front(strlen("grad:"))).str();
}

struct TpGradSumsPerStepPass
    : public merak::impl::MerakTpGradSumsPerStepBase<TpGradSumsPerStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Every write of every accumulator in the fragments, with the stage
    // that writes it; an accumulator qualifies when all of them add a tp
    // sum.
    llvm::StringMap<SmallVector<std::pair<int64_t, Accumulation>>> writes;
    llvm::StringSet<> others;
    for (auto fn : module.getOps<func::FuncOp>()) {
      auto fragment = fn->getAttrOfType<DictionaryAttr>(kFragmentAttr);
      if (!fragment)
        continue;
      auto stage = fragment.getAs<IntegerAttr>("stage");
      fn.walk([&](SetParamOp set) {
        StringRef name = set.getName();
        if (!name.starts_with(kGradAccumulatorPrefix))
          return;
        std::optional<Accumulation> a = accumulationOf(set);
        if (a && a->sum && stage)
          writes[name].push_back({stage.getInt(), *a});
        else
          others.insert(name);
      });
    }
    // Where each accumulator's step gradient is returned: @stage<s>_grads
    // (every holder of a tied weight returns its own, after the runtime
    // has summed the holders' accumulators).
    llvm::StringMap<SmallVector<std::pair<func::FuncOp, unsigned>>> returns;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!fn->hasAttr(kUpdateAttr))
        continue;
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (std::string acc = accumulatorOf(fn, i); !acc.empty())
          returns[acc].push_back({fn, i});
    }
    llvm::StringSet<> deferred;
    for (auto &[name, list] : writes) {
      auto where = returns.find(name);
      if (others.contains(name) || where == returns.end())
        continue;
      // Each writing stage must return the gradient (where it gets summed).
      auto returnedBy = [&](int64_t stage) {
        std::string grads = ("stage" + Twine(stage) + "_grads").str();
        return llvm::any_of(where->second, [&](auto &r) { return r.first.getName() == grads; });
      };
      if (llvm::all_of(list, [&](auto &w) { return returnedBy(w.first); }))
        deferred.insert(name);
    }
    // In program order, so that the IR does not depend on hashing.
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!fn->hasAttr(kUpdateAttr))
        continue;
      auto ret = cast<func::ReturnOp>(fn.getBody().back().getTerminator());
      OpBuilder b(ret);
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        if (!deferred.contains(accumulatorOf(fn, i)))
          continue;
        Value step = ret.getOperand(i);
        ret.setOperand(i, AllReduceOp::create(b, step.getLoc(), TypeRange{step.getType()},
                                              ValueRange{step}, "tp", "sum")
                              .getResult(0));
      }
    }
    for (const auto &name : deferred)
      for (auto &[stage, a] : writes[name.getKey()]) {
        a.term->set(a.sum.getOperand(0));
        a.sum->erase();
      }
  }
};

} // namespace
