//===- EvaluableOpInterface.td - ops the evaluator runs ----*- tablegen -*-===//
#ifndef MERAK_EVALUATOR_EVALUABLEOPINTERFACE_TD
#define MERAK_EVALUATOR_EVALUABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def Merak_EvaluableOpInterface : OpInterface<"EvaluableOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op the reference evaluator can run on host tensors. `evaluate` reads
    one HostTensor per operand and appends one per result, or emits an error
    on the op and fails (an index out of range, an unsupported element
    type). Rules are attached as external models (lib/Evaluator/EvalModels.cpp),
    one per op, so `evaluateOp` never switches on op kinds. The interface
    lives in the evaluator library because it names HostTensor.
  }];
  let methods = [
    InterfaceMethod<
      "Computes the results from the operand values.",
      "::llvm::LogicalResult", "evaluate",
      (ins "::llvm::ArrayRef<const ::mlir::merak::HostTensor *>":$operands,
           "::llvm::SmallVectorImpl<::mlir::merak::HostTensor> &":$results)>
  ];
}

#endif
