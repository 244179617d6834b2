//===- VJP.h - derivative rules of merak ops --------------------*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_AUTODIFF_VJP_H
#define MERAK_DIALECT_MERAK_AUTODIFF_VJP_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::merak {
/// Attaches the DifferentiableOpInterface external models (one VJP rule per
/// op) to the merak dialect's ops.
void registerVJPExternalModels(DialectRegistry &registry);
} // namespace mlir::merak

#endif
