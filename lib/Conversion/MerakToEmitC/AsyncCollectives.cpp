//===- AsyncCollectives.cpp - Lowering started collectives ----------------===//
#include "AsyncCollectives.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/ADT/TypeSwitch.h"

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

bool emitc_lowering::isAsyncCollective(Operation *op) {
  return isa<AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp, WaitOp>(op);
}

namespace {
std::string groupLiteral(StringRef g) {
  return g == "dp" ? "Group::DP" : g == "tp" ? "Group::TP" : "Group::PP";
}

/// Appends (pointer, count) pairs of `inputs`: the whole tensor, or one of
/// `parts` parts of it (reduce-scatter).
LogicalResult addPairs(Emitter::Call &call, Emitter &e, Operation *op, ValueRange inputs,
                       int64_t divide) {
  Type elem = cast<RankedTensorType>(inputs[0].getType()).getElementType();
  for (Value in : inputs) {
    auto t = cast<RankedTensorType>(in.getType());
    if (t.getElementType() != elem)
      return op->emitOpError("operands of one bucket must share an element type");
    FailureOr<Value> p = e.pointer(in);
    if (failed(p))
      return failure();
    call.ptr(*p).i64(t.getNumElements() / divide);
  }
  return success();
}
} // namespace

FailureOr<bool> emitc_lowering::lowerAsyncCollective(Operation *op, Emitter &e,
                                                     RequestSlots &slots) {
  if (!isAsyncCollective(op))
    return false;
  if (auto wait = dyn_cast<WaitOp>(op)) {
    int32_t slot = slots.release(wait.getRequest());
    if (slot < 0)
      return op->emitOpError("merak-to-emitc: its start was not lowered before it"), failure();
    auto call = e.call("collectiveWait");
    call.i64(slot);
    for (Value r : wait.getResults()) {
      FailureOr<Value> p = e.pointer(r);
      if (failed(p))
        return failure();
      call.ptr(*p);
    }
    call.emit();
    return true;
  }
  Value request = op->getResult(0);
  Type elem = cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  int32_t slot = slots.acquire(request);
  LogicalResult ok =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](AllReduceStartOp a) {
            auto call = e.call("allReduceStart");
            call.i64(slot).lit(groupLiteral(a.getGroup()))
                .lit(a.getReduction() == "mean"  ? "CollReduce::Mean"
                     : a.getReduction() == "max" ? "CollReduce::Max"
                                                 : "CollReduce::Sum")
                .dtype(elem);
            if (failed(addPairs(call, e, op, a.getInputs(), 1)))
              return failure();
            call.emit();
            return success();
          })
          .Case([&](ReduceScatterStartOp r) {
            auto call = e.call("reduceScatterStart");
            call.i64(slot).lit(groupLiteral(r.getGroup()))
                .lit(r.getReduction() == "mean" ? "CollReduce::Mean" : "CollReduce::Sum")
                .dtype(elem).i64(r.getParts());
            if (failed(addPairs(call, e, op, r.getInputs(), r.getParts())))
              return failure();
            call.emit();
            return success();
          })
          .Case([&](AllGatherStartOp g) {
            auto call = e.call("allGatherStart");
            call.i64(slot).lit(groupLiteral(g.getGroup())).dtype(elem).i64(g.getParts());
            if (failed(addPairs(call, e, op, g.getInputs(), 1)))
              return failure();
            call.emit();
            return success();
          })
          .Default([](Operation *) { return failure(); });
  if (failed(ok))
    return failure();
  return true;
}
