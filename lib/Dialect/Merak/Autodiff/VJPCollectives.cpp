//===- VJPCollectives.cpp - VJP rules of the collective ops ---------------===//
//
// Megatron-LM's conjugate pair of tensor parallelism: f (merak.tp_identity)
// is the identity forward and sums the gradient over "tp" backward; g
// (merak.all_reduce, tp, sum) sums forward and is the identity backward,
// since everything after it is computed identically on every rank of the
// group, so the incoming gradient is already replicated. Over "dp" (sum)
// the ranks' losses differ (merak-sync-batch-norm's statistics), so the
// gradient is summed over the group too.
//
// Expert parallelism's dispatch and combine (merak-expert-parallel) are an
// all-gather and a reduce-scatter (sum) over "ep", each other's transpose:
// the gradient of an all-gather is the reduce-scatter (sum) of the incoming
// gradient (every rank's copy of a rank's rows contributed), that of a
// reduce-scatter the all-gather of the incoming parts. Its all-to-all
// dispatch and combine (merak.all_to_all) are likewise each other's
// transpose.
//
// Sequence parallelism (merak-sequence-parallel) splits the token rows
// between the tensor-parallel regions over "tp": a region ends in a
// reduce-scatter (gradient: the all-gather of the incoming rows), a
// replicated value is cut into its rows with local_shard (gradient: the
// all-gather), and a region starts from the all-gather of the rows
// (gradient: this rank's part of the replicated incoming gradient).
//
//===----------------------------------------------------------------------===//
#include "VJPRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::vjp;

namespace mlir::merak::vjp {

LogicalResult rule(AllReduceOp op, Emitter &e, ValueRange g, Grads &out) {
  if (op.getReduction() != "sum" || (op.getGroup() != "tp" && op.getGroup() != "dp"))
    return op.emitError("no derivative rule for merak.all_reduce over \"")
           << op.getGroup() << "\" with reduction \"" << op.getReduction()
           << "\" (only tp/sum and dp/sum are differentiated)";
  if (op.getGroup() == "tp") {
    out.assign(g.begin(), g.end());
    return success();
  }
  // dp (synchronised batch normalisation's sums): each rank's loss reads
  // the sum, so a rank's input reaches every rank's loss, and its gradient
  // is the sum over the ranks of theirs (the all-reduce again).
  SmallVector<Value> live, grads(g.size());
  for (Value v : g)
    if (v)
      live.push_back(v);
  if (live.empty()) {
    out.assign(grads.begin(), grads.end());
    return success();
  }
  auto summed = AllReduceOp::create(e.b, e.loc, live, "dp", "sum");
  for (size_t i = 0, k = 0; i < g.size(); ++i)
    if (g[i])
      grads[i] = summed.getResult(k++);
  out.assign(grads.begin(), grads.end());
  return success();
}

LogicalResult rule(TpIdentityOp op, Emitter &e, ValueRange g, Grads &out) {
  if (!g[0]) {
    out.assign({Value()});
    return success();
  }
  out.assign({AllReduceOp::create(e.b, e.loc, ValueRange{g[0]}, "tp", "sum").getResult(0)});
  return success();
}

LogicalResult rule(AllGatherOp op, Emitter &e, ValueRange g, Grads &out) {
  if (op.getGroup() == "tp") {
    // Sequence parallelism: what reads the gathered rows is computed alike
    // on every tp rank (or through tp_identity, whose gradient is summed),
    // so the incoming gradient is replicated and this rank's rows are its
    // part of it.
    out.clear();
    for (auto [in, grad] : llvm::zip(op.getInputs(), g))
      out.push_back(grad ? LocalShardOp::create(e.b, e.loc, in.getType(), grad, "tp").getResult()
                         : Value());
    return success();
  }
  if (op.getGroup() != "ep")
    return op.emitError("no derivative rule for merak.all_gather over \"")
           << op.getGroup() << "\" (only \"ep\" and \"tp\" are differentiated)";
  out.clear();
  for (auto [in, grad] : llvm::zip(op.getInputs(), g))
    out.push_back(grad && isa<FloatType>(cast<RankedTensorType>(in.getType()).getElementType())
                      ? ReduceScatterOp::create(e.b, e.loc, TypeRange{in.getType()},
                                                ValueRange{grad}, "ep", "sum")
                            .getResult(0)
                      : Value());
  return success();
}

LogicalResult rule(AllToAllOp op, Emitter &e, ValueRange g, Grads &out) {
  Value back;
  if (g[0])
    back = AllToAllOp::create(e.b, e.loc, op.getInput().getType(), g[0], op.getExperts(),
                              op.getGroupAttr(), op.getCombine() ? UnitAttr() : e.b.getUnitAttr(),
                              op.getExpertsPerRankAttr(), op.getShadowSlotsAttr(),
                              op.getHierarchicalAttr(), op.getCompactAttr());
  out.assign({back, Value()});
  return success();
}

/// Shadowing's broadcast and reduce are each other's transpose.
LogicalResult rule(ExpertShadowOp op, Emitter &e, ValueRange g, Grads &out) {
  Value back;
  if (g[0])
    back = ExpertShadowOp::create(e.b, e.loc, op.getInput().getType(), g[0], op.getSlots(),
                                  op.getGroupAttr(),
                                  op.getReduce() ? UnitAttr() : e.b.getUnitAttr(),
                                  op.getPartsAttr());
  out.assign({back, Value()});
  return success();
}

LogicalResult rule(ReduceScatterOp op, Emitter &e, ValueRange g, Grads &out) {
  if ((op.getGroup() != "ep" && op.getGroup() != "tp") || op.getReduction() != "sum")
    return op.emitError("no derivative rule for merak.reduce_scatter over \"")
           << op.getGroup() << "\" with reduction \"" << op.getReduction()
           << "\" (only ep/sum and tp/sum are differentiated)";
  out.clear();
  for (auto [in, grad] : llvm::zip(op.getInputs(), g))
    out.push_back(grad ? AllGatherOp::create(e.b, e.loc, TypeRange{in.getType()}, ValueRange{grad},
                                             op.getGroup())
                             .getResult(0)
                       : Value());
  return success();
}

/// A replicated value's rows (sequence parallelism): every rank's rows
/// reach the loss through that rank alone, so the value's gradient is the
/// all-gather of the ranks' parts.
LogicalResult rule(LocalShardOp op, Emitter &e, ValueRange g, Grads &out) {
  if (op.getGroup() != "tp")
    return op.emitError("no derivative rule for merak.local_shard over \"")
           << op.getGroup() << "\" (only \"tp\" is differentiated)";
  out.assign({g[0] ? AllGatherOp::create(e.b, e.loc, TypeRange{op.getInput().getType()},
                                         ValueRange{g[0]}, "tp")
                         .getResult(0)
                   : Value()});
  return success();
}

} // namespace mlir::merak::vjp
