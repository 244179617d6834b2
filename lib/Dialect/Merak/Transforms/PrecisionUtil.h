//===- PrecisionUtil.h - Shared by the precision passes ---------*- C++ -*-===//
//
// merak-mixed-precision and merak-grad-reduce-precision: the `precision`
// option's check and retyping a tensor's element type.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TRANSFORMS_PRECISIONUTIL_H
#define MERAK_TRANSFORMS_PRECISIONUTIL_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::merak {

/// The tensor type `t` with element type `elem` (same shape).
inline RankedTensorType withElement(Type t, Type elem) {
  return RankedTensorType::get(cast<RankedTensorType>(t).getShape(), elem);
}

/// Whether a pass's `precision` option asks for bf16: false for "fp32",
/// true for "bf16"; anything else is an error on `module` naming `pass`.
inline FailureOr<bool> bf16Requested(ModuleOp module, StringRef pass, StringRef precision) {
  if (precision == "fp32" || precision == "bf16")
    return precision == "bf16";
  module.emitError(pass) << ": precision '" << precision << "': expected fp32 or bf16";
  return failure();
}

} // namespace mlir::merak

#endif // MERAK_TRANSFORMS_PRECISIONUTIL_H
