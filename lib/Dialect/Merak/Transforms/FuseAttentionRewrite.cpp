//===- FuseAttentionRewrite.cpp - merak-fuse-attention's rewrite ---------===//
//
// A matched attention (FuseAttention.h) becomes one merak.attention:
//
//   matmul(softmax(scale * matmul(q, kT) [+ bias] [masked]), v)
//     => attention(q, transpose(kT), v) {scale, causal, window, ...}
//   matmul(softmax(c * (scale * matmul(q, kT) + bias)), v)
//     => attention(q, transpose(kT), v, c * bias) {c * scale}
//
// Keys and values shared by heads are broadcast to q's; value heads of
// another width than the query/key heads (multi-head latent attention) pad
// the narrower side with zero columns, and the output is cut back.
//
//===----------------------------------------------------------------------===//
#include "FuseAttention.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// `x` broadcast to the leading dims `lead` (x's own last two kept):
/// multi-query keys and values [B, 1, S, D] read by every head; x itself
/// when its leading dims are `lead` already.
Value broadcastLeading(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> lead) {
  auto t = cast<RankedTensorType>(x.getType());
  if (t.getShape().drop_back(2) == lead)
    return x;
  SmallVector<int64_t> shape(lead);
  shape.append(t.getShape().take_back(2).begin(), t.getShape().take_back(2).end());
  return BroadcastOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), x);
}

/// One term of the fused op's bias: the model's times its scale, and, when
/// the model added it to scores whose leading dims regroup q's (XLNet's
/// [B, H, T, S] sum of products taken over [B * H]), broadcast to those
/// scores and regrouped to q's leading dims `lead`.
Value biasTerm(OpBuilder &b, Location loc, const BiasTerm &term, ArrayRef<int64_t> lead) {
  Value bias = term.value;
  auto t = cast<RankedTensorType>(bias.getType());
  if (term.scale != 1.0) {
    auto scalar = RankedTensorType::get({}, t.getElementType());
    Value c = ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, b.getFloatAttr(t.getElementType(), term.scale)));
    bias = MulOp::create(b, loc, bias, c);
  }
  ArrayRef<int64_t> scores = term.scores.getShape();
  if (scores.drop_back(2) == lead)
    return bias;
  if (t.getShape() != scores)
    bias = BroadcastOp::create(b, loc, term.scores, bias);
  SmallVector<int64_t> shape(lead);
  shape.append(scores.take_back(2).begin(), scores.take_back(2).end());
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), bias);
}

/// The fused op's bias: the sum of the matched terms (null without any).
Value fusedBias(OpBuilder &b, Location loc, const Matched &m, ArrayRef<int64_t> lead) {
  Value sum;
  for (const BiasTerm &term : m.biases) {
    Value v = biasTerm(b, loc, term, lead);
    sum = sum ? AddOp::create(b, loc, sum, v).getResult() : v;
  }
  return sum;
}

/// `x` [..., n] with zero columns [n, width) appended.
Value zeroColumnsAfter(OpBuilder &b, Location loc, Value x, int64_t width) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = width - shape.back();
  auto scalar = RankedTensorType::get({}, t.getElementType());
  Value zero = ConstantOp::create(b, loc, cast<DenseElementsAttr>(b.getZeroAttr(scalar)));
  Value zeros = BroadcastOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), zero);
  return ConcatOp::create(b, loc, ValueRange{x, zeros}, t.getRank() - 1);
}
} // namespace

void mlir::merak::rewriteAttention(const Matched &m) {
  MatmulOp pv = m.pv;
  Value q = m.q, kT = m.kT, v = m.v;
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(kT.getType());
  int64_t rank = qt.getRank(), d = qt.getDimSize(rank - 1),
          dv = cast<RankedTensorType>(v.getType()).getDimSize(rank - 1);
  ArrayRef<int64_t> batch = qt.getShape().drop_back(2);
  OpBuilder b(pv);
  SmallVector<Location> locs;
  for (Operation *op : llvm::reverse(m.chain))
    locs.push_back(op->getLoc());
  Location loc = b.getFusedLoc(locs);
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  SmallVector<int64_t> kShape(kt.getShape());
  std::swap(kShape[rank - 1], kShape[rank - 2]);
  Value k =
      TransposeOp::create(b, loc, RankedTensorType::get(kShape, kt.getElementType()), kT, perm);
  k = broadcastLeading(b, loc, k, batch);
  v = broadcastLeading(b, loc, v, batch);
  // Value heads of another width than query/key heads (multi-head latent
  // attention: DeepSeek's 192 and 128): the narrower side gets zero
  // columns, which change neither the scores nor the output's first dv
  // columns, and the fused op's output is cut back to them.
  int64_t width = std::max(d, dv);
  if (d < width) {
    q = zeroColumnsAfter(b, loc, q, width);
    k = zeroColumnsAfter(b, loc, k, width);
  }
  if (dv < width)
    v = zeroColumnsAfter(b, loc, v, width);
  SmallVector<int64_t> outShape(qt.getShape());
  outShape.back() = width;
  auto lseType = RankedTensorType::get(qt.getShape().drop_back(), b.getF32Type());
  // The dropout's ratio, seed and the splits it recorded (none at p = 0).
  DropoutOp dropout = m.dropout;
  bool drops = dropout && dropout.getRatio().convertToDouble() > 0;
  auto attn = AttentionOp::create(
      b, loc, TypeRange{RankedTensorType::get(outShape, b.getF32Type()), lseType}, q, k, v,
      fusedBias(b, loc, m, batch), b.getF64FloatAttr(m.scale),
      m.mask.causal ? b.getUnitAttr() : UnitAttr(), UnitAttr(), b.getI64IntegerAttr(m.mask.window),
      b.getF64FloatAttr(m.softcap),
      b.getF64FloatAttr(drops ? dropout.getRatio().convertToDouble() : 0),
      b.getI64IntegerAttr(drops ? dropout.getSeed() : 0),
      drops ? dropout.getBatchSplitAttr() : DenseI64ArrayAttr(),
      drops ? dropout.getTpSplitAttr() : DenseI64ArrayAttr());
  Value out = attn.getResult();
  if (dv < width) {
    SmallVector<int64_t> starts(rank, 0), strides(rank, 1), limits(outShape);
    limits.back() = dv;
    out = SliceOp::create(b, loc, pv.getType(), out, starts, limits, strides);
  }
  if (m.sink) { // each row's share without the sink: sigmoid(lse - sink)
    SmallVector<int64_t> rows(lseType.getShape());
    rows.push_back(1);
    Value lse =
        ReshapeOp::create(b, loc, RankedTensorType::get(rows, b.getF32Type()), attn.getLse());
    Value share = SigmoidOp::create(b, loc, SubOp::create(b, loc, lse, m.sink));
    out = MulOp::create(b, loc, out, share);
  }
  pv.getResult().replaceAllUsesWith(out);
  for (Operation *op : m.chain)
    op->erase();
}
