//===- VJPStructured.cpp - VJP rules of shape, reduction, NN ops ----------===//
#include "VJPRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::vjp;

/// `v` (a reduction result) reshaped with the reduced `axes` kept as 1s.
static Value keepDims(Emitter &e, Value v, RankedTensorType input,
                      ArrayRef<int64_t> axes) {
  SmallVector<int64_t> shape(input.getShape());
  for (int64_t a : axes)
    shape[a] = 1;
  return e.reshape(v, shape);
}

namespace mlir::merak::vjp {

LogicalResult rule(ReshapeOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.reshape(g[0], typeOf(op.getInput()).getShape())});
  return success();
}

LogicalResult rule(BroadcastOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({e.unbroadcast(g[0], typeOf(op.getInput()))});
  return success();
}

LogicalResult rule(TransposeOp op, Emitter &e, ValueRange g, Grads &out) {
  ArrayRef<int64_t> perm = op.getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out.assign({TransposeOp::create(e.b, e.loc, g[0], inverse)});
  return success();
}

/// `grad` with k - 1 zeros after each element along `d` (the last element's
/// trailing zeros dropped): element i lands at position i * k.
static Value spreadWithZeros(Emitter &e, Value grad, int64_t d, int64_t k) {
  auto type = typeOf(grad);
  int64_t n = type.getDimSize(d);
  SmallVector<int64_t> column(type.getShape()), spread(type.getShape());
  column.insert(column.begin() + d + 1, 1);
  SmallVector<int64_t> zerosShape(column);
  zerosShape[d + 1] = k - 1;
  Value zeros = e.broadcast(e.scalar(grad, 0.0), zerosShape);
  Value pairs = ConcatOp::create(e.b, e.loc, ValueRange{e.reshape(grad, column), zeros}, d + 1);
  spread[d] = n * k;
  Value flat = e.reshape(pairs, spread);
  SmallVector<int64_t> starts(type.getRank(), 0), limits(spread), strides(type.getRank(), 1);
  limits[d] = (n - 1) * k + 1;
  return SliceOp::create(e.b, e.loc, flat, starts, limits, strides);
}

LogicalResult rule(SliceOp op, Emitter &e, ValueRange g, Grads &out) {
  // Per sliced dimension: a negative stride reversed, a stride k > 1 spread
  // with k - 1 zeros between the elements (interleaved rotary embeddings'
  // x[..., ::2]), then zeros padded back to the input's extent.
  auto in = typeOf(op.getInput());
  Value grad = g[0];
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t stride = op.getStrides()[d], start = op.getStarts()[d], dim = in.getDimSize(d);
    int64_t size = typeOf(grad).getDimSize(d), k = std::abs(stride);
    // The first (lowest) input position the slice reads along d; an empty
    // slice (Phi-3's pass-through rotary part) reads none: all zeros.
    int64_t lo = size == 0 ? 0 : stride > 0 ? start : start - (size - 1) * k;
    if (stride < 0 && size > 1) {
      SmallVector<int64_t> starts(in.getRank(), 0), limits(typeOf(grad).getShape()),
          strides(in.getRank(), 1);
      starts[d] = size - 1;
      limits[d] = -1;
      strides[d] = -1;
      grad = SliceOp::create(e.b, e.loc, grad, starts, limits, strides);
    }
    if (k > 1 && size > 1) {
      grad = spreadWithZeros(e, grad, d, k);
      size = typeOf(grad).getDimSize(d);
    }
    if (size == dim)
      continue;
    SmallVector<Value> parts;
    auto zeros = [&](int64_t n) {
      SmallVector<int64_t> shape(typeOf(grad).getShape());
      shape[d] = n;
      return e.broadcast(e.scalar(grad, 0.0), shape);
    };
    if (lo > 0)
      parts.push_back(zeros(lo));
    parts.push_back(grad);
    if (dim - lo - size > 0)
      parts.push_back(zeros(dim - lo - size));
    grad = ConcatOp::create(e.b, e.loc, parts, d);
  }
  out.assign({grad});
  return success();
}

LogicalResult rule(ConcatOp op, Emitter &e, ValueRange g, Grads &out) {
  SmallVector<int64_t> sizes;
  int64_t axis = op.getAxis();
  for (Value in : op.getInputs())
    sizes.push_back(typeOf(in).getDimSize(axis));
  SmallVector<Type> types(op.getInputs().getTypes());
  auto split = SplitOp::create(e.b, e.loc, types, g[0], axis, sizes);
  out.assign(split.getResults().begin(), split.getResults().end());
  return success();
}

