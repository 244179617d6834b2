//===- CallBuilder.h - Building runtime calls in EmitC ----------*- C++ -*-===//
//
// Helpers of merak-to-emitc: a buffer pointer per planned (region, offset),
// created once and reused, and `emitc.call_opaque` argument lists mixing
// those pointers with literal arguments (`Dims{...}`, enum values, numbers).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_CALLBUILDER_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_CALLBUILDER_H

#include "RuntimeKernels.h"

#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace mlir::merak::emitc_lowering {

/// `Dims{rank, {d0, d1, ...}}`, the runtime's shape literal.
std::string dimsLiteral(ArrayRef<int64_t> values);
/// The shape literal of a ranked tensor type.
std::string dimsOf(Type tensorType);
/// `DT::F32` etc. for a tensor (or element) type.
std::string dtypeOf(Type type);
/// A double literal that round-trips (and spells infinities).
std::string doubleLiteral(double v);
/// `Group::DP` etc. for a group attribute ("dp", "tp", "pp").
std::string groupLiteral(StringRef group);

/// Bytes of a ranked tensor type.
int64_t byteSize(Type tensorType);
/// Elements of a ranked tensor type.
int64_t numElements(Type tensorType);
/// `axis` (negative: from the end) of a ranked tensor type, counted from 0.
int64_t normAxis(int64_t axis, Type tensorType);

/// Emits into one EmitC function with the three region base pointers and,
/// for a pipeline fragment, the runtime's table of its inputs' and outputs'
/// buffers.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc, Value arena, Value params, Value consts,
          SymbolTableCollection &symbols)
      : b(b), loc(loc), bases{arena, params, consts}, symbols(symbols) {}

  /// The pointer to `value`'s planned buffer.
  FailureOr<Value> pointer(Value value);
  /// The pointer to (region, offset).
  Value pointer(PlannedBuffer buffer);

  /// A pipeline fragment's values that live outside A: `table` is its
  /// `char **IO` argument and `slots` maps a buffer's root value
  /// (viewRoot) to its entry. pointer() then gives `IO[slot]` for them.
  void setIo(Value table, llvm::DenseMap<Value, int64_t> slots) {
    io = table;
    ioSlots = std::move(slots);
  }
  /// `IO[slot]` (created once).
  Value ioPointer(int64_t slot);

  /// One call: `callee(args...)` where each argument is either a pointer
  /// operand or a literal.
  class Call {
  public:
    Call &ptr(Value p) {
      args.push_back(e.b.getIndexAttr(operands.size()));
      operands.push_back(p);
      return *this;
    }
    Call &lit(const std::string &text) {
      args.push_back(emitc::OpaqueAttr::get(e.b.getContext(), text));
      return *this;
    }
    Call &i64(int64_t v) { return lit(std::to_string(v)); }
    Call &f64(double v) { return lit(doubleLiteral(v)); }
    Call &boolean(bool v) { return lit(v ? "true" : "false"); }
    Call &dims(Type t) { return lit(dimsOf(t)); }
    Call &dims(ArrayRef<int64_t> v) { return lit(dimsLiteral(v)); }
    Call &dtype(Type t) { return lit(dtypeOf(t)); }
    /// The planned pointer of each value, a `nullptr` literal for a null
    /// one (an absent optional operand, or see readOrNull); failure after a
    /// diagnostic when a value has no planned buffer.
    LogicalResult ptrs(ArrayRef<Value> values);
    void emit();

  private:
    friend class Emitter;
    Call(Emitter &e, std::string callee) : e(e), callee(std::move(callee)) {}

    Emitter &e;
    std::string callee;
    SmallVector<Attribute> args;
    SmallVector<Value> operands;
  };
  /// A call of `kernel` (one of the kernels:: constants).
  Call call(Kernel kernel) {
    calledCollective |= kernel.collective;
    return Call(*this, calleePrefix + kernel.name);
  }

  /// `v`, or null when nothing reads it (a result the kernel may skip).
  static Value readOrNull(Value v) { return v.use_empty() ? Value() : v; }

  /// Prepended to every callee ("gpu::" for the CUDA target: a qualified
  /// call, so argument-dependent lookup cannot also find merak::rt::cpu's).
  std::string calleePrefix;
  /// Whether some call was of an entry point of merak_rt/collectives.h (the
  /// generated code then includes it).
  bool calledCollective = false;

  OpBuilder &b;
  Location loc;

private:
  Value bases[3];
  SymbolTableCollection &symbols;
  llvm::DenseMap<std::pair<int, int64_t>, Value> cache;
  Value io;
  llvm::DenseMap<Value, int64_t> ioSlots;
  llvm::DenseMap<int64_t, Value> ioCache;
};

} // namespace mlir::merak::emitc_lowering

#endif
