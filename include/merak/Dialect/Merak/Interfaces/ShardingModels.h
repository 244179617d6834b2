//===- ShardingModels.h - attach the per-op sharding rules ------*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_INTERFACES_SHARDINGMODELS_H
#define MERAK_DIALECT_MERAK_INTERFACES_SHARDINGMODELS_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::merak {
/// Attaches the ShardingRuleOpInterface external models (one factor rule
/// per op, lib/Dialect/Merak/Interfaces/ShardingModels.cpp).
void registerShardingRuleExternalModels(DialectRegistry &registry);
} // namespace mlir::merak

#endif
