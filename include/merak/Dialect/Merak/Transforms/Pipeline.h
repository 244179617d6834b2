//===- Pipeline.h - Pipeline parallelism: stages and schedules --*- C++ -*-===//
//
// merak-pipeline (PipelinePartition.cpp) cuts @loss into stages and builds
// each stage's fragments; this header names what it records on the IR
// besides the plan. The plan, the fragments and the schedules are in
// Analysis/PipelineSchedule.h. See docs/parallelism.md, "Pipeline".
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_PIPELINE_H
#define MERAK_DIALECT_MERAK_TRANSFORMS_PIPELINE_H

#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"
#include "merak/Dialect/Merak/Autodiff/ReverseSweep.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::merak {

/// Function attribute of a fragment: {stage, kind = "forward" | "backward"}.
inline constexpr llvm::StringLiteral kFragmentAttr = "merak.fragment";
/// On a per-stage gradient function: the name of the update function
/// merak-optimizer builds from it (instead of @loss_grad -> @train_step).
inline constexpr llvm::StringLiteral kUpdateAttr = "merak.update";
/// On such a function: the mesh axis whose ranks hold the other parts of
/// the gradient norm (the sum of squares is all-reduced over it).
inline constexpr llvm::StringLiteral kNormGroupAttr = "merak.norm_group";
/// On such a function: parameters whose squared gradient another stage
/// counts (tied copies), left out of this stage's part of the norm.
inline constexpr llvm::StringLiteral kNormSkipAttr = "merak.norm_skip";
/// Prefix of the gradient accumulators: params of merak.kind "scratch"
/// (zeroed by the runtime before every step, never checkpointed; under
/// tensor parallelism they have the local shard's shape, unsharded).
inline constexpr llvm::StringLiteral kGradAccumulatorPrefix = "pipeline.grad.";

/// Estimated forward FLOPs of one op: CostOpInterface::getFlops (matmul
/// 2MNK, convolution 2 * output * reduction, views 0, see MerakCost.cpp);
/// 0 for ops of other dialects.
int64_t estimateOpFlops(Operation *op);

/// The ops of a stage's forward that its backward does not repeat: writes
/// of parameters (merak-batch-norm-stats' running statistics, which must
/// change once per micro-batch) and the effect-free ops whose results only
/// such ops read. merak-pipeline leaves them out of @stage<s>_backward and
/// merak-recompute out of the op-for-op pairing of forward and backward.
llvm::DenseSet<Operation *> forwardOnlyOps(Block &body);

/// The stage assignment recorded by merak-pipeline, as comment lines: per
/// stage its ops, estimated FLOPs, parameters and boundary values.
void printPipelinePlan(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
