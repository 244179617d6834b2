//===- FoldTransposes.cpp - merak-fold-transposes -------------------------===//
//
// matmul(transpose(a), b) -> matmul_t(a, b) {transpose_lhs} (and the rhs
// likewise) when the transpose swaps only the last two dimensions of an f32
// or bf16 operand of rank >= 2; see Passes.td. Then a product read only
// transposed is computed in that layout, (a b)^T = b^T a^T:
//   transpose(matmul_t(a, b) {ta, tb}) -> matmul_t(b, a) {!tb, !ta}
// (a weight's gradient, x^T g transposed back into the weight's layout).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFOLDTRANSPOSES
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-fold-transposes"

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

/// Whether `perm` swaps dims rank-3 and rank-2 only: [..., T, H, D] <->
/// [..., H, T, D], the heads transpose around attention.
bool isHeadsSwap(ArrayRef<int64_t> perm) {
  int64_t r = perm.size();
  if (r < 3)
    return false;
  for (int64_t d = 0; d < r; ++d)
    if (perm[d] != (d == r - 3 ? r - 2 : d == r - 2 ? r - 3 : d))
      return false;
  return true;
}

Value headsSwappedInput(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && isHeadsSwap(t.getPerm()) ? t.getInput() : Value();
}

RankedTensorType headsSwapped(Type t) {
  auto r = cast<RankedTensorType>(t);
  SmallVector<int64_t> s(r.getShape());
  std::swap(s[s.size() - 3], s[s.size() - 2]);
  return RankedTensorType::get(s, r.getElementType());
}

/// Hands `from`'s (heads-first) uses to `to` (its seq-major form): a heads
/// transpose of `from` becomes `to` itself (and is erased); any other use
/// reads one transpose of `to`. Afterwards `from` has no uses.
void rewire(OpBuilder &b, Value from, Value to) {
  Value back;
  for (OpOperand &use : llvm::make_early_inc_range(from.getUses())) {
    auto t = dyn_cast<TransposeOp>(use.getOwner());
    if (t && isHeadsSwap(t.getPerm())) {
      t.getResult().replaceAllUsesWith(to);
      t.erase();
      continue;
    }
    if (!back) {
      b.setInsertionPointAfter(to.getDefiningOp());
      SmallVector<int64_t> perm;
      for (int64_t d = 0, r = cast<RankedTensorType>(to.getType()).getRank(); d < r; ++d)
        perm.push_back(d);
      std::swap(perm[perm.size() - 3], perm[perm.size() - 2]);
      back = TransposeOp::create(b, to.getLoc(), from.getType(), to, perm);
    }
    use.set(back);
  }
}

