//===- MerakAttentionOps.cpp - verifiers of attention and its gradient ----===//
//
// Both ops take query [..., T, D], key [..., S, D] and value [..., S, D]
// with equal leading (batch, head) dimensions (or, seq_major, [..., T, H, D]
// and the like), float32, bf16 (with a
// float32 lse; merak-mixed-precision) or float64 (the evaluator's gradient
// checks); causal needs S = T. An optional bias is [..., T, S] in the
// heads-first order, each leading dimension 1 or the scores' own, of the
// query's element type; attention_grad then returns its gradient shaped
// like the scores. With attention-probability dropout (`dropout` in
// [0, 1)), the recorded splits lie on the probabilities' leading dims, and
// the op reads the training position (its mask's step and this rank's parts).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include <cmath>

using namespace mlir;
using namespace mlir::merak;

/// `t` with dims rank-3 and rank-2 swapped: a seq_major operand's
/// [..., T, H, D] as the [..., H, T, D] the checks are written for.
static RankedTensorType headsFirst(RankedTensorType t) {
  SmallVector<int64_t> s(t.getShape());
  std::swap(s[s.size() - 3], s[s.size() - 2]);
  return RankedTensorType::get(s, t.getElementType());
}

/// The checks shared by attention and attention_grad: operand shapes, the
/// element type, the scale; `result`/`lse` are the forward's result types
/// (attention_grad receives them as operands). Messages name the types as
/// written (seq_major: [..., T, H, D]).
/// The scores' type [..., T, S] (heads-first) of heads-first query `q`
/// and key `k`.
static RankedTensorType scoresType(RankedTensorType q, RankedTensorType k) {
  SmallVector<int64_t> s(q.getShape().drop_back());
  s.push_back(k.getDimSize(k.getRank() - 2));
  return RankedTensorType::get(s, q.getElementType());
}

/// A bias must broadcast to the scores `scores` numpy-style without
/// growing: the same rank, S last, each other dim (T too: a per-key bias,
/// ALiBi's) 1 or the scores'.
static LogicalResult verifyBias(Operation *op, Value bias, RankedTensorType scores) {
  if (!bias)
    return success();
  auto b = cast<RankedTensorType>(bias.getType());
  bool fits = b.getRank() == scores.getRank() &&
              b.getElementType() == scores.getElementType();
  for (int64_t d = 0; fits && d < b.getRank(); ++d)
    fits = b.getDimSize(d) == scores.getDimSize(d) || (d < b.getRank() - 1 && b.getDimSize(d) == 1);
  if (!fits)
    return op->emitOpError("bias type ")
           << b << " must broadcast to the scores " << scores
           << " (the same rank and element type, S last, other dims 1 or the scores')";
  return success();
}

static LogicalResult verifyAttention(Operation *op, Value query, Value key, Value value,
                                     Value bias, Type result, Type lse, double scale,
                                     bool causal, bool seqMajor, int64_t window,
                                     double softcap) {
  if (window < 0)
    return op->emitOpError("window ") << window << " must be 0 (none) or positive";
  if (!(softcap >= 0) || !std::isfinite(softcap))
    return op->emitOpError("softcap ") << softcap << " must be 0 (none) or positive";
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (seqMajor) {
    if (q.getRank() < 3 || k.getRank() < 3 || v.getRank() < 3)
      return op->emitOpError("seq_major needs query, key and value of rank >= 3 "
                             "([..., T, H, D])");
    q = headsFirst(q), k = headsFirst(k), v = headsFirst(v);
  }
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
  if ((causal || window > 0) && ks[rank - 2] != qs[rank - 2])
    return op->emitOpError(causal ? "causal" : "windowed")
           << " attention needs as many keys as queries, got " << ks[rank - 2] << " keys for "
           << qs[rank - 2] << " queries";
  if (!std::isfinite(scale))
    return op->emitOpError("scale must be finite");
  SmallVector<int64_t> outShape(qs);
  outShape.back() = vs.back();
  auto want = RankedTensorType::get(outShape, q.getElementType());
  if (seqMajor)
    want = headsFirst(want); // back to [..., T, H, D]
  if (result != want)
    return op->emitOpError("result type ") << result << " must be " << want;
  // bf16 attention keeps its row statistics in float32.
  auto wantLse = RankedTensorType::get(
      qs.drop_back(), elem.isBF16() ? Float32Type::get(op->getContext()) : elem);
  if (lse != wantLse)
    return op->emitOpError("lse type ") << lse << " must be " << wantLse;
  return verifyBias(op, bias, scoresType(q, k));
}

/// The dropout checks of both ops: a ratio in [0, 1); splits recorded on
/// the leading dims of the heads-first probabilities [..., T, S].
template <typename OpTy> static LogicalResult verifyDropout(OpTy op) {
  double p = op.getDropout().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return op.emitOpError("dropout must be in [0, 1), got ") << p;
  if (p == 0.0 && (op.getBatchSplit() || op.getTpSplit()))
    return op.emitOpError("records dropout splits without dropout");
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  auto k = cast<RankedTensorType>(op.getKey().getType());
  if (op.getSeqMajor())
    q = headsFirst(q), k = headsFirst(k);
  RankedTensorType probs = scoresType(q, k);
  return verifyDropoutSplits(op, probs.getShape(), probs.getRank() - 2, op.getBatchSplit(),
                             op.getTpSplit());
}

/// Dropout reads the training position; attention is otherwise pure.
template <typename OpTy>
static void dropoutEffects(OpTy op,
                           SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &e) {
  if (op.getDropout().convertToDouble() > 0)
    e.emplace_back(MemoryEffects::Read::get(), TrainingPositionResource::get());
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getBias(),
                             getResult().getType(), getLse().getType(),
                             getScale().convertToDouble(), getCausal(), getSeqMajor(), getWindow(),
                             getSoftcap().convertToDouble())))
    return failure();
  return verifyDropout(*this);
}

void AttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  dropoutEffects(*this, effects);
}

void AttentionGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  dropoutEffects(*this, effects);
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getBias(),
                             getResult().getType(), getLse().getType(),
                             getScale().convertToDouble(), getCausal(),
                             getSeqMajor(), getWindow(), getSoftcap().convertToDouble())))
    return failure();
  if (getGrad().getType() != getResult().getType())
    return emitOpError("grad type ")
           << getGrad().getType() << " must equal the result type " << getResult().getType();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError("gradient types must equal query, key and value's");
  if (getLseGrad() && getLseGrad().getType() != getLse().getType())
    return emitOpError("lse_grad type ")
           << getLseGrad().getType() << " must equal the lse type " << getLse().getType();
  if (!getBias() != !getBiasGrad())
    return emitOpError("has a bias_grad result exactly when it has a bias operand");
  if (getBiasGrad()) {
    auto q = cast<RankedTensorType>(getQuery().getType());
    auto k = cast<RankedTensorType>(getKey().getType());
    RankedTensorType want =
        getSeqMajor() ? scoresType(headsFirst(q), headsFirst(k)) : scoresType(q, k);
    if (getBiasGrad().getType() != want)
      return emitOpError("bias_grad type ")
             << getBiasGrad().getType() << " must be the scores' " << want;
  }
  return verifyDropout(*this);
}
