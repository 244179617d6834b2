//===- MerakOptimizerOps.cpp - fused optimizer update ops -----------------===//
//
// Verifiers and costs of adamw_update, adan_update and sgd_update: the
// parameter, its gradient, its state and the results share one type; the
// learning rate and clip coefficient are rank-0 tensors of its element type,
// the step a rank-0 integer; the hyper-parameters are in range.
//
// Cost: FLOPs per element as counted from the formulas (adamw 14, adan 22,
// sgd 2 to 6), bytes as every operand read and result written once.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// The shared checks: `tensors` (operands and results) have the param's
/// type, the scalars are rank-0 of the right element type, the values in
/// `unitInterval` are in [0, 1) and those in `nonNegative` are >= 0.
LogicalResult verifyUpdate(Operation *op, Value param, ValueRange tensors,
                           ArrayRef<std::pair<StringRef, Value>> scalars, Value step,
                           ArrayRef<std::pair<StringRef, double>> unitInterval,
                           ArrayRef<std::pair<StringRef, double>> nonNegative) {
  auto type = cast<RankedTensorType>(param.getType());
  for (Value v : tensors)
    if (v.getType() != type)
      return op->emitOpError("expects every parameter, gradient, state and result "
                             "tensor to have the parameter's type ")
             << type << ", got " << v.getType();
  for (auto [name, v] : scalars) {
    if (!v)
      continue;
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != 0 || t.getElementType() != type.getElementType())
      return op->emitOpError() << name << " must be a rank-0 tensor of "
                               << type.getElementType() << ", got " << t;
  }
  if (step && cast<RankedTensorType>(step.getType()).getRank() != 0)
    return op->emitOpError("step must be a rank-0 integer tensor, got ") << step.getType();
  for (auto [name, v] : unitInterval)
    if (!(v >= 0.0 && v < 1.0))
      return op->emitOpError() << name << " must be in [0, 1), got " << v;
  for (auto [name, v] : nonNegative)
    if (!(v >= 0.0))
      return op->emitOpError() << name << " must be non-negative, got " << v;
  return success();
}

int64_t elementsOf(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }
} // namespace

LogicalResult AdamWUpdateOp::verify() {
  SmallVector<Value> tensors{getParam(), getGrad(), getExpAvg(), getExpAvgSq()};
  llvm::append_range(tensors, getResults());
  return verifyUpdate(*this, getParam(), tensors, {{"lr", getLr()}, {"clip", getClip()}},
                      getStep(),
                      {{"beta1", getBeta1().convertToDouble()},
                       {"beta2", getBeta2().convertToDouble()}},
                      {{"eps", getEps().convertToDouble()},
                       {"weight_decay", getWeightDecay().convertToDouble()}});
}

LogicalResult AdanUpdateOp::verify() {
  SmallVector<Value> tensors{getParam(),     getGrad(),     getExpAvg(),
                             getExpAvgDiff(), getExpAvgSq(), getPrevGrad()};
  llvm::append_range(tensors, getResults());
  // Adan's betas weigh the new term: [0, 1] (1 keeps no history).
  for (auto [name, v] : {std::pair<StringRef, double>{"beta1", getBeta1().convertToDouble()},
                         {"beta2", getBeta2().convertToDouble()},
                         {"beta3", getBeta3().convertToDouble()}})
    if (!(v >= 0.0 && v <= 1.0))
      return emitOpError() << name << " must be in [0, 1], got " << v;
  return verifyUpdate(*this, getParam(), tensors, {{"lr", getLr()}, {"clip", getClip()}},
                      getStep(), {},
                      {{"eps", getEps().convertToDouble()},
                       {"weight_decay", getWeightDecay().convertToDouble()}});
}

LogicalResult SgdUpdateOp::verify() {
  double momentum = getMomentum().convertToDouble();
  bool hasBuffer = static_cast<bool>(getMomentumBuffer());
  if (hasBuffer != (momentum != 0.0))
    return emitOpError("expects a momentum_buffer exactly when momentum is not 0 (momentum ")
           << momentum << (hasBuffer ? ", with a buffer)" : ", without a buffer)");
  if (getNesterov() && !hasBuffer)
    return emitOpError("nesterov needs momentum");
  unsigned expected = hasBuffer ? 2 : 1;
  if (getResults().size() != expected)
    return emitOpError("expects ") << expected << " results (the parameter"
                                   << (hasBuffer ? " and the momentum buffer)" : ")")
                                   << ", got " << getResults().size();
  SmallVector<Value> tensors{getParam(), getGrad()};
  if (hasBuffer)
    tensors.push_back(getMomentumBuffer());
  llvm::append_range(tensors, getResults());
  return verifyUpdate(*this, getParam(), tensors, {{"lr", getLr()}, {"clip", getClip()}},
                      Value(), {},
                      {{"momentum", momentum},
                       {"weight_decay", getWeightDecay().convertToDouble()}});
}

int64_t AdamWUpdateOp::getFlops() { return 14 * elementsOf(getParam()); }
int64_t AdamWUpdateOp::getBytesAccessed() { return operandAndResultBytes(*this); }
int64_t AdanUpdateOp::getFlops() { return 22 * elementsOf(getParam()); }
int64_t AdanUpdateOp::getBytesAccessed() { return operandAndResultBytes(*this); }
int64_t SgdUpdateOp::getFlops() {
  int64_t perElement = 2 + (getClip() ? 1 : 0) +
                       (getWeightDecay().convertToDouble() != 0 ? 2 : 0) +
                       (getMomentumBuffer() ? 2 + (getNesterov() ? 2 : 0) : 0);
  return perElement * elementsOf(getParam());
}
int64_t SgdUpdateOp::getBytesAccessed() { return operandAndResultBytes(*this); }
