//===- BatchNormUtil.h - Shared by the batch-norm passes ------*- C++ -*-===//
//
// merak-batch-norm-stats and merak-sync-batch-norm: the running
// statistics' parameters and the batch counter nn.BatchNorm* keeps next to
// them.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TRANSFORMS_BATCHNORMUTIL_H
#define MERAK_TRANSFORMS_BATCHNORMUTIL_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <utility>

namespace mlir::merak {

/// The parameter reads of `op`'s running mean and variance, made buffers
/// (never trained, saved with checkpoints); none, with a warning naming
/// `pass`, when they are not two distinct parameters (initializers), whose
/// statistics training then leaves alone.
std::optional<std::pair<GetParamOp, GetParamOp>> runningStatistics(ModuleOp module, BatchNormOp op,
                                                                   StringRef pass);

/// Adds 1 at `b` to `<prefix>.num_batches_tracked`, the counter of the
/// normalisation whose running mean is `<prefix>.running_mean` (`meanName`;
/// nothing for another name, or when a symbol of that name is not an int64
/// scalar parameter): declared as a buffer starting at 0 when the module
/// lacks it (torch's exporter drops it), so a checkpoint holds every key of
/// the module's state_dict.
void countBatchNormForward(ModuleOp module, OpBuilder &b, Location loc, StringRef meanName);

} // namespace mlir::merak

#endif // MERAK_TRANSFORMS_BATCHNORMUTIL_H
