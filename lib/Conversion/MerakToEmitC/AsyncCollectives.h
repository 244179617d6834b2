//===- AsyncCollectives.h - Lowering started collectives --------*- C++ -*-===//
//
// merak-to-emitc's part for merak.*_start and merak.wait: each start gets a
// request slot of the runtime (merak_rt/collectives.h), the lowest one free
// at that point of the function, freed again at its wait, so the runtime's
// slot table is as large as the most collectives ever in flight at once.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_ASYNCCOLLECTIVES_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_ASYNCCOLLECTIVES_H

#include "CallBuilder.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::merak::emitc_lowering {

/// The request slots of one function, assigned in program order.
class RequestSlots {
public:
  /// The lowest free slot, now taken by `request`.
  int32_t acquire(Value request);
  /// The slot of `request`, freed; -1 when it has none.
  int32_t release(Value request);
  /// Whether some collective is in flight.
  bool inFlight() const { return !slotOf.empty(); }

private:
  SmallVector<bool> busy;
  llvm::DenseMap<Value, int32_t> slotOf;
};

/// Emits the runtime call of a start op or merak.wait: failure after a
/// diagnostic, false when `op` is neither.
FailureOr<bool> lowerAsyncCollective(Operation *op, Emitter &e, RequestSlots &slots);

/// Whether `op` is a started collective or merak.wait.
bool isAsyncCollective(Operation *op);

} // namespace mlir::merak::emitc_lowering

#endif