/// Attention (and its gradient) whose every [..., H, T, D] operand is a
/// heads transpose read the transposes' inputs as seq_major; forward ops
/// first, so that a gradient op's `result` operand is by then a transpose
/// of the folded forward's.
void foldAttentionLayouts(ModuleOp module) {
  SmallVector<AttentionOp> fwd;
  SmallVector<AttentionGradOp> bwd;
  module.walk([&](Operation *op) {
    if (auto a = dyn_cast<AttentionOp>(op); a && !a.getSeqMajor())
      fwd.push_back(a);
    else if (auto g = dyn_cast<AttentionGradOp>(op); g && !g.getSeqMajor())
      bwd.push_back(g);
  });
  OpBuilder b(module.getContext());
  bool folded = false;
  for (AttentionOp a : fwd) {
    Value q = headsSwappedInput(a.getQuery()), k = headsSwappedInput(a.getKey()),
          v = headsSwappedInput(a.getValue());
    if (!q || !k || !v)
      continue;
    b.setInsertionPoint(a);
    auto n = AttentionOp::create(
        b, a.getLoc(), TypeRange{headsSwapped(a.getResult().getType()), a.getLse().getType()}, q, k,
        v, a.getBias(), a.getScaleAttr(), a.getCausalAttr(), b.getUnitAttr(), a.getWindowAttr(),
        a.getSoftcapAttr(), a.getDropoutAttr(), a.getSeedAttr(), a.getBatchSplitAttr(),
        a.getTpSplitAttr());
    a.getLse().replaceAllUsesWith(n.getLse());
    rewire(b, a.getResult(), n.getResult());
    a.erase();
    folded = true;
  }
  for (AttentionGradOp g : bwd) {
    SmallVector<Value> in;
    for (Value x : {g.getQuery(), g.getKey(), g.getValue(), g.getResult(), g.getGrad()})
      in.push_back(headsSwappedInput(x));
    if (llvm::is_contained(in, Value()))
      continue;
    b.setInsertionPoint(g);
    // The bias and its gradient are heads-first in either layout.
    SmallVector<Type> types{headsSwapped(g.getQueryGrad().getType()),
                            headsSwapped(g.getKeyGrad().getType()),
                            headsSwapped(g.getValueGrad().getType())};
    if (g.getBiasGrad())
      types.push_back(g.getBiasGrad().getType());
    auto n = AttentionGradOp::create(b, g.getLoc(), types, in[0], in[1], in[2], in[3], g.getLse(),
                                     in[4], g.getBias(), g.getLseGrad(), g.getScaleAttr(),
                                     g.getCausalAttr(), b.getUnitAttr(), g.getWindowAttr(),
                                     g.getSoftcapAttr(), g.getDropoutAttr(), g.getSeedAttr(),
                                     g.getBatchSplitAttr(), g.getTpSplitAttr());
    for (auto [from, to] : llvm::zip(g.getResults().take_front(3), n.getResults()))
      rewire(b, from, to);
    if (g.getBiasGrad())
      g.getBiasGrad().replaceAllUsesWith(n.getBiasGrad());
    g.erase();
    folded = true;
  }
  // The heads transposes nobody reads any more (the operands' and the
  // inserted ones), producers after their consumers.
  if (!folded)
    return;
  for (bool changed = true; changed;) {
    changed = false;
    module.walk([&](TransposeOp t) {
      if (t->use_empty() && isHeadsSwap(t.getPerm())) {
        t.erase();
        changed = true;
      }
    });
  }
}

/// transpose(matmul_t(a, b) {ta, tb}) -> matmul_t(b, a) {!tb, !ta} (a plain
/// matmul as ta = tb = false) when the transpose swaps the last two
/// dimensions and is the product's only reader, the operands of one rank
/// >= 2 (their batch dimensions broadcast alike either way round).
void foldTransposedProducts(ModuleOp module) {
  SmallVector<TransposeOp> transposes;
  module.walk([&](TransposeOp t) { transposes.push_back(t); });
  for (TransposeOp t : transposes) {
    Operation *m = t.getInput().getDefiningOp();
    if (!m || !isa<MatmulOp, MatmulTOp>(m) || !m->hasOneUse() || !swappedInput(t.getResult()))
      continue;
    Value lhs = m->getOperand(0), rhs = m->getOperand(1);
    int64_t rank = cast<RankedTensorType>(lhs.getType()).getRank();
    if (rank < 2 || rank != cast<RankedTensorType>(rhs.getType()).getRank())
      continue;
    auto mt = dyn_cast<MatmulTOp>(m);
    if (mt && mt.getAcc())
      continue; // (acc + a b)^T is not a product
    const bool ta = mt && mt.getTransposeLhs(), tb = mt && mt.getTransposeRhs();
    OpBuilder b(t);
    auto swapped = MatmulTOp::create(b, m->getLoc(), t.getType(), rhs, lhs, /*acc=*/Value(),
                                     /*transpose_lhs=*/!tb, /*transpose_rhs=*/!ta);
    t.replaceAllUsesWith(swapped.getResult());
    t.erase();
    m->erase();
  }
}

struct MerakFoldTransposesPass
    : merak::impl::MerakFoldTransposesBase<MerakFoldTransposesPass> {
  void runOnOperation() override {
    foldAttentionLayouts(getOperation());
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
                                      b ? b : m.getRhs(), /*acc=*/Value(),
                                      /*transpose_lhs=*/(bool)a,
                                      /*transpose_rhs=*/(bool)b);
      m.replaceAllUsesWith(folded.getResult());
      m.erase();
      for (Operation *t : {ta, tb})
        if (t && t->use_empty())
          t->erase();
    }
    foldTransposedProducts(getOperation());
  }
};

} // namespace
