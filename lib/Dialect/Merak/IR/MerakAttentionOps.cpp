//===- MerakAttentionOps.cpp - verifiers of attention and its gradient ----===//
//
// Both ops take query [..., T, D], key [..., S, D] and value [..., S, D]
// with equal leading (batch, head) dimensions, float32, bf16 (with a
// float32 lse; merak-mixed-precision) or float64 (the evaluator's gradient
// checks); causal needs S = T.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include <cmath>

using namespace mlir;
using namespace mlir::merak;

/// The checks shared by attention and attention_grad: operand shapes, the
/// element type, the scale; `result`/`lse` are the forward's result types
/// (attention_grad receives them as operands).
static LogicalResult verifyAttention(Operation *op, Value query, Value key, Value value,
                                     Type result, Type lse, double scale, bool causal) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  Type elem = q.getElementType();
  if (!elem.isF32() && !elem.isF64() && !elem.isBF16())
    return op->emitOpError("query must be a float32, bf16 or float64 tensor, got ") << q;
  if (k.getElementType() != elem || v.getElementType() != elem)
    return op->emitOpError("key and value must have query's element type ") << elem;
  int64_t rank = q.getRank();
  if (rank < 2)
    return op->emitOpError("query must have rank >= 2 ([..., T, D]), got ") << q;
  if (k.getRank() != rank || v.getRank() != rank)
    return op->emitOpError("query, key and value must have the same rank");
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  if (qs.drop_back(2) != ks.drop_back(2) || qs.drop_back(2) != vs.drop_back(2))
    return op->emitOpError("query, key and value must have equal leading (batch, head) "
                           "dimensions: ")
           << q << ", " << k << ", " << v;
  if (ks.back() != qs.back())
    return op->emitOpError("key's last dimension ")
           << ks.back() << " must equal query's " << qs.back();
  if (vs[rank - 2] != ks[rank - 2])
    return op->emitOpError("value has ")
           << vs[rank - 2] << " rows but key has " << ks[rank - 2];
  if (causal && ks[rank - 2] != qs[rank - 2])
    return op->emitOpError("causal attention needs as many keys as queries, got ")
           << ks[rank - 2] << " keys for " << qs[rank - 2] << " queries";
  if (!std::isfinite(scale))
    return op->emitOpError("scale must be finite");
  SmallVector<int64_t> outShape(qs);
  outShape.back() = vs.back();
  auto want = RankedTensorType::get(outShape, q.getElementType());
  if (result != want)
    return op->emitOpError("result type ") << result << " must be " << want;
  // bf16 attention keeps its row statistics in float32.
  auto wantLse = RankedTensorType::get(
      qs.drop_back(), elem.isBF16() ? Float32Type::get(op->getContext()) : elem);
  if (lse != wantLse)
    return op->emitOpError("lse type ") << lse << " must be " << wantLse;
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getQuery(), getKey(), getValue(), getResult().getType(),
                         getLse().getType(), getScale().convertToDouble(), getCausal());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getResult().getType(),
                             getLse().getType(), getScale().convertToDouble(), getCausal())))
    return failure();
  if (getGrad().getType() != getResult().getType())
    return emitOpError("grad type ")
           << getGrad().getType() << " must equal the result type " << getResult().getType();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError("gradient types must equal query, key and value's");
  return success();
}
