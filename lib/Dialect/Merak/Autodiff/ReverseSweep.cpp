//===- ReverseSweep.cpp - reverse-mode accumulation over a block ----------===//
//
// The one reverse sweep of merak: merak-autodiff differentiates @loss with
// it, merak-pipeline each stage's forward. Only values on a path from a
// source (a block argument or a trainable parameter's read) to a seed get
// gradients; every op on such a path contributes through its
// DifferentiableOpInterface rule, and a value's gradients are summed.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Autodiff/ReverseSweep.h"

#include "llvm/ADT/MapVector.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::merak;

LogicalResult mlir::merak::buildReverseSweep(OpBuilder &b, Block &body,
                                             ArrayRef<std::pair<Value, Value>> seeds,
                                             ArrayRef<Value> sourceArgs, StringRef pass,
                                             llvm::function_ref<bool(StringRef)> trainable,
                                             llvm::DenseMap<Value, Value> &argGrads,
                                             llvm::StringMap<Value> &paramGrads) {
  // Values on a path from a source to a seed need gradients.
  llvm::DenseSet<Value> fromSource(sourceArgs.begin(), sourceArgs.end()), toSeed;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    ops.push_back(&op);
    auto get = dyn_cast<GetParamOp>(op);
    bool reached = (get && trainable(get.getName())) ||
                   llvm::any_of(op.getOperands(), [&](Value v) { return fromSource.contains(v); });
    if (reached)
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          fromSource.insert(r);
  }
  for (auto &seed : seeds)
    toSeed.insert(seed.first);
  for (Operation *op : llvm::reverse(ops))
    if (llvm::any_of(op->getResults(), [&](Value r) { return toSeed.contains(r); }))
      for (Value v : op->getOperands())
        if (isFloatTensor(v))
          toSeed.insert(v);
  auto needed = [&](Value v) { return fromSource.contains(v) && toSeed.contains(v); };

  // Every op kind on the path from a trainable value to the loss that has no
  // derivative rule, reported at once (not one per compile).
  llvm::MapVector<OperationName, SmallVector<Operation *>> missing;
  for (Operation *op : ops)
    if (!isa<GetParamOp>(op) && !isa<DifferentiableOpInterface>(op) &&
        llvm::any_of(op->getOperands(), needed) && llvm::any_of(op->getResults(), needed))
      missing[op->getName()].push_back(op);
  if (!missing.empty()) {
    auto diag = missing.front().second.front()->emitError(pass)
                << ": no derivative rule for " << missing.size()
                << " op kind(s) on the path to the loss:";
    for (auto &[name, uses] : missing)
      diag << " '" << name << "' (" << uses.size() << "x)";
    for (auto &[name, uses] : missing)
      diag.attachNote(uses.front()->getLoc()) << "first '" << name << "' here";
    return failure();
  }

  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    auto [it, inserted] = grads.try_emplace(v, g);
    if (!inserted)
      it->second = AddOp::create(b, g.getLoc(), it->second, g);
  };
  for (auto &[v, g] : seeds)
    if (needed(v))
      accumulate(v, g);
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = needed(r) ? grads.lookup(r) : Value();
      resultGrads.push_back(g);
      any |= (bool)g;
    }
    if (!any)
      continue;
    if (auto get = dyn_cast<GetParamOp>(op)) {
      auto [it, inserted] = paramGrads.try_emplace(get.getName(), resultGrads[0]);
      if (!inserted)
        it->second = AddOp::create(b, get.getLoc(), it->second, resultGrads[0]);
      continue;
    }
    if (!llvm::any_of(op->getOperands(), needed))
      continue;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff)
      return op->emitError(pass) << ": no derivative rule for '" << op->getName() << "'";
    SmallVector<Value> operandGrads;
    if (failed(diff.buildVJP(b, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitError(pass) << ": rule returned " << operandGrads.size()
                                 << " gradients for " << op->getNumOperands() << " operands";
    for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!g || !needed(v))
        continue;
      if (g.getType() != v.getType()) // a rule's bug: say so, do not abort
        return op->emitError(pass) << ": internal error: the derivative rule of '"
                                   << op->getName() << "' gave a gradient of type "
                                   << g.getType() << " for an operand of type " << v.getType();
      accumulate(v, g);
    }
  }
  for (Value a : sourceArgs)
    if (Value g = grads.lookup(a))
      argGrads[a] = g;
  return success();
}
