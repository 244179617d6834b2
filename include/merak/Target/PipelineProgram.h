//===- PipelineProgram.h - Pipeline-parallel generated programs -*- C++ -*-===//
//
// A module cut by merak-pipeline (and updated by merak-optimizer) becomes a
// program of fragments (per stage: forward, backward, update and the parts
// of a split backward, see pipelineFragments), each an
// `extern "C" merak_fragment_<k>(A, P, C, IO)` with its own arena plan
// inside the shared arena A, reading its arguments and writing its results
// through the runtime's pointer table IO, plus
// `merak_run_fragment(k, A, P, C, IO)` that dispatches to them. The manifest's
// "pipeline" object (runtime/include/merak_rt/pipeline.h) tells the runtime
// where each fragment's inputs and outputs live, how activations and
// gradients are packed into messages, and each stage's instruction list.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TARGET_PIPELINEPROGRAM_H
#define MERAK_TARGET_PIPELINEPROGRAM_H

#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Target/Program.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::merak {

/// Prints the fragment arenas of a module planned by
/// merak-plan-pipeline-memory ("merak-compile: memory plan: ...").
void reportPipelineMemoryPlan(ModuleOp module, llvm::raw_ostream &os);

/// The manifest (with its "pipeline" object) and the initial data.
LogicalResult writePipelineProgramData(ModuleOp planned, const ProgramInfo &info,
                                       llvm::raw_ostream &manifest, llvm::raw_ostream &data);

/// The C++ of every fragment and the dispatcher.
LogicalResult emitPipelineProgramSource(ModuleOp planned, const ProgramInfo &info,
                                        llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
