//===- ManifestJSON.h - Spellings shared by the manifest writers -*- C++ -*-===//
//
// The serial (ProgramData.cpp) and pipelined (PipelineProgram.cpp) manifest
// writers spell dtypes and shapes the same way: the runtime's reader
// (runtime/src/manifest.cpp) expects the safetensors dtype names.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_TARGET_MANIFESTJSON_H
#define MERAK_LIB_TARGET_MANIFESTJSON_H

#include "mlir/IR/BuiltinTypes.h"
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

} // namespace mlir::merak::target

#endif
