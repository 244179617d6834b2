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
// float32. merak.attention (float32 kernels) is left alone.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKMIXEDPRECISION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
RankedTensorType withElement(Type t, Type elem) {
  auto r = cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), elem);
}

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

struct MerakMixedPrecisionPass
    : merak::impl::MerakMixedPrecisionBase<MerakMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (precision == "fp32")
      return;
    if (precision != "bf16") {
      module.emitError("merak-mixed-precision: precision '")
          << precision << "': expected fp32 or bf16";
      return signalPassFailure();
    }
    Type bf16 = BFloat16Type::get(&getContext());
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
      Value back = CastOp::create(b, loc, mm.getType(), y);
      mm.getResult().replaceAllUsesWith(back);
      Operation *lhsDef = mm.getLhs().getDefiningOp(), *rhsDef = mm.getRhs().getDefiningOp();
      mm.erase();
      for (Operation *def : {lhsDef, rhsDef})
        if (def && isa<TransposeOp>(def) && def->use_empty())
          def->erase();
    }
  }
};
} // namespace
