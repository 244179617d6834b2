//===- Evaluator.h - reference evaluator of merak IR ------------*- C++ -*-===//
#ifndef MERAK_EVALUATOR_EVALUATOR_H
#define MERAK_EVALUATOR_EVALUATOR_H

#include "merak/Evaluator/HostTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::merak {

/// Attaches the EvaluableOpInterface external models (one evaluation rule
/// per op) to the merak dialect's ops. Every context that evaluates or folds
/// with the evaluator needs them.
void registerEvaluatorExternalModels(DialectRegistry &registry);

/// Evaluates one op on host tensors through its EvaluableOpInterface. Emits
/// an error on the op and fails for unsupported ops (those without the
/// interface) or run-time errors (index out of range).
LogicalResult evaluateOp(Operation *op, ArrayRef<const HostTensor *> operands,
                         SmallVectorImpl<HostTensor> &results);

/// Current values of parameters (and optimizer state) across calls: a
/// parameter missing from the store starts at its initial value.
using ParamStore = llvm::StringMap<HostTensor>;

/// Evaluates `func` (merak ops, func.return) on `inputs`. Parameters are
/// read from `store` (or, without one, the merak.param initial values);
/// merak.set_param writes into `store`, so a training step can be run
/// repeatedly.
FailureOr<SmallVector<HostTensor>> evaluateFunction(func::FuncOp func,
                                                    ArrayRef<HostTensor> inputs,
                                                    ParamStore *store = nullptr);

/// The training step merak.dropout draws its masks at: 0 unless a
/// ScopedEvaluationStep is alive on this thread.
int64_t evaluationStep();

/// Sets the evaluation step while alive (merak-run sets step s around the
/// evaluation of step s of a training step).
class ScopedEvaluationStep {
public:
  explicit ScopedEvaluationStep(int64_t step);
  ~ScopedEvaluationStep();
  ScopedEvaluationStep(const ScopedEvaluationStep &) = delete;
  ScopedEvaluationStep &operator=(const ScopedEvaluationStep &) = delete;

private:
  int64_t previous;
};

/// Folds `op` when it has no side effects (merak.dropout reads the step,
/// merak.group_rank the rank), all operands are constants and every result has at most
/// `maxElements` elements (and no splat operand has more than 2^24 or
/// `maxElements`); returns the folded attributes.
FailureOr<SmallVector<Attribute>> foldWithEvaluator(Operation *op,
                                                    int64_t maxElements);

} // namespace mlir::merak

#endif
