//===- MerakCost.cpp - CostOpInterface: FLOPs and bytes of merak ops ------===//
//
// The defaults (elementwise: one FLOP per element of the largest operand or
// result; every operand and result moved once) and the ops that differ:
//   matmul           2 x result elements x K
//   conv2d (and its data / filter gradients)
//                    2 x output elements x (input channels / groups) x kh x kw
//   softmax, log_softmax, layer_norm, cross_entropy
//                    5 per element (max/mean, subtract, exp/square,
//                    sum, divide/scale)
//   argsort          ceil(log2(n)) comparisons per element (n along the
//                    axis)
//   attention        4 x D x (query, key) pairs attended (QK^T and PV; a
//                    causal row r attends r + 1 keys), plus 5 per score
//                    (the softmax); attention_grad 2.5 x that (it
//                    recomputes QK^T, then P^T dO, dO V^T, dS K, dS^T Q)
//   gather_grad with an accumulator
//                    one FLOP per grad element; grad and indices read, and
//                    the table's rows they reach (at most grad's elements)
//                    read and written: the accumulator is updated in place
//   reshape, tp_identity   views: no FLOPs, no bytes
//   constant, get_param, set_param, param   no FLOPs, no bytes: a
//                    parameter's or constant's bytes are counted by the ops
//                    that read it, a written value's by the op producing it
//   collectives      no FLOPs, no bytes here: their cost is the link's
//                    (lib/Planner/Simulate.cpp, collectiveSeconds)
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
int64_t elements(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.hasStaticShape() ? r.getNumElements() : 0;
}

int64_t bytes(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape())
    return 0;
  unsigned bits = r.getElementType().getIntOrFloatBitWidth();
  return r.getNumElements() * std::max<int64_t>(1, (bits + 7) / 8);
}

/// 2 x output elements x (weight elements / output channels).
int64_t convFlops(Type output, Type weight) {
  auto w = cast<RankedTensorType>(weight);
  return 2 * elements(output) * (w.getNumElements() / std::max<int64_t>(1, w.getDimSize(0)));
}
} // namespace

int64_t mlir::merak::elementwiseOpFlops(Operation *op, int64_t perElement) {
  int64_t n = 0;
  for (Type t : op->getOperandTypes())
    n = std::max(n, elements(t));
  for (Type t : op->getResultTypes())
    n = std::max(n, elements(t));
  return perElement * n;
}

int64_t mlir::merak::operandAndResultBytes(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getOperandTypes())
    n += bytes(t);
  for (Type t : op->getResultTypes())
    n += bytes(t);
  return n;
}

int64_t GatherGradOp::getFlops() {
  return getAcc() ? elements(getGrad().getType()) : elementwiseOpFlops(*this, 1);
}

int64_t GatherGradOp::getBytesAccessed() {
  if (!getAcc())
    return operandAndResultBytes(*this);
  // The table's elements the indices reach: at most grad's.
  int64_t reached = std::min(elements(getGrad().getType()), elements(getType()));
  int64_t perElement = elements(getType()) ? bytes(getType()) / elements(getType()) : 0;
  return bytes(getGrad().getType()) + bytes(getIndices().getType()) + 2 * reached * perElement;
}

int64_t MatmulOp::getFlops() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  int64_t k = lhs.getRank() ? lhs.getShape().back() : 1;
  return 2 * elements(getType()) * k;
}

int64_t MatmulTOp::getFlops() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  int64_t k = lhs.getShape()[lhs.getRank() - (getTransposeLhs() ? 2 : 1)];
  return 2 * elements(getType()) * k;
}

int64_t Conv2DOp::getFlops() { return convFlops(getType(), getWeight().getType()); }
int64_t Conv2DBackwardDataOp::getFlops() {
  return convFlops(getGrad().getType(), getWeight().getType());
}
int64_t Conv2DBackwardFilterOp::getFlops() {
  return convFlops(getGrad().getType(), getType());
}

