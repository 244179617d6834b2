//===- VJPNN.cpp - VJP rules of convolution, pooling, batch norm ----------===//
#include "VJPRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::vjp;

namespace mlir::merak::vjp {

LogicalResult rule(Conv2DOp op, Emitter &e, ValueRange g, Grads &out) {
  Value dx = Conv2DBackwardDataOp::create(
      e.b, e.loc, typeOf(op.getInput()), g[0], op.getWeight(), op.getStrides(),
      op.getPadding(), op.getDilations(), op.getGroups());
  Value dw = Conv2DBackwardFilterOp::create(
      e.b, e.loc, typeOf(op.getWeight()), op.getInput(), g[0], op.getStrides(),
      op.getPadding(), op.getDilations(), op.getGroups());
  out.assign({dx, dw});
  if (Value bias = op.getBias())
    out.push_back(ReduceSumOp::create(e.b, e.loc, g[0], ArrayRef<int64_t>{0, 2, 3},
                                      /*keepdims=*/false));
  return success();
}

// conv2d_backward_data forward (ONNX ConvTranspose): y = conv^T(x, w) is
// linear in x and in w; its adjoints are the convolution it transposes
// (for x) and that convolution's filter gradient with y's gradient as the
// convolution's input (for w).
LogicalResult rule(Conv2DBackwardDataOp op, Emitter &e, ValueRange g, Grads &out) {
  Value dx = Conv2DOp::create(e.b, e.loc, typeOf(op.getGrad()), g[0], op.getWeight(), Value(),
                              op.getStrides(), op.getPadding(), op.getDilations(),
                              op.getGroups());
  Value dw = Conv2DBackwardFilterOp::create(
      e.b, e.loc, typeOf(op.getWeight()), g[0], op.getGrad(), op.getStrides(), op.getPadding(),
      op.getDilations(), op.getGroups());
  out.assign({dx, dw});
  return success();
}

LogicalResult rule(MaxPool2DOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({MaxPool2DGradOp::create(e.b, e.loc, typeOf(op.getInput()), op.getInput(),
                                      g[0], op.getKernel(), op.getStrides(),
                                      op.getPadding(), op.getDilations(),
                                      op.getCeilMode())});
  return success();
}

LogicalResult rule(AvgPool2DOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({AvgPool2DGradOp::create(e.b, e.loc, typeOf(op.getInput()), g[0],
                                      op.getKernel(), op.getStrides(), op.getPadding(),
                                      op.getCeilMode(), op.getCountIncludePad())});
  return success();
}

// y[s] = W[e_s] x[s] is linear in x and W: dx[s] = W[e_s]^T dy[s] (the same
// op with the weight read transposed), dW[e] = sum over the rows routed to
// e of dy[s] x[s]^T; the routing (experts) gets none. Shadow copies are a
// second weight: their gradient sums the rows routed to them (the ids from
// shadow_first; total_experts counts the copies' ids too).
LogicalResult rule(ExpertMatmulOp op, Emitter &e, ValueRange g, Grads &out) {
  Value dx = ExpertMatmulOp::create(e.b, e.loc, typeOf(op.getInput()), g[0], op.getWeight(),
                                    op.getExperts(), op.getFirst(), op.getShadow(),
                                    op.getShadowFirst(), !op.getTransposeWeight(),
                                    op.getTotalExpertsAttr(), op.getGroupRowsAttr());
  Value dw = ExpertMatmulGradWeightOp::create(
      e.b, e.loc, typeOf(op.getWeight()), op.getInput(), g[0], op.getExperts(), op.getFirst(),
      /*acc=*/Value(), op.getTransposeWeight(), op.getTotalExpertsAttr(), op.getGroupRowsAttr());
  out.assign({dx, dw, Value()});
  if (op.getFirst())
    out.push_back(Value());
  if (Value shadow = op.getShadow()) {
    const int64_t copies = typeOf(shadow).getDimSize(0),
                  local = typeOf(op.getWeight()).getDimSize(0);
    const int64_t total = op.getTotalExperts().value_or(0);
    out.push_back(ExpertMatmulGradWeightOp::create(
        e.b, e.loc, typeOf(shadow), op.getInput(), g[0], op.getExperts(), op.getShadowFirst(),
        /*acc=*/Value(), op.getTransposeWeight(),
        e.b.getI64IntegerAttr(total + total / local * copies), op.getGroupRowsAttr()));
    out.push_back(Value());
  }
  return success();
}

LogicalResult rule(GatherElementsOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({GatherElementsGradOp::create(e.b, e.loc, typeOf(op.getData()), g[0],
                                           op.getIndices(), op.getAxis()),
              Value()});
  return success();
}

// The scatter-adds (imported ScatterND/ScatterElements use them forward)
// are linear in the scattered values: their adjoint gathers. An accumulator
// (the lowering form) passes the gradient through.
LogicalResult rule(GatherGradOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({GatherOp::create(e.b, e.loc, typeOf(op.getGrad()), g[0], op.getIndices(),
                               op.getAxis()),
              Value()});
  if (op.getAcc())
    out.push_back(g[0]);
  return success();
}

LogicalResult rule(GatherElementsGradOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({GatherElementsOp::create(e.b, e.loc, typeOf(op.getGrad()), g[0],
                                       op.getIndices(), op.getAxis()),
              Value()});
  return success();
}

LogicalResult rule(BatchNormOp op, Emitter &e, ValueRange g, Grads &out) {
  // Per channel (dim 1) over the other dimensions. With batch statistics
  // (training) the mean and variance depend on x as in layer_norm: one
  // merak.batch_norm_grad. With running statistics (inference) x is only
  // scaled. The running mean and variance are buffers and get no gradient.
  Value x = op.getInput();
  if (op.getTraining()) {
    Type channel = op.getScale().getType();
    auto grad = BatchNormGradOp::create(e.b, e.loc, x.getType(), channel, channel, x, g[0],
                                        op.getScale(), op.getEpsilonAttr());
    out.assign({grad.getInputGrad(), grad.getScaleGrad(), grad.getBiasGrad(), Value(), Value()});
    return success();
  }
  auto t = typeOf(x);
  SmallVector<int64_t> axes{0}, chan(t.getRank(), 1);
  for (int64_t d = 2; d < t.getRank(); ++d)
    axes.push_back(d);
  chan[1] = t.getDimSize(1);
  double eps = op.getEpsilon().convertToDouble();
  Value scale = e.reshape(op.getScale(), chan);
  Value inv = RsqrtOp::create(e.b, e.loc, e.add(e.reshape(op.getVar(), chan), e.scalar(x, eps)));
  Value xhat = e.mul(e.sub(x, e.reshape(op.getMean(), chan)), inv);
  Value dx = e.mul(e.mul(g[0], scale), inv);
  Value dscale = ReduceSumOp::create(e.b, e.loc, e.mul(g[0], xhat), axes, false);
  Value dbias = ReduceSumOp::create(e.b, e.loc, g[0], axes, false);
  out.assign({dx, dscale, dbias, Value(), Value()});
  return success();
}

LogicalResult rule(AttentionOp op, Emitter &e, ValueRange g, Grads &out) {
  // The lse's gradient (a program that reads the lse: attention sinks'
  // rescaling) is attention_grad's lse_grad.
  Value bias = op.getBias(), result = g[0];
  if (!g[0] && !g[1]) {
    out.assign(bias ? 4 : 3, Value());
    return success();
  }
  if (!result)
    result = e.zerosLike(op.getResult());
  SmallVector<Type> types{typeOf(op.getQuery()), typeOf(op.getKey()), typeOf(op.getValue())};
  if (bias) { // the scores' gradient: heads-first [..., T, S]
    SmallVector<int64_t> scores(typeOf(op.getLse()).getShape());
    scores.push_back(typeOf(bias).getShape().back());
    types.push_back(RankedTensorType::get(scores, typeOf(bias).getElementType()));
  }
  auto grad = AttentionGradOp::create(e.b, e.loc, types, op.getQuery(), op.getKey(), op.getValue(),
                                      op.getResult(), op.getLse(), result, bias, g[1],
                                      op.getScaleAttr(), op.getCausalAttr(), op.getSeqMajorAttr(),
                                      op.getWindowAttr(), op.getSoftcapAttr(), op.getDropoutAttr(),
                                      op.getSeedAttr(), op.getBatchSplitAttr(),
                                      op.getTpSplitAttr()); // the forward's mask again
  out.assign({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (bias) // summed over the dims the bias broadcasts
    out.push_back(e.unbroadcast(grad.getBiasGrad(), typeOf(bias)));
  return success();
}

} // namespace mlir::merak::vjp