LogicalResult rule(SplitOp op, Emitter &e, ValueRange g, Grads &out) {
  SmallVector<Value> parts;
  for (auto [res, grad] : llvm::zip(op.getResults(), g))
    parts.push_back(grad ? grad : e.zerosLike(res));
  out.assign({ConcatOp::create(e.b, e.loc, parts, op.getAxis())});
  return success();
}

LogicalResult rule(GatherOp op, Emitter &e, ValueRange g, Grads &out) {
  out.assign({GatherGradOp::create(e.b, e.loc, typeOf(op.getData()), g[0], op.getIndices(),
                              op.getAxis()),
         Value()});
  return success();
}

LogicalResult rule(CumSumOp op, Emitter &e, ValueRange g, Grads &out) {
  // The adjoint of a cumulative sum is the cumulative sum the other way.
  out.assign({CumSumOp::create(e.b, e.loc, g[0], op.getAxis(), op.getExclusive(),
                          !op.getReverse())});
  return success();
}

LogicalResult rule(LinearScanOp op, Emitter &e, ValueRange g, Grads &out) {
  // The same recurrence run from the end, in one op (see its description).
  Type t = op.getType();
  auto grad =
      LinearScanGradOp::create(e.b, e.loc, t, t, op.getDecay(), op.getResult(), g[0], op.getAxis());
  out.assign({grad.getDecayGrad(), grad.getInputGrad()});
  return success();
}

LogicalResult rule(SelectiveScanOp op, Emitter &e, ValueRange g, Grads &out) {
  // One op that recomputes the states and walks them back (see its description).
  Type u = op.getU().getType(), a = op.getA().getType(), b = op.getB().getType();
  auto grad = SelectiveScanGradOp::create(e.b, e.loc, u, u, a, b, b, op.getU(), op.getDelta(),
                                          op.getA(), op.getB(), op.getC(), g[0]);
  out.assign(
      {grad.getUGrad(), grad.getDeltaGrad(), grad.getAGrad(), grad.getBGrad(), grad.getCGrad()});
  return success();
}

// Reductions: the gradient spreads back over the reduced dimensions.

LogicalResult rule(ReduceSumOp op, Emitter &e, ValueRange g, Grads &out) {
  auto in = typeOf(op.getInput());
  out.assign({e.broadcast(keepDims(e, g[0], in, op.getAxes()), in.getShape())});
  return success();
}

LogicalResult rule(ReduceMeanOp op, Emitter &e, ValueRange g, Grads &out) {
  auto in = typeOf(op.getInput());
  int64_t count = 1;
  for (int64_t a : op.getAxes())
    count *= in.getDimSize(a);
  Value spread = e.broadcast(keepDims(e, g[0], in, op.getAxes()), in.getShape());
  out.assign({e.div(spread, e.scalar(spread, (double)std::max<int64_t>(count, 1)))});
  return success();
}

/// max/min: shared evenly among the elements equal to the extremum.
template <typename OpTy>
static LogicalResult extremumRule(OpTy op, Emitter &e, ValueRange g, Grads &out) {
  auto in = typeOf(op.getInput());
  Value y = e.broadcast(keepDims(e, op.getResult(), in, op.getAxes()), in.getShape());
  Value hit = EqOp::create(e.b, e.loc, op.getInput(), y);
  Value hits = e.sumKeep(e.cast(hit, in.getElementType()), op.getAxes());
  Value share = e.div(keepDims(e, g[0], in, op.getAxes()), hits);
  out.assign({WhereOp::create(e.b, e.loc, hit, e.broadcast(share, in.getShape()),
                         e.scalar(share, 0.0))});
  return success();
}
LogicalResult rule(ReduceMaxOp op, Emitter &e, ValueRange g, Grads &out) {
  return extremumRule(op, e, g, out);
}
LogicalResult rule(ReduceMinOp op, Emitter &e, ValueRange g, Grads &out) {
  return extremumRule(op, e, g, out);
}

LogicalResult rule(SoftmaxOp op, Emitter &e, ValueRange g, Grads &out) {
  // y * (g - sum_axis(g * y)).
  out.assign({SoftmaxGradOp::create(e.b, e.loc, op.getResult(), g[0], op.getAxis())});
  return success();
}

LogicalResult rule(LogSoftmaxOp op, Emitter &e, ValueRange g, Grads &out) {
  // g - exp(y) * sum_axis(g).
  out.assign({LogSoftmaxGradOp::create(e.b, e.loc, op.getResult(), g[0], op.getAxis())});
  return success();
}

