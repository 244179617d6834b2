//===- OptimizerUpdates.h - Lowering the fused optimizer updates -*- C++ -*-===//
//
// merak-to-emitc's part for merak.adamw_update, adan_update and sgd_update:
// one runtime call per op (cpu::adamwUpdate / adanUpdate / sgdUpdate, or
// the gpu:: entry points of the same names), a null pointer for an absent
// clip coefficient or momentum buffer.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_OPTIMIZERUPDATES_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_OPTIMIZERUPDATES_H

#include "CallBuilder.h"

namespace mlir::merak::emitc_lowering {

/// Emits the runtime call of a fused optimizer update: failure after a
/// diagnostic, false when `op` is not one.
FailureOr<bool> lowerOptimizerUpdate(Operation *op, Emitter &e);

} // namespace mlir::merak::emitc_lowering

#endif
