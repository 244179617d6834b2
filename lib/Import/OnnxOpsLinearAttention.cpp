//===- OnnxOpsLinearAttention.cpp - LinearAttention, CausalConvWithState --===//
//
// The token mixers of linear-attention and state-space models (Gated
// DeltaNet in Qwen3.5, Mamba in Jamba and FalconMamba; ONNX 27), built from
// merak ops so that they train through the parts' derivative rules:
//
//   CausalConvWithState(x [B, C, L], w [C, 1, K], bias, past [B, C, K-1])
//     p = concat(past or zeros, x)             (time axis)
//     y = act(depthwise conv1d(p, w) + bias)   (a grouped conv2d, height 1;
//                                               act: none or SiLU)
//     present = the last K-1 steps of p
//
//   LinearAttention(q [B, T, Hq dk], k, v [B, T, Hkv d], past [B, Hkv, dk, dv],
//                   decay, beta), unrolled over T (one split per input):
//     S = past or 0                                        [B, Hkv, dk, dv]
//     per step t:  S = S * exp(g_t)                        (gated rules)
//                  v_t = beta_t (v_t - k_t S)              (delta rules)
//                  S = S + k_t^T v_t
//                  o_t = scale q_t S   (q's heads grouped over the kv heads)
//     output = o stacked over T [B, T, Hq dv]; present = S
//
// Both compute in float32 for narrower inputs (onnx's reference does) and
// return the input's type.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// `v` as float32 (when narrower) and back.
Value toF32(NodeContext &n, Value v) {
  if (!v)
    return v;
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType().isF32() || t.getElementType().isF64())
    return v;
  return n.create<CastOp>(RankedTensorType::get(t.getShape(), n.builder().getF32Type()), v);
}
Value toType(NodeContext &n, Value v, Type et) {
  if (!v)
    return v;
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType() == et)
    return v;
  return n.create<CastOp>(RankedTensorType::get(t.getShape(), et), v);
}

