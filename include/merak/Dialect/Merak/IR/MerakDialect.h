//===- MerakDialect.h - merak dialect ---------------------------*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_IR_MERAKDIALECT_H
#define MERAK_DIALECT_MERAK_IR_MERAKDIALECT_H

#include "mlir/IR/Dialect.h"

#include "merak/Dialect/Merak/IR/MerakOpsDialect.h.inc"

#endif
