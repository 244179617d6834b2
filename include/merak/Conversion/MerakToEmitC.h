//===- MerakToEmitC.h - Code generation helpers -----------------*- C++ -*-===//
#ifndef MERAK_CONVERSION_MERAKTOEMITC_H
#define MERAK_CONVERSION_MERAKTOEMITC_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <string>

namespace mlir::merak {
/// The ops of a planned function that emit kernel calls, in the order
/// merak-to-emitc numbers them in its opMark(i) calls (the manifest's "ops"
/// name them for traces, its "op_keys" give their shape keys for
/// --profile-ops).
SmallVector<Operation *> kernelOps(func::FuncOp fn);

/// Replaces the module's contents by EmitC: one `extern "C" void
/// name(char *A, char *P, const char *C)` per (planned function, name), in
/// order, their opMark indices numbered consecutively across them (what
/// merak-to-emitc does for one function named merak_train_step). `target`
/// "cpu" calls merak::rt::cpu, "cuda" merak::rt::gpu. With `fragmentIo`
/// (pipeline fragments) each takes a fourth argument `char **IO`: argument
/// i is read from IO[i] and result j written to IO[arguments + j] (see
/// runtime/include/merak_rt/pipeline.h).
LogicalResult lowerToEmitC(ModuleOp module, ArrayRef<std::pair<func::FuncOp, std::string>> fns,
                           StringRef target = "cpu", bool fragmentIo = false);
} // namespace mlir::merak

#endif