LogicalResult causalConvWithState(NodeContext &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto xt = n.inputType(0), wt = n.inputType(1);
  Type et = xt.getElementType();
  if (!isa<FloatType>(et) || xt.getRank() != 3)
    return n.error("the input must be a float tensor [batch, channels, length]");
  const int64_t B = xt.getDimSize(0), C = xt.getDimSize(1), L = xt.getDimSize(2);
  if (wt.getRank() != 3 || wt.getDimSize(0) != C || wt.getDimSize(1) != 1 ||
      wt.getElementType() != et)
    return n.error("the weight must be [channels, 1, k] of the input's type");
  const int64_t K = wt.getDimSize(2);
  if (K < 1 || B < 1 || C < 1 || L < 1)
    return n.error("the kernel, batch, channels and length must be non-empty");
  std::string act = n.getString("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    return n.error("unknown activation '" + act + "' (none, silu or swish)");
  if (n.hasInput(2) && n.inputType(2).getShape() != ArrayRef<int64_t>{C})
    return n.error("the bias must be [channels]");
  if (n.hasInput(3) && n.inputType(3).getShape() != ArrayRef<int64_t>{B, C, K - 1})
    return n.error("past_state must be [batch, channels, k - 1] = [" + Twine(B) + ", " +
                   Twine(C) + ", " + Twine(K - 1) + "]");
  Value x = toF32(n, n.input(0));
  Value p = x;
  if (K > 1) {
    Value past = n.hasInput(3) ? toF32(n, n.input(3))
                               : n.broadcastTo(n.scalarLike(x, 0.0), {B, C, K - 1});
    p = n.create<ConcatOp>(ValueRange{past, x}, 2);
  }
  Value w = n.reshape(toF32(n, n.input(1)), {C, 1, 1, K});
  Value bias = n.hasInput(2) ? toF32(n, n.input(2)) : Value();
  Value y = n.create<Conv2DOp>(n.reshape(p, {B, C, 1, L + K - 1}), w, bias,
                               ArrayRef<int64_t>{1, 1}, ArrayRef<int64_t>{0, 0, 0, 0},
                               ArrayRef<int64_t>{1, 1}, C);
  y = n.reshape(y, {B, C, L});
  if (act != "none")
    y = n.create<MulOp>(y, n.create<SigmoidOp>(y));
  Value present = n.sliceDim(p, 2, L, L + K - 1);
  if (n.hasFailed())
    return failure();
  n.setOutputs({toType(n, y, et), toType(n, present, et)});
  return success();
}

LogicalResult linearAttention(NodeContext &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  auto qt = n.inputType(0), kt = n.inputType(1), vt = n.inputType(2);
  Type et = qt.getElementType();
  if (!isa<FloatType>(et) || qt.getRank() != 3 || kt.getRank() != 3 || vt.getRank() != 3)
    return n.error("query, key and value must be float tensors [batch, time, heads * dim]");
  const int64_t Hq = n.getInt("q_num_heads", 0), Hkv = n.getInt("kv_num_heads", 0);
  if (Hq < 1 || Hkv < 1 || Hq % Hkv)
    return n.error("q_num_heads (" + Twine(Hq) + ") must be a positive multiple of "
                   "kv_num_heads (" + Twine(Hkv) + ")");
  const int64_t B = qt.getDimSize(0), T = qt.getDimSize(1), G = Hq / Hkv;
  if (qt.getDimSize(2) % Hq || vt.getDimSize(2) % Hkv || qt.getDimSize(2) == 0 ||
      vt.getDimSize(2) == 0 || B == 0)
    return n.error("the query's and value's last dimensions must be non-empty multiples of "
                   "their heads (and the batch non-empty)");
  const int64_t dk = qt.getDimSize(2) / Hq, dv = vt.getDimSize(2) / Hkv;
  if (kt.getShape() != ArrayRef<int64_t>{B, T, Hkv * dk} ||
      vt.getShape() != ArrayRef<int64_t>{B, T, Hkv * dv})
    return n.error("key must be [B, T, kv_num_heads * dk] and value [B, T, kv_num_heads * dv]");
  if (T < 1)
    return n.unsupported("LinearAttention over zero steps");
  std::string rule = n.getString("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return n.error("unknown update_rule '" + rule + "'");
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (gated != n.hasInput(4) || delta != n.hasInput(5))
    return n.error("update_rule '" + rule + "' " + (gated ? "needs" : "takes no") +
                   " decay and " + (delta ? "needs" : "takes no") + " beta");
  int64_t gLast = 0, bLast = 0;
  if (gated) {
    auto g = n.inputType(4);
    gLast = g.getRank() == 3 ? g.getDimSize(2) : -1;
    if (g.getRank() != 3 || g.getDimSize(0) != B || g.getDimSize(1) != T ||
        (gLast != Hkv && gLast != Hkv * dk))
      return n.error("decay must be [B, T, kv_num_heads] or [B, T, kv_num_heads * dk]");
  }
  if (delta) {
    auto b = n.inputType(5);
    bLast = b.getRank() == 3 ? b.getDimSize(2) : -1;
    if (b.getRank() != 3 || b.getDimSize(0) != B || b.getDimSize(1) != T ||
        (bLast != Hkv && bLast != 1))
      return n.error("beta must be [B, T, kv_num_heads] or [B, T, 1]");
  }
  if (n.hasInput(3) && n.inputType(3).getShape() != ArrayRef<int64_t>{B, Hkv, dk, dv})
    return n.error("past_state must be [B, kv_num_heads, dk, dv] = [" + Twine(B) + ", " +
                   Twine(Hkv) + ", " + Twine(dk) + ", " + Twine(dv) + "]");
  double scale = n.getFloat("scale", 0.0);
  if (scale == 0.0)
    scale = 1.0 / std::sqrt(double(dk));
  if (T > 4096)
    return n.unsupported("LinearAttention over " + Twine(T) + " steps (it unrolls; at most 4096)");

  Value q = n.reshape(toF32(n, n.input(0)), {B, T, Hkv, G, dk});
  Value k = n.reshape(toF32(n, n.input(1)), {B, T, Hkv, 1, dk});
  Value v = n.reshape(toF32(n, n.input(2)), {B, T, Hkv, 1, dv});
  SmallVector<Value> qs = n.unstack(q, 1), ks = n.unstack(k, 1), vs = n.unstack(v, 1), gs, bs;
  if (gated) // exp(g) per key dimension (or per head), scaling S's rows
    gs = n.unstack(n.reshape(n.create<ExpOp>(toF32(n, n.input(4))),
                             {B, T, Hkv, gLast == Hkv ? 1 : dk, 1}),
                   1);
  if (delta)
    bs = n.unstack(n.reshape(toF32(n, n.input(5)), {B, T, bLast, 1, 1}), 1);
  if (n.hasFailed() || (int64_t)qs.size() != T)
    return failure();
  Value S = n.hasInput(3) ? toF32(n, n.input(3))
                          : n.broadcastTo(n.scalarLike(qs[0], 0.0), {B, Hkv, dk, dv});
  const SmallVector<int64_t> hkd{B, Hkv, 1, dk}, hvd{B, Hkv, 1, dv};
  SmallVector<Value> outs;
  for (int64_t t = 0; t < T && !n.hasFailed(); ++t) {
    if (gated)
      S = n.create<MulOp>(S, n.reshape(gs[t], {B, Hkv, gLast == Hkv ? 1 : dk, 1}));
    Value kRow = n.reshape(ks[t], hkd), vRow = n.reshape(vs[t], hvd);
    if (delta) {
      Value retrieved = n.create<MatmulOp>(kRow, S); // [B, Hkv, 1, dv]
      vRow = n.create<MulOp>(n.reshape(bs[t], {B, bLast, 1, 1}),
                             n.create<SubOp>(vRow, retrieved));
    }
    Value kCol = n.reshape(ks[t], {B, Hkv, dk, 1});
    S = n.create<AddOp>(S, n.create<MulOp>(kCol, vRow));
    Value o = n.create<MatmulOp>(n.reshape(qs[t], {B, Hkv, G, dk}), S); // [B, Hkv, G, dv]
    outs.push_back(n.reshape(o, {B, Hq * dv}));
  }
  Value y = n.stack(outs, 1);
  if (n.hasFailed())
    return failure();
  y = n.create<MulOp>(y, n.scalarLike(y, scale));
  Type stateType = n.hasInput(3) ? n.inputType(3).getElementType() : et;
  if (n.hasFailed())
    return failure();
  n.setOutputs({toType(n, y, et), toType(n, S, stateType)});
  return success();
}

} // namespace

void onnx_import::registerLinearAttentionOps(OpRegistry &r) {
  r.add("CausalConvWithState", 27, causalConvWithState);
  r.add("LinearAttention", 27, linearAttention);
}
