//===- MerakToEmitC.cpp - merak-to-emitc ----------------------------------===//
//
// Lowers the function planned by merak-plan-memory to one EmitC function of
// runtime calls (see Passes.td and runtime/include/merak_rt/ops.h).
//
//===----------------------------------------------------------------------===//
#include "AsyncCollectives.h"
#include "CallBuilder.h"
#include "AttentionOps.h"
#include "OptimizerUpdates.h"
#include "llvm/ADT/SmallVectorExtras.h"

#include "merak/Conversion/MerakToEmitC.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKTOEMITC
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
int64_t byteSize(Type t) {
  auto r = cast<RankedTensorType>(t);
  return r.getNumElements() * storageElementBytes(r.getElementType());
}

int64_t normAxis(int64_t axis, Type t) {
  return axis < 0 ? axis + cast<RankedTensorType>(t).getRank() : axis;
}

/// The runtime's Unary kind of an elementwise op, or "".
std::string unaryName(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([](ExpOp) { return "Exp"; })
      .Case([](LogOp) { return "Log"; })
      .Case([](SqrtOp) { return "Sqrt"; })
      .Case([](RsqrtOp) { return "Rsqrt"; })
      .Case([](TanhOp) { return "Tanh"; })
      .Case([](ErfOp) { return "Erf"; })
      .Case([](SigmoidOp) { return "Sigmoid"; })
      .Case([](ReciprocalOp) { return "Reciprocal"; })
      .Case([](SinOp) { return "Sin"; })
      .Case([](CosOp) { return "Cos"; })
      .Case([](FloorOp) { return "Floor"; })
      .Case([](CeilOp) { return "Ceil"; })
      .Case([](ReluOp) { return "Relu"; })
      .Case([](NegOp) { return "Neg"; })
      .Case([](AbsOp) { return "Abs"; })
      .Case([](SignOp) { return "Sign"; })
      .Case([](NotOp) { return "Not"; })
      .Case([](GeluOp g) { return g.getApproximateTanh() ? "GeluTanh" : "Gelu"; })
      .Case([](LeakyReluOp) { return "LeakyRelu"; })
      .Case([](ClampOp) { return "Clamp"; })
      .Default([](Operation *) { return ""; });
}

/// The runtime's Binary kind of a two-operand elementwise op, or "".
std::string binaryName(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([](AddOp) { return "Add"; })
      .Case([](SubOp) { return "Sub"; })
      .Case([](MulOp) { return "Mul"; })
      .Case([](DivOp) { return "Div"; })
      .Case([](PowOp) { return "Pow"; })
      .Case([](MaxOp) { return "Max"; })
      .Case([](MinOp) { return "Min"; })
      .Case([](RemOp) { return "Rem"; })
      .Case([](EqOp) { return "Eq"; })
      .Case([](NeOp) { return "Ne"; })
      .Case([](LtOp) { return "Lt"; })
      .Case([](LeOp) { return "Le"; })
      .Case([](GtOp) { return "Gt"; })
      .Case([](GeOp) { return "Ge"; })
      .Case([](AndOp) { return "And"; })
      .Case([](OrOp) { return "Or"; })
      .Case([](XorOp) { return "Xor"; })
      .Default([](Operation *) { return ""; });
}

std::string reduceName(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([](ReduceSumOp) { return "Sum"; })
      .Case([](ReduceMeanOp) { return "Mean"; })
      .Case([](ReduceMaxOp) { return "Max"; })
      .Case([](ReduceMinOp) { return "Min"; })
      .Case([](ReduceProdOp) { return "Prod"; })
      .Default([](Operation *) { return ""; });
}

std::string convAttrs(ArrayRef<int64_t> s, ArrayRef<int64_t> p, ArrayRef<int64_t> d, int64_t g) {
  return "Conv2DAttrs{" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " +
         std::to_string(p[0]) + ", " + std::to_string(p[1]) + ", " + std::to_string(p[2]) +
         ", " + std::to_string(p[3]) + ", " + std::to_string(d[0]) + ", " +
         std::to_string(d[1]) + ", " + std::to_string(g) + "}";
}

