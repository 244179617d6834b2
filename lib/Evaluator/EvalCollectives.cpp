//===- EvalCollectives.cpp - collectives in a group of one rank -----------===//
//
// The reference evaluator runs one process, so every collective runs in a
// group of one rank: group_rank is 0 and the collectives are the identity
// when they were built for one part.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

static void forwardOperands(Operands in, Results out) {
  for (const HostTensor *t : in)
    out.push_back(*t);
}

LogicalResult kernels::eval(GroupRankOp op, Operands, Results out) {
  out.push_back(HostTensor(cast<RankedTensorType>(op.getType()))); // rank 0 of one
  return success();
}

LogicalResult kernels::eval(TpIdentityOp, Operands in, Results out) {
  out.push_back(*in[0]); // Megatron's f: the identity forward
  return success();
}

LogicalResult kernels::eval(AllReduceOp, Operands in, Results out) {
  forwardOperands(in, out);
  return success();
}

/// One rank holds every expert: a combine is the identity, a dispatch
/// zeroes the rows of no expert this rank holds (ids outside [0,
/// experts_per_rank) are an error, as in the runtime).
LogicalResult kernels::eval(AllToAllOp op, Operands in, Results out) {
  if (op.getParts() != 1)
    return op.emitOpError("splits over ")
           << op.getParts() << " ranks; the reference evaluator runs one";
  // With one rank a shadow copy's id (expert_shadow_plan) is also this rank's.
  FailureOr<HostTensor> res =
      allToAllOnOneRank(op, *in[0], *in[1], op.getExpertsPerRank() + op.getShadowSlots(),
                        op.getCombine(), op.getCompact());
  if (failed(res))
    return failure();
  out.push_back(std::move(*res));
  return success();
}

FailureOr<HostTensor> kernels::allToAllOnOneRank(Operation *op, const HostTensor &x,
                                                 const HostTensor &ids, int64_t experts,
                                                 bool combine, std::optional<uint64_t> compact) {
  const int64_t rows = ids.getShape()[0], row = x.getShape()[0] ? x.size() / x.getShape()[0] : 0;
  SmallVector<int64_t> kept; // positional row -> compact row
  for (int64_t s = 0; s < rows; ++s) {
    int64_t e = ids.i()[s];
    if (e < -1 || e >= experts)
      return op->emitOpError("expert id ") << e << " of row " << s << " out of range [0, "
                                           << experts << ")";
    if (e != -1)
      kept.push_back(s);
  }
  const int64_t compactRows = compact ? static_cast<int64_t>(*compact) : 0;
  if (compact && static_cast<int64_t>(kept.size()) > compactRows)
    return op->emitOpError("") << kept.size() << " rows for " << compactRows << " compact rows";
  SmallVector<int64_t> shape(x.getShape());
  shape[0] = compact && !combine ? compactRows : rows;
  HostTensor res(RankedTensorType::get(shape, x.getType().getElementType()));
  for (int64_t k = 0; k < res.size(); ++k)
    res.setFromDouble(k, 0.0);
  // A dropped row is not sent: zero. Compact rows: kept row k at place k.
  for (auto [k, s] : llvm::enumerate(kept)) {
    const int64_t from = compact && combine ? (int64_t)k : s;
    const int64_t to = compact && !combine ? (int64_t)k : s;
    for (int64_t j = 0; j < row; ++j)
      res.setFromDouble(to * row + j, x.f()[from * row + j]);
  }
  return res;
}

/// This rank's rows' ids in order, then -1.
LogicalResult kernels::eval(ExpertCompactOp op, Operands in, Results out) {
  const HostTensor &ids = *in[0];
  const int64_t first = in[1]->i()[0], perRank = op.getExpertsPerRank();
  HostTensor res(cast<RankedTensorType>(op.getResult().getType()));
  const int64_t compact = res.getShape()[0];
  std::fill(res.i().begin(), res.i().end(), -1);
  int64_t c = 0;
  for (int64_t s = 0; s < ids.getShape()[0]; ++s)
    if (int64_t e = ids.i()[s]; e >= first && e < first + perRank) {
      if (c == compact)
        return op.emitOpError("more than the ") << compact << " compact rows are this rank's";
      res.i()[c++] = e;
    }
  out.push_back(std::move(res));
  return success();
}

/// One rank owns every expert: a broadcast copies the slots' matrices, a
/// reduce puts each slot back on its expert.
LogicalResult kernels::eval(ExpertShadowOp op, Operands in, Results out) {
  if (op.getParts() != 1)
    return op.emitOpError("splits over ")
           << op.getParts() << " ranks; the reference evaluator runs one";
  const HostTensor &x = *in[0], &slots = *in[1];
  HostTensor res(op.getType());
  const int64_t matrix = static_cast<int64_t>(res.f().size()) / res.getShape()[0];
  const int64_t experts = (op.getReduce() ? res : x).getShape()[0];
  for (int64_t j = 0; j < slots.getShape()[0]; ++j) {
    const int64_t e = slots.i()[j];
    if (e < -1 || e >= experts)
      return op.emitOpError("slot ") << j << " names expert " << e << ", out of range [0, "
                                     << experts << ")";
    if (e < 0)
      continue;
    const int64_t from = (op.getReduce() ? j : e) * matrix, to = (op.getReduce() ? e : j) * matrix;
    for (int64_t k = 0; k < matrix; ++k)
      res.f()[to + k] = x.f()[from + k];
  }
  out.push_back(std::move(res));
  return success();
}

/// The identity when `op` was built for one part; its other parts live on
/// ranks the evaluator cannot run.
static LogicalResult onePart(Operation *op, int64_t parts, Operands in, Results out) {
  if (parts != 1)
    return op->emitOpError("splits over ")
           << parts
           << " ranks; the reference evaluator runs one (compile with --dp 1 or "
              "without --zero to evaluate)";
  forwardOperands(in, out);
  return success();
}

#define MERAK_EVAL_PARTS(OP)                                                   \
  LogicalResult kernels::eval(OP op, Operands in, Results out) {               \
    return onePart(op, op.getParts(), in, out);                                \
  }
MERAK_EVAL_PARTS_OPS(MERAK_EVAL_PARTS)
#undef MERAK_EVAL_PARTS
