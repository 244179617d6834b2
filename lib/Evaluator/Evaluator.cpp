//===- Evaluator.cpp - interpreter over merak IR --------------------------===//
#include "merak/Evaluator/Evaluator.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/EvaluableOpInterface.h"
#include "Kernels.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::merak;

/// The error for a uint64 value the int64 storage cannot hold.
static LogicalResult uint64TooLarge(Operation *op, const Twine &what) {
  return op->emitError("unsupported: ")
         << what
         << " holds a uint64 value of 2^63 or more (the reference evaluator computes with "
            "int64)";
}

LogicalResult mlir::merak::evaluateOp(Operation *op, ArrayRef<const HostTensor *> in,
                                      SmallVectorImpl<HostTensor> &out) {
  auto e = dyn_cast<EvaluableOpInterface>(op);
  if (!e)
    return op->emitError("the reference evaluator does not support '")
           << op->getName() << "'";
  if (failed(e.evaluate(in, out)))
    return failure();
  for (auto [i, t] : llvm::enumerate(out))
    if (!t.isRepresentable())
      return uint64TooLarge(op, "result " + Twine(i));
  return success();
}

FailureOr<SmallVector<HostTensor>>
mlir::merak::evaluateFunction(func::FuncOp func, ArrayRef<HostTensor> inputs,
                              ParamStore *store) {
  ParamStore local;
  if (!store)
    store = &local;
  if (func.getNumArguments() != inputs.size())
    return func.emitError("expected ") << func.getNumArguments()
                                       << " inputs, got " << inputs.size(),
           failure();
  if (!func.getBody().hasOneBlock())
    return func.emitError("function must have a single block"), failure();
  llvm::DenseMap<Value, HostTensor> env;
  for (auto [arg, t] : llvm::zip(func.getArguments(), inputs)) {
    if (arg.getType() != t.getType())
      return func.emitError("input ") << arg.getArgNumber() << " has type "
                                      << t.getType() << ", expected "
                                      << arg.getType(),
             failure();
    if (!t.isRepresentable())
      return uint64TooLarge(func, "input " + Twine(arg.getArgNumber())), failure();
    env[arg] = t;
  }
  ModuleOp module = func->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  // Operands of started collectives, yielded by their merak.wait.
  llvm::DenseMap<Value, SmallVector<HostTensor>> started;
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<HostTensor> results;
      for (Value v : ret.getOperands())
        results.push_back(env.lookup(v));
      return results;
    }
    SmallVector<HostTensor> results;
    auto current = [&](StringRef name, Operation *user) -> HostTensor * {
      auto it = store->find(name);
      if (it != store->end())
        return &it->second;
      auto param = symbols.lookup<ParamOp>(name);
      if (!param)
        return user->emitError("unknown parameter"), nullptr;
      if (param->hasAttr(kShardAttr))
        return param.emitError("the evaluator runs one process and cannot run a "
                               "tensor-parallel shard; evaluate the program before "
                               "merak-tensor-parallel"),
               nullptr;
      auto t = HostTensor::fromAttr(param.getInitialValue());
      if (failed(t))
        return param.emitError("cannot read initial value"), nullptr;
      HostTensor &slot = (*store)[name];
      slot = std::move(*t);
      return &slot;
    };
    if (auto get = dyn_cast<GetParamOp>(op)) {
      HostTensor *t = current(get.getName(), get);
      if (!t)
        return failure();
      results.push_back(*t);
    } else if (auto set = dyn_cast<SetParamOp>(op)) {
      HostTensor *t = current(set.getName(), set);
      auto it = env.find(set.getValue());
      if (!t || it == env.end())
        return set.emitError("cannot update the parameter"), failure();
      *t = it->second;
    } else if (isa<AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp, AllToAllStartOp>(
                   op)) {
      // One process is a group of one rank: the wait yields the operands.
      if (auto parts = op.getAttrOfType<IntegerAttr>("parts"); parts && parts.getInt() != 1)
        return op.emitOpError("splits over ")
                   << parts.getInt()
                   << " ranks; the reference evaluator runs one (compile with --dp 1 or "
                      "without --zero to evaluate)",
               failure();
      SmallVector<HostTensor> &held = started[op.getResult(0)];
      if (auto a2a = dyn_cast<AllToAllStartOp>(op)) { // (its routing ids are no result)
        FailureOr<HostTensor> rows = kernels::allToAllOnOneRank(
            &op, env.lookup(a2a.getInput()), env.lookup(a2a.getExperts()),
            a2a.getExpertsPerRank() + a2a.getShadowSlots(), a2a.getCombine(), a2a.getCompact());
        if (failed(rows))
          return failure();
        held.push_back(std::move(*rows));
      } else {
        for (Value v : op.getOperands())
          held.push_back(env.lookup(v));
      }
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      results = started.lookup(wait.getRequest());
      started.erase(wait.getRequest());
    } else {
      SmallVector<const HostTensor *> operands;
      for (Value v : op.getOperands()) {
        auto it = env.find(v);
        if (it == env.end())
          return op.emitError("operand is not defined before use"), failure();
        operands.push_back(&it->second);
      }
      if (failed(evaluateOp(&op, operands, results)))
        return failure();
    }
    for (auto [res, t] : llvm::zip(op.getResults(), results))
      env[res] = std::move(t);
    // Drop values whose last use is this op to bound memory.
    for (Value v : op.getOperands())
      if (llvm::all_of(v.getUsers(), [&](Operation *u) {
            return u->getBlock() == op.getBlock() && !op.isBeforeInBlock(u) ;
          }))
        env.erase(v);
  }
  return func.emitError("function has no return"), failure();
}

