//===- MerakInPlace.cpp - InPlace/AccumulatingOpInterface of merak ops ----===//
//
// The (result, operand) pairs an op's kernel may compute in one buffer
// (MerakInterfaces.td); merak-plan-memory grants them. The kernels read an
// element before writing the same element, nothing else:
//   - fused optimizer updates: the new parameter and state over the old;
//   - merak.add into a parameter's storage (a gradient accumulator, a
//     BatchNorm counter): the equal-shape elementwise loop;
//   - merak.matmul_t with an accumulator: the GEMM with beta = 1;
//   - merak.gather_grad with an accumulator: the rows its indices reach;
//   - merak.expert_matmul_grad_weight with an accumulator: each expert's
//     GEMM with beta = 1.
//
// The accumulating forms (AccumulatingOpInterface) that
// merak-fuse-grad-accumulation makes of `add(get_param @a, op)`:
//   matmul / matmul_t (operands of rank >= 2)  matmul_t ... acc (beta = 1)
//   gather_grad                                gather_grad ... acc
//   expert_matmul_grad_weight                  expert_matmul_grad_weight ... acc
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

using namespace mlir;
using namespace mlir::merak;

using Pairs = SmallVector<std::pair<unsigned, unsigned>>;

Pairs AdamWUpdateOp::getInPlaceCandidates() { // param, exp_avg, exp_avg_sq
  return {{0, 0}, {1, 2}, {2, 3}};
}

Pairs AdanUpdateOp::getInPlaceCandidates() {
  // param, exp_avg, exp_avg_diff, exp_avg_sq, prev_grad
  return {{0, 0}, {1, 2}, {2, 3}, {3, 4}, {4, 5}};
}

Pairs SgdUpdateOp::getInPlaceCandidates() {
  if (getMomentumBuffer())
    return {{0, 0}, {1, 2}};
  return {{0, 0}};
}

/// Only an operand that is a parameter's storage (accumulations into it):
/// an arena operand keeps its own buffer, so that the arena plan of other
/// programs does not change with this op.
Pairs AddOp::getInPlaceCandidates() {
  Pairs pairs;
  for (unsigned o = 0; o < 2; ++o)
    if (getOperand(o).getDefiningOp<GetParamOp>() && getOperand(o).getType() == getType())
      pairs.push_back({0, o});
  return pairs;
}

Pairs MatmulTOp::getInPlaceCandidates() {
  if (!getAcc())
    return {};
  return {{0, 2}};
}

Pairs GatherGradOp::getInPlaceCandidates() {
  if (!getAcc())
    return {};
  return {{0, 2}};
}

Pairs ExpertMatmulGradWeightOp::getInPlaceCandidates() {
  if (!getAcc())
    return {};
  return {{0, getAccMutable()[0].getOperandNumber()}};
}

//===----------------------------------------------------------------------===//
// AccumulatingOpInterface
//===----------------------------------------------------------------------===//

static bool isF32(Type t) { return cast<RankedTensorType>(t).getElementType().isF32(); }

/// A GEMM of operands of rank >= 2 with a float32 result.
static bool gemmCanAccumulate(Operation *op) {
  return isF32(op->getResult(0).getType()) && llvm::all_of(op->getOperandTypes(), [](Type t) {
           return cast<RankedTensorType>(t).getRank() >= 2;
         });
}

bool MatmulOp::canAccumulate() { return gemmCanAccumulate(*this); }

Value MatmulOp::buildAccumulating(OpBuilder &b, Value acc) {
  return MatmulTOp::create(b, getLoc(), getType(), getLhs(), getRhs(), acc, false, false);
}

bool MatmulTOp::canAccumulate() { return !getAcc() && gemmCanAccumulate(*this); }

Value MatmulTOp::buildAccumulating(OpBuilder &b, Value acc) {
  return MatmulTOp::create(b, getLoc(), getType(), getLhs(), getRhs(), acc, getTransposeLhs(),
                           getTransposeRhs());
}

bool GatherGradOp::canAccumulate() { return !getAcc() && isF32(getType()); }

Value GatherGradOp::buildAccumulating(OpBuilder &b, Value acc) {
  return GatherGradOp::create(b, getLoc(), getType(), getGrad(), getIndices(), getAxis(), acc);
}

bool ExpertMatmulGradWeightOp::canAccumulate() { return !getAcc() && isF32(getType()); }

Value ExpertMatmulGradWeightOp::buildAccumulating(OpBuilder &b, Value acc) {
  return ExpertMatmulGradWeightOp::create(b, getLoc(), getType(), getInput(), getGrad(),
                                          getExperts(), getFirst(), acc, getTransposeWeightAttr(),
                                          getTotalExpertsAttr(), getGroupRowsAttr());
}
