//===- CollectiveRules.cpp - Lowering collectives -------------------------===//
//
// The blocking collectives (one *Bucket call per bucket of tensors, as
// (in, out, count) triples), group_rank and local_shard, and the started
// ones: merak.*_start takes the lowest free request slot of the function
// (LoweringContext.h) and passes (in, count) pairs, merak.wait frees it.
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

int32_t RequestSlots::acquire(Value request) {
  int32_t slot = 0;
  while (slot < (int32_t)busy.size() && busy[slot])
    ++slot;
  if (slot == (int32_t)busy.size())
    busy.push_back(false);
  busy[slot] = true;
  slotOf[request] = slot;
  return slot;
}

int32_t RequestSlots::release(Value request) {
  auto it = slotOf.find(request);
  if (it == slotOf.end())
    return -1;
  int32_t slot = it->second;
  busy[slot] = false;
  slotOf.erase(it);
  return slot;
}

namespace {
/// `CollReduce::...` of a reduction attribute (max only where `allowMax`).
std::string reduceLiteral(StringRef reduction, bool allowMax) {
  if (reduction == "mean")
    return "CollReduce::Mean";
  return allowMax && reduction == "max" ? "CollReduce::Max" : "CollReduce::Sum";
}

/// The element type all tensors of a bucket share.
Type bucketElementType(ValueRange inputs) {
  return cast<RankedTensorType>(inputs[0].getType()).getElementType();
}

/// Appends one (in, out, count) triple per tensor of a blocking collective;
/// `count` is the input's elements, or the output's when `outputCount`
/// (reduce-scatter: the count of one part).
LogicalResult addTriples(Emitter::Call &call, Emitter &e, Operation *op, ValueRange inputs,
                         ValueRange outputs, bool outputCount) {
  Type elem = bucketElementType(inputs);
  for (auto [in, out] : llvm::zip(inputs, outputs)) {
    if (cast<RankedTensorType>(in.getType()).getElementType() != elem)
      return op->emitOpError("operands of one bucket must share an element type");
    PTR(pi, in);
    PTR(po, out);
    call.ptr(pi).ptr(po).i64(numElements((outputCount ? out : in).getType()));
  }
  return success();
}

/// Appends (pointer, count) pairs of a started collective's inputs: the
/// whole tensor, or one of `divide` parts of it (reduce-scatter).
LogicalResult addPairs(Emitter::Call &call, Emitter &e, Operation *op, ValueRange inputs,
                       int64_t divide) {
  Type elem = bucketElementType(inputs);
  for (Value in : inputs) {
    auto t = cast<RankedTensorType>(in.getType());
    if (t.getElementType() != elem)
      return op->emitOpError("operands of one bucket must share an element type");
    PTR(p, in);
    call.ptr(p).i64(t.getNumElements() / divide);
  }
  return success();
}

/// Emits `call` once its tensors are appended.
FailureOr<Lowering> emitIf(LogicalResult appended, Emitter::Call &call) {
  if (failed(appended))
    return failure();
  call.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(AllReduceOp a, Emitter &e, LoweringContext &) {
  auto call = e.call(kernels::allReduceBucket);
  call.lit(groupLiteral(a.getGroup())).lit(reduceLiteral(a.getReduction(), true))
      .dtype(bucketElementType(a.getInputs()));
  return emitIf(addTriples(call, e, a, a.getInputs(), a.getResults(), false), call);
}

FailureOr<Lowering> emitc_lowering::rule(ReduceScatterOp r, Emitter &e, LoweringContext &) {
  auto call = e.call(kernels::reduceScatterBucket);
  call.lit(groupLiteral(r.getGroup())).lit(reduceLiteral(r.getReduction(), false))
      .dtype(bucketElementType(r.getInputs())).i64(r.getParts());
  return emitIf(addTriples(call, e, r, r.getInputs(), r.getResults(), true), call);
}

FailureOr<Lowering> emitc_lowering::rule(AllGatherOp g, Emitter &e, LoweringContext &) {
  auto call = e.call(kernels::allGatherBucket);
  call.lit(groupLiteral(g.getGroup())).dtype(bucketElementType(g.getInputs()))
      .i64(g.getParts());
  return emitIf(addTriples(call, e, g, g.getInputs(), g.getResults(), false), call);
}

FailureOr<Lowering> emitc_lowering::rule(AllToAllOp a, Emitter &e, LoweringContext &) {
  PTR(x, a.getInput());
  PTR(ids, a.getExperts());
  PTR(y, a.getResult());
  auto in = cast<RankedTensorType>(a.getInput().getType());
  e.call(kernels::expertAllToAll).lit(groupLiteral(a.getGroup())).dtype(in)
      .boolean(a.getCombine()).i64(a.getParts()).ptr(ids).i64(a.getLocalRows())
      .i64(in.getDimSize(1)).i64(a.getExpertsPerRank()).i64(a.getShadowSlots()).ptr(x).ptr(y)
      .boolean(a.getHierarchical()).i64(static_cast<int64_t>(a.getCompact().value_or(0)))
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ExpertShadowOp a, Emitter &e, LoweringContext &) {
  PTR(x, a.getInput());
  PTR(slots, a.getSlots());
  PTR(y, a.getResult());
  auto in = cast<RankedTensorType>(a.getInput().getType());
  auto weights = cast<RankedTensorType>((a.getReduce() ? a.getResult() : a.getInput()).getType());
  const int64_t slotCount = cast<RankedTensorType>(a.getSlots().getType()).getDimSize(0);
  e.call(kernels::expertShadow).lit(groupLiteral(a.getGroup())).dtype(in)
      .boolean(a.getReduce()).i64(a.getParts()).ptr(slots).i64(slotCount).i64(weights.getDimSize(0))
      .i64(weights.getNumElements() / weights.getDimSize(0)).ptr(x).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(GroupRankOp g, Emitter &e, LoweringContext &) {
  PTR(y, g.getResult());
  e.call(kernels::groupRank).lit(groupLiteral(g.getGroup())).ptr(y).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(LocalShardOp l, Emitter &e, LoweringContext &) {
  PTR(x, l.getInput());
  PTR(y, l.getResult());
  Type r0 = l.getType();
  e.call(kernels::localShard).lit(groupLiteral(l.getGroup())).dtype(r0).i64(l.getParts())
      .ptr(x).ptr(y).i64(numElements(r0)).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(AllReduceStartOp a, Emitter &e, LoweringContext &ctx) {
  auto call = e.call(kernels::allReduceStart);
  call.i64(ctx.requests.acquire(a->getResult(0))).lit(groupLiteral(a.getGroup()))
      .lit(reduceLiteral(a.getReduction(), true)).dtype(bucketElementType(a.getInputs()));
  return emitIf(addPairs(call, e, a, a.getInputs(), 1), call);
}

FailureOr<Lowering> emitc_lowering::rule(ReduceScatterStartOp r, Emitter &e,
                                         LoweringContext &ctx) {
  auto call = e.call(kernels::reduceScatterStart);
  call.i64(ctx.requests.acquire(r->getResult(0))).lit(groupLiteral(r.getGroup()))
      .lit(reduceLiteral(r.getReduction(), false)).dtype(bucketElementType(r.getInputs()))
      .i64(r.getParts());
  return emitIf(addPairs(call, e, r, r.getInputs(), r.getParts()), call);
}

FailureOr<Lowering> emitc_lowering::rule(AllGatherStartOp g, Emitter &e, LoweringContext &ctx) {
  auto call = e.call(kernels::allGatherStart);
  call.i64(ctx.requests.acquire(g->getResult(0))).lit(groupLiteral(g.getGroup()))
      .dtype(bucketElementType(g.getInputs())).i64(g.getParts());
  return emitIf(addPairs(call, e, g, g.getInputs(), 1), call);
}

FailureOr<Lowering> emitc_lowering::rule(AllToAllStartOp a, Emitter &e, LoweringContext &ctx) {
  PTR(x, a.getInput());
  PTR(ids, a.getExperts());
  auto in = cast<RankedTensorType>(a.getInput().getType());
  const int64_t idRows = cast<RankedTensorType>(a.getExperts().getType()).getDimSize(0);
  e.call(kernels::expertAllToAllStart).i64(ctx.requests.acquire(a->getResult(0)))
      .lit(groupLiteral(a.getGroup())).dtype(in).boolean(a.getCombine()).i64(a.getParts())
      .ptr(ids).i64(idRows / a.getParts()).i64(in.getDimSize(1)).i64(a.getExpertsPerRank())
      .i64(a.getShadowSlots()).ptr(x).i64(static_cast<int64_t>(a.getCompact().value_or(0)))
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(WaitOp wait, Emitter &e, LoweringContext &ctx) {
  int32_t slot = ctx.requests.release(wait.getRequest());
  if (slot < 0)
    return wait.emitOpError("merak-to-emitc: its start was not lowered before it");
  auto call = e.call(kernels::collectiveWait);
  call.i64(slot);
  return emitIf(call.ptrs(llvm::to_vector_of<Value>(wait.getResults())), call);
}
