//===- MerakIndexLimits.cpp - IndexOperandOpInterface of merak ops --------===//
//
// Indices select along `axis` of the data (gather, gather_elements) or a
// class of the logits (cross_entropy, whose labels may also equal
// ignore_index, checked by the loss itself); merak-record-index-limits
// reads these bounds.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

using namespace mlir;
using namespace mlir::merak;

/// The static size of `type` along `axis`, or nullopt.
static std::optional<int64_t> staticDim(Type type, int64_t axis) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || axis < 0 || axis >= t.getRank() || t.isDynamicDim(axis))
    return std::nullopt;
  return t.getDimSize(axis);
}

std::optional<int64_t> GatherOp::getIndexLimit(unsigned operandIndex) {
  if (operandIndex != getIndicesMutable().getOperandNumber())
    return std::nullopt;
  return staticDim(getData().getType(), getAxis());
}

std::optional<int64_t> ExpertMatmulOp::getIndexLimit(unsigned operandIndex) {
  // With `first` the ids are global and may lie outside this rank's experts.
  if (operandIndex != getExpertsMutable().getOperandNumber() || getFirst())
    return std::nullopt;
  return staticDim(getWeight().getType(), 0);
}

std::optional<int64_t> GatherElementsOp::getIndexLimit(unsigned operandIndex) {
  if (operandIndex != getIndicesMutable().getOperandNumber())
    return std::nullopt;
  return staticDim(getData().getType(), getAxis());
}

std::optional<int64_t> CrossEntropyOp::getIndexLimit(unsigned operandIndex) {
  if (operandIndex != getLabelsMutable().getOperandNumber())
    return std::nullopt;
  if (getGroup()) // the logits are one rank's shard of the classes
    return getClasses() ? std::optional<int64_t>(*getClasses()) : std::nullopt;
  return staticDim(getLogits().getType(), getAxis());
}
