//===- Evaluator.h - reference evaluator of merak IR ------------*- C++ -*-===//
#ifndef MERAK_EVALUATOR_EVALUATOR_H
#define MERAK_EVALUATOR_EVALUATOR_H

#include "merak/Evaluator/HostTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::merak {

/// Evaluates one merak op on host tensors. Emits an error on the op and
/// fails for unsupported ops or run-time errors (index out of range).
LogicalResult evaluateOp(Operation *op, ArrayRef<const HostTensor *> operands,
                         SmallVectorImpl<HostTensor> &results);

/// Evaluates `func` (merak ops, func.return) on `inputs`. Parameters are
/// read from the enclosing module's merak.param initial values.
FailureOr<SmallVector<HostTensor>> evaluateFunction(func::FuncOp func,
                                                    ArrayRef<HostTensor> inputs);

/// Folds `op` when all operands are constants and every result has at most
/// `maxElements` elements; returns the folded attributes.
FailureOr<SmallVector<Attribute>> foldWithEvaluator(Operation *op,
                                                    int64_t maxElements);

} // namespace mlir::merak

#endif
