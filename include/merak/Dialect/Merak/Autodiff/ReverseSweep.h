//===- ReverseSweep.h - reverse-mode accumulation over a block --*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_AUTODIFF_REVERSESWEEP_H
#define MERAK_DIALECT_MERAK_AUTODIFF_REVERSESWEEP_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::merak {

/// Reverse-mode sweep over the ops of `body` (program order, terminator
/// excluded), emitted at `b`'s insertion point with the ops' VJP rules
/// (DifferentiableOpInterface): `seeds` are (value, cotangent) pairs;
/// gradients flow to `sourceArgs` (block arguments; their gradients land in
/// `argGrads`) and to the reads of parameters for which `trainable` holds
/// (summed per parameter into `paramGrads`). Errors name `pass`.
LogicalResult buildReverseSweep(OpBuilder &b, Block &body,
                                ArrayRef<std::pair<Value, Value>> seeds,
                                ArrayRef<Value> sourceArgs, StringRef pass,
                                llvm::function_ref<bool(StringRef)> trainable,
                                llvm::DenseMap<Value, Value> &argGrads,
                                llvm::StringMap<Value> &paramGrads);

} // namespace mlir::merak

#endif
