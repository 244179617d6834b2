//===- Passes.h - merak dialect passes --------------------------*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_PASSES_H
#define MERAK_DIALECT_MERAK_TRANSFORMS_PASSES_H

#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace mlir::merak {

/// The inputs whose leading dimension merak-split-batch splits: the token
/// ids (the first rank-2 integer argument of `fn`), or without them every
/// argument, when all share a leading dimension (empty otherwise).
SmallVector<BlockArgument> batchInputs(func::FuncOp fn);

#define GEN_PASS_DECL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"

} // namespace mlir::merak

#endif
