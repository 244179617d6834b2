//===- MixedPrecision.cpp - merak-mixed-precision -------------------------===//
//
// bf16 GEMMs with float32 everywhere else (torch.autocast's policy for
// matmuls): every float32 merak.matmul becomes
//
//   cast(matmul(cast(a, bf16), cast(b, bf16)), f32)
//
// before autodiff, so the backward's GEMMs (the matmul VJP on bf16
// operands) are bf16 too, the values the backward keeps for them are the
// bf16 copies (half the activation memory of a linear layer's input), and
// the cast's VJP returns float32 gradients to the float32 parameters
// (master weights), their accumulators and the optimizer. A weight's
// transpose moves below the cast (transpose(cast(w))) so that
// merak-fold-transposes still folds it into the GEMM's flags and the
// transpose, if any remains, moves half the bytes.
//
// Only matmuls whose VJP needs no reduction over broadcast batch dims are
// converted (a rank-2 right operand, or equal batch dims); the rest stay
// float32.
//
// Then bf16 activations: a GEMM's bf16 result flows on in bf16 through the
// ops torch.autocast runs in the input's dtype -- the bias add (a
// parameter operand is cast to bf16, as autocast's addmm does), GELU, the
// reshapes, transposes and splits between a projection and attention, and
// merak.attention itself when its query, key and value all arrive in bf16
// (lse stays float32) -- moving the widening cast below each; it stops at
// anything else (layer norm, softmax, the loss, a residual add with a
// float32 operand: float32 by type promotion). A narrowing cast of a widened bf16
// value is then that value, so MLP activations go from one GEMM to the
// next in bf16 and the backward keeps GELU's input in bf16. A GEMM whose
// bf16 result is still only widened (the LM head) gives its float32
// accumulation directly (a bf16 x bf16 -> f32 merak.matmul), and so does
// the backward's weight-gradient GEMM of a bf16 weight copy (the cast's
// VJP, VJPElementwise.cpp): no bf16 rounding of logits or weight gradients.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "PrecisionUtil.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKMIXEDPRECISION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-mixed-precision"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// `v` as bf16: a cast, placed below a transpose that feeds only this use.
Value toBf16(OpBuilder &b, Location loc, Value v, Type bf16) {
  if (auto tr = v.getDefiningOp<TransposeOp>(); tr && tr->hasOneUse()) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(tr);
    Value in = CastOp::create(b, loc, withElement(tr.getInput().getType(), bf16), tr.getInput());
    Value out = TransposeOp::create(b, tr.getLoc(), withElement(tr.getType(), bf16), in,
                                    tr.getPerm());
    return out;
  }
  return CastOp::create(b, loc, withElement(v.getType(), bf16), v);
}

bool convertible(MatmulOp mm) {
  auto a = cast<RankedTensorType>(mm.getLhs().getType());
  auto b = cast<RankedTensorType>(mm.getRhs().getType());
  if (!a.getElementType().isF32() || !b.getElementType().isF32() || a.getRank() < 2 ||
      b.getRank() < 2)
    return false;
  return b.getRank() == 2 || a.getShape().drop_back(2) == b.getShape().drop_back(2);
}

/// The bf16 value a widening cast (bf16 -> f32) widens, or null.
Value widened(Value v) {
  auto c = v.getDefiningOp<CastOp>();
  if (!c || !c.getType().getElementType().isF32() ||
      !cast<RankedTensorType>(c.getInput().getType()).getElementType().isBF16())
    return {};
  return c.getInput();
}

/// A parameter read (or a constant), possibly reshaped, transposed or
/// broadcast: cheap to narrow (a bias).
bool parameterLike(Value v) {
  for (int depth = 0; depth < 4; ++depth) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    if (isa<GetParamOp, ConstantOp>(def))
      return true;
    if (!isa<ReshapeOp, TransposeOp, BroadcastOp>(def))
      return false;
    v = def->getOperand(0);
  }
  return false;
}

/// `op` may run in bf16 on its operands: an op autocast keeps in the
/// input's dtype, every operand float32, each a widened bf16 value or
/// (binary ops) parameter-like, at least one widened.
bool runsInBf16(Operation *op) {
  bool unary = op->hasTrait<AutocastKeepsInput>();
  bool binary = op->hasTrait<AutocastBinary>();
  if (!unary && !binary)
    return false;
  bool any = false;
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.getElementType().isF32())
      return false;
    if (widened(v))
      any = true;
    else if (!binary || !parameterLike(v))
      return false;
  }
  for (Type t : op->getResultTypes())
    if (!cast<RankedTensorType>(t).getElementType().isF32())
      return false;
  return any;
}

