//===- MerakCollectiveOps.cpp - verifiers of the collective ops -----------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/Builders.h"
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

std::optional<ShardLayout> mlir::merak::getShardLayout(Operation *op) {
  auto dict = op->getAttrOfType<DictionaryAttr>(kShardAttr);
  if (!dict)
    return std::nullopt;
  auto get = [&](StringRef key) { return dict.getAs<IntegerAttr>(key); };
  IntegerAttr axis = get("axis"), parts = get("parts"), blocks = get("blocks");
  if (!axis || !parts || !blocks)
    return std::nullopt;
  return ShardLayout{axis.getInt(), parts.getInt(), blocks.getInt()};
}

void mlir::merak::setShardLayout(Operation *op, const ShardLayout &layout) {
  Builder b(op->getContext());
  op->setAttr(kShardAttr, b.getDictionaryAttr({
                              b.getNamedAttr("axis", b.getI64IntegerAttr(layout.axis)),
                              b.getNamedAttr("blocks", b.getI64IntegerAttr(layout.blocks)),
                              b.getNamedAttr("parts", b.getI64IntegerAttr(layout.parts)),
                          }));
}

RankedTensorType mlir::merak::globalShardType(RankedTensorType local,
                                              const ShardLayout &layout) {
  SmallVector<int64_t> shape(local.getShape());
  shape[layout.axis] *= layout.parts;
  return RankedTensorType::get(shape, local.getElementType());
}
