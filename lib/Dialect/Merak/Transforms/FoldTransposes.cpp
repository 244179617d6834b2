//===- FoldTransposes.cpp - merak-fold-transposes -------------------------===//
//
// matmul(transpose(a), b) -> matmul_t(a, b) {transpose_lhs} (and the rhs
// likewise) when the transpose swaps only the last two dimensions of an f32
// or bf16 operand of rank >= 2; see Passes.td.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFOLDTRANSPOSES
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {

/// The input of `v`'s defining transpose when it swaps only the last two
/// dimensions of an f32 or bf16 tensor of rank >= 2 (the GEMM kernels'
/// transposed reads: BLAS / cuBLASLt flags; bf16 through the widening path
/// on CPU).
Value swappedInput(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t)
    return {};
  ArrayRef<int64_t> perm = t.getPerm();
  int64_t r = perm.size();
  Type elem = cast<RankedTensorType>(v.getType()).getElementType();
  if (r < 2 || !(elem.isF32() || elem.isBF16()))
    return {};
  for (int64_t d = 0; d + 2 < r; ++d)
    if (perm[d] != d)
      return {};
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2 ? t.getInput() : Value();
}

struct MerakFoldTransposesPass
    : merak::impl::MerakFoldTransposesBase<MerakFoldTransposesPass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp m) { matmuls.push_back(m); });
    for (MatmulOp m : matmuls) {
      auto lt = cast<RankedTensorType>(m.getLhs().getType());
      auto rt = cast<RankedTensorType>(m.getRhs().getType());
      if (lt.getRank() < 2 || rt.getRank() < 2)
        continue;
      Value a = swappedInput(m.getLhs()), b = swappedInput(m.getRhs());
      if (!a && !b)
        continue;
      OpBuilder builder(m);
      Operation *ta = a ? m.getLhs().getDefiningOp() : nullptr;
      Operation *tb = b ? m.getRhs().getDefiningOp() : nullptr;
      if (tb == ta)
        tb = nullptr;
      auto folded = MatmulTOp::create(builder, m.getLoc(), m.getType(), a ? a : m.getLhs(),
                                      b ? b : m.getRhs(), /*transpose_lhs=*/(bool)a,
                                      /*transpose_rhs=*/(bool)b);
      m.replaceAllUsesWith(folded.getResult());
      m.erase();
      for (Operation *t : {ta, tb})
        if (t && t->use_empty())
          t->erase();
    }
  }
};

} // namespace
