//===- Evaluator.cpp - interpreter over merak IR --------------------------===//
#include "merak/Evaluator/Evaluator.h"
#include "Kernels.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

LogicalResult mlir::merak::evaluateOp(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ConstantOp>([&](ConstantOp c) -> LogicalResult {
        auto t = HostTensor::fromAttr(c.getValue());
        if (failed(t))
          return c.emitError("cannot read constant value");
        out.push_back(std::move(*t));
        return success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp, RemOp, PowOp, MaxOp, MinOp, EqOp, NeOp, LtOp,
            LeOp, GtOp, GeOp, AndOp, OrOp, XorOp>(
          [&](Operation *o) { return evalBinary(o, in, out); })
      .Case<WhereOp>([&](WhereOp o) { return evalWhere(o, in, out); })
      .Case<ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, ErfOp, SigmoidOp,
            ReciprocalOp, SinOp, CosOp, FloorOp, CeilOp, ReluOp, NegOp, AbsOp,
            SignOp, NotOp, GeluOp, LeakyReluOp, ClampOp>(
          [&](Operation *o) { return evalUnary(o, in, out); })
      .Case<CastOp>([&](CastOp o) { return evalCast(o, in, out); })
      .Case<ReshapeOp>([&](ReshapeOp o) { return evalReshape(o, in, out); })
      .Case<BroadcastOp>([&](BroadcastOp o) { return evalBroadcast(o, in, out); })
      .Case<TransposeOp>([&](TransposeOp o) { return evalTranspose(o, in, out); })
      .Case<SliceOp>([&](SliceOp o) { return evalSlice(o, in, out); })
      .Case<ConcatOp>([&](ConcatOp o) { return evalConcat(o, in, out); })
      .Case<SplitOp>([&](SplitOp o) { return evalSplit(o, in, out); })
      .Case<GatherOp>([&](GatherOp o) { return evalGather(o, in, out); })
      .Case<GatherGradOp>([&](GatherGradOp o) { return evalGatherGrad(o, in, out); })
      .Case<GatherElementsOp>(
          [&](GatherElementsOp o) { return evalGatherElements(o, in, out); })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp>(
          [&](Operation *o) { return evalReduce(o, in, out); })
      .Case<ArgMaxOp>([&](ArgMaxOp o) {
        return evalArg(o, o.getAxis(), o.getKeepdims(), o.getSelectLastIndex(),
                       /*min=*/false, in, out);
      })
      .Case<ArgMinOp>([&](ArgMinOp o) {
        return evalArg(o, o.getAxis(), o.getKeepdims(), o.getSelectLastIndex(),
                       /*min=*/true, in, out);
      })
      .Case<SoftmaxOp>([&](SoftmaxOp o) {
        return evalSoftmax(o, o.getAxis(), /*log=*/false, in, out);
      })
      .Case<LogSoftmaxOp>([&](LogSoftmaxOp o) {
        return evalSoftmax(o, o.getAxis(), /*log=*/true, in, out);
      })
      .Case<CumSumOp>([&](CumSumOp o) { return evalCumSum(o, in, out); })
      .Case<LayerNormOp>([&](LayerNormOp o) { return evalLayerNorm(o, in, out); })
      .Case<RmsNormOp>([&](RmsNormOp o) { return evalRmsNorm(o, in, out); })
      .Case<BatchNormOp>([&](BatchNormOp o) { return evalBatchNorm(o, in, out); })
      .Case<CrossEntropyOp>(
          [&](CrossEntropyOp o) { return evalCrossEntropy(o, in, out); })
      .Case<MatmulOp>([&](MatmulOp o) { return evalMatmul(o, in, out); })
      .Case<Conv2DOp>([&](Conv2DOp o) { return evalConv2D(o, in, out); })
      .Case<MaxPool2DOp>([&](MaxPool2DOp o) { return evalMaxPool(o, in, out); })
      .Case<AvgPool2DOp>([&](AvgPool2DOp o) { return evalAvgPool(o, in, out); })
      .Case<DropoutOp>([&](DropoutOp o) { return evalDropout(o, in, out); })
      .Case<GroupRankOp>([&](GroupRankOp o) {
        out.push_back(HostTensor(cast<RankedTensorType>(o.getType()))); // rank 0 of one
        return success();
      })
      .Case<TpIdentityOp>([&](TpIdentityOp) {
        out.push_back(*in[0]); // Megatron's f: the identity forward
        return success();
      })
      .Case<AllReduceOp>([&](AllReduceOp) {
        // One process is a group of one rank: the identity.
        for (const HostTensor *t : in)
          out.push_back(*t);
        return success();
      })
      .Case<ReduceScatterOp, AllGatherOp, LocalShardOp>([&](auto o) -> LogicalResult {
        // One process is a group of one rank: the identity when the op was
        // built for one part; its other parts live on ranks it cannot run.
        if (o.getParts() != 1)
          return o.emitOpError("splits over ")
                 << o.getParts()
                 << " ranks; the reference evaluator runs one (compile with --dp 1 or "
                    "without --zero to evaluate)";
        for (const HostTensor *t : in)
          out.push_back(*t);
        return success();
      })
      .Case<Conv2DBackwardDataOp>(
          [&](Conv2DBackwardDataOp o) { return evalConvBackwardData(o, in, out); })
      .Case<Conv2DBackwardFilterOp>(
          [&](Conv2DBackwardFilterOp o) { return evalConvBackwardFilter(o, in, out); })
      .Case<MaxPool2DGradOp>([&](MaxPool2DGradOp o) { return evalMaxPoolGrad(o, in, out); })
      .Case<AvgPool2DGradOp>([&](AvgPool2DGradOp o) { return evalAvgPoolGrad(o, in, out); })
      .Case<GatherElementsGradOp>(
          [&](GatherElementsGradOp o) { return evalGatherElementsGrad(o, in, out); })
      .Case<GeluGradOp>([&](GeluGradOp o) { return evalGeluGrad(o, in, out); })
      .Case<SoftmaxGradOp>([&](SoftmaxGradOp o) {
        return evalSoftmaxGrad(o, o.getAxis(), /*log=*/false, in, out);
      })
      .Case<LogSoftmaxGradOp>([&](LogSoftmaxGradOp o) {
        return evalSoftmaxGrad(o, o.getAxis(), /*log=*/true, in, out);
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp o) { return evalLayerNormGrad(o, in, out); })
      .Case<CrossEntropyGradOp>(
          [&](CrossEntropyGradOp o) { return evalCrossEntropyGrad(o, in, out); })
      .Case([&](AttentionOp o) { return evalAttention(o, in, out); })
      .Case([&](AttentionGradOp o) { return evalAttentionGrad(o, in, out); })
      .Case<AdamWUpdateOp>([&](AdamWUpdateOp o) { return evalAdamWUpdate(o, in, out); })
      .Case<AdanUpdateOp>([&](AdanUpdateOp o) { return evalAdanUpdate(o, in, out); })
      .Case<SgdUpdateOp>([&](SgdUpdateOp o) { return evalSgdUpdate(o, in, out); })
      .Default([&](Operation *o) {
        return o->emitError("the reference evaluator does not support '")
               << o->getName() << "'";
      });
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
    } else if (isa<AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp>(op)) {
      // One process is a group of one rank: the wait yields the operands.
      if (auto parts = op.getAttrOfType<IntegerAttr>("parts"); parts && parts.getInt() != 1)
        return op.emitOpError("splits over ")
                   << parts.getInt()
                   << " ranks; the reference evaluator runs one (compile with --dp 1 or "
                      "without --zero to evaluate)",
               failure();
      SmallVector<HostTensor> &held = started[op.getResult(0)];
      for (Value v : op.getOperands())
        held.push_back(env.lookup(v));
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

FailureOr<SmallVector<Attribute>>
mlir::merak::foldWithEvaluator(Operation *op, int64_t maxElements) {
  if (op->getNumRegions() || isa<ConstantOp, GetParamOp>(op) ||
      !isa<MerakDialect>(op->getDialect()))
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
