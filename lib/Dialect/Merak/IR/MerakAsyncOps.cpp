//===- MerakAsyncOps.cpp - started collectives and merak.wait -------------===//
//
// Verifiers of the non-blocking collectives merak-overlap builds: a start
// op's request has exactly one use, the merak.wait of the same block that
// follows it, and that wait yields what the blocking collective would.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
LogicalResult verifyGroup(Operation *op, StringRef group) {
  if (!isMeshGroup(group))
    return op->emitOpError("group must be ") << kMeshGroups << ", got \"" << group << "\"";
  return success();
}

/// `types` with the leading dimension multiplied (all_gather) or divided
/// (reduce_scatter) by `parts`; failure when an operand has no leading
/// dimension or it does not divide.
FailureOr<SmallVector<Type>> scaleLeading(Operation *op, TypeRange types, int64_t parts,
                                          bool gather) {
  if (parts < 1)
    return op->emitOpError("parts must be positive, got ") << parts;
  SmallVector<Type> out;
  for (Type t : types) {
    auto r = cast<RankedTensorType>(t);
    if (r.getRank() == 0)
      return op->emitOpError("operands need a leading dimension");
    SmallVector<int64_t> shape(r.getShape());
    if (!gather && shape[0] % parts != 0)
      return op->emitOpError("operand leading dimension ")
             << shape[0] << " does not divide by parts = " << parts;
    shape[0] = gather ? shape[0] * parts : shape[0] / parts;
    out.push_back(RankedTensorType::get(shape, r.getElementType()));
  }
  return out;
}

/// The checks every start op shares: operands, one element type, and the
/// request's single use by a merak.wait later in the same block.
/// `bucket`: the operands are one bucket of tensors (one element type);
/// an all-to-all's are its rows and their routing ids.
LogicalResult verifyStart(Operation *op, StringRef group, bool bucket = true) {
  if (failed(verifyGroup(op, group)))
    return failure();
  if (op->getNumOperands() == 0)
    return op->emitOpError("needs at least one operand");
  Type elem = cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  for (Value v : op->getOperands())
    if (bucket && cast<RankedTensorType>(v.getType()).getElementType() != elem)
      return op->emitOpError("operands of one bucket must share an element type");
  Value request = op->getResult(0);
  if (!request.hasOneUse() || !isa<WaitOp>(*request.user_begin()))
    return op->emitOpError("request must have exactly one use, a merak.wait");
  Operation *wait = *request.user_begin();
  if (wait->getBlock() != op->getBlock())
    return op->emitOpError("the merak.wait must be in the same block");
  return success();
}
} // namespace

#define MERAK_START_COMMON(Op)                                                 \
  WaitOp Op::getWait() { return cast<WaitOp>(*getRequest().user_begin()); }

MERAK_START_COMMON(AllReduceStartOp)
MERAK_START_COMMON(ReduceScatterStartOp)
MERAK_START_COMMON(AllGatherStartOp)
MERAK_START_COMMON(AllToAllStartOp)
#undef MERAK_START_COMMON

SmallVector<Type> AllReduceStartOp::getCompletedTypes() {
  return SmallVector<Type>(getInputs().getTypes());
}

SmallVector<Type> ReduceScatterStartOp::getCompletedTypes() {
  FailureOr<SmallVector<Type>> t =
      scaleLeading(*this, getInputs().getTypes(), getParts(), /*gather=*/false);
  return succeeded(t) ? *t : SmallVector<Type>();
}

SmallVector<Type> AllGatherStartOp::getCompletedTypes() {
  FailureOr<SmallVector<Type>> t =
      scaleLeading(*this, getInputs().getTypes(), getParts(), /*gather=*/true);
  return succeeded(t) ? *t : SmallVector<Type>();
}

/// A dispatch yields one row per routing id ([parts * S, K] from [S, K]); a
/// combine the rows of this rank ([S, K] from [parts * S, K]).
SmallVector<Type> AllToAllStartOp::getCompletedTypes() {
  auto in = cast<RankedTensorType>(getInput().getType());
  const int64_t ids = cast<RankedTensorType>(getExperts().getType()).getDimSize(0);
  SmallVector<int64_t> shape(in.getShape());
  shape[0] = getCombine() ? ids / std::max<int64_t>(1, getParts())
                          : static_cast<int64_t>(getCompact().value_or(ids));
  return {RankedTensorType::get(shape, in.getElementType())};
}

LogicalResult AllToAllStartOp::verify() {
  if (failed(verifyStart(*this, getGroup(), /*bucket=*/false)))
    return failure();
  auto in = cast<RankedTensorType>(getInput().getType());
  auto ids = cast<RankedTensorType>(getExperts().getType());
  const int64_t parts = getParts(), rows = in.getRank() == 2 ? in.getDimSize(0) : -1;
  if (rows < 0 || ids.getRank() != 1)
    return emitOpError("expects rows [S, K] and one routing id per row of the group (rank 1)");
  if (parts < 1 || static_cast<int64_t>(getExpertsPerRank()) < 1 ||
      static_cast<int64_t>(getShadowSlots()) < 0)
    return emitOpError("parts and experts_per_rank must be at least 1, shadow_slots >= 0");
  const int64_t compact = static_cast<int64_t>(getCompact().value_or(0));
  if (getCompact() && (compact < 1 || getShadowSlots() != 0))
    return emitOpError("compact rows must be at least 1, without shadow slots");
  if (getCompact() && getCombine() && rows != compact)
    return emitOpError("the combine's ") << rows << " rows are not its " << compact
                                         << " compact rows";
  if (!(getCompact() && getCombine()) &&
      (getCombine() ? ids.getDimSize(0) != rows : ids.getDimSize(0) != parts * rows))
    return emitOpError("the ") << ids.getDimSize(0) << " routing ids do not match "
                               << (getCombine() ? "the combine's " : "the dispatch's ") << rows
                               << " rows over " << parts << " parts";
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  StringRef red = getReduction();
  if (red != "sum" && red != "mean" && red != "max")
    return emitOpError("reduction must be \"sum\", \"mean\" or \"max\", got \"") << red << "\"";
  return verifyStart(*this, getGroup());
}

LogicalResult ReduceScatterStartOp::verify() {
  StringRef red = getReduction();
  if (red != "sum" && red != "mean")
    return emitOpError("reduction must be \"sum\" or \"mean\", got \"") << red << "\"";
  if (failed(verifyStart(*this, getGroup())))
    return failure();
  return scaleLeading(*this, getInputs().getTypes(), getParts(), false);
}

LogicalResult AllGatherStartOp::verify() {
  if (failed(verifyStart(*this, getGroup())))
    return failure();
  return scaleLeading(*this, getInputs().getTypes(), getParts(), true);
}

LogicalResult WaitOp::verify() {
  Operation *start = getRequest().getDefiningOp();
  if (!start ||
      !isa<AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp, AllToAllStartOp>(start))
    return emitOpError("request must come from a merak collective start op");
  if (start->getBlock() != (*this)->getBlock() || !start->isBeforeInBlock(*this))
    return emitOpError("must follow its start op in the same block");
  SmallVector<Type> expected =
      llvm::TypeSwitch<Operation *, SmallVector<Type>>(start)
          .Case<AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp, AllToAllStartOp>(
              [](auto s) { return s.getCompletedTypes(); });
  if (expected.size() != getNumResults())
    return emitOpError("yields ") << getNumResults() << " results, but its collective has "
                                  << start->getNumOperands() << " operands";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(expected, getResultTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError("result ") << i << " has type " << std::get<1>(pair)
                                    << ", but the collective yields " << std::get<0>(pair);
  return success();
}
