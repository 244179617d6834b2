//===- LinalgRules.cpp - Lowering matmul, convolution and pooling ---------===//
//
// matmul / matmul_t (a widening GEMM names its result type); conv2d, max/avg
// pool and their gradients, whose kernels are CPU-only (on --target cuda
// their rules report no kernel); the expert GEMMs and routing kernels (both
// targets).
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

#include <optional>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
std::string convAttrs(ArrayRef<int64_t> s, ArrayRef<int64_t> p, ArrayRef<int64_t> d, int64_t g) {
  return "Conv2DAttrs{" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " +
         std::to_string(p[0]) + ", " + std::to_string(p[1]) + ", " + std::to_string(p[2]) +
         ", " + std::to_string(p[3]) + ", " + std::to_string(d[0]) + ", " +
         std::to_string(d[1]) + ", " + std::to_string(g) + "}";
}

template <typename OpTy> std::string convAttrs(OpTy c) {
  return convAttrs(c.getStrides(), c.getPadding(), c.getDilations(), c.getGroups());
}

std::string poolAttrs(ArrayRef<int64_t> k, ArrayRef<int64_t> s, ArrayRef<int64_t> p,
                      ArrayRef<int64_t> d, bool ceil, bool includePad) {
  auto n = [](int64_t v) { return std::to_string(v); };
  return "Pool2DAttrs{" + n(k[0]) + ", " + n(k[1]) + ", " + n(s[0]) + ", " + n(s[1]) + ", " +
         n(p[0]) + ", " + n(p[1]) + ", " + n(p[2]) + ", " + n(p[3]) + ", " + n(d[0]) + ", " +
         n(d[1]) + ", " + (ceil ? "true" : "false") + ", " + (includePad ? "true" : "false") +
         "}";
}

/// The attributes of a max pool (dilated) or an avg pool (count_include_pad).
template <typename OpTy> std::string maxPoolAttrs(OpTy m) {
  return poolAttrs(m.getKernel(), m.getStrides(), m.getPadding(), m.getDilations(),
                   m.getCeilMode(), false);
}
template <typename OpTy> std::string avgPoolAttrs(OpTy m) {
  SmallVector<int64_t> ones{1, 1};
  return poolAttrs(m.getKernel(), m.getStrides(), m.getPadding(), ones, m.getCeilMode(),
                   m.getCountIncludePad());
}

/// matmul(t, a, da, b, db, y, dy[, transA, transB][, yt[, accumulate]]): the
/// transposes of merak.matmul_t, the result type of a widening GEMM (bf16
/// operands, f32 result), and an accumulated product (merak.matmul_t's
/// `acc`: y = acc + a b, the accumulator first copied into y unless
/// merak-plan-memory placed y in its buffer).
FailureOr<Lowering> lowerMatmul(Operation *op, std::optional<std::pair<bool, bool>> transpose,
                                Value acc, Emitter &e) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  PTR(a, lhs);
  PTR(b, rhs);
  PTR(y, op->getResult(0));
  Type r0 = op->getResult(0).getType();
  if (acc) {
    PTR(c, acc);
    if (c != y)
      e.call(kernels::copyBytes).ptr(y).ptr(c).i64(byteSize(r0)).emit();
  }
  const bool widening = cast<RankedTensorType>(lhs.getType()).getElementType() !=
                        cast<RankedTensorType>(r0).getElementType();
  auto call = e.call(kernels::matmul);
  call.dtype(lhs.getType()).ptr(a).dims(lhs.getType()).ptr(b).dims(rhs.getType()).ptr(y)
      .dims(r0);
  if (transpose || widening || acc)
    call.boolean(transpose && transpose->first).boolean(transpose && transpose->second);
  if (widening || acc)
    call.dtype(r0);
  if (acc)
    call.boolean(true);
  call.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(MatmulOp m, Emitter &e, LoweringContext &) {
  return lowerMatmul(m, std::nullopt, Value(), e);
}

FailureOr<Lowering> emitc_lowering::rule(MatmulTOp m, Emitter &e, LoweringContext &) {
  return lowerMatmul(m, std::make_pair(m.getTransposeLhs(), m.getTransposeRhs()), m.getAcc(), e);
}