std::string poolAttrs(ArrayRef<int64_t> k, ArrayRef<int64_t> s, ArrayRef<int64_t> p,
                      ArrayRef<int64_t> d, bool ceil, bool includePad) {
  auto n = [](int64_t v) { return std::to_string(v); };
  return "Pool2DAttrs{" + n(k[0]) + ", " + n(k[1]) + ", " + n(s[0]) + ", " + n(s[1]) + ", " +
         n(p[0]) + ", " + n(p[1]) + ", " + n(p[2]) + ", " + n(p[3]) + ", " + n(d[0]) + ", " +
         n(d[1]) + ", " + (ceil ? "true" : "false") + ", " + (includePad ? "true" : "false") +
         "}";
}

#define PTR(name, value)                                                       \
  FailureOr<Value> name##OrErr = e.pointer(value);                             \
  if (failed(name##OrErr))                                                     \
    return failure();                                                          \
  Value name = *name##OrErr;

/// Emits the runtime call(s) of `op`. Failure after a diagnostic; success
/// with `unsupported` set when no kernel exists for it.
LogicalResult lowerOp(Operation *op, Emitter &e, SymbolTableCollection &symbols,
                      bool &unsupported) {
  unsupported = false;
  if (isa<ConstantOp>(op) || isViewOp(op))
    return success();
  if (auto get = dyn_cast<GetParamOp>(op)) {
    if (!op->hasAttr(kCopyAttr))
      return success();
    auto param = symbols.lookupNearestSymbolFrom<ParamOp>(op, get.getNameAttr());
    PTR(dst, get.getResult());
    Value src = e.pointer(PlannedBuffer{PlannedBuffer::Params,
                                        param->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt()});
    e.call("copyBytes").ptr(dst).ptr(src).i64(byteSize(get.getType())).emit();
    return success();
  }
  if (auto set = dyn_cast<SetParamOp>(op)) {
    auto param = symbols.lookupNearestSymbolFrom<ParamOp>(op, set.getNameAttr());
    if (!param)
      return op->emitError("no parameter @") << set.getName();
    PTR(src, set.getValue());
    Value dst = e.pointer(PlannedBuffer{PlannedBuffer::Params,
                                        param->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt()});
    if (src != dst)
      e.call("copyBytes").ptr(dst).ptr(src).i64(byteSize(set.getValue().getType())).emit();
    return success();
  }

  Type r0 = op->getNumResults() ? op->getResult(0).getType() : Type();
  if (std::string k = binaryName(op); !k.empty()) {
    PTR(a, op->getOperand(0));
    PTR(b, op->getOperand(1));
    PTR(y, op->getResult(0));
    Type ta = op->getOperand(0).getType(), tb = op->getOperand(1).getType();
    e.call("binary").lit("Binary::" + k).dtype(ta).ptr(a).dims(ta).ptr(b).dims(tb).ptr(y)
        .dims(r0).emit();
    return success();
  }
  if (std::string k = unaryName(op); !k.empty()) {
    PTR(x, op->getOperand(0));
    PTR(y, op->getResult(0));
    double a = 0, b = 0;
    if (auto l = dyn_cast<LeakyReluOp>(op))
      a = l.getAlpha().convertToDouble();
    if (auto c = dyn_cast<ClampOp>(op)) {
      a = c.getMinAttr() ? c.getMinAttr().getValueAsDouble() : -HUGE_VAL;
      b = c.getMaxAttr() ? c.getMaxAttr().getValueAsDouble() : HUGE_VAL;
    }
    e.call("unary").lit("Unary::" + k).dtype(r0).ptr(x).ptr(y)
        .i64(cast<RankedTensorType>(r0).getNumElements()).f64(a).f64(b).emit();
    return success();
  }
  if (std::string k = reduceName(op); !k.empty()) {
    PTR(x, op->getOperand(0));
    PTR(y, op->getResult(0));
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    Type tx = op->getOperand(0).getType();
    e.call("reduce").lit("Reduce::" + k).dtype(tx).ptr(x).dims(tx).dims(axes.asArrayRef())
        .ptr(y).emit();
    return success();
  }

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](WhereOp w) -> LogicalResult {
        PTR(c, w.getCondition());
        PTR(a, w.getLhs());
        PTR(b, w.getRhs());
        PTR(y, w.getResult());
        e.call("where").ptr(c).dims(w.getCondition().getType()).dtype(r0).ptr(a)
            .dims(w.getLhs().getType()).ptr(b).dims(w.getRhs().getType()).ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](CastOp c) -> LogicalResult {
        PTR(x, c.getInput());
        PTR(y, c.getResult());
        e.call("cast").dtype(c.getInput().getType()).ptr(x).dtype(r0).ptr(y)
            .i64(cast<RankedTensorType>(r0).getNumElements()).emit();
        return success();
      })
      .Case([&](BroadcastOp c) -> LogicalResult {
        PTR(x, c.getInput());
        PTR(y, c.getResult());
        e.call("broadcastTo").dtype(r0).ptr(x).dims(c.getInput().getType()).ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](TransposeOp t) -> LogicalResult {
        PTR(x, t.getInput());
        PTR(y, t.getResult());
        e.call("transpose").dtype(r0).ptr(x).dims(t.getInput().getType()).dims(t.getPerm())
            .ptr(y).emit();
        return success();
      })
      .Case([&](SliceOp s) -> LogicalResult {
        PTR(x, s.getInput());
        PTR(y, s.getResult());
        e.call("slice").dtype(r0).ptr(x).dims(s.getInput().getType()).dims(s.getStarts())
            .dims(s.getStrides()).ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](ConcatOp c) -> LogicalResult {
        PTR(y, c.getResult());
        int64_t axis = normAxis(c.getAxis(), r0), offset = 0;
        for (Value in : c.getInputs()) {
          PTR(x, in);
          e.call("insertAlongAxis").dtype(r0).ptr(x).dims(in.getType()).i64(axis).i64(offset)
              .ptr(y).dims(r0).emit();
          offset += cast<RankedTensorType>(in.getType()).getDimSize(axis);
        }
        return success();
      })
      .Case([&](SplitOp s) -> LogicalResult {
        PTR(x, s.getInput());
        Type tx = s.getInput().getType();
        int64_t rank = cast<RankedTensorType>(tx).getRank();
        int64_t axis = normAxis(s.getAxis(), tx), offset = 0;
        for (Value r : s.getResults()) {
          SmallVector<int64_t> starts(rank, 0), strides(rank, 1);
          starts[axis] = offset;
          offset += cast<RankedTensorType>(r.getType()).getDimSize(axis);
          if (r.use_empty())
            continue;
          PTR(y, r);
          e.call("slice").dtype(tx).ptr(x).dims(tx).dims(starts).dims(strides).ptr(y)
              .dims(r.getType()).emit();
        }
        return success();
      })
      .Case([&](GatherOp g) -> LogicalResult {
        PTR(d, g.getData());
        PTR(i, g.getIndices());
        PTR(y, g.getResult());
        Type td = g.getData().getType(), ti = g.getIndices().getType();
        e.call("gather").dtype(td).ptr(d).dims(td).dtype(ti).ptr(i).dims(ti)
            .i64(normAxis(g.getAxis(), td)).ptr(y).emit();
        return success();
      })
      .Case([&](GatherGradOp g) -> LogicalResult {
        PTR(gr, g.getGrad());
        PTR(i, g.getIndices());
        PTR(y, g.getResult());
        Type ti = g.getIndices().getType();
        e.call("gatherGrad").dtype(r0).ptr(gr).dtype(ti).ptr(i).dims(ti)
            .i64(normAxis(g.getAxis(), r0)).ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](GatherElementsOp g) -> LogicalResult {
        PTR(d, g.getData());
        PTR(i, g.getIndices());
        PTR(y, g.getResult());
        Type td = g.getData().getType(), ti = g.getIndices().getType();
        e.call("gatherElements").dtype(td).ptr(d).dims(td).dtype(ti).ptr(i).dims(ti)
            .i64(normAxis(g.getAxis(), td)).ptr(y).emit();
        return success();
      })
      .Case([&](GatherElementsGradOp g) -> LogicalResult {
        PTR(gr, g.getGrad());
        PTR(i, g.getIndices());
        PTR(y, g.getResult());
        Type ti = g.getIndices().getType();
        e.call("gatherElementsGrad").dtype(r0).ptr(gr).dtype(ti).ptr(i).dims(ti)
            .i64(normAxis(g.getAxis(), r0)).ptr(y).dims(r0).emit();
        return success();
      })
      .Case<ArgMaxOp, ArgMinOp>([&](auto a) -> LogicalResult {
        PTR(x, a.getInput());
        PTR(y, a.getResult());
        Type tx = a.getInput().getType();
        e.call("argReduce").boolean(isa<ArgMaxOp>(op)).dtype(tx).ptr(x).dims(tx)
            .i64(normAxis(a.getAxis(), tx)).boolean(a.getSelectLastIndex()).ptr(y).emit();
        return success();
      })
      .Case([&](CumSumOp c) -> LogicalResult {
        PTR(x, c.getInput());
        PTR(y, c.getResult());
        e.call("cumsum").dtype(r0).ptr(x).dims(r0).i64(normAxis(c.getAxis(), r0))
            .boolean(c.getExclusive()).boolean(c.getReverse()).ptr(y).emit();
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) -> LogicalResult {
        PTR(x, s.getInput());
        PTR(y, s.getResult());
        e.call("softmax").boolean(isa<LogSoftmaxOp>(op)).dtype(r0).ptr(x).dims(r0)
            .i64(normAxis(s.getAxis(), r0)).ptr(y).emit();
        return success();
      })
      .Case([&](LayerNormOp l) -> LogicalResult {
        PTR(x, l.getInput());
        PTR(y, l.getResult());
        auto c = e.call("layerNorm");
        c.dtype(r0).ptr(x).dims(r0).i64(normAxis(l.getAxis(), r0));
        for (Value v : {l.getScale(), l.getBias()}) {
          if (!v) {
            c.lit("nullptr").lit("Dims{}");
            continue;
          }
          PTR(pv, v);
          c.ptr(pv).dims(v.getType());
        }
        c.f64(l.getEpsilon().convertToDouble()).ptr(y).emit();
        return success();
      })
      .Case([&](RmsNormOp l) -> LogicalResult {
        PTR(x, l.getInput());
        PTR(y, l.getResult());
        auto c = e.call("rmsNorm");
        c.dtype(r0).ptr(x).dims(r0).i64(normAxis(l.getAxis(), r0));
        if (Value s = l.getScale()) {
          PTR(ps, s);
          c.ptr(ps).dims(s.getType());
        } else {
          c.lit("nullptr").lit("Dims{}");
        }
        c.f64(l.getEpsilon().convertToDouble()).ptr(y).emit();
        return success();
      })
      .Case([&](BatchNormOp bn) -> LogicalResult {
        PTR(x, bn.getInput());
        PTR(s, bn.getScale());
        PTR(b, bn.getBias());
        PTR(m, bn.getMean());
        PTR(v, bn.getVar());
        PTR(y, bn.getResult());
        e.call("batchNorm").dtype(r0).ptr(x).dims(r0).ptr(s).ptr(b).ptr(m).ptr(v)
            .f64(bn.getEpsilon().convertToDouble()).boolean(bn.getTraining()).ptr(y).emit();
        return success();
      })
      .Case([&](DropoutOp d) -> LogicalResult {
        PTR(x, d.getInput());
        PTR(y, d.getOutput());
        PTR(m, d.getMask());
        e.call("dropout").dtype(r0).ptr(x).i64(cast<RankedTensorType>(r0).getNumElements())
            .f64(d.getRatio().convertToDouble()).i64(d.getSeed()).ptr(y).ptr(m).emit();
        return success();
      })
      .Case([&](CrossEntropyOp c) -> LogicalResult {
        PTR(l, c.getLogits());
        PTR(t, c.getLabels());
        PTR(y, c.getResult());
        StringRef red = c.getReduction();
        int reduction = red == "none" ? 0 : red == "mean" ? 1 : 2;
        Type tl = c.getLogits().getType();
        auto ignore = c.getIgnoreIndex();
        if (c.getGroup()) {
          auto lt = cast<RankedTensorType>(tl);
          e.call("vocabCrossEntropy").lit("Group::TP").dtype(tl).ptr(l)
              .i64(lt.getNumElements() / lt.getShape().back()).i64(lt.getShape().back())
              .dtype(c.getLabels().getType()).ptr(t).i64(reduction)
              .boolean(ignore.has_value()).i64(ignore.value_or(-100))
              .i64(c.getClasses().value_or(-1)).ptr(y).emit();
          return success();
        }
        e.call("crossEntropy").dtype(tl).ptr(l).dims(tl).i64(normAxis(c.getAxis(), tl))
            .dtype(c.getLabels().getType()).ptr(t).i64(reduction).boolean(ignore.has_value())
            .i64(ignore.value_or(-100)).ptr(y).emit();
        return success();
      })
      .Case([&](AllReduceOp a) -> LogicalResult {
        Type elem = cast<RankedTensorType>(a.getInputs()[0].getType()).getElementType();
        StringRef g = a.getGroup();
        auto call = e.call("allReduceBucket");
        call.lit(g == "dp" ? "Group::DP" : g == "tp" ? "Group::TP" : "Group::PP")
            .lit(a.getReduction() == "mean"  ? "CollReduce::Mean"
                 : a.getReduction() == "max" ? "CollReduce::Max"
                                             : "CollReduce::Sum")
            .dtype(elem);
        for (auto [in, out] : llvm::zip(a.getInputs(), a.getResults())) {
          if (cast<RankedTensorType>(in.getType()).getElementType() != elem)
            return a.emitOpError("operands of one bucket must share an element type");
          PTR(pi, in);
          PTR(po, out);
          call.ptr(pi).ptr(po).i64(cast<RankedTensorType>(in.getType()).getNumElements());
        }
        call.emit();
        return success();
      })
      .Case<ReduceScatterOp, AllGatherOp>([&](auto c) -> LogicalResult {
        // (in, out, local count) triples: the count of one part (ZeRO).
        constexpr bool scatter = std::is_same_v<decltype(c), ReduceScatterOp>;
        Type elem = cast<RankedTensorType>(c.getInputs()[0].getType()).getElementType();
        StringRef g = c.getGroup();
        auto call = e.call(scatter ? "reduceScatterBucket" : "allGatherBucket");
        call.lit(g == "dp" ? "Group::DP" : g == "tp" ? "Group::TP" : "Group::PP");
        if constexpr (scatter)
          call.lit(c.getReduction() == "mean" ? "CollReduce::Mean" : "CollReduce::Sum");
        call.dtype(elem).i64(c.getParts());
        for (auto [in, out] : llvm::zip(c.getInputs(), c.getResults())) {
          if (cast<RankedTensorType>(in.getType()).getElementType() != elem)
            return c.emitOpError("operands of one bucket must share an element type");
          PTR(pi, in);
          PTR(po, out);
          Value local = scatter ? out : in;
          call.ptr(pi).ptr(po).i64(cast<RankedTensorType>(local.getType()).getNumElements());
        }
        call.emit();
        return success();
      })
      .Case([&](GroupRankOp g) -> LogicalResult {
        PTR(y, g.getResult());
        StringRef gr = g.getGroup();
        e.call("groupRank")
            .lit(gr == "dp" ? "Group::DP" : gr == "tp" ? "Group::TP" : "Group::PP")
            .ptr(y).emit();
        return success();
      })
      .Case([&](LocalShardOp l) -> LogicalResult {
        PTR(x, l.getInput());
        PTR(y, l.getResult());
        StringRef g = l.getGroup();
        e.call("localShard")
            .lit(g == "dp" ? "Group::DP" : g == "tp" ? "Group::TP" : "Group::PP")
            .dtype(r0).i64(l.getParts()).ptr(x).ptr(y)
            .i64(cast<RankedTensorType>(r0).getNumElements()).emit();
        return success();
      })
      .Case([&](GeluGradOp gg) -> LogicalResult {
        PTR(x, gg.getInput());
        PTR(g, gg.getGrad());
        PTR(y, gg.getResult());
        e.call("geluGrad").dtype(r0).ptr(x).ptr(g).ptr(y)
            .i64(cast<RankedTensorType>(r0).getNumElements())
            .boolean(gg.getApproximateTanh()).emit();
        return success();
      })
      .Case<SoftmaxGradOp, LogSoftmaxGradOp>([&](auto s) -> LogicalResult {
        PTR(y, s.getOutput());
        PTR(g, s.getGrad());
        PTR(dx, s.getResult());
        e.call("softmaxGrad").boolean(isa<LogSoftmaxGradOp>(op)).dtype(r0).ptr(y).ptr(g)
            .dims(r0).i64(normAxis(s.getAxis(), r0)).ptr(dx).emit();
        return success();
      })
      .Case([&](LayerNormGradOp l) -> LogicalResult {
        PTR(x, l.getInput());
        PTR(g, l.getGrad());
        auto c = e.call("layerNormGrad");
        c.dtype(r0).ptr(x).ptr(g).dims(r0).i64(normAxis(l.getAxis(), r0));
        if (Value s = l.getScale()) {
          PTR(ps, s);
          c.ptr(ps).dims(s.getType());
        } else {
          c.lit("nullptr").lit("Dims{}");
        }
        c.f64(l.getEpsilon().convertToDouble()).boolean(l.getRms());
        // A result nobody reads is not written.
        if (failed(c.ptrs(llvm::map_to_vector(l.getResults(), Emitter::readOrNull))))
          return failure();
        c.emit();
        return success();
      })
      .Case([&](CrossEntropyGradOp c) -> LogicalResult {
        PTR(l, c.getLogits());
        PTR(t, c.getLabels());
        PTR(g, c.getGrad());
        PTR(y, c.getResult());
        StringRef red = c.getReduction();
        int reduction = red == "none" ? 0 : red == "mean" ? 1 : 2;
        auto ignore = c.getIgnoreIndex();
        if (c.getGroup()) {
          auto lt = cast<RankedTensorType>(r0);
          e.call("vocabCrossEntropyGrad").lit("Group::TP").dtype(r0).ptr(l)
              .i64(lt.getNumElements() / lt.getShape().back()).i64(lt.getShape().back())
              .dtype(c.getLabels().getType()).ptr(t).ptr(g).i64(reduction)
              .boolean(ignore.has_value()).i64(ignore.value_or(-100))
              .i64(c.getClasses().value_or(-1)).ptr(y).emit();
          return success();
        }
        e.call("crossEntropyGrad").dtype(r0).ptr(l).dims(r0).i64(normAxis(c.getAxis(), r0))
            .dtype(c.getLabels().getType()).ptr(t).ptr(g).i64(reduction)
            .boolean(ignore.has_value()).i64(ignore.value_or(-100)).ptr(y).emit();
        return success();
      })
      .Case([&](MatmulOp m) -> LogicalResult {
        PTR(a, m.getLhs());
        PTR(b, m.getRhs());
        PTR(y, m.getResult());
        auto call = e.call("matmul");
        call.dtype(m.getLhs().getType()).ptr(a).dims(m.getLhs().getType()).ptr(b)
            .dims(m.getRhs().getType()).ptr(y).dims(r0);
        // A widening GEMM (bf16 operands, f32 result) names its result type.
        if (cast<RankedTensorType>(m.getLhs().getType()).getElementType() !=
            cast<RankedTensorType>(r0).getElementType())
          call.boolean(false).boolean(false).dtype(r0);
        call.emit();
        return success();
      })
      .Case([&](MatmulTOp m) -> LogicalResult {
        PTR(a, m.getLhs());
        PTR(b, m.getRhs());
        PTR(y, m.getResult());
        auto call = e.call("matmul");
        call.dtype(m.getLhs().getType()).ptr(a).dims(m.getLhs().getType()).ptr(b)
            .dims(m.getRhs().getType()).ptr(y).dims(r0).boolean(m.getTransposeLhs())
            .boolean(m.getTransposeRhs());
        if (cast<RankedTensorType>(m.getLhs().getType()).getElementType() !=
            cast<RankedTensorType>(r0).getElementType())
          call.dtype(r0);
        call.emit();
        return success();
      })
      .Case([&](Conv2DOp c) -> LogicalResult {
        PTR(x, c.getInput());
        PTR(w, c.getWeight());
        PTR(y, c.getResult());
        auto call = e.call("conv2d");
        call.dtype(r0).ptr(x).dims(c.getInput().getType()).ptr(w).dims(c.getWeight().getType());
        if (Value bias = c.getBias()) {
          PTR(pb, bias);
          call.ptr(pb);
        } else {
          call.lit("nullptr");
        }
        call.lit(convAttrs(c.getStrides(), c.getPadding(), c.getDilations(), c.getGroups()))
            .ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](Conv2DBackwardDataOp c) -> LogicalResult {
        PTR(g, c.getGrad());
        PTR(w, c.getWeight());
        PTR(y, c.getResult());
        e.call("conv2dBackwardData").dtype(r0).ptr(g).dims(c.getGrad().getType()).ptr(w)
            .dims(c.getWeight().getType())
            .lit(convAttrs(c.getStrides(), c.getPadding(), c.getDilations(), c.getGroups()))
            .ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](Conv2DBackwardFilterOp c) -> LogicalResult {
        PTR(x, c.getInput());
        PTR(g, c.getGrad());
        PTR(y, c.getResult());
        e.call("conv2dBackwardFilter").dtype(r0).ptr(x).dims(c.getInput().getType()).ptr(g)
            .dims(c.getGrad().getType())
            .lit(convAttrs(c.getStrides(), c.getPadding(), c.getDilations(), c.getGroups()))
            .ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](MaxPool2DOp m) -> LogicalResult {
        PTR(x, m.getInput());
        PTR(y, m.getResult());
        e.call("maxPool2d").dtype(r0).ptr(x).dims(m.getInput().getType())
            .lit(poolAttrs(m.getKernel(), m.getStrides(), m.getPadding(), m.getDilations(),
                           m.getCeilMode(), false))
            .ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](AvgPool2DOp m) -> LogicalResult {
        PTR(x, m.getInput());
        PTR(y, m.getResult());
        SmallVector<int64_t> ones{1, 1};
        e.call("avgPool2d").dtype(r0).ptr(x).dims(m.getInput().getType())
            .lit(poolAttrs(m.getKernel(), m.getStrides(), m.getPadding(), ones, m.getCeilMode(),
                           m.getCountIncludePad()))
            .ptr(y).dims(r0).emit();
        return success();
      })
      .Case([&](MaxPool2DGradOp m) -> LogicalResult {
        PTR(x, m.getInput());
        PTR(g, m.getGrad());
        PTR(y, m.getResult());
        e.call("maxPool2dGrad").dtype(r0).ptr(x).dims(m.getInput().getType()).ptr(g)
            .dims(m.getGrad().getType())
            .lit(poolAttrs(m.getKernel(), m.getStrides(), m.getPadding(), m.getDilations(),
                           m.getCeilMode(), false))
            .ptr(y).emit();
        return success();
      })
      .Case([&](AvgPool2DGradOp m) -> LogicalResult {
        PTR(g, m.getGrad());
        PTR(y, m.getResult());
        SmallVector<int64_t> ones{1, 1};
        e.call("avgPool2dGrad").dtype(r0).ptr(g).dims(m.getGrad().getType())
            .lit(poolAttrs(m.getKernel(), m.getStrides(), m.getPadding(), ones, m.getCeilMode(),
                           m.getCountIncludePad()))
            .ptr(y).dims(r0).emit();
        return success();
      })
      .Default([&](Operation *) {
        unsupported = true;
        return success();
      });
}

