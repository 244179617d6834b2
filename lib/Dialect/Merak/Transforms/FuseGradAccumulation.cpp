//===- FuseGradAccumulation.cpp - merak-fuse-grad-accumulation ------------===//
//
// A product added into a stored tensor becomes the product's accumulating
// form (AccumulatingOpInterface; see Passes.td):
//   add(get_param @a, matmul_t(x, y) {ta, tb})  -> matmul_t(x, y) acc get_param @a {ta, tb}
//   add(get_param @a, matmul(x, y))             -> matmul_t(x, y) acc get_param @a
//   add(get_param @a, gather_grad(g[i]))        -> gather_grad(g[i]) acc get_param @a
//   add(get_param @a, expert_matmul_grad_weight(x, g[e]))
//                                               -> expert_matmul_grad_weight(x, g[e]) acc ...
//   add(get_param @a, add(p, q))                -> q' acc (p' acc get_param @a)
// (a tied weight's two gradients, both fusable, in program order; either
// operand order) when the product is float32, of the add's type,
// read by nothing else, and the op accepts it (a GEMM's operands have rank
// >= 2). The fused op takes the product's place (its operands die where
// they did); a read of the accumulator that came later moves up to it when
// nothing writes the tensor in between.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFUSEGRADACCUMULATION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {

/// The op defining `v` when it has an accumulating form of type `type`
/// (AccumulatingOpInterface) and nothing else reads `v`.
AccumulatingOpInterface fusableProduct(Value v, Type type) {
  auto m = v.getDefiningOp<AccumulatingOpInterface>();
  if (!m || !m->hasOneUse() || v.getType() != type || !m.canAccumulate())
    return nullptr;
  return m;
}

/// The accumulator read at the product `m`: `get` itself when it comes
/// first, else a copy of the read made right before `m` when no write of
/// the tensor lies between the two (the fused GEMM runs where the product
/// did, so that its operands' buffers die where they did); null otherwise.
Value accumulatorAt(GetParamOp get, Operation *m,
                    const llvm::StringMap<SmallVector<Operation *>> &writes) {
  if (get->getBlock() != m->getBlock())
    return {};
  if (get->isBeforeInBlock(m))
    return get.getResult();
  if (auto it = writes.find(get.getName()); it != writes.end())
    for (Operation *set : it->second)
      if (set->getBlock() == m->getBlock() && m->isBeforeInBlock(set) && set->isBeforeInBlock(get))
        return {};
  OpBuilder b(m);
  return b.clone(*get)->getResult(0);
}

struct MerakFuseGradAccumulationPass
    : merak::impl::MerakFuseGradAccumulationBase<MerakFuseGradAccumulationPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    llvm::StringMap<SmallVector<Operation *>> writes;
    getOperation().walk([&](Operation *op) {
      if (auto add = dyn_cast<AddOp>(op))
        adds.push_back(add);
      else if (auto set = dyn_cast<SetParamOp>(op))
        writes[set.getName()].push_back(op);
    });
    llvm::DenseSet<Operation *> erased;
    for (AddOp add : adds)
      if (!erased.contains(add))
        for (unsigned o = 0; o < 2; ++o)
          if (fuse(add, o, writes, erased))
            break;
  }

  /// Fuses `add` = add(get_param @a (operand o), terms): the terms are the
  /// other operand, or the two operands of a single-use add (a tied
  /// weight's two gradients). When every term has an accumulating form, they
  /// add into the accumulator one after the other, in program order.
  bool fuse(AddOp add, unsigned o, const llvm::StringMap<SmallVector<Operation *>> &writes,
            llvm::DenseSet<Operation *> &erased) {
    auto get = add.getOperand(o).getDefiningOp<GetParamOp>();
    if (!get || get.getType() != add.getType())
      return false;
    Value other = add.getOperand(1 - o);
    SmallVector<Value> terms{other};
    auto inner = other.getDefiningOp<AddOp>();
    if (inner && inner->hasOneUse() && inner.getType() == add.getType())
      terms.assign({inner.getLhs(), inner.getRhs()});
    else
      inner = nullptr;
    SmallVector<AccumulatingOpInterface> products;
    for (Value t : terms) {
      AccumulatingOpInterface m = fusableProduct(t, add.getType());
      // Every term, or none: an add left over would read the fused result
      // from a buffer of its own (no longer the accumulator's storage).
      if (!m || m->getBlock() != add->getBlock())
        return false;
      products.push_back(m);
    }
    llvm::sort(products, [](AccumulatingOpInterface a, AccumulatingOpInterface b) {
      return a->isBeforeInBlock(b);
    });
    Value acc = accumulatorAt(get, products.front(), writes);
    if (!acc)
      return false;
    for (AccumulatingOpInterface m : products) {
      OpBuilder b(m);
      acc = m.buildAccumulating(b, acc);
    }
    add.replaceAllUsesWith(acc);
    erased.insert(add);
    add.erase();
    if (inner) {
      erased.insert(inner);
      inner.erase();
    }
    for (AccumulatingOpInterface m : products)
      m->erase();
    if (get->use_empty())
      get->erase();
    return true;
  }
};

} // namespace
