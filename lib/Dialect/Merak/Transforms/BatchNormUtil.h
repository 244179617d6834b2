//===- BatchNormUtil.h - Shared by the batch-norm passes ------*- C++ -*-===//
//
// merak-batch-norm-stats and merak-sync-batch-norm: the batch counter
// nn.BatchNorm* keeps next to its running statistics.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TRANSFORMS_BATCHNORMUTIL_H
#define MERAK_TRANSFORMS_BATCHNORMUTIL_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::merak {

/// Adds 1 at `b` to `<prefix>.num_batches_tracked`, the counter of the
/// normalisation whose running mean is `<prefix>.running_mean` (`meanName`;
/// nothing for another name, or when a symbol of that name is not an int64
/// scalar parameter): declared as a buffer starting at 0 when the module
/// lacks it (torch's exporter drops it), so a checkpoint holds every key of
/// the module's state_dict.
void countBatchNormForward(ModuleOp module, OpBuilder &b, Location loc, StringRef meanName);

} // namespace mlir::merak

#endif // MERAK_TRANSFORMS_BATCHNORMUTIL_H