/// The largest splat operand foldWithEvaluator expands (2^24 elements,
/// 128 MiB as doubles) when its results are small.
static constexpr int64_t kMaxSplatOperand = int64_t(1) << 24;

namespace {
thread_local int64_t gEvaluationStep = 0;
} // namespace

int64_t mlir::merak::evaluationStep() { return gEvaluationStep; }

ScopedEvaluationStep::ScopedEvaluationStep(int64_t step) : previous(gEvaluationStep) {
  gEvaluationStep = step;
}

ScopedEvaluationStep::~ScopedEvaluationStep() { gEvaluationStep = previous; }

FailureOr<SmallVector<Attribute>>
mlir::merak::foldWithEvaluator(Operation *op, int64_t maxElements) {
  if (op->getNumRegions() || isa<ConstantOp>(op) || !isa<MerakDialect>(op->getDialect()) ||
      !isMemoryEffectFree(op))
    return failure();
  for (Value r : op->getResults()) {
    auto t = dyn_cast<RankedTensorType>(r.getType());
    if (!t || !t.hasStaticShape() || t.getNumElements() > maxElements)
      return failure();
  }
  SmallVector<HostTensor> operands;
  for (Value v : op->getOperands()) {
    ElementsAttr attr;
    if (!matchPattern(v, m_Constant(&attr)))
      return failure();
    // A splat holds one value for any size (ConstantOfShape of a declared
    // shape); a small result (a reduction) does not bound what evaluating it
    // would expand. Dense operands are bounded by the bytes they came from.
    if (attr.isSplat() && attr.getNumElements() > std::max(maxElements, kMaxSplatOperand))
      return failure();
    auto t = HostTensor::fromAttr(attr);
    if (failed(t))
      return failure();
    operands.push_back(std::move(*t));
  }
  SmallVector<const HostTensor *> ptrs;
  for (auto &t : operands)
    ptrs.push_back(&t);
  SmallVector<HostTensor> results;
  {
    // A fold that would fail at run time (an index out of range) is simply
    // not folded; the error is reported when the program runs.
    ScopedDiagnosticHandler silence(op->getContext(),
                                    [](Diagnostic &) { return success(); });
    if (failed(evaluateOp(op, ptrs, results)))
      return failure();
  }
  SmallVector<Attribute> attrs;
  for (auto &t : results)
    attrs.push_back(t.toAttr());
  return attrs;
}
