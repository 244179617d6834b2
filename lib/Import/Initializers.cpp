//===- Initializers.cpp - ONNX initializers as parameters or constants ----===//
//
// The graph's initializers: indexed by name, then imported as merak.param
// (trainable state: floats of more than one element, and one-element ones
// named like module state) or merak.constant, large values as dense
// resources (mapped from external data where possible); and the parameters
// TorchScript's de-duplication of equal values wrote as Identity nodes.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

/// Small values inline, values of one repeated element as splats (an
/// export's zero initial state, `torch.zeros` of a baked shape: patterns
/// see a splat constant, and it takes no space), larger ones as resources.
ElementsAttr GraphImporter::makeElements(const HostTensor &t, StringRef hint) {
  if (t.size() <= 16)
    return t.toAttr();
  std::vector<char> bytes = t.toBytes();
  RankedTensorType type = t.getType();
  size_t width = bytes.size() / t.size();
  if (!type.getElementType().isInteger(1) && width > 0 && isRepeatedElement(bytes, width))
    return DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes.data(), width));
  return makeResource(type, bytes, hint);
}

/// Large values become dense resources: never spelled out in textual IR.
/// With `mapped` (external data: the file range `bytes` views) the blob
/// keeps the mapping instead of a copy, so that the weights are in memory
/// once (as file pages) however large the model.
ElementsAttr GraphImporter::makeResource(RankedTensorType type, ArrayRef<char> bytes,
                                         StringRef hint,
                                         std::unique_ptr<llvm::MemoryBuffer> mapped) {
  size_t align = std::max<int64_t>(HostTensor::elementBytes(type.getElementType()), 1);
  AsmResourceBlob blob;
  if (mapped && reinterpret_cast<uintptr_t>(bytes.data()) % align == 0) {
    std::shared_ptr<llvm::MemoryBuffer> owner(std::move(mapped));
    blob = AsmResourceBlob(
        bytes, align, [owner](void *, size_t, size_t) mutable { owner.reset(); },
        /*dataIsMutable=*/false);
  } else {
    blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, align);
  }
  std::string key = hint.empty() ? std::string("merak_const") : hint.str();
  for (char &c : key)
    if (!isalnum(c) && c != '_')
      c = '_';
  return DenseResourceElementsAttr::get(type, key, std::move(blob));
}

LogicalResult GraphImporter::indexInitializers() {
  for (const auto &init : graph.initializer()) {
    Location loc = NameLoc::get(StringAttr::get(ctx, init.name()), fileLoc);
    if (init.name().empty())
      return fail(loc, "initializer without a name");
    if (initializers.count(init.name()))
      return fail(loc, "duplicate initializer name '" + init.name() + "'");
    if (init.name() == kEntryName)
      return fail(loc, "initializer name '" + init.name() +
                           "' collides with merak's entry function @" + kEntryName);
    initializers[init.name()] = &init;
  }
  return success();
}

/// A float initializer of more than one element is a parameter. One of one
/// element may be a trained scalar (Apertus's xIELU alphas, CLIP's
/// logit_scale, nn.PReLU's single slope) or a constant (a folded scale, a
/// buffer such as an epsilon): it is a parameter when named like module
/// state (a dotted path, as torch names parameters and buffers, not
/// "onnx::Mul_7" or "val_3") and, in a dynamo export, when an FX node reads
/// it as a parameter (`%p_...`; buffers stay constants). A TorchScript
/// export does not say which module state is a buffer: those train unless
/// --frozen, as buffers of more elements do.
bool GraphImporter::isParameter(StringRef name, RankedTensorType type) const {
  if (!isa<FloatType>(type.getElementType()))
    return false;
  if (type.getNumElements() != 1)
    return type.getNumElements() > 1;
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  auto identifier = [](StringRef s) {
    return !s.empty() && llvm::all_of(s, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  };
  if (parts.size() < 2 || !llvm::all_of(parts, identifier))
    return false;
  return fromDynamo ? isExportParameter(name) : true;
}

/// Initializers that something reads: parameters (isParameter) become
/// merak.param + merak.get_param, the rest (integers, constants) constants.
LogicalResult GraphImporter::importInitializers(func::FuncOp func) {
  builder.setInsertionPointToStart(&func.getBody().front());
  for (onnx::TensorProto &init : *graph.mutable_initializer()) {
    Location loc = NameLoc::get(StringAttr::get(ctx, init.name()), fileLoc);
    if (!consumed.contains(init.name()))
      continue;
    std::string err;
    auto raw = decodeTensorRaw(ctx, init, baseDir, err);
    if (failed(raw))
      return fail(loc, err);
    RankedTensorType type = raw->type;
    if (isParameter(init.name(), type)) {
      OpBuilder pb(ctx);
      pb.setInsertionPoint(func);
      params[init.name()] =
          ParamOp::create(pb, loc, pb.getStringAttr(init.name()), TypeAttr::get(type),
                          makeResource(type, raw->bytes, init.name(), std::move(raw->file)));
      // The blob owns a copy or the mapping now; drop the proto's (raw->bytes
      // views it).
      raw->bytes = {};
      std::string().swap(*init.mutable_raw_data()); // clear() keeps capacity
      values[init.name()] =
          GetParamOp::create(builder, loc, type, FlatSymbolRefAttr::get(ctx, init.name()));
    } else {
      auto t = HostTensor::fromBytes(type, raw->bytes);
      values[init.name()] = ConstantOp::create(builder, loc, makeElements(*t, init.name()));
    }
  }

  return success();
}

/// torch.onnx.export de-duplicates parameters with equal initial values by
/// emitting one initializer and `Identity` nodes for the others. Those are
/// distinct trainable parameters, so each Identity output becomes its own
/// merak.param named after it, starting from the same value. (An Identity
/// that is an initializer's only reader is a plain alias: importNodes leaves
/// it to the Identity rule, which keeps the initializer's own name.)
LogicalResult GraphImporter::importIdentityParam(const onnx::NodeProto &node) {
  auto src = values[node.input(0)].getDefiningOp<GetParamOp>();
  ParamOp srcParam = params.lookup(src.getName());
  const std::string &name = node.output(0);
  if (name.empty())
    return success(); // an unused output: nothing to name
  Location loc = NameLoc::get(StringAttr::get(ctx, name), fileLoc);
  OpBuilder pb(ctx);
  pb.setInsertionPointAfter(srcParam);
  params[name] = ParamOp::create(pb, loc, pb.getStringAttr(name), srcParam.getTypeAttr(),
                                 srcParam.getInitialValue());
  values[name] =
      GetParamOp::create(builder, loc, srcParam.getTensorType(), FlatSymbolRefAttr::get(ctx, name));
  return success();
}
