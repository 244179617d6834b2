//===- Registration.h - everything the merak tools register -----*- C++ -*-===//
#ifndef MERAK_TOOLS_REGISTRATION_H
#define MERAK_TOOLS_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::merak {

/// Dialects merak IR uses (merak, func, and what later phases add).
void registerMerakDialects(DialectRegistry &registry);
/// Every merak pass and pipeline, plus the upstream passes merak uses.
void registerAllMerakPasses();

/// The clean-up that follows import: fold shape arithmetic, canonicalise,
/// CSE, fuse decomposed LayerNorm/GELU, drop parameters nothing reads.
void buildImportCleanupPipeline(OpPassManager &pm);

} // namespace mlir::merak

#endif
