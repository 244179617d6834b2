//===- NNRules.cpp - Lowering normalisations, activations and losses ------===//
//
// softmax / log_softmax, layer_norm, rms_norm, batch_norm, dropout,
// cross_entropy (vocabCrossEntropy when vocabulary-parallel), and the fused
// backward ops the VJP rules build for them (gelu_grad, softmax_grad,
// layer_norm_grad, cross_entropy_grad).
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

#include "llvm/ADT/SmallVectorExtras.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
/// Appends an optional operand: its pointer and shape, or `nullptr, Dims{}`.
LogicalResult optionalOperand(Emitter::Call &c, Emitter &e, Value v) {
  if (!v) {
    c.lit("nullptr").lit("Dims{}");
    return success();
  }
  PTR(p, v);
  c.ptr(p).dims(v.getType());
  return success();
}

/// softmax(isLog, t, x, dx, axis, y).
template <typename OpTy> FailureOr<Lowering> softmax(OpTy s, Emitter &e, bool isLog) {
  PTR(x, s.getInput());
  PTR(y, s.getResult());
  Type r0 = s.getType();
  e.call(kernels::softmax).boolean(isLog).dtype(r0).ptr(x).dims(r0)
      .i64(normAxis(s.getAxis(), r0)).ptr(y).emit();
  return Lowering::Done;
}

/// softmaxGrad(isLog, t, y, dy, d, axis, dx).
template <typename OpTy> FailureOr<Lowering> softmaxGrad(OpTy s, Emitter &e, bool isLog) {
  PTR(y, s.getOutput());
  PTR(g, s.getGrad());
  PTR(dx, s.getResult());
  Type r0 = s.getType();
  e.call(kernels::softmaxGrad).boolean(isLog).dtype(r0).ptr(y).ptr(g).dims(r0)
      .i64(normAxis(s.getAxis(), r0)).ptr(dx).emit();
  return Lowering::Done;
}