/// Whether result `i` of an op running in bf16 is bf16 (attention's lse,
/// its row statistics, stays float32).
bool narrowResult(Operation *op, unsigned i) { return !isa<AttentionOp>(op) || i == 0; }

/// Rebuilds `op` (runsInBf16) on bf16 operands with bf16 results, each
/// result widened back for its users; returns the new widening casts.
SmallVector<CastOp> toBf16Op(Operation *op, Type bf16) {
  OpBuilder b(op);
  IRMapping map;
  for (Value v : op->getOperands()) {
    Value w = widened(v);
    map.map(v, w ? w : CastOp::create(b, op->getLoc(), withElement(v.getType(), bf16), v));
  }
  Operation *n = b.clone(*op, map);
  SmallVector<CastOp> widen;
  b.setInsertionPointAfter(n);
  for (auto [i, from, to] : llvm::enumerate(op->getResults(), n->getResults())) {
    if (!narrowResult(op, i)) {
      from.replaceAllUsesWith(to);
      continue;
    }
    to.setType(withElement(from.getType(), bf16));
    widen.push_back(CastOp::create(b, op->getLoc(), from.getType(), to));
    from.replaceAllUsesWith(widen.back().getResult());
  }
  op->erase();
  return widen;
}

/// Moves every widening cast in `start` below the ops that may run in
/// bf16 (worklist: each op is rewritten once), then drops narrowings of
/// widened values and dead casts.
void propagateBf16(ModuleOp module, SmallVector<CastOp> work, Type bf16) {
  while (!work.empty()) {
    CastOp w = work.pop_back_val();
    SmallVector<Operation *> users(w->getUsers().begin(), w->getUsers().end());
    llvm::SmallPtrSet<Operation *, 4> seen;
    for (Operation *u : users)
      if (seen.insert(u).second && runsInBf16(u))
        for (CastOp c : toBf16Op(u, bf16))
          work.push_back(c);
  }
  SmallVector<CastOp> casts;
  module.walk([&](CastOp c) { casts.push_back(c); });
  for (CastOp c : casts)
    if (c.getType().getElementType().isBF16())
      if (Value w = widened(c.getInput()); w && w.getType() == c.getType())
        c.getResult().replaceAllUsesWith(w);
  for (CastOp c : llvm::reverse(casts))
    if (c->use_empty())
      c->erase();
  // A GEMM whose bf16 result is only widened (e.g. the LM head's logits,
  // read by the float32 loss) writes its float32 accumulation directly.
  module.walk([&](CastOp c) {
    auto mm = c.getInput().getDefiningOp<MatmulOp>();
    if (!mm || !mm->hasOneUse() || !c.getType().getElementType().isF32() ||
        !mm.getType().getElementType().isBF16())
      return;
    mm.getResult().setType(c.getType());
    c.getResult().replaceAllUsesWith(mm.getResult());
    c->erase();
  });
}

struct MerakMixedPrecisionPass
    : merak::impl::MerakMixedPrecisionBase<MerakMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<bool> bf16Wanted = bf16Requested(module, "merak-mixed-precision", precision);
    if (failed(bf16Wanted))
      return signalPassFailure();
    if (!*bf16Wanted)
      return;
    Type bf16 = BFloat16Type::get(&getContext());
    SmallVector<CastOp> widenings;
    SmallVector<MatmulOp> matmuls;
    module.walk([&](MatmulOp mm) {
      if (convertible(mm))
        matmuls.push_back(mm);
    });
    for (MatmulOp mm : matmuls) {
      OpBuilder b(mm);
      Location loc = mm.getLoc();
      Value a = toBf16(b, loc, mm.getLhs(), bf16);
      Value c = toBf16(b, loc, mm.getRhs(), bf16);
      Value y = MatmulOp::create(b, loc, a, c);
      auto back = CastOp::create(b, loc, mm.getType(), y);
      widenings.push_back(back);
      mm.getResult().replaceAllUsesWith(back.getResult());
      Operation *lhsDef = mm.getLhs().getDefiningOp(), *rhsDef = mm.getRhs().getDefiningOp();
      mm.erase();
      for (Operation *def : {lhsDef, rhsDef})
        if (def && isa<TransposeOp>(def) && def->use_empty())
          def->erase();
    }
    propagateBf16(module, std::move(widenings), bf16);
  }
};
} // namespace
