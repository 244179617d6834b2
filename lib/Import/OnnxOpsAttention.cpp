//===- OnnxOpsAttention.cpp - ONNX Attention (opset 23) --------------------===//
//
// Attention-23 is imported as its definition, in the spelling that
// merak-fuse-attention recognises, so that one set of rules decides where
// the fused kernel applies (a constant mask that is causal or keeps every
// key, the kernels' head dims) and everything else still trains:
//
//   q, k, v   [B, T, H*D] -> [B, H, T, D] (3-D inputs, q_num_heads /
//             kv_num_heads), k and v repeated per query head group (GQA:
//             kv head h serves query heads h*G .. h*G+G-1)
//   s = matmul(q, transpose(k)) * scale          scale: 1/sqrt(D) by default
//   s = tanh(s / softcap) * softcap              softcap > 0
//   s = s + bias                                 bias = attn_mask (float), or
//             0 / -inf from a boolean mask, plus the causal 0 / -inf (key
//             j visible to query i when j <= i), padded with -inf to S keys
//   p = softmax(s, last axis)
//   p = where(row has a visible key, p, 0)       only for a mask computed at
//             run time, or a constant one that hides a whole row (ONNX
//             gives such rows zeros; the scores are zeroed first, so no NaN
//             reaches the gradient)
//   y = matmul(p, v)                             -> [B, T, H*Dv] for 3-D
//
// With past_key / past_value (a KV cache) the keys and values are the past's
// followed by this step's, and the causal mask shifts by the past's length
// (query i sees key j <= i + past); present_key / present_value are those
// concatenations. qk_matmul_output is the scores after the scale and softcap
// (mode 0, 1), with the bias added (2), or the probabilities (3).
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

RankedTensorType like(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

Value transposed(NodeContext &n, Value v, ArrayRef<int64_t> perm) {
  return n.create<TransposeOp>(v, perm);
}

/// [B, S, H*D] -> [B, H, S, D].
Value headsFirst(NodeContext &n, Value v, int64_t heads, StringRef what) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t hidden = t.getDimSize(2);
  if (heads <= 0 || hidden % heads) {
    (void)n.error(Twine(what) + "'s hidden size " + Twine(hidden) +
                  " is not a multiple of its head count " + Twine(heads));
    return {};
  }
  Value r = n.reshape(v, {t.getDimSize(0), t.getDimSize(1), heads, hidden / heads});
  return transposed(n, r, {0, 2, 1, 3});
}

/// [B, Hkv, S, D] -> [B, Hkv * groups, S, D], each head repeated in place.
Value repeatHeads(NodeContext &n, Value v, int64_t groups) {
  if (groups == 1)
    return v;
  auto t = cast<RankedTensorType>(v.getType());
  ArrayRef<int64_t> s = t.getShape();
  Value e = n.reshape(v, {s[0], s[1], 1, s[2], s[3]});
  e = n.broadcastTo(e, {s[0], s[1], groups, s[2], s[3]});
  return n.reshape(e, {s[0], s[1] * groups, s[2], s[3]});
}

/// The mask as an additive bias of Q's element type, padded with -inf up
/// to `keys` on its last axis.
Value maskBias(NodeContext &n, Value mask, RankedTensorType qt, int64_t keys) {
  auto mt = cast<RankedTensorType>(mask.getType());
  double ninf = -std::numeric_limits<double>::infinity();
  Value bias = mask;
  if (mt.getElementType().isInteger(1)) {
    Value zero = n.broadcastTo(n.scalarLike(n.input(0), 0.0), mt.getShape());
    bias = n.create<WhereOp>(mask, zero, n.scalarLike(n.input(0), ninf));
  } else if (mt.getElementType() != qt.getElementType()) {
    (void)n.error("attn_mask must be boolean or of Q's element type");
    return {};
  }
  int64_t have = mt.getShape().empty() ? 1 : mt.getShape().back();
  if (mt.getRank() == 0 || have == keys || have == 1)
    return bias;
  if (have > keys) {
    (void)n.error("attn_mask has " + Twine(have) + " keys, more than the " +
                  Twine(keys) + " of K");
    return {};
  }
  SmallVector<int64_t> padShape(mt.getShape());
  padShape.back() = keys - have;
  Value pad = n.broadcastTo(n.scalarLike(n.input(0), ninf), padShape);
  return n.create<ConcatOp>(ValueRange{bias, pad}, mt.getRank() - 1);
}