namespace {
/// The shape of every conv2d / pool call: (t, then each operand of
/// `shaped` with its shape, [the bias pointer or nullptr,] attrs, y, [dy]);
/// pointers are taken for the operands, then the result, then the bias.
struct WindowCall {
  Kernel kernel;
  SmallVector<Value, 2> shaped;
  std::string attrs;
  std::optional<Value> bias = std::nullopt;
  bool resultDims = true;
};

FailureOr<Lowering> lowerWindow(Operation *op, const WindowCall &w, Emitter &e,
                                LoweringContext &ctx) {
  if (ctx.lacks(w.kernel))
    return Lowering::NoKernel;
  SmallVector<Value, 2> ptrs;
  for (Value v : w.shaped) {
    PTR(p, v);
    ptrs.push_back(p);
  }
  PTR(y, op->getResult(0));
  Type r0 = op->getResult(0).getType();
  auto call = e.call(w.kernel);
  call.dtype(r0);
  for (auto [p, v] : llvm::zip(ptrs, w.shaped))
    call.ptr(p).dims(v.getType());
  if (w.bias && failed(call.ptrs({*w.bias})))
    return failure();
  call.lit(w.attrs).ptr(y);
  if (w.resultDims)
    call.dims(r0);
  call.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(Conv2DOp c, Emitter &e, LoweringContext &ctx) {
  return lowerWindow(c, {kernels::conv2d, {c.getInput(), c.getWeight()}, convAttrs(c), c.getBias()},
                     e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(Conv2DBackwardDataOp c, Emitter &e,
                                         LoweringContext &ctx) {
  return lowerWindow(c, {kernels::conv2dBackwardData, {c.getGrad(), c.getWeight()}, convAttrs(c)},
                     e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(Conv2DBackwardFilterOp c, Emitter &e,
                                         LoweringContext &ctx) {
  return lowerWindow(
      c, {kernels::conv2dBackwardFilter, {c.getInput(), c.getGrad()}, convAttrs(c)}, e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(MaxPool2DOp m, Emitter &e, LoweringContext &ctx) {
  return lowerWindow(m, {kernels::maxPool2d, {m.getInput()}, maxPoolAttrs(m)}, e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(AvgPool2DOp m, Emitter &e, LoweringContext &ctx) {
  return lowerWindow(m, {kernels::avgPool2d, {m.getInput()}, avgPoolAttrs(m)}, e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(MaxPool2DGradOp m, Emitter &e, LoweringContext &ctx) {
  // The only one without the result's shape (it is the input's).
  return lowerWindow(m,
                     {kernels::maxPool2dGrad, {m.getInput(), m.getGrad()}, maxPoolAttrs(m),
                      /*bias=*/std::nullopt, /*resultDims=*/false},
                     e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(AvgPool2DGradOp m, Emitter &e, LoweringContext &ctx) {
  return lowerWindow(m, {kernels::avgPool2dGrad, {m.getGrad()}, avgPoolAttrs(m)}, e, ctx);
}

namespace {
/// expertMatmul / expertMatmulGradWeight(t, x, second, ti, experts, first, S,
/// K, O, E, transW, result[, accumulate]): `second` is the weight or the
/// result's gradient; with an accumulator `acc` (the gradient's) the kernel
/// adds into the result, the accumulator first copied there unless
/// merak-plan-memory placed the result in its buffer.
template <typename OpTy>
FailureOr<Lowering> lowerExpertGemm(OpTy op, Kernel kernel, Value second, Value rows, Value weight,
                                    Emitter &e, LoweringContext &ctx, Value acc = {}) {
  if (ctx.lacks(kernel))
    return Lowering::NoKernel;
  PTR(x, op.getInput());
  PTR(b, second);
  PTR(ids, op.getExperts());
  PTR(y, op.getResult());
  if (acc) { // the kernel adds into y: the accumulator, unless planned in place
    PTR(a, acc);
    if (a != y)
      e.call(kernels::copyBytes).ptr(y).ptr(a).i64(byteSize(acc.getType())).emit();
  }
  auto xt = cast<RankedTensorType>(op.getInput().getType());
  auto wt = cast<RankedTensorType>(weight.getType());
  auto c = e.call(kernel);
  c.dtype(xt).ptr(x).ptr(b).dtype(op.getExperts().getType()).ptr(ids);
  if (failed(c.ptrs({op.getFirst()}))) // nullptr without one
    return failure();
  c.i64(xt.getDimSize(0)).i64(xt.getDimSize(1))
      .i64(cast<RankedTensorType>(rows.getType()).getDimSize(1)).i64(wt.getDimSize(0))
      .boolean(op.getTransposeWeight()).ptr(y);
  if constexpr (std::is_same_v<OpTy, ExpertMatmulOp>)
    if (Value shadow = op.getShadow()) { // the shadow copies, their first id, their count
      PTR(ws, shadow);
      PTR(copies, op.getShadowFirst());
      c.ptr(ws).ptr(copies).i64(cast<RankedTensorType>(shadow.getType()).getDimSize(0));
    }
  if (acc)
    c.boolean(true);
  c.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(ExpertMatmulOp m, Emitter &e, LoweringContext &ctx) {
  return lowerExpertGemm(m, kernels::expertMatmul, m.getWeight(), m.getResult(), m.getWeight(),
                         e, ctx);
}

FailureOr<Lowering> emitc_lowering::rule(ExpertShadowPlanOp p, Emitter &e, LoweringContext &ctx) {
  if (ctx.lacks(kernels::expertShadowPlan))
    return Lowering::NoKernel;
  PTR(ids, p.getExperts());
  PTR(routed, p.getRouted());
  PTR(slots, p.getSlots());
  const int64_t rows = cast<RankedTensorType>(p.getExperts().getType()).getDimSize(0);
  e.call(kernels::expertShadowPlan).ptr(ids).i64(p.getParts()).i64(rows / p.getParts())
      .i64(p.getExpertsPerRank())
      .i64(cast<RankedTensorType>(p.getSlots().getType()).getDimSize(0)).i64(p.getMinRows())
      .ptr(routed).ptr(slots).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ExpertPlaceOp p, Emitter &e, LoweringContext &ctx) {
  if (ctx.lacks(kernels::expertPlace))
    return Lowering::NoKernel;
  PTR(ids, p.getExperts());
  PTR(table, p.getPlacement());
  PTR(placed, p.getResult());
  e.call(kernels::expertPlace).ptr(ids).i64(cast<RankedTensorType>(p.getExperts().getType()).getDimSize(0))
      .ptr(table).i64(cast<RankedTensorType>(p.getPlacement().getType()).getDimSize(0))
      .i64(p.getTable()).ptr(placed).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ExpertCapacityOp p, Emitter &e, LoweringContext &ctx) {
  if (ctx.lacks(kernels::expertCapacity))
    return Lowering::NoKernel;
  PTR(ids, p.getExperts());
  PTR(probs, p.getProbs());
  PTR(kept, p.getResult());
  e.call(kernels::expertCapacity).ptr(ids).dtype(p.getProbs().getType()).ptr(probs)
      .i64(cast<RankedTensorType>(p.getExperts().getType()).getDimSize(0))
      .i64(p.getNumExperts()).i64(p.getCapacity()).boolean(p.getPolicy() == "probs")
      .ptr(kept).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ExpertCompactOp p, Emitter &e, LoweringContext &ctx) {
  if (ctx.lacks(kernels::expertCompact))
    return Lowering::NoKernel;
  PTR(ids, p.getExperts());
  PTR(first, p.getFirst());
  PTR(out, p.getResult());
  e.call(kernels::expertCompact).ptr(ids)
      .i64(cast<RankedTensorType>(p.getExperts().getType()).getDimSize(0)).ptr(first)
      .i64(p.getExpertsPerRank())
      .i64(cast<RankedTensorType>(p.getResult().getType()).getDimSize(0)).ptr(out).emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(ExpertMatmulGradWeightOp m, Emitter &e,
                                         LoweringContext &ctx) {
  return lowerExpertGemm(m, kernels::expertMatmulGradWeight, m.getGrad(), m.getGrad(),
                         m.getResult(), e, ctx, m.getAcc());
}
