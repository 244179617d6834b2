//===- ManifestJSON.h - Spellings shared by the manifest writers -*- C++ -*-===//
//
// The serial (ProgramData.cpp) and pipelined (PipelineProgram.cpp) manifest
// and data writers share these: dtypes and shapes spelled as the runtime's
// reader (runtime/src/manifest.cpp) expects, and tensor data in storage
// layout.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_TARGET_MANIFESTJSON_H
#define MERAK_LIB_TARGET_MANIFESTJSON_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mlir::merak::target {

/// "F32", "F64", "I64", "I32" or "BOOL" for a tensor or element type.
inline std::string manifestDType(Type t) {
  Type e = isa<ShapedType>(t) ? cast<ShapedType>(t).getElementType() : t;
  if (e.isF32())
    return "F32";
  if (e.isF64())
    return "F64";
  if (e.isInteger(64))
    return "I64";
  if (e.isInteger(32))
    return "I32";
  return "BOOL";
}

/// A ranked tensor type's shape as a JSON list.
inline llvm::json::Array manifestShape(Type t) {
  llvm::json::Array a;
  for (int64_t d : cast<RankedTensorType>(t).getShape())
    a.push_back(d);
  return a;
}

/// Writes the bytes of `attr` in storage layout (row-major, little endian,
/// i1 as one byte) to `os`, zero padded to `bytes`; parameter blobs go
/// straight from their resource. Failure after a diagnostic on `owner`.
LogicalResult writeElementData(Operation *owner, ElementsAttr attr, int64_t bytes,
                               llvm::raw_ostream &os);

/// A param's manifest "kind": its merak.kind (state, scratch, hparam), else
/// "trainable" when the step writes it (`trained`), else "frozen"; for an
/// hparam, records `key -> name` in `hparams` and a splat initial value as
/// the run-time default in `defaults`.
std::string manifestParamKind(ParamOp p, const llvm::StringSet<> &trained,
                              llvm::json::Object &hparams, llvm::json::Object &defaults);

/// Bytes a tensor of type `t` occupies in an arena or the parameter
/// storage: its storage size rounded up to kBufferAlignment (at least one
/// alignment unit).
int64_t slotBytes(Type t);

/// Writes the initial data of the parameters planned below `initBytes` (the
/// initialised part of the parameter storage), in offset order, each padded
/// to its slot; checks that they tile [0, initBytes) exactly.
LogicalResult writeInitialParams(ModuleOp module, int64_t initBytes, llvm::raw_ostream &os);

} // namespace mlir::merak::target

#endif
