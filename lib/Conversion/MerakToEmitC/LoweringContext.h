//===- LoweringContext.h - What merak-to-emitc's rules share ----*- C++ -*-===//
//
// The state of one function being lowered that the per-op rules
// (LowerToRuntimeOpInterface) read or update besides the emitter: the
// symbol tables, the target, and the request slots of started collectives.
// Each merak.*_start gets a request slot of the runtime
// (merak_rt/collectives.h), the lowest one free at that point of the
// function, freed again at its wait, so the runtime's slot table is as
// large as the most collectives ever in flight at once.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_LOWERINGCONTEXT_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_LOWERINGCONTEXT_H

#include "RuntimeKernels.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

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

struct LoweringContext {
  LoweringContext(SymbolTableCollection &symbols, bool cuda) : symbols(symbols), cuda(cuda) {}

  /// Whether the target has no entry point `kernel` (a CPU-only one on CUDA).
  bool lacks(Kernel kernel) const { return cuda && kernel.cpuOnly; }

  SymbolTableCollection &symbols;
  /// --target cuda (merak::rt::gpu) rather than cpu.
  const bool cuda;
  RequestSlots requests;
};

} // namespace mlir::merak::emitc_lowering

#endif
