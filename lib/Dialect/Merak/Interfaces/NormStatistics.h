//===- NormStatistics.h - norms over features split over ranks --*- C++ -*-===//
//
// The statistics of a layer or RMS norm whose normalised features are split
// over ranks (ShardingRuleOpInterface's canSplitStatistics and
// splitStatistics; see NormStatistics.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_DIALECT_MERAK_INTERFACES_NORMSTATISTICS_H
#define MERAK_LIB_DIALECT_MERAK_INTERFACES_NORMSTATISTICS_H

#include "merak/Dialect/Merak/IR/MerakOps.h"

namespace mlir::merak {
using SumOverRanks = llvm::function_ref<Value(OpBuilder &, Value)>;

/// A split of dimension `dim` of operand `operand` is one of the input's
/// (operand 0) normalised dimensions [axis, rank).
bool canSplitNormStatistics(Value input, int64_t axis, unsigned operand, int64_t dim);

/// The norm from local sums made whole by `sum` (its operands already local).
Value splitNormStatistics(LayerNormOp op, OpBuilder &b, int64_t parts, SumOverRanks sum);
Value splitNormStatistics(RmsNormOp op, OpBuilder &b, int64_t parts, SumOverRanks sum);
} // namespace mlir::merak

#endif