/// Which keys query i (at position i + past) sees: with `causal` none after
/// it, with a `left` (`right`) window >= 0 none more than that many before
/// (after) it; as an additive [queries, keys] bias of 0 and -inf.
struct KeyWindow {
  bool causal = false;
  int64_t left = -1, right = -1;
  bool any() const { return causal || left >= 0 || right >= 0; }
};
Value positionBias(NodeContext &n, RankedTensorType qt, int64_t queries, int64_t keys,
                   int64_t past, KeyWindow w) {
  HostTensor t(like(qt, {queries, keys}));
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j) {
      int64_t at = i + past;
      bool seen = (!w.causal || j <= at) && (w.left < 0 || j >= at - w.left) &&
                  (w.right < 0 || j <= at + w.right);
      t.setFromDouble(i * keys + j, seen ? 0.0 : -std::numeric_limits<double>::infinity());
    }
  return n.constant(t);
}

/// True when `bias` is a constant in which every row (last axis) keeps at
/// least one key.
bool everyRowVisible(Value bias) {
  ElementsAttr attr;
  if (!matchPattern(bias, m_Constant(&attr)))
    return false;
  auto t = HostTensor::fromAttr(attr);
  if (failed(t))
    return false;
  int64_t row = t->getShape().empty() ? 1 : t->getShape().back();
  for (int64_t r = 0; r * row < t->size(); ++r) {
    bool any = false;
    for (int64_t c = 0; c < row && !any; ++c)
      any = t->getAsDouble(r * row + c) != -std::numeric_limits<double>::infinity();
    if (!any)
      return false;
  }
  return true;
}

/// Attention-24's nonpad_kv_seqlen (one count per sample, computed at run
/// time): sample b's first lengths[b] keys are valid, and its queries are
/// the last ones before them, so that query i sits at position
/// i + lengths[b] - queries for `window` (causal, sliding); as a [batch, 1,
/// queries, keys] bias of 0 and -inf.
Value nonpadBias(NodeContext &n, Value lengths, RankedTensorType qt, int64_t batch,
                 int64_t queries, int64_t keys, KeyWindow window) {
  auto lt = cast<RankedTensorType>(lengths.getType());
  if (lt.getRank() != 1 || lt.getDimSize(0) != batch || !lt.getElementType().isInteger() ||
      lt.getElementType().isInteger(1)) {
    (void)n.error("nonpad_kv_seqlen must be an integer vector of the batch size");
    return {};
  }
  Type it = lt.getElementType();
  HostTensor positions(RankedTensorType::get({1, 1, 1, keys}, it));
  HostTensor rowMinusCol(RankedTensorType::get({1, 1, queries, keys}, it));
  for (int64_t j = 0; j < keys; ++j) {
    positions.setFromInt(j, j);
    for (int64_t i = 0; i < queries; ++i)
      rowMinusCol.setFromInt(i * keys + j, i - j);
  }
  Value len = n.reshape(lengths, {batch, 1, 1, 1});
  Value visible = n.create<LtOp>(n.constant(positions), len);
  if (window.any()) {
    // d = (query position) - (key position) = i - j + lengths[b] - queries.
    Value offset = n.create<SubOp>(len, n.scalarLike(len, (double)queries));
    Value d = n.create<AddOp>(n.constant(rowMinusCol), offset);
    auto keep = [&](Value cond) { visible = n.create<AndOp>(visible, cond); };
    if (window.causal)
      keep(n.create<GeOp>(d, n.scalarLike(len, 0.0)));
    if (window.left >= 0)
      keep(n.create<LeOp>(d, n.scalarLike(len, (double)window.left)));
    if (window.right >= 0)
      keep(n.create<GeOp>(d, n.scalarLike(len, -(double)window.right)));
  }
  if (!visible || n.hasFailed()) // an earlier error of the node (reported)
    return {};
  auto vt = cast<RankedTensorType>(visible.getType());
  Value zero = n.broadcastTo(n.scalarLike(n.input(0), 0.0), vt.getShape());
  return n.create<WhereOp>(visible, zero,
                           n.scalarLike(n.input(0), -std::numeric_limits<double>::infinity()));
}

