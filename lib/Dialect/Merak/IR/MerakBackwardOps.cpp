//===- MerakBackwardOps.cpp - verifiers of the fused backward ops ---------===//
//
// softmax_grad, log_softmax_grad, layer_norm_grad and cross_entropy_grad
// (gelu_grad is checked by SameOperandsAndResultType alone). Each backward
// op is checked against the forward op it differentiates: the same axis,
// normalised shape and label layout.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

/// "'merak.x' op axis ... is out of range for rank ..." as the forward ops.
static LogicalResult verifyGradAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  return verifyGradAxis(*this, getAxis(), getType().getRank());
}

LogicalResult LogSoftmaxGradOp::verify() {
  return verifyGradAxis(*this, getAxis(), getType().getRank());
}

LogicalResult LayerNormGradOp::verify() {
  auto in = getInput().getType();
  if (failed(verifyGradAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be non-negative");
  if (getGrad().getType() != in)
    return emitOpError("grad type ") << getGrad().getType() << " must equal the input type "
                                     << in;
  if (getInputGrad().getType() != in || getNormalized().getType() != in)
    return emitOpError("result types must equal the input type ") << in;
  if (Value scale = getScale()) {
    auto t = cast<RankedTensorType>(scale.getType());
    if (t.getElementType() != in.getElementType())
      return emitOpError("scale element type differs from the input's");
    if (!isBroadcastableTo(t.getShape(), in.getShape().drop_front(getAxis())))
      return emitOpError("scale shape ") << t << " does not broadcast to the normalised shape";
  }
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  auto logits = getLogits().getType(), labels = getLabels().getType(),
       grad = getGrad().getType();
  int64_t axis = getAxis();
  if (failed(verifyGradAxis(*this, axis, logits.getRank())))
    return failure();
  if (getType() != logits)
    return emitOpError("result type ") << getType() << " must equal the logits type " << logits;
  SmallVector<int64_t> expected(logits.getShape());
  expected.erase(expected.begin() + axis);
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("labels ") << labels
                                  << " must have the logits' shape without the class axis";
  StringRef red = getReduction();
  if (red != "mean" && red != "sum" && red != "none")
    return emitOpError("reduction must be mean, sum or none, got '") << red << "'";
  if (std::optional<int64_t> c = getClasses(); c && (!getGroup() || *c < 1))
    return emitOpError("classes (") << *c
                                    << ") must be positive and needs a group (vocabulary "
                                       "parallelism)";
  auto loss = RankedTensorType::get(red == "none" ? ArrayRef<int64_t>(expected)
                                                  : ArrayRef<int64_t>(),
                                    logits.getElementType());
  if (grad != loss)
    return emitOpError("grad ") << grad << " is not the cross_entropy result type " << loss;
  return success();
}
