//===- AttentionOps.cpp - Lowering merak.attention and its gradient -------===//
#include "AttentionOps.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
/// Adds the pointer of each value to `call`; a result nobody reads (when
/// `unreadIsNull`) is a `nullptr` literal, which the kernels skip.
LogicalResult addPointers(Emitter &e, Emitter::Call &call, ValueRange values,
                          bool unreadIsNull = false) {
  for (Value v : values) {
    if (unreadIsNull && v.use_empty()) {
      call.lit("nullptr");
      continue;
    }
    FailureOr<Value> ptr = e.pointer(v);
    if (failed(ptr))
      return failure();
    call.ptr(*ptr);
  }
  return success();
}

int64_t keys(Value key) { return cast<RankedTensorType>(key.getType()).getShape().drop_back().back(); }
} // namespace

FailureOr<bool> mlir::merak::emitc_lowering::lowerAttention(Operation *op, Emitter &e,
                                                             bool &unsupported) {
  if (!isa<AttentionOp, AttentionGradOp>(op))
    return false;
  Value query = op->getOperand(0);
  if (!cast<RankedTensorType>(query.getType()).getElementType().isF32()) {
    unsupported = true; // the kernels are float32
    return true;
  }
  return llvm::TypeSwitch<Operation *, FailureOr<bool>>(op)
      .Case([&](AttentionOp a) -> FailureOr<bool> {
        auto call = e.call("attention");
        call.dtype(query.getType());
        if (failed(addPointers(e, call, {a.getQuery()})))
          return failure();
        call.dims(query.getType());
        if (failed(addPointers(e, call, {a.getKey(), a.getValue()})))
          return failure();
        call.i64(keys(a.getKey())).f64(a.getScale().convertToDouble()).boolean(a.getCausal());
        if (failed(addPointers(e, call, {a.getResult()})) ||
            failed(addPointers(e, call, {a.getLse()}, /*unreadIsNull=*/true)))
          return failure();
        call.emit();
        return true;
      })
      .Case([&](AttentionGradOp a) -> FailureOr<bool> {
        auto call = e.call("attentionGrad");
        call.dtype(query.getType());
        if (failed(addPointers(e, call, {a.getQuery()})))
          return failure();
        call.dims(query.getType());
        if (failed(addPointers(e, call, {a.getKey(), a.getValue()})))
          return failure();
        call.i64(keys(a.getKey()));
        if (failed(addPointers(e, call, {a.getResult(), a.getLse(), a.getGrad()})))
          return failure();
        call.f64(a.getScale().convertToDouble()).boolean(a.getCausal());
        if (failed(addPointers(e, call, a.getResults(), /*unreadIsNull=*/true)))
          return failure();
        call.emit();
        return true;
      });
}