/// Attention as its definition (opsets 23-25); `window` holds Attention-25's
/// left_window_size / right_window_size (-1 before 25), `nonpad`
/// Attention-24's key lengths.
LogicalResult attentionImpl(NodeContext &n, KeyWindow window, bool nonpad = false) {
  // Debian's onnx has no schema of Attention-23 to check the arity.
  for (unsigned i = 0; i < 3; ++i)
    if (!n.hasInput(i))
      return n.error("input " + Twine(i) + " (" + (i == 0 ? "Q" : i == 1 ? "K" : "V") +
                     ") is required");
  if (n.hasInput(4) != n.hasInput(5))
    return n.error("past_key and past_value must be given together");
  int64_t mode = n.getInt("qk_matmul_output_mode", 0);
  bool wantScores = n.numOutputs() > 3 && n.isOutputUsed(3);
  if (wantScores && (mode < 0 || mode > 3))
    return n.error("qk_matmul_output_mode " + Twine(mode) + " is not 0..3");
  auto qt = n.inputType(0), kt = n.inputType(1), vt = n.inputType(2);
  int64_t rank = qt.getRank();
  if (rank != kt.getRank() || rank != vt.getRank() || (rank != 3 && rank != 4))
    return n.error("Q, K and V must all be 3-D or all 4-D");
  if (!isa<FloatType>(qt.getElementType()) || kt.getElementType() != qt.getElementType() ||
      vt.getElementType() != qt.getElementType())
    return n.error("Q, K and V must have one float element type");
  Value q = n.input(0), k = n.input(1), v = n.input(2);
  if (rank == 3) {
    int64_t qHeads = n.getInt("q_num_heads", 0), kvHeads = n.getInt("kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      return n.error("3-D inputs need q_num_heads and kv_num_heads");
    q = headsFirst(n, q, qHeads, "Q");
    k = headsFirst(n, k, kvHeads, "K");
    v = headsFirst(n, v, kvHeads, "V");
    if (!q || !k || !v)
      return failure();
  }
  // A past (the KV cache of earlier steps) comes before this step's keys.
  int64_t past = 0;
  if (n.hasInput(4)) {
    auto pk = n.inputType(4), pv = n.inputType(5);
    if (pk.getRank() != 4 || pv.getRank() != 4)
      return n.error("past_key and past_value must be 4-D");
    past = pk.getDimSize(2);
    k = n.create<ConcatOp>(ValueRange{n.input(4), k}, 2);
    v = n.create<ConcatOp>(ValueRange{n.input(5), v}, 2);
    if (n.hasFailed())
      return failure();
  }
  auto q4 = cast<RankedTensorType>(q.getType()), k4 = cast<RankedTensorType>(k.getType()),
       v4 = cast<RankedTensorType>(v.getType());
  int64_t batch = q4.getDimSize(0), heads = q4.getDimSize(1), queries = q4.getDimSize(2),
          dim = q4.getDimSize(3), kvHeads = k4.getDimSize(1), keys = k4.getDimSize(2);
  if (k4.getDimSize(0) != batch || v4.getDimSize(0) != batch || k4.getDimSize(3) != dim ||
      v4.getDimSize(1) != kvHeads || v4.getDimSize(2) != keys)
    return n.error("Q, K and V shapes do not fit: batch, K's head size and K/V's heads "
                   "and lengths must agree");
  if (kvHeads <= 0 || heads % kvHeads)
    return n.error("Q's " + Twine(heads) + " heads are not a multiple of K/V's " +
                   Twine(kvHeads));
  // present_key / present_value: the past and this step's K and V, 4-D.
  SmallVector<Value> outs(n.numOutputs());
  if (n.numOutputs() > 1)
    outs[1] = k;
  if (n.numOutputs() > 2)
    outs[2] = v;

  double scale = n.getFloat("scale", 1.0 / std::sqrt((double)dim));
  double softcap = n.getFloat("softcap", 0.0);
  Value kr = repeatHeads(n, k, heads / kvHeads), vr = repeatHeads(n, v, heads / kvHeads);
  Value s = n.create<MatmulOp>(q, transposed(n, kr, {0, 1, 3, 2}));
  s = n.create<MulOp>(s, n.scalarLike(q, scale));
  if (softcap > 0)
    s = n.create<MulOp>(n.create<TanhOp>(n.create<DivOp>(s, n.scalarLike(q, softcap))),
                        n.scalarLike(q, softcap));
  Value bias;
  if (n.hasInput(3))
    bias = maskBias(n, n.input(3), q4, keys);
  window.causal = n.getInt("is_causal", 0) != 0;
  // The causal and window masks are compile-time [queries, keys] tensors.
  if ((window.any() || (nonpad && n.hasInput(6))) &&
      queries > kMaxMaterialisedElements / std::max<int64_t>(keys, 1))
    return n.error("the " + Twine(queries) + " x " + Twine(keys) +
                   " positional mask is too large to build at compile time (limit " +
                   Twine(kMaxMaterialisedElements) + " elements)");
  if (nonpad && n.hasInput(6)) {
    if (past > 0)
      return n.error("nonpad_kv_seqlen cannot be used with past_key and past_value");
    Value b = nonpadBias(n, n.input(6), q4, batch, queries, keys, window);
    bias = bias && b ? n.create<AddOp>(bias, b) : b;
  } else if (window.any()) {
    Value c = positionBias(n, q4, queries, keys, past, window);
    bias = bias ? n.create<AddOp>(bias, c) : c;
  }
  if (n.hasFailed())
    return failure();
  bool guard = bias && !everyRowVisible(bias);
  if (wantScores && mode <= 1)
    outs[3] = s;
  if (bias)
    s = n.create<AddOp>(s, bias);
  if (wantScores && mode == 2)
    outs[3] = s;
  Value visible;
  if (guard) {
    auto bt = cast<RankedTensorType>(bias.getType());
    Value maxBias = n.create<ReduceMaxOp>(bias, SmallVector<int64_t>{bt.getRank() - 1},
                                          /*keepdims=*/true);
    visible = n.create<GtOp>(maxBias,
                             n.scalarLike(q, -std::numeric_limits<double>::infinity()));
    s = n.create<WhereOp>(visible, s, n.scalarLike(q, 0.0));
  }
  Value p = n.create<SoftmaxOp>(s, 3);
  if (guard)
    p = n.create<WhereOp>(visible, p, n.scalarLike(q, 0.0));
  if (wantScores && mode == 3)
    outs[3] = p;
  Value y = n.create<MatmulOp>(p, vr);
  if (rank == 3 && y) {
    auto yt = cast<RankedTensorType>(y.getType());
    y = transposed(n, y, {0, 2, 1, 3});
    y = n.reshape(y, {batch, queries, heads * yt.getDimSize(3)});
  }
  outs[0] = y;
  if (n.hasFailed())
    return failure();
  n.setOutputs(outs);
  return success();
}

LogicalResult attention(NodeContext &n) { return attentionImpl(n, {}); }

/// Attention-24 adds the optional input nonpad_kv_seqlen (per-sample key
/// lengths, a padding mask).
LogicalResult attention24(NodeContext &n) { return attentionImpl(n, {}, /*nonpad=*/true); }

/// Attention-25 adds left_window_size / right_window_size (-1: unbounded),
/// a sliding window that composes with is_causal and the mask.
LogicalResult attention25(NodeContext &n) {
  KeyWindow w;
  w.left = n.getInt("left_window_size", -1);
  w.right = n.getInt("right_window_size", -1);
  if (w.left < -1 || w.right < -1)
    return n.error("window sizes must be -1 (unbounded) or >= 0");
  return attentionImpl(n, w, /*nonpad=*/true);
}
} // namespace

void onnx_import::registerAttentionOps(OpRegistry &r) {
  r.add("Attention", 23, attention);
  r.add("Attention", 24, attention24);
  r.add("Attention", 25, attention25);
}
