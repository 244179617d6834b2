//===- MerakInterfaces.td - merak op interfaces ------------*- tablegen -*-===//
#ifndef MERAK_INTERFACES_TD
#define MERAK_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Merak_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op with a reverse-mode derivative rule (a vector-Jacobian product).
    Given the gradients of the op's results (null for a result that nothing
    differentiable reads), `buildVJP` emits ops at the builder's insertion
    point computing the gradient of every operand, or null for an operand
    that carries no gradient (integer indices, boolean conditions).
    Rules are attached as external models (lib/Dialect/Merak/Autodiff), one
    per op, so the autodiff pass never switches on op kinds.
  }];
  let methods = [
    InterfaceMethod<
      "Emits the operand gradients given the result gradients.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif
