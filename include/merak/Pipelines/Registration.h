//===- Registration.h - everything the merak tools register -----*- C++ -*-===//
#ifndef MERAK_PIPELINES_REGISTRATION_H
#define MERAK_PIPELINES_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::merak {

/// Dialects merak IR uses (merak, func, and what later phases add).
void registerMerakDialects(DialectRegistry &registry);
/// Every merak pass and pipeline, plus the upstream passes merak uses.
void registerAllMerakPasses();

} // namespace mlir::merak

#endif