/// Ops the CUDA target has no kernel for yet (the vocabulary-parallel
/// cross-entropy runs host-staged in the runtime).
bool unsupportedOnCuda(Operation *op) {
  return isa<Conv2DOp, Conv2DBackwardDataOp, Conv2DBackwardFilterOp, MaxPool2DOp, AvgPool2DOp,
             MaxPool2DGradOp, AvgPool2DGradOp>(op);
}

/// True for ops that emit at least one kernel call (the trace's op list).
bool emitsKernel(Operation *op) {
  if (isa<ConstantOp, func::ReturnOp>(op) || isViewOp(op))
    return false;
  if (isa<GetParamOp>(op))
    return op->hasAttr(kCopyAttr);
  return true;
}

/// Returned values in parameter or constant storage are copied to their
/// result slots.
LogicalResult lowerReturn(func::ReturnOp ret, func::FuncOp fn, Emitter &e) {
  auto slots = fn->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
  if (!slots || slots.size() != (int64_t)ret.getNumOperands())
    return fn.emitError("merak-to-emitc: the function has no planned result offsets");
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    PTR(src, v);
    Value dst = e.pointer(PlannedBuffer{PlannedBuffer::Arena, slots[i]});
    if (src != dst)
      e.call("copyBytes").ptr(dst).ptr(src).i64(byteSize(v.getType())).emit();
  }
  return success();
}

