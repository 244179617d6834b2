//===- PipelineProgram.h - Pipeline-parallel generated programs -*- C++ -*-===//
//
// A module cut by merak-pipeline (and updated by merak-optimizer) becomes a
// program of fragments (per stage: forward, backward, update and the parts
// of a split backward, see pipelineFragments), each an
// `extern "C" merak_fragment_<k>(A, P, C)` with
// its own arena plan inside the shared arena A, plus
// `merak_run_fragment(k, A, P, C)` that dispatches to them. The manifest's
// "pipeline" object (runtime/include/merak_rt/pipeline.h) tells the runtime
// where each fragment's inputs and outputs live, how activations and
// gradients are packed into messages, and each stage's instruction list.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TARGET_PIPELINEPROGRAM_H
#define MERAK_TARGET_PIPELINEPROGRAM_H

#include "merak/Target/Program.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::merak {

/// True when `module` was cut by merak-pipeline.
bool isPipelineModule(ModuleOp module);

/// The fragments in index order: per stage s, @stage<s>_forward, _backward,
/// _update, then those of merak-split-backward it has (_forward_keep,
/// _recompute, _backward_weight). The runtime finds them by the manifest's
/// "stage" and "kind".
FailureOr<SmallVector<func::FuncOp>> pipelineFragments(ModuleOp module);

/// (s, "kind") of @stage<s>_<kind>; (-1, "") for another name.
std::pair<int64_t, StringRef> pipelineFragmentStageKind(func::FuncOp fragment);

/// merak-plan-memory over every fragment; prints the totals to `os`.
LogicalResult planPipelineMemory(ModuleOp module, llvm::raw_ostream &os);

/// The manifest (with its "pipeline" object) and the initial data.
LogicalResult writePipelineProgramData(ModuleOp planned, const ProgramInfo &info,
                                       llvm::raw_ostream &manifest, llvm::raw_ostream &data);

/// The C++ of every fragment and the dispatcher.
LogicalResult emitPipelineProgramSource(ModuleOp planned, const ProgramInfo &info,
                                        llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
