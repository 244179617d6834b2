//===- MoeCapacity.cpp - merak-moe-capacity -------------------------------===//
//
// Expert capacity with token dropping (GShard, Megatron-LM's
// --moe-expert-capacity-factor, DeepSpeed's capacity factor). Per
// Mixture-of-Experts layer (the expert GEMMs sharing ids [S]):
//
//   %y = expert_matmul %x, %W[%ids]  ...  mul(%rows [S, H], %w [S, 1])
//     => %kept = expert_capacity %ids, reshape(%w) [S] experts = E
//                    capacity = ceil(S * factor / E) policy = P
//        %y = expert_matmul %x, %W[%kept]  ...
//        mul(%rows, %w * reshape(cast(ne(%kept, -1))))
//
// `%w` is the routing weight of each row: the operand of a merak.mul that
// is not computed from the layer's rows while the other one is. Its
// computation is moved before the layer's first GEMM when the exporter
// wrote it after (transformers' batched_mm reshapes it last).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <cmath>

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKMOECAPACITY
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A per-row value of S rows: [S] or [S, 1].
bool isPerRow(Value v, int64_t rows) {
  RankedTensorType t = tensorOf(v);
  return isa<FloatType>(t.getElementType()) && t.getRank() >= 1 && t.getRank() <= 2 &&
         t.getDimSize(0) == rows && t.getNumElements() == rows;
}

/// The values computed from the layer's GEMMs that keep one row per row
/// (matrices [S, n]): the expert MLP up to where its rows are combined (a
/// reshape to [tokens, k, n], or with top-1 routing [tokens, 1, n]).
llvm::DenseSet<Value> rowSlice(ArrayRef<ExpertMatmulOp> gemms, int64_t rows) {
  llvm::DenseSet<Value> slice;
  SmallVector<Value> work;
  for (ExpertMatmulOp op : gemms)
    work.push_back(op.getResult());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!slice.insert(v).second)
      continue;
    for (Operation *user : v.getUsers())
      for (Value r : user->getResults())
        if (RankedTensorType t = dyn_cast<RankedTensorType>(r.getType());
            t && t.getRank() >= 1 && t.getRank() <= 2 && t.getDimSize(0) == rows)
          work.push_back(r);
  }
  return slice;
}

/// Moves the ops `v` needs that come after `before` to just before it, in
/// order; fails when one of them is an expert GEMM of the layer (the weight
/// would depend on the experts' output).
LogicalResult hoistAbove(Value v, Operation *before, ArrayRef<ExpertMatmulOp> gemms) {
  llvm::DenseSet<Operation *> need;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != before->getBlock() || def->isBeforeInBlock(before) ||
        !need.insert(def).second)
      continue;
    if (isa<ExpertMatmulOp>(def) && llvm::is_contained(gemms, cast<ExpertMatmulOp>(def)))
      return failure();
    for (Value in : def->getOperands())
      work.push_back(in);
  }
  SmallVector<Operation *> ordered(need.begin(), need.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *op : ordered)
    op->moveBefore(before);
  return success();
}