/// A comparison per element per halving: n log2(n) along the axis.
int64_t ArgSortOp::getFlops() {
  uint64_t len = getInput().getType().getDimSize(getAxis());
  return elementwiseOpFlops(*this, std::max<int64_t>(1, llvm::Log2_64_Ceil(len)));
}
int64_t SoftmaxOp::getFlops() { return elementwiseOpFlops(*this, 5); }
int64_t LogSoftmaxOp::getFlops() { return elementwiseOpFlops(*this, 5); }
int64_t LayerNormOp::getFlops() { return elementwiseOpFlops(*this, 5); }
int64_t SumSquaresOp::getFlops() { return elementwiseOpFlops(*this, 2); } // a mul and an add
int64_t LinearScanOp::getFlops() { return elementwiseOpFlops(*this, 2); } // a mul and an add
// The reverse recurrence's mul and add, and the decay gradient's mul.
int64_t LinearScanGradOp::getFlops() { return elementwiseOpFlops(*this, 3); }
/// Per state of every (batch, channel, token): the decay's mul and exp, the
/// input's two muls, the state's mul and add, the read-out's mul and add.
static int64_t selectiveScanFlops(RankedTensorType u, RankedTensorType a, int64_t perState) {
  return u.getNumElements() * a.getDimSize(1) * perState;
}
int64_t SelectiveScanOp::getFlops() {
  return selectiveScanFlops(cast<RankedTensorType>(getU().getType()),
                            cast<RankedTensorType>(getA().getType()), 8);
}
// The states recomputed (8) and the reverse recurrence with its five
// gradients (about 14 more).
int64_t SelectiveScanGradOp::getFlops() {
  return selectiveScanFlops(cast<RankedTensorType>(getU().getType()),
                            cast<RankedTensorType>(getA().getType()), 22);
}
int64_t CrossEntropyOp::getFlops() { return elementwiseOpFlops(*this, 5); }

/// Query-key pairs an attention op attends, over its batch and head dims
/// (the sequence dims are rank-2, or rank-3 when seq_major).
/// (with a sliding window w, row r attends min(r + 1, w) keys; a window
/// without causal is a band, the keys |r - c| < w).
static int64_t attendedPairs(Value query, Value key, bool causal, bool seqMajor,
                             int64_t window) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  int64_t rank = q.getRank(), seq = rank - (seqMajor ? 3 : 2);
  int64_t t = q.getDimSize(seq), s = k.getDimSize(seq);
  int64_t rows = elements(q) / std::max<int64_t>(1, q.getDimSize(rank - 1));
  if (!causal && window > 0) {
    int64_t perSlice = 0;
    for (int64_t r = 0; r < t; ++r)
      perSlice += std::min(s, r + window) - std::max<int64_t>(0, r - window + 1);
    return rows / std::max<int64_t>(1, t) * perSlice;
  }
  if (!causal)
    return rows * s;
  int64_t w = window > 0 ? std::min(window, t) : t;
  int64_t perSlice = w * (w + 1) / 2 + (t - w) * w;
  return rows / std::max<int64_t>(1, t) * perSlice;
}

static int64_t attentionFlops(Value query, Value key, bool causal, bool seqMajor,
                              int64_t window) {
  auto q = cast<RankedTensorType>(query.getType());
  return attendedPairs(query, key, causal, seqMajor, window) * (4 * q.getShape().back() + 5);
}

int64_t AttentionOp::getFlops() {
  return attentionFlops(getQuery(), getKey(), getCausal(), getSeqMajor(), getWindow());
}
int64_t AttentionGradOp::getFlops() {
  return attentionFlops(getQuery(), getKey(), getCausal(), getSeqMajor(), getWindow()) * 5 / 2;
}

int64_t ReshapeOp::getFlops() { return 0; }
int64_t ReshapeOp::getBytesAccessed() { return 0; }
int64_t TpIdentityOp::getFlops() { return 0; }
int64_t TpIdentityOp::getBytesAccessed() { return 0; }
int64_t ConstantOp::getFlops() { return 0; }
int64_t ConstantOp::getBytesAccessed() { return 0; }
int64_t GetParamOp::getFlops() { return 0; }
int64_t GetParamOp::getBytesAccessed() { return 0; }
int64_t SetParamOp::getFlops() { return 0; }
int64_t SetParamOp::getBytesAccessed() { return 0; }
int64_t ParamOp::getFlops() { return 0; }
int64_t ParamOp::getBytesAccessed() { return 0; }
int64_t LocalShardOp::getFlops() { return 0; }
int64_t LocalShardOp::getBytesAccessed() { return bytes(getType()); }

int64_t AllReduceOp::getFlops() { return 0; }
int64_t AllReduceOp::getBytesAccessed() { return 0; }
int64_t ReduceScatterOp::getFlops() { return 0; }
int64_t ReduceScatterOp::getBytesAccessed() { return 0; }
int64_t AllToAllOp::getFlops() { return 0; }
int64_t AllToAllOp::getBytesAccessed() { return 0; }
int64_t ExpertShadowOp::getFlops() { return 0; }
int64_t ExpertShadowOp::getBytesAccessed() { return 0; }
int64_t AllGatherOp::getFlops() { return 0; }
int64_t AllGatherOp::getBytesAccessed() { return 0; }
