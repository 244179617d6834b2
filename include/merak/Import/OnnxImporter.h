//===- OnnxImporter.h - ONNX model to merak IR ------------------*- C++ -*-===//
#ifndef MERAK_IMPORT_ONNXIMPORTER_H
#define MERAK_IMPORT_ONNXIMPORTER_H

#include "merak/Evaluator/HostTensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::merak {

struct ImportOptions {
  /// Static shapes for graph inputs (`--input-shape NAME=8x128`); they bind
  /// dynamic dimensions and must agree with the static ones.
  llvm::StringMap<SmallVector<int64_t>> inputShapes;
  /// `--batch-size N`: binds the dynamic leading dimension of every graph
  /// input that inputShapes does not bind (0: unset). At least one input
  /// must have a dynamic leading dimension.
  int64_t batchSize = 0;
  /// Results up to this many elements computed from constants are folded
  /// during import (shape arithmetic).
  int64_t foldMaxElements = 65536;
  /// Graph inputs bound to compile-time values (`merak-run --bind-constant`):
  /// they become constants instead of arguments, so shapes, axes or indices
  /// fed as inputs can be folded into a static program.
  llvm::StringMap<HostTensor> constantInputs;
};

/// Parses `NAME=D0xD1x...` (a scalar is `NAME=`) into `options`.
LogicalResult parseInputShape(StringRef spec, ImportOptions &options,
                              std::string &error);

/// Imports a binary `.onnx` or textual `.onnxtxt` file into a module with
/// `merak.param`s and one `func.func @forward`. Errors are emitted as
/// diagnostics (each names the cause); returns null on failure.
OwningOpRef<ModuleOp> importOnnxFile(StringRef path, MLIRContext *context,
                                     const ImportOptions &options);

/// Imports a model held in memory: a serialized ModelProto, or ONNX text
/// when `isText`. `name` stands for the model in diagnostics; external data
/// is looked up under `baseDir` (empty: refused). importOnnxFile's checks
/// and errors, without the file (the fuzz targets under test/fuzz use it).
OwningOpRef<ModuleOp> importOnnxBuffer(StringRef bytes, bool isText, StringRef name,
                                       StringRef baseDir, MLIRContext *context,
                                       const ImportOptions &options);

} // namespace mlir::merak

#endif