struct MerakMoeCapacityPass : merak::impl::MerakMoeCapacityBase<MerakMoeCapacityPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(capacityFactor > 0) || !std::isfinite(capacityFactor)) {
      module.emitError("merak-moe-capacity: the capacity factor must be a finite number > 0, "
                       "got ")
          << capacityFactor;
      return signalPassFailure();
    }
    if (policy != "probs" && policy != "position") {
      module.emitError("merak-moe-capacity: the drop policy must be probs or position, got '")
          << policy << "'";
      return signalPassFailure();
    }
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-moe-capacity: no single-block func.func @") << entry;
      return signalPassFailure();
    }
    // The layers: the GEMMs sharing one ids value, in program order.
    llvm::MapVector<Value, SmallVector<ExpertMatmulOp>> layers;
    fn.walk([&](ExpertMatmulOp op) {
      if (!op.getFirst())
        layers[op.getExperts()].push_back(op);
    });
    if (layers.empty()) {
      fn.emitError("merak-moe-capacity: --moe-capacity-factor needs a Mixture-of-Experts "
                   "model, but @")
          << entry
          << " has no expert GEMM (merak.expert_matmul, formed by merak-fuse-experts from "
             "transformers' batched_mm experts)";
      return signalPassFailure();
    }
    for (auto &[ids, gemms] : layers)
      if (failed(limit(ids, gemms)))
        return signalPassFailure();
  }

  LogicalResult limit(Value ids, ArrayRef<ExpertMatmulOp> gemms) {
    const int64_t rows = tensorOf(ids).getDimSize(0);
    ExpertMatmulOp head = gemms.front();
    int64_t experts = tensorOf(head.getWeight()).getDimSize(0);
    for (ExpertMatmulOp op : gemms)
      if (tensorOf(op.getWeight()).getDimSize(0) != experts)
        return op.emitError("merak-moe-capacity: the expert GEMMs of one layer have ")
               << experts << " and " << tensorOf(op.getWeight()).getDimSize(0) << " experts";
    // Where the layer weights its rows: mul(rows, %w) with %w per row and
    // not computed from the rows.
    llvm::DenseSet<Value> slice = rowSlice(gemms, rows);
    SmallVector<OpOperand *> weights;
    for (Value v : slice)
      for (Operation *user : v.getUsers())
        if (auto mul = dyn_cast<MulOp>(user))
          for (OpOperand &w : mul->getOpOperands())
            if (!slice.contains(w.get()) && isPerRow(w.get(), rows) &&
                !llvm::is_contained(weights, &w))
              weights.push_back(&w);
    if (weights.size() != 1)
      return head.emitError("merak-moe-capacity: ")
             << (weights.empty() ? "cannot find" : "found several candidates for")
             << " the routing weight of this Mixture-of-Experts layer: expected one merak.mul "
                "of its expert rows by a ["
             << rows << "] or [" << rows << ", 1] weight (transformers' batched_mm experts)";
    OpOperand &use = *weights.front();
    Operation *first = gemms.front();
    for (ExpertMatmulOp op : gemms)
      if (op->isBeforeInBlock(first))
        first = op;
    if (failed(hoistAbove(use.get(), first, gemms)))
      return use.getOwner()->emitError("merak-moe-capacity: the routing weight of this "
                                       "Mixture-of-Experts layer depends on its experts' output");

    OpBuilder b(first);
    Location loc = first->getLoc();
    Value w = use.get();
    RankedTensorType wt = tensorOf(w);
    auto i64 = b.getI64Type();
    Value ids64 = ids;
    if (!tensorOf(ids).getElementType().isInteger(64))
      ids64 = CastOp::create(b, loc, RankedTensorType::get({rows}, i64), ids);
    Value probs = w;
    if (wt.getRank() != 1)
      probs = ReshapeOp::create(b, loc, RankedTensorType::get({rows}, wt.getElementType()), w);
    const int64_t capacity =
        std::max<int64_t>(1, (int64_t)std::ceil((double)rows * capacityFactor / experts));
    Value kept = ExpertCapacityOp::create(b, loc, ids64.getType(), ids64, probs, experts,
                                          capacity, policy);
    Value none = ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, i64), ArrayRef<int64_t>{-1}));
    Value keep = NeOp::create(b, loc, kept, none);
    Value mask = CastOp::create(b, loc, RankedTensorType::get({rows}, wt.getElementType()), keep);
    if (wt.getRank() != 1)
      mask = ReshapeOp::create(b, loc, wt, mask);
    use.set(MulOp::create(b, loc, w, mask));
    for (ExpertMatmulOp op : gemms)
      op.getExpertsMutable().assign(kept);
    return success();
  }
};
} // namespace
