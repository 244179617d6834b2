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
#define GET_ATTRDEF_CLASSES
#include "merak/Dialect/Merak/IR/MerakOpsAttrs.cpp.inc"

void MerakDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "merak/Dialect/Merak/IR/MerakOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "merak/Dialect/Merak/IR/MerakOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "merak/Dialect/Merak/IR/MerakOpsAttrs.cpp.inc"
      >();
}

DeviceMesh mlir::merak::getMesh(ModuleOp module) {
  if (auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttr))
    return {mesh.getDp(), mesh.getTp(), mesh.getPp(), mesh.getEp()};
  return {};
}

void mlir::merak::printI64List(AsmPrinter &printer, ArrayRef<int64_t> values) {
  printer << '[';
  llvm::interleaveComma(values, printer);
  printer << ']';
}

FailureOr<SmallVector<int64_t>> mlir::merak::parseI64List(AsmParser &parser) {
  SmallVector<int64_t> values;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() {
        return parser.parseInteger(values.emplace_back());
      }))
    return failure();
  return values;
}

SmallVector<StringRef> PipelinePlanAttr::getOwnersOf(int64_t s) const {
  SmallVector<StringRef> names;
  for (Attribute n : cast<ArrayAttr>(getOwners()[s]))
    names.push_back(cast<StringAttr>(n).getValue());
  return names;
}

PipelinePlanAttr PipelinePlanAttr::withSchedule(StringRef schedule, int64_t virtualStages) const {
  return get(getContext(), getStages(), getMicrobatches(), getCutPoints(), getCuts(), getCosts(),
             getOwners(), virtualStages, getMemoryEstimate(), getRecompute(), getScpKept(),
             getStashBytes(), StringAttr::get(getContext(), schedule));
}

PipelinePlanAttr PipelinePlanAttr::withRecompute(ArrayAttr modes, ArrayRef<int64_t> stash,
                                                 ArrayRef<int64_t> estimate,
                                                 ArrayRef<int64_t> scpKept) const {
  return get(getContext(), getStages(), getMicrobatches(), getCutPoints(), getCuts(), getCosts(),
             getOwners(), getVirtualStages(), estimate, modes, scpKept, stash, getSchedule());
}

Operation *MerakDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
