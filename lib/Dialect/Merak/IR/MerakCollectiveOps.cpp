//===- MerakCollectiveOps.cpp - verifiers of the collective ops -----------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

LogicalResult AllReduceOp::verify() {
  StringRef group = getGroup();
  if (group != "dp" && group != "tp" && group != "pp")
    return emitOpError("group must be \"dp\", \"tp\" or \"pp\", got \"") << group << "\"";
  StringRef red = getReduction();
  if (red != "sum" && red != "mean")
    return emitOpError("reduction must be \"sum\" or \"mean\", got \"") << red << "\"";
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  if (getInputs().getTypes() != getResults().getTypes())
    return emitOpError("result types must equal the operand types");
  return success();
}
