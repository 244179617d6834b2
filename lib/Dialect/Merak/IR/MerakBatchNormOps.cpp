//===- MerakBatchNormOps.cpp - batch normalisation's verifiers -----------===//
//
// merak.batch_norm, merak.batch_norm_stats (its running-statistics update)
// and merak.batch_norm_grad: an NC... input and [C] per-channel operands
// and results of its element type; a momentum in [0, 1].
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

/// The input has rank >= 2 and every value of `perChannel` the [C] type
/// ("<what> must be tensor<Cxf32>, got ...").
static LogicalResult verifyChannels(Operation *op, RankedTensorType in, ValueRange perChannel,
                                    StringRef what) {
  if (in.getRank() < 2)
    return op->emitOpError("input must have rank >= 2 (N, C, ...)");
  auto channel = RankedTensorType::get({in.getDimSize(1)}, in.getElementType());
  for (Value v : perChannel)
    if (v.getType() != channel)
      return op->emitOpError(what) << " must be " << channel << ", got " << v.getType();
  return success();
}

static LogicalResult verifyMomentum(Operation *op, double m) {
  if (!(m >= 0.0 && m <= 1.0))
    return op->emitOpError("momentum must be in [0, 1], got ") << m;
  return success();
}

LogicalResult BatchNormOp::verify() {
  auto in = getInput().getType();
  if (in.getRank() >= 2 && getType() != in)
    return emitOpError("result type must equal the input type");
  if (failed(verifyChannels(*this, in, {getScale(), getBias(), getMean(), getVar()},
                            "per-channel operands")))
    return failure();
  if (FloatAttr momentum = getMomentumAttr()) {
    if (!getTraining())
      return emitOpError("momentum (a running-statistics update) needs training");
    return verifyMomentum(*this, momentum.getValueAsDouble());
  }
  return success();
}

LogicalResult BatchNormGradOp::verify() {
  auto in = getInput().getType();
  if (in.getRank() >= 2 && (getGrad().getType() != in || getInputGrad().getType() != in))
    return emitOpError("grad and input_grad must have the input's type ") << in;
  return verifyChannels(*this, in, {getScale(), getScaleGrad(), getBiasGrad()},
                        "scale, scale_grad and bias_grad");
}

LogicalResult BatchNormStatsOp::verify() {
  auto in = getInput().getType();
  if (failed(verifyChannels(*this, in, {getMean(), getVar(), getNewMean(), getNewVar()},
                            "per-channel operands and results")))
    return failure();
  int64_t n = 1;
  for (int64_t d = 0; d < in.getRank(); ++d)
    n *= d == 1 ? 1 : in.getDimSize(d);
  if (n < 2)
    return emitOpError("needs two or more values per channel for the unbiased variance");
  return verifyMomentum(*this, getMomentum().convertToDouble());
}
