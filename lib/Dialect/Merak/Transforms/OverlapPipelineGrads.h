//===- OverlapPipelineGrads.h - dp all-reduce under the last backward -*- C++ -*-===//
#ifndef MERAK_LIB_DIALECT_MERAK_TRANSFORMS_OVERLAPPIPELINEGRADS_H
#define MERAK_LIB_DIALECT_MERAK_TRANSFORMS_OVERLAPPIPELINEGRADS_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::merak {
/// In a pipeline module (interleaved chunks too) with a dp all-reduce of the
/// gradient accumulators in @stage<s>_update: builds the stage's last
/// accumulating fragment's "_last" clone, which all-reduces the
/// accumulators in buckets of about `bucketBytes` as they become final,
/// and removes the update's all-reduce (OverlapPipelineGrads.cpp).
void overlapPipelineGradients(ModuleOp module, int64_t bucketBytes);
} // namespace mlir::merak

#endif
