//===- MemoryPlan.h - Reading merak-plan-memory's results -------*- C++ -*-===//
//
// merak-plan-memory records where every value of the planned function lives
// as attributes (see Passes.td); code generation reads them back through
// these helpers so that the alias rules (reshape views, parameter and
// constant storage) live in one place.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_MEMORYPLAN_H
#define MERAK_DIALECT_MERAK_TRANSFORMS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Value.h"

namespace mlir::merak {

/// Attribute names written by merak-plan-memory.
inline constexpr llvm::StringLiteral kOffsetsAttr = "merak.offsets";
inline constexpr llvm::StringLiteral kOffsetAttr = "merak.offset";
inline constexpr llvm::StringLiteral kResultOffsetsAttr = "merak.result_offsets";
inline constexpr llvm::StringLiteral kArenaBytesAttr = "merak.arena_bytes";
inline constexpr llvm::StringLiteral kParamsBytesAttr = "merak.params_bytes";
/// Parameter storage below this offset has initial data; above it (the
/// zero-initialised optimizer state) starts as zeros.
inline constexpr llvm::StringLiteral kParamsInitBytesAttr = "merak.params_init_bytes";
inline constexpr llvm::StringLiteral kConstsBytesAttr = "merak.consts_bytes";
inline constexpr llvm::StringLiteral kCopyAttr = "merak.copy";
/// On a fused optimizer update (merak.adamw_update, ...): per result, the
/// operand whose buffer it is written into (an update in place), or -1.
inline constexpr llvm::StringLiteral kInPlaceAttr = "merak.in_place";

/// Every planned buffer starts at a multiple of this many bytes.
inline constexpr int64_t kBufferAlignment = 64;

/// Bytes per element of a tensor element type in generated programs (i1 is
/// one byte), or 0 when code generation does not support the type.
int64_t storageElementBytes(Type elementType);

/// Where a planned value lives.
struct PlannedBuffer {
  enum Region { Arena, Params, Consts } region = Arena;
  int64_t offset = 0;
};

/// The buffer of `value` in a function planned by merak-plan-memory
/// (following reshape views to their source); failure with a diagnostic
/// when the plan has no entry for it.
FailureOr<PlannedBuffer> getPlannedBuffer(Value value,
                                          SymbolTableCollection &symbols);

/// True for ops whose result is a view of their first operand and that emit
/// no code: `merak.reshape` and `merak.tp_identity`.
bool isViewOp(Operation *op);

/// `value` with view ops (isViewOp) and in-place update results
/// (kInPlaceAttr) followed back to the buffer they alias.
Value viewRoot(Value value);

/// Whether `root` (a viewRoot) is a buffer of its function's arena plan:
/// an argument or a computed value, not a started collective's request, a
/// constant or a parameter's storage read without a copy (kCopyAttr).
bool hasOwnArenaBuffer(Value root);

/// Pipeline fragments (kFragmentAttr): the arguments and results the
/// runner hands over in their own buffers on every target, which therefore
/// take no arena slot: arguments other than received activations and
/// gradients ("act:", "cot:", staged through the arena on a device) and
/// the step; results kept for a later fragment ("stash:", "rstash:",
/// "wstash:") of a fragment that does not read that kind itself, outside
/// the update (runtime/include/merak_rt/pipeline.h).
bool isInPlaceFragmentArg(func::FuncOp fragment, unsigned i);
bool isInPlaceFragmentResult(func::FuncOp fragment, unsigned i);

/// merak-plan-memory for several functions of one program (pipeline
/// fragments): parameter storage once, the constants of all of them in one
/// constant region, an arena plan per function (each from offset 0).
LogicalResult planMemory(ModuleOp module, ArrayRef<func::FuncOp> fns);

} // namespace mlir::merak

#endif
