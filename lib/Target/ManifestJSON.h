//===- ManifestJSON.h - Spellings shared by the manifest writers -*- C++ -*-===//
//
// The serial (ProgramData.cpp) and pipelined (PipelineProgram.cpp) manifest
// and data writers share these: manifest entries in the schema the runtime
// reads (runtime/include/merak_rt/manifest_schema.h; this target defines
// JSON_NOEXCEPTION and only writes it), and tensor data in storage layout.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_TARGET_MANIFESTJSON_H
#define MERAK_LIB_TARGET_MANIFESTJSON_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include "merak_rt/manifest_schema.h"

#include <string>
#include <vector>

namespace mlir::merak::target {

namespace schema = ::merak::rt::schema;

/// "F32", "BF16", "F64", "I64", "I32" or "BOOL" for a tensor or element
/// type.
inline std::string manifestDType(Type t) {
  Type e = isa<ShapedType>(t) ? cast<ShapedType>(t).getElementType() : t;
  if (e.isF32())
    return "F32";
  if (e.isBF16())
    return "BF16";
  if (e.isF64())
    return "F64";
  if (e.isInteger(64))
    return "I64";
  if (e.isInteger(32))
    return "I32";
  return "BOOL";
}

/// A ranked tensor type's shape.
inline std::vector<int64_t> manifestShape(Type t) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(t).getShape();
  return {shape.begin(), shape.end()};
}

/// An input's or output's entry: name, dtype, shape and offset.
/// An input's merak.index_limit (merak-record-index-limits), if any.
inline std::optional<int64_t> indexLimit(FunctionOpInterface fn, unsigned arg) {
  if (auto limit = fn.getArgAttrOfType<IntegerAttr>(arg, kIndexLimitAttr))
    return limit.getInt();
  return std::nullopt;
}

/// An input's merak.ignore_index (merak-attach-loss's labels), if any.
inline std::optional<int64_t> ignoreIndex(FunctionOpInterface fn, unsigned arg) {
  if (auto ignored = fn.getArgAttrOfType<IntegerAttr>(arg, kIgnoreIndexAttr))
    return ignored.getInt();
  return std::nullopt;
}

/// `fn`'s argument `arg` is a language model's token ids (./train reads them
/// from a token file and shifts them into the labels): [B, T] i64 or i32,
/// and the `labels` argument, when there is one, of the same shape. Ids of a
/// sequence classifier (labels [B]) are an array input like any other.
inline bool isTokenInput(FunctionOpInterface fn, unsigned arg) {
  auto type = cast<RankedTensorType>(fn.getArgumentTypes()[arg]);
  Type e = type.getElementType();
  if (type.getRank() != 2 || !(e.isInteger(64) || e.isInteger(32)))
    return false;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "merak.name");
        name && name.getValue() == "labels")
      return cast<RankedTensorType>(fn.getArgumentTypes()[i]).getShape() == type.getShape();
  return true;
}

inline schema::Tensor manifestTensor(std::string name, Type t, int64_t offset) {
  schema::Tensor e;
  e.name = std::move(name);
  e.dtype = manifestDType(t);
  e.shape = manifestShape(t);
  e.offset = offset;
  return e;
}

/// Writes the bytes of `attr` in storage layout (row-major, little endian,
/// i1 as one byte) to `os`, zero padded to `bytes`; parameter blobs go
/// straight from their resource. Failure after a diagnostic on `owner`.
LogicalResult writeElementData(Operation *owner, ElementsAttr attr, int64_t bytes,
                               llvm::raw_ostream &os);

/// A param's manifest entry: name, dtype, shape, offset, bytes; "kind" (its
/// merak.kind: state, scratch, hparam; else "trainable" when the step writes
/// it (`trained`), else "frozen"; an hparam's `key -> name` goes into
/// `program`'s hparams, a splat initial value into its defaults); a
/// tensor-parallel shard's "shard" and "global_shape"; ZeRO-1 state's
/// "zero" and "global_shape". Failure after a diagnostic when a shard lies
/// below `initBytes` (the initialised storage).
FailureOr<schema::Tensor> manifestParam(ParamOp p, const llvm::StringSet<> &trained,
                                        int64_t initBytes, schema::Program &program);

/// A sharded param's full initial tensor, which every rank copies its shard
/// out of: unless zero-initialised (optimizer state), written to `os` at
/// data offset `written` (advanced past its slot) and recorded in `entry`'s
/// "data_offset" and "data_bytes".
LogicalResult writeShardData(ParamOp p, schema::Tensor &entry, int64_t &written,
                             llvm::raw_ostream &os);

/// Bytes of a tensor of type `t` in storage layout.
inline int64_t tensorBytes(Type t) {
  auto r = cast<RankedTensorType>(t);
  return r.getNumElements() * storageElementBytes(r.getElementType());
}

/// Bytes a tensor of type `t` occupies in an arena or the parameter
/// storage: its storage size rounded up to kBufferAlignment (at least one
/// alignment unit).
int64_t slotBytes(Type t);

/// Appends the kernel ops of `fn` (merak-to-emitc's opMark order) to the
/// manifest's "ops" (names) and "op_keys" (shape keys).
void addKernelOps(func::FuncOp fn, schema::Program &manifest);

/// Adds the placement tables of `fn`'s merak.expert_place ops (once per
/// table) to the manifest's "moe".
void addExpertTables(func::FuncOp fn, schema::Program &manifest);

/// Writes the initial data of the parameters planned below `initBytes` (the
/// initialised part of the parameter storage), in offset order, each padded
/// to its slot; checks that they tile [0, initBytes) exactly.
LogicalResult writeInitialParams(ModuleOp module, int64_t initBytes, llvm::raw_ostream &os);

} // namespace mlir::merak::target

#endif
