//===- LowerToRuntimeOpInterface.h - merak-to-emitc rules -------*- C++ -*-===//
//
// The interface through which merak-to-emitc lowers each op to runtime
// calls (LowerToRuntimeOpInterface.td). The rules, one per op, are external
// models that registerMerakToEmitCExternalModels attaches to the merak
// dialect's ops; the emitter and the lowering context they take are
// internal to lib/Conversion/MerakToEmitC.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_CONVERSION_MERAKTOEMITC_LOWERTORUNTIMEOPINTERFACE_H
#define MERAK_CONVERSION_MERAKTOEMITC_LOWERTORUNTIMEOPINTERFACE_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::merak {
namespace emitc_lowering {
class Emitter;
struct LoweringContext;

/// What a lowering rule did (besides failing after a diagnostic).
enum class Lowering {
  /// Emitted the op's calls (none for a view or a constant).
  Done,
  /// Emitted nothing: the target has no kernel for this op (merak-to-emitc
  /// reports every such op at once).
  NoKernel,
};
} // namespace emitc_lowering

/// Attaches the LowerToRuntimeOpInterface external models (one lowering
/// rule per op) to the merak dialect's ops.
void registerMerakToEmitCExternalModels(DialectRegistry &registry);
} // namespace mlir::merak

#include "merak/Conversion/MerakToEmitC/LowerToRuntimeOpInterface.h.inc"

#endif
