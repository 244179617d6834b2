//===- FuseGradAccumulation.cpp - merak-fuse-grad-accumulation ------------===//
//
// A product added into a stored tensor becomes a GEMM accumulating into it
// (see Passes.td):
//   add(get_param @a, matmul_t(x, y) {ta, tb})  -> matmul_t(x, y) acc get_param @a {ta, tb}
//   add(get_param @a, matmul(x, y))             -> matmul_t(x, y) acc get_param @a
// (either operand order) when the product is float32, of the add's type,
// read by nothing else, and its operands have rank >= 2. The fused GEMM
// takes the product's place (its operands die where they did); a read of
// the accumulator that came later moves up to it when nothing writes the
// tensor in between.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFUSEGRADACCUMULATION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {

/// The product `v` when it can take an accumulator of type `type`.
Operation *fusableProduct(Value v, Type type) {
  Operation *m = v.getDefiningOp();
  if (!m || !isa<MatmulOp, MatmulTOp>(m) || !m->hasOneUse() || v.getType() != type)
    return nullptr;
  if (auto mt = dyn_cast<MatmulTOp>(m); mt && mt.getAcc())
    return nullptr;
  if (!cast<RankedTensorType>(type).getElementType().isF32())
    return nullptr;
  for (Value operand : m->getOperands())
    if (cast<RankedTensorType>(operand.getType()).getRank() < 2)
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
    for (AddOp add : adds) {
      for (unsigned o = 0; o < 2; ++o) {
        auto get = add.getOperand(o).getDefiningOp<GetParamOp>();
        Operation *m = fusableProduct(add.getOperand(1 - o), add.getType());
        if (!get || get.getType() != add.getType() || !m)
          continue;
        Value acc = accumulatorAt(get, m, writes);
        if (!acc)
          continue;
        auto mt = dyn_cast<MatmulTOp>(m);
        OpBuilder b(m);
        auto fused = MatmulTOp::create(b, m->getLoc(), add.getType(), m->getOperand(0),
                                       m->getOperand(1), acc,
                                       /*transpose_lhs=*/mt && mt.getTransposeLhs(),
                                       /*transpose_rhs=*/mt && mt.getTransposeRhs());
        add.replaceAllUsesWith(fused.getResult());
        add.erase();
        m->erase();
        if (get->use_empty())
          get->erase();
        break;
      }
    }
  }
};

} // namespace
