//===- AttentionOps.h - Lowering merak.attention and its gradient -*- C++ -*-===//
//
// merak-to-emitc's part for merak.attention / attention_grad: one runtime
// call each (cpu::attention / attentionGrad, or the gpu:: entry points of
// the same names, the flash kernels), a null pointer for a result nobody
// reads; float64 attention (the evaluator's gradient checks) has no kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_ATTENTIONOPS_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_ATTENTIONOPS_H

#include "CallBuilder.h"

namespace mlir::merak::emitc_lowering {

/// Emits the runtime call of an attention op: failure after a diagnostic,
/// false when `op` is not one; `unsupported` set for a non-float32 one.
FailureOr<bool> lowerAttention(Operation *op, Emitter &e, bool &unsupported);

} // namespace mlir::merak::emitc_lowering

#endif