/// crossEntropy / crossEntropyGrad (`grad`, the loss gradient, set), or
/// their vocabulary-parallel forms when the op has a group.
template <typename OpTy>
FailureOr<Lowering> crossEntropy(OpTy c, Emitter &e, Value grad) {
  PTR(l, c.getLogits());
  PTR(t, c.getLabels());
  Value gp;
  if (grad) {
    PTR(g, grad);
    gp = g;
  }
  PTR(y, c.getResult());
  StringRef red = c.getReduction();
  int reduction = red == "none" ? 0 : red == "mean" ? 1 : 2;
  // The gradient has the logits' type.
  Type tl = grad ? c.getType() : c.getLogits().getType();
  auto ignore = c.getIgnoreIndex();
  const bool vocab = bool(c.getGroup());
  auto call = e.call(vocab ? (grad ? kernels::vocabCrossEntropyGrad : kernels::vocabCrossEntropy)
                           : (grad ? kernels::crossEntropyGrad : kernels::crossEntropy));
  if (vocab) {
    auto lt = cast<RankedTensorType>(tl);
    call.lit("Group::TP").dtype(tl).ptr(l).i64(lt.getNumElements() / lt.getShape().back())
        .i64(lt.getShape().back());
  } else {
    call.dtype(tl).ptr(l).dims(tl).i64(normAxis(c.getAxis(), tl));
  }
  call.dtype(c.getLabels().getType()).ptr(t);
  if (grad)
    call.ptr(gp);
  call.i64(reduction).boolean(ignore.has_value()).i64(ignore.value_or(-100));
  if (vocab)
    call.i64(c.getClasses().value_or(-1));
  call.ptr(y).emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(SoftmaxOp s, Emitter &e, LoweringContext &) {
  return softmax(s, e, /*isLog=*/false);
}

FailureOr<Lowering> emitc_lowering::rule(LogSoftmaxOp s, Emitter &e, LoweringContext &) {
  return softmax(s, e, /*isLog=*/true);
}

FailureOr<Lowering> emitc_lowering::rule(LayerNormOp l, Emitter &e, LoweringContext &) {
  PTR(x, l.getInput());
  PTR(y, l.getResult());
  Type r0 = l.getType();
  auto c = e.call(kernels::layerNorm);
  c.dtype(r0).ptr(x).dims(r0).i64(normAxis(l.getAxis(), r0));
  if (failed(optionalOperand(c, e, l.getScale())) || failed(optionalOperand(c, e, l.getBias())))
    return failure();
  c.f64(l.getEpsilon().convertToDouble()).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(RmsNormOp l, Emitter &e, LoweringContext &) {
  PTR(x, l.getInput());
  PTR(y, l.getResult());
  Type r0 = l.getType();
  auto c = e.call(kernels::rmsNorm);
  c.dtype(r0).ptr(x).dims(r0).i64(normAxis(l.getAxis(), r0));
  if (failed(optionalOperand(c, e, l.getScale())))
    return failure();
  c.f64(l.getEpsilon().convertToDouble()).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(BatchNormOp bn, Emitter &e, LoweringContext &) {
  PTR(x, bn.getInput());
  PTR(s, bn.getScale());
  PTR(b, bn.getBias());
  PTR(m, bn.getMean());
  PTR(v, bn.getVar());
  PTR(y, bn.getResult());
  Type r0 = bn.getType();
  e.call(kernels::batchNorm).dtype(r0).ptr(x).dims(r0).ptr(s).ptr(b).ptr(m).ptr(v)
      .f64(bn.getEpsilon().convertToDouble()).boolean(bn.getTraining()).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SumSquaresOp sq, Emitter &e, LoweringContext &) {
  PTR(x, sq.getInput());
  PTR(y, sq.getResult());
  Type in = sq.getInput().getType();
  e.call(kernels::sumSquares)
      .dtype(in)
      .ptr(x)
      .i64(cast<RankedTensorType>(in).getNumElements())
      .ptr(y)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(BatchNormGradOp bg, Emitter &e, LoweringContext &) {
  PTR(x, bg.getInput());
  PTR(g, bg.getGrad());
  PTR(s, bg.getScale());
  PTR(dx, bg.getInputGrad());
  PTR(ds, bg.getScaleGrad());
  PTR(db, bg.getBiasGrad());
  Type in = bg.getInput().getType();
  e.call(kernels::batchNormGrad)
      .dtype(in)
      .ptr(x)
      .ptr(g)
      .dims(in)
      .ptr(s)
      .f64(bg.getEpsilon().convertToDouble())
      .ptr(dx)
      .ptr(ds)
      .ptr(db)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(BatchNormStatsOp st, Emitter &e, LoweringContext &) {
  PTR(x, st.getInput());
  PTR(m, st.getMean());
  PTR(v, st.getVar());
  PTR(nm, st.getNewMean());
  PTR(nv, st.getNewVar());
  Type in = st.getInput().getType();
  e.call(kernels::batchNormStats)
      .dtype(in)
      .ptr(x)
      .dims(in)
      .ptr(m)
      .ptr(v)
      .f64(st.getMomentum().convertToDouble())
      .ptr(nm)
      .ptr(nv)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(DropoutOp d, Emitter &e, LoweringContext &) {
  PTR(x, d.getInput());
  PTR(y, d.getOutput());
  PTR(m, d.getMask());
  Type r0 = d->getResult(0).getType();
  auto split = [](std::optional<ArrayRef<int64_t>> s) { return s.value_or(ArrayRef<int64_t>()); };
  e.call(kernels::dropout).dtype(r0).ptr(x).dims(r0).f64(d.getRatio().convertToDouble())
      .i64(d.getSeed()).dims(split(d.getBatchSplit())).dims(split(d.getTpSplit())).ptr(y).ptr(m)
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(CrossEntropyOp c, Emitter &e, LoweringContext &) {
  return crossEntropy(c, e, Value());
}

FailureOr<Lowering> emitc_lowering::rule(GeluGradOp gg, Emitter &e, LoweringContext &) {
  PTR(x, gg.getInput());
  PTR(g, gg.getGrad());
  PTR(y, gg.getResult());
  Type r0 = gg.getType();
  e.call(kernels::geluGrad).dtype(r0).ptr(x).ptr(g).ptr(y).i64(numElements(r0))
      .boolean(gg.getApproximateTanh()).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SoftmaxGradOp s, Emitter &e, LoweringContext &) {
  return softmaxGrad(s, e, /*isLog=*/false);
}

FailureOr<Lowering> emitc_lowering::rule(LogSoftmaxGradOp s, Emitter &e, LoweringContext &) {
  return softmaxGrad(s, e, /*isLog=*/true);
}

FailureOr<Lowering> emitc_lowering::rule(LayerNormGradOp l, Emitter &e, LoweringContext &) {
  PTR(x, l.getInput());
  PTR(g, l.getGrad());
  Type r0 = l->getResult(0).getType();
  auto c = e.call(kernels::layerNormGrad);
  c.dtype(r0).ptr(x).ptr(g).dims(r0).i64(normAxis(l.getAxis(), r0));
  if (failed(optionalOperand(c, e, l.getScale())))
    return failure();
  c.f64(l.getEpsilon().convertToDouble()).boolean(l.getRms());
  // A result nobody reads is not written.
  if (failed(c.ptrs(llvm::map_to_vector(l.getResults(), Emitter::readOrNull))))
    return failure();
  c.emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(CrossEntropyGradOp c, Emitter &e, LoweringContext &) {
  return crossEntropy(c, e, c.getGrad());
}
