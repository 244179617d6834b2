//===- StageBalance.h - where merak-pipeline cuts the model -----*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_ANALYSIS_STAGEBALANCE_H
#define MERAK_DIALECT_MERAK_ANALYSIS_STAGEBALANCE_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::merak {

/// The `pp` - 1 cut points (indices into `candidates`, the positions in the
/// program where a stage may end; `bytes[i]` cross candidate i) that split
/// the program's `n` ops into `pp` stages: balanced compute first, then few
/// bytes sent. `prefix[k]` is the cost of ops [0, k). The cuts allowed are
/// those sending at most a threshold of bytes; the threshold is the smallest
/// of the candidates' byte counts at which the most expensive stage costs
/// at most 5% more than with every candidate allowed. A transformer's block
/// boundaries (the residual stream) thus win over the logits, while a model
/// that narrows (an MLP ending in fewer classes, a CNN's pooling) is still
/// cut evenly at its wider activations.
SmallVector<int64_t> chooseStageCuts(ArrayRef<int64_t> candidates, ArrayRef<int64_t> bytes,
                                     ArrayRef<int64_t> prefix, int64_t n, int64_t pp);

/// The `costs` (one per piece, in order) in `groups` contiguous groups, cut
/// as chooseStageCuts cuts (balanced sums first, then few bytes sent;
/// `bytes[i]` cross the boundary after piece i): the first piece of every
/// group, then the number of pieces (groups + 1 entries). The planner
/// groups its fine stages so.
SmallVector<int64_t> balanceGroups(ArrayRef<int64_t> costs, ArrayRef<int64_t> bytes,
                                   int64_t groups);

} // namespace mlir::merak

#endif
