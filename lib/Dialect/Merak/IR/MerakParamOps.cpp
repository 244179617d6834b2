//===- MerakParamOps.cpp - verifiers of param, get_param and set_param ----===//
//
// A parameter's declared (local) type against its initial value, with the
// tensor-parallel shard layout (merak.shard, padded or not) and the ZeRO-1
// layout (merak.zero) that relate them; reads and writes against the
// declared type.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::merak;


LogicalResult ParamOp::verify() {
  auto type = getTensorType();
  if (Attribute zero = (*this)->getAttr(kZeroAttr)) {
    std::optional<ZeroLayout> layout = getZeroLayout(zero);
    if (!layout)
      return emitOpError("malformed ") << kZeroAttr << " " << zero
                                       << " (expected {parts >= 1, shape = array<i64>})";
    if (type.getRank() != 1 || type.getDimSize(0) != layout->partSize())
      return emitOpError("a ZeRO shard of ")
             << layout->numElements() << " elements over " << layout->parts
             << " parts must have type "
             << RankedTensorType::get({layout->partSize()}, type.getElementType()) << ", got "
             << type;
  }
  if (Attribute shard = (*this)->getAttr(kShardAttr)) {
    std::optional<ShardLayout> layout = getShardLayout(*this);
    // ZeRO state of a tensor-parallel shard: merak.zero's shape is the
    // local shard; the initial value is the part (zeros).
    auto local = type;
    if (std::optional<ZeroLayout> zero = getZeroLayout((*this)->getAttr(kZeroAttr)))
      local = RankedTensorType::get(zero->shape, type.getElementType());
    if (!layout || layout->axis < 0 || layout->axis >= local.getRank() ||
        layout->parts < 1 || layout->blocks < 1)
      return emitOpError("malformed ") << kShardAttr << " " << shard
                                       << " (expected #merak.shard<axis, blocks, parts> with the "
                                          "axis within the rank)";
    int64_t n = local.getDimSize(layout->axis);
    if (layout->size && (layout->blocks != 1 || layout->size < 1 ||
                         layout->size > n * layout->parts))
      return emitOpError("padded shard size ")
             << layout->size << " does not fit " << layout->parts << " shards of " << n
             << " (one block)";
    if (!layout->blockSizes.empty()) {
      // Blocks of their own lengths, each cut into `parts`.
      int64_t total = 0;
      bool divides = (int64_t)layout->blockSizes.size() == layout->blocks && !layout->size;
      for (int64_t len : layout->blockSizes) {
        divides &= len > 0 && len % layout->parts == 0;
        total += len;
      }
      if (!divides || total != n * layout->parts)
        return emitOpError("shard block sizes [")
               << llvm::make_range(layout->blockSizes.begin(), layout->blockSizes.end())
               << "] must be " << layout->blocks << " lengths, each divisible by " << layout->parts
               << ", summing to " << n * layout->parts << " (the full shard dimension "
               << layout->axis << ")";
    } else if (local.getDimSize(layout->axis) % layout->blocks != 0)
      return emitOpError("shard dimension ") << layout->axis << " (local size "
             << local.getDimSize(layout->axis) << ") does not divide into "
             << layout->blocks << " blocks";
    if (local == type)
      type = globalShardType(type, *layout);
  }
  if (getInitialValue().getType() != type)
    return emitOpError("initial value type ")
           << getInitialValue().getType() << " does not match " << type;
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' does not name a merak.param";
  if (param.getType() != getType())
    return emitOpError("result type ") << getType()
           << " does not match parameter type " << param.getType();
  return success();
}

LogicalResult SetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' does not name a merak.param";
  if (param.getType() != getValue().getType())
    return emitOpError("value type ") << getValue().getType()
           << " does not match parameter type " << param.getType();
  return success();
}

bool mlir::merak::isBuffer(ParamOp param) {
  auto kind = param->getAttrOfType<StringAttr>(kKindAttr);
  return kind && kind.getValue() == kBufferKind;
}

llvm::StringSet<> mlir::merak::frozenParamNames(ModuleOp module) {
  llvm::StringSet<> names;
  for (ParamOp p : module.getOps<ParamOp>())
    if (auto kind = p->getAttrOfType<StringAttr>(kKindAttr);
        kind && (kind.getValue() == "frozen" || kind.getValue() == kBufferKind))
      names.insert(p.getSymName());
  return names;
}

FailureOr<FrozenParams> FrozenParams::get(ModuleOp module, ArrayRef<std::string> globs,
                                          std::string &error) {
  FrozenParams f;
  f.patterns = std::make_shared<const std::vector<std::string>>(globs.begin(), globs.end());
  for (const std::string &pattern : *f.patterns) {
    auto glob = llvm::GlobPattern::create(pattern);
    if (!glob) {
      error = "bad --frozen pattern '" + pattern + "': " + llvm::toString(glob.takeError());
      return failure();
    }
    f.globs.push_back(std::move(*glob));
  }
  f.kinds = frozenParamNames(module);
  return f;
}

bool FrozenParams::contains(StringRef name) const {
  return kinds.contains(name) ||
         llvm::any_of(globs, [&](const llvm::GlobPattern &g) { return g.match(name); });
}