/// Shared by layer_norm and rms_norm: merak.layer_norm_grad gives dx and
/// xhat (the input normalised over [axis, rank)); the scale and bias
/// gradients are reductions of g * xhat and g.
static LogicalResult normRule(Emitter &e, Value x, Value scale, Value bias,
                              IntegerAttr axis, FloatAttr eps, bool rms, ValueRange g,
                              Grads &out) {
  auto t = typeOf(x);
  auto grad = LayerNormGradOp::create(e.b, e.loc, TypeRange{t, t}, x, g[0], scale, axis, eps,
                                      rms ? e.b.getUnitAttr() : UnitAttr());
  out.assign({grad.getInputGrad()});
  if (scale)
    out.push_back(e.unbroadcast(e.mul(g[0], grad.getNormalized()), typeOf(scale)));
  if (bias)
    out.push_back(e.unbroadcast(g[0], typeOf(bias)));
  return success();
}

LogicalResult rule(LayerNormOp op, Emitter &e, ValueRange g, Grads &out) {
  return normRule(e, op.getInput(), op.getScale(), op.getBias(), op.getAxisAttr(),
                  op.getEpsilonAttr(), /*rms=*/false, g, out);
}

LogicalResult rule(RmsNormOp op, Emitter &e, ValueRange g, Grads &out) {
  return normRule(e, op.getInput(), op.getScale(), Value(), op.getAxisAttr(),
                  op.getEpsilonAttr(), /*rms=*/true, g, out);
}

LogicalResult rule(CrossEntropyOp op, Emitter &e, ValueRange g, Grads &out) {
  // (softmax(logits) - onehot(labels)) * weight, where weight is g (sum),
  // g / #valid (mean) or g at the label (none), and 0 at ignored labels.
  out.assign({CrossEntropyGradOp::create(e.b, e.loc, typeOf(op.getLogits()), op.getLogits(),
                                         op.getLabels(), g[0], op.getAxisAttr(),
                                         op.getReductionAttr(), op.getIgnoreIndexAttr(),
                                         op.getGroupAttr(), op.getClassesAttr()),
              Value()});
  return success();
}

LogicalResult rule(MatmulOp op, Emitter &e, ValueRange g, Grads &out) {
  // Lift rank-1 operands to matrices as numpy does, then
  // dA = g B^T and dB = A^T g, summed over broadcast batch dimensions.
  Value a = op.getLhs(), b = op.getRhs();
  auto at = typeOf(a), bt = typeOf(b);
  // A widening GEMM (bf16 operands, f32 result): the gradient GEMMs take
  // the gradient rounded to bf16, as the VJP of a widening cast would.
  Value grad = e.cast(g[0], at.getElementType());
  SmallVector<int64_t> as(at.getShape()), bs(bt.getShape()), gs(typeOf(grad).getShape());
  if (as.size() == 1) {
    as.insert(as.begin(), 1);
    gs.insert(gs.end() - (bs.size() == 1 ? 0 : 1), 1);
  }
  if (bs.size() == 1) {
    bs.push_back(1);
    gs.push_back(1);
  }
  Value a2 = e.reshape(a, as), b2 = e.reshape(b, bs), g2 = e.reshape(grad, gs);
  auto swapLast = [&](Value v) {
    int64_t r = typeOf(v).getRank();
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < r; ++d)
      perm.push_back(d);
    std::swap(perm[r - 1], perm[r - 2]);
    return TransposeOp::create(e.b, e.loc, v, perm);
  };
  Value da = MatmulOp::create(e.b, e.loc, g2, swapLast(b2));
  Value db;
  if (bs.size() == 2 && as.size() > 2) {
    // A linear layer (batched activations times a weight matrix): dB is one
    // GEMM over every row of every batch, (rows, K)^T (rows, N), instead of
    // a batched product summed over the batch afterwards.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < as.size(); ++d)
      rows *= as[d];
    Value aRows = e.reshape(a2, {rows, as.back()});
    Value gRows = e.reshape(g2, {rows, gs.back()});
    db = MatmulOp::create(e.b, e.loc, swapLast(aRows), gRows);
  } else {
    db = MatmulOp::create(e.b, e.loc, swapLast(a2), g2);
  }
  da = e.unbroadcast(da, RankedTensorType::get(as, at.getElementType()));
  db = e.unbroadcast(db, RankedTensorType::get(bs, bt.getElementType()));
  out.assign({e.reshape(da, at.getShape()), e.reshape(db, bt.getShape())});
  return success();
}

} // namespace mlir::merak::vjp
