//===- MerakDropout.cpp - merak.dropout's verifier and its mask splits ----===//
//
// merak.dropout's checks, and those of the splits a pass records on a
// dropout mask (merak.dropout's, or merak.attention's on its
// probabilities: verifyDropoutSplits): each `[dim, blocks, parts]` on a
// dimension a pass may split, `blocks` dividing it.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

LogicalResult DropoutOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  if (getOutput().getType() != getInput().getType())
    return emitOpError("output type must equal the input type");
  if (getMask().getType().getShape() != getInput().getType().getShape())
    return emitOpError("mask shape must equal the input shape");
  return verifyDropoutSplits(*this, getInput().getType().getShape(), getInput().getType().getRank(),
                             getBatchSplit(), getTpSplit());
}

LogicalResult mlir::merak::verifyDropoutSplits(Operation *op, ArrayRef<int64_t> shape,
                                               int64_t splittable,
                                               std::optional<ArrayRef<int64_t>> batchSplit,
                                               std::optional<ArrayRef<int64_t>> tpSplit) {
  for (auto [name, split] :
       {std::pair{"batch_split", batchSplit}, std::pair{"tp_split", tpSplit}}) {
    if (!split)
      continue;
    if (split->size() != 3)
      return op->emitOpError(name)
             << " must be [dim, blocks, parts], got " << split->size() << " values";
    int64_t dim = (*split)[0], blocks = (*split)[1], parts = (*split)[2];
    if (dim < 0 || dim >= splittable)
      return op->emitOpError(name) << " dimension " << dim << " is out of range (the first "
                                   << splittable << " of rank " << shape.size() << " may be split)";
    if (blocks < 1 || parts < 1 || shape[dim] % blocks)
      return op->emitOpError(name)
             << ": dimension " << dim << " (size " << shape[dim] << ") must hold " << blocks
             << " blocks, and parts (" << parts << ") must be positive";
  }
  return success();
}