/// Emits `extern "C" void name(char *A, char *P, const char *C)` for `fn`
/// at the end of the module; opMark indices continue from `index`.
LogicalResult lowerFunction(ModuleOp module, func::FuncOp fn, StringRef name, int64_t &index,
                            bool cuda) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = fn.getLoc();
  auto charPtr = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "char"));
  auto constCharPtr = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "const char"));
  auto fnType = FunctionType::get(ctx, {charPtr, charPtr, constCharPtr}, {});
  auto out = emitc::FuncOp::create(b, loc, name, fnType);
  out.setSpecifiersAttr(b.getStrArrayAttr({"extern \"C\""}));
  Block *body = out.addEntryBlock();
  b.setInsertionPointToStart(body);

  SymbolTableCollection symbols;
  Emitter e(b, loc, body->getArgument(0), body->getArgument(1), body->getArgument(2), symbols);
  if (cuda)
    e.calleePrefix = "gpu::";
  llvm::SetVector<StringRef> unsupported;
  bool failedAny = false;
  RequestSlots requests;
  for (Operation &op : fn.getBody().front()) {
    e.loc = op.getLoc();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(lowerReturn(ret, fn, e)))
        failedAny = true;
      break;
    }
    if (cuda && unsupportedOnCuda(&op)) {
      unsupported.insert(op.getName().getStringRef());
      continue;
    }
    if (emitsKernel(&op))
      e.call("opMark").i64(index++).emit();
    if (isAsyncCollective(&op)) {
      if (failed(lowerAsyncCollective(&op, e, requests)))
        failedAny = true;
      continue;
    }
    FailureOr<bool> update = lowerOptimizerUpdate(&op, e);
    if (failed(update) || *update) {
      failedAny |= failed(update);
      continue;
    }
    bool isUnsupported = false;
    FailureOr<bool> attention = lowerAttention(&op, e, isUnsupported);
    if (failed(attention) || (!*attention && failed(lowerOp(&op, e, symbols, isUnsupported))))
      failedAny = true;
    if (isUnsupported)
      unsupported.insert(op.getName().getStringRef());
    // MPI's non-blocking collectives progress only inside MPI calls.
    if (requests.inFlight() && emitsKernel(&op))
      e.call("collectiveProgress").emit();
  }
  if (!unsupported.empty()) {
    std::string names;
    llvm::raw_string_ostream os(names);
    llvm::interleave(unsupported, os, ", ");
    return fn.emitError("merak-to-emitc: no ") << (cuda ? "CUDA" : "CPU") << " kernel for "
                                                 << names;
  }
  if (failedAny)
    return failure();
  e.call("opMark").i64(-1).emit();
  emitc::ReturnOp::create(b, loc, Value());
  return success();
}

