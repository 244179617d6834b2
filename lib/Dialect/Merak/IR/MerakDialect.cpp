//===- MerakDialect.cpp - merak dialect registration ----------------------===//
#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"

using namespace mlir;
using namespace mlir::merak;

#include "merak/Dialect/Merak/IR/MerakOpsDialect.cpp.inc"
#include "merak/Dialect/Merak/IR/MerakInterfaces.cpp.inc"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#define GET_TYPEDEF_CLASSES
#include "merak/Dialect/Merak/IR/MerakOpsTypes.cpp.inc"

void MerakDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "merak/Dialect/Merak/IR/MerakOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "merak/Dialect/Merak/IR/MerakOpsTypes.cpp.inc"
      >();
}

Operation *MerakDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
