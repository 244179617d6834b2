//===- ShardingRule.h - how an op's dimensions follow each other -*- C++ -*-===//
//
// A sharding rule describes an op's iteration space as *factors* (in the
// spirit of GSPMD's and Shardy's per-op rules): every dimension of every
// operand and result is a product of factors, listed major to minor. A
// factor is
//  - parallel: it appears in results (and in the operands that have it);
//    splitting it splits those dimensions alike, with no communication;
//  - reduction: it appears in operands only and is summed over (a
//    contraction's K, reduce_sum's axes); splitting it leaves every rank a
//    partial sum of the results;
//  - combined: it appears in operands only and is reduced over by something
//    other than a sum (reduce_max/min/prod, argmax, a mean loss);
//    splitting it leaves every rank the reduction of its own part, which
//    only a data split (the batch, whose rows are independent samples) may
//    keep as it is;
//  - mean: combined by a mean (reduce_mean): as combined for a data split;
//    split into p equal parts, the sum of the parts' means over the ranks
//    divided by p is the whole mean (tensor parallelism's partial sum);
//  - replicated: it cannot be split (a softmax's axis, a layer norm's
//    normalised dimensions, a slice's sliced dimension).
// A broadcast dimension of size 1 has no factor. The passes that split
// values (merak-tensor-parallel; the batch and expert axes) read the rule
// of each op through ShardingRuleOpInterface and never list op kinds; the
// rules are attached to the ops in lib/Dialect/Merak/Interfaces.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_INTERFACES_SHARDINGRULE_H
#define MERAK_DIALECT_MERAK_INTERFACES_SHARDINGRULE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::merak {

enum class FactorKind { Parallel, Reduction, Combined, Mean, Replicated };

struct ShardingRule {
  struct Factor {
    int64_t size;
    FactorKind kind;
  };
  /// The factors of one dimension, major to minor (empty: a broadcast 1).
  using DimFactors = SmallVector<unsigned, 2>;
  using TensorFactors = SmallVector<DimFactors, 4>;

  SmallVector<Factor> factors;
  SmallVector<TensorFactors> operands, results;

  /// A factor whose positions a tensor's values are (`value` numbers an
  /// operand or a result, by the list it is in).
  struct Positions {
    unsigned factor;
    unsigned value;
  };
  /// Factors read or written at the positions an operand holds: a
  /// gather's table axis, a scatter's result axis (at its indices).
  SmallVector<Positions, 1> addressedBy;
  /// Results that hold positions along a factor: argsort's, along its axis.
  SmallVector<Positions, 1> positionsIn;

  /// A split of a dimension viewed as [blocks, parts, n / (blocks * parts)]
  /// (rank r holds part r of every block) expressed on the dimension's
  /// factors: the split `factor`, itself viewed as [blocks, parts, ...].
  struct FactorSplit {
    unsigned factor;
    int64_t blocks;
  };
  /// Where a split of `dim` of `tensor` (an operand's or result's factors)
  /// with `blocks` falls: the factor holding the flat position `blocks`
  /// of the dimension. Fails when the position is inside a factor rather
  /// than at a multiple of its stride.
  std::optional<FactorSplit> locate(const TensorFactors &tensor, int64_t dim,
                                    int64_t blocks) const;
  /// The dimension of `tensor` holding `split.factor` and the blocks it
  /// has there (the product of the factors before it, times the split's
  /// blocks); nullopt when `tensor` has no such factor.
  std::optional<std::pair<int64_t, int64_t>> find(const TensorFactors &tensor,
                                                  FactorSplit split) const;
  /// For a split that `locate` put on a replicated factor with blocks 1:
  /// the dimension's blocks that would put it on the next factor (a fused
  /// projection split into equal parts), or 0.
  int64_t blocksPastReplicated(const TensorFactors &tensor, int64_t dim,
                               FactorSplit split) const;

  // Builders of the common rules.
  /// Every result dimension a parallel factor; operands broadcast numpy-style
  /// (right-aligned, size-1 dimensions without a factor).
  static ShardingRule elementwise(Operation *op);
  /// `elementwise`, with the result dimensions in `replicated` (negative:
  /// from the end) unsplittable.
  static ShardingRule elementwiseExcept(Operation *op, ArrayRef<int64_t> replicated);
  /// Result dim i is operand dim perm[i].
  static ShardingRule permutation(Operation *op, ArrayRef<int64_t> perm);
  /// A row-major reshape: the common refinement of the two shapes. A run of
  /// dimensions between two boundaries the shapes share that has none
  /// ([B, 31, 16] -> [B, 16, 31]) gets a replicated factor per dimension,
  /// on each side; fails only for empty tensors.
  static std::optional<ShardingRule> reshape(Operation *op);
};

} // namespace mlir::merak

#endif