struct MerakToEmitCPass : merak::impl::MerakToEmitCBase<MerakToEmitCPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn->hasAttr(kArenaBytesAttr)) {
      module.emitError("merak-to-emitc: no function @")
          << entry << " planned by merak-plan-memory";
      return signalPassFailure();
    }
    if (target != "cpu" && target != "cuda") {
      module.emitError("merak-to-emitc: unknown target '") << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    if (failed(lowerToEmitC(module, {{fn, "merak_train_step"}}, target)))
      signalPassFailure();
  }
};
} // namespace

namespace mlir::merak {
/// The op names in trace order, as merak-to-emitc numbers them in opMark.
SmallVector<std::string> kernelOpNames(func::FuncOp fn) {
  SmallVector<std::string> names;
  for (Operation &op : fn.getBody().front())
    if (emitsKernel(&op))
      names.push_back(op.getName().stripDialect().str());
  return names;
}
} // namespace mlir::merak

LogicalResult mlir::merak::lowerToEmitC(ModuleOp module,
                                        ArrayRef<std::pair<func::FuncOp, std::string>> fns,
                                        StringRef target) {
  const bool cuda = target == "cuda";
  if (fns.empty())
    return module.emitError("merak-to-emitc: nothing to lower");
  module.getContext()->getOrLoadDialect<emitc::EmitCDialect>();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = func::FuncOp(fns.front().first).getLoc();
  emitc::IncludeOp::create(b, loc, cuda ? "merak_rt/cuda/ops.h" : "merak_rt/ops.h",
                           /*is_standard_include=*/false);
  if (llvm::any_of(fns, [](auto &f) {
        return func::FuncOp(f.first)
            .walk([](Operation *op) {
              if (auto ce = dyn_cast<CrossEntropyOp>(op); ce && ce.getGroup())
                return WalkResult::interrupt();
              if (auto ce = dyn_cast<CrossEntropyGradOp>(op); ce && ce.getGroup())
                return WalkResult::interrupt();
              return isa<AllReduceOp, ReduceScatterOp, AllGatherOp, LocalShardOp, GroupRankOp,
                         AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp>(op)
                         ? WalkResult::interrupt()
                         : WalkResult::advance();
            })
            .wasInterrupted();
      }))
    emitc::IncludeOp::create(b, loc,
                             cuda ? "merak_rt/cuda/collectives.h" : "merak_rt/collectives.h",
                             /*is_standard_include=*/false);
  emitc::IncludeOp::create(b, loc, "cmath", /*is_standard_include=*/true);
  if (cuda) {
    emitc::VerbatimOp::create(b, loc, "namespace gpu = merak::rt::gpu;");
    emitc::VerbatimOp::create(b, loc, "using namespace merak::rt::gpu;");
  } else {
    emitc::VerbatimOp::create(b, loc, "using namespace merak::rt::cpu;");
  }
  int64_t index = 0;
  for (auto &[fn, name] : fns)
    if (failed(lowerFunction(module, fn, name, index, cuda)))
      return failure();
  // Only the EmitC code stays.
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!isa<emitc::EmitCDialect>(op.getDialect()))
      op.erase();
  return success();
}
