//===- ResolvedOptions.h - merak-compile's options, checked ------*- C++ -*-===//
//
// CompileOptions as the user gave them become, after one check of every
// flag and the resolution of the defaults that depend on each other, the
// PipelineOptions the passes take (one name per quantity, the flag's) and
// what the driver does around the pass pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TOOLS_RESOLVEDOPTIONS_H
#define MERAK_TOOLS_RESOLVEDOPTIONS_H

#include "merak/Import/OnnxImporter.h"
#include "merak/Pipelines/Pipelines.h"
#include "merak/Tools/Compile.h"
#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"
#include "merak/Planner/Simulate.h"

namespace mlir::merak {

struct ResolvedOptions {
  CompilePhase compileTo = CompilePhase::Import;
  /// --report given (text or json).
  bool report = false;
  /// A model in merak IR (.mlir) rather than ONNX.
  bool mlirInput = false;
  ImportOptions import;
  PipelineOptions pipeline;
  SimulateOptions simulation;
};

/// Checks `opts` (not --devices: the planner resolves that first) and
/// resolves it; `error` holds the message (without "merak-compile: error:")
/// on failure.
FailureOr<ResolvedOptions> resolveCompileOptions(const CompileOptions &opts,
                                                 std::string &error);

} // namespace mlir::merak

#endif
