//===- MerakToEmitC.h - Code generation helpers -----------------*- C++ -*-===//
#ifndef MERAK_CONVERSION_MERAKTOEMITC_H
#define MERAK_CONVERSION_MERAKTOEMITC_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <string>

namespace mlir::merak {
/// The names of the ops of a planned function that emit kernel calls, in
/// the order merak-to-emitc numbers them in its opMark(i) calls (the
/// manifest's "ops", for traces).
SmallVector<std::string> kernelOpNames(func::FuncOp fn);
} // namespace mlir::merak

#endif
