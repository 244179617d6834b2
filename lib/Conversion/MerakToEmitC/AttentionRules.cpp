//===- AttentionRules.cpp - Lowering merak.attention and its gradient -----===//
//
// One runtime call each (attention / attentionGrad: on the CPU a tiled
// kernel, on CUDA the flash kernels), a null pointer for a result nobody
// reads; float64 attention (the evaluator's gradient checks) has no kernel.
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

#include "llvm/ADT/SmallVectorExtras.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
/// The call of attention op `op` with its leading arguments, shared by
/// both ops, which start (query, key, value, ...): (dtype, q, q's dims, k,
/// v, the key count); the caller appends the rest and the seq_major flag
/// (appendSeqMajor).
FailureOr<Emitter::Call> attentionCall(Operation *op, Kernel kernel, Emitter &e) {
  Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
  auto call = e.call(kernel);
  call.dtype(q.getType());
  if (failed(call.ptrs({q})))
    return failure();
  call.dims(q.getType());
  if (failed(call.ptrs({k, v})))
    return failure();
  // The key count: k's sequence dim (rank-2, or rank-3 when seq_major).
  ArrayRef<int64_t> ks = cast<RankedTensorType>(k.getType()).getShape();
  call.i64(ks[ks.size() - (op->hasAttr("seq_major") ? 3 : 2)]);
  return call;
}

/// The kernels are float32 and bf16.
bool hasKernel(Operation *op) {
  Type elem = cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
  return elem.isF32() || elem.isBF16();
}

/// The CUDA kernels drop no probabilities (merak-fuse-attention leaves such
/// attention decomposed for --target cuda): an error for one that does.
template <typename OpTy> LogicalResult checkTarget(OpTy op, const LoweringContext &ctx) {
  if (ctx.cuda && op.getDropout().convertToDouble() > 0)
    return op.emitOpError("with dropout has no CUDA kernel (compile with "
                          "--fused-attention=off, or fuse for --target cpu)");
  return success();
}

/// Ends the call: operands [..., T, H, D], read in place, when seq_major;
/// the sliding window and the soft-capping when there are; the bias and
/// its dims (attention_grad: and the scores' gradient `biasGrad`, null
/// when nothing reads it) when there is one; the probabilities' dropout
/// (ratio, seed, batch and tp splits) when there is; attention_grad's
/// `lseGrad` when it has one. Trailing defaults are left out.
template <typename OpTy>
FailureOr<Lowering> emitWithLayout(OpTy op, Value biasGrad, Value lseGrad, Emitter::Call &call) {
  const int64_t window = op.getWindow();
  const double softcap = op.getSoftcap().convertToDouble();
  const double dropout = op.getDropout().convertToDouble();
  Value bias = op.getBias();
  constexpr bool isGrad = std::is_same_v<OpTy, AttentionGradOp>;
  const bool tail = dropout > 0 || lseGrad, withBias = bias || tail;
  if (op.getSeqMajor() || window || softcap || withBias)
    call.boolean(op.getSeqMajor());
  if (window || softcap || withBias)
    call.i64(window);
  if (softcap || withBias)
    call.f64(softcap);
  if (withBias) {
    if (failed(call.ptrs({bias})))
      return failure();
    bias ? call.dims(bias.getType()) : call.dims(ArrayRef<int64_t>());
    if (isGrad && (biasGrad || tail) &&
        failed(call.ptrs({biasGrad ? Emitter::readOrNull(biasGrad) : Value()})))
      return failure();
  }
  if (tail) {
    auto split = [](std::optional<ArrayRef<int64_t>> s) { return s.value_or(ArrayRef<int64_t>()); };
    call.f64(dropout)
        .i64(op.getSeed())
        .dims(split(op.getBatchSplit()))
        .dims(split(op.getTpSplit()));
    if (lseGrad && failed(call.ptrs({lseGrad})))
      return failure();
  }
  call.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(AttentionOp a, Emitter &e, LoweringContext &ctx) {
  if (!hasKernel(a))
    return Lowering::NoKernel;
  if (failed(checkTarget(a, ctx)))
    return failure();
  FailureOr<Emitter::Call> call = attentionCall(a, kernels::attention, e);
  if (failed(call))
    return failure();
  call->f64(a.getScale().convertToDouble()).boolean(a.getCausal());
  // Results nobody reads are null pointers, which the kernels skip.
  if (failed(call->ptrs({a.getResult(), Emitter::readOrNull(a.getLse())})))
    return failure();
  return emitWithLayout(a, Value(), Value(), *call);
}

FailureOr<Lowering> emitc_lowering::rule(AttentionGradOp g, Emitter &e, LoweringContext &ctx) {
  if (!hasKernel(g))
    return Lowering::NoKernel;
  if (failed(checkTarget(g, ctx)))
    return failure();
  FailureOr<Emitter::Call> call = attentionCall(g, kernels::attentionGrad, e);
  if (failed(call) || failed(call->ptrs({g.getResult(), g.getLse(), g.getGrad()})))
    return failure();
  call->f64(g.getScale().convertToDouble()).boolean(g.getCausal());
  if (failed(call->ptrs(
          llvm::map_to_vector(g.getResults().take_front(3), Emitter::readOrNull))))
    return failure();
  return emitWithLayout(g, g.getBiasGrad(), g.getLseGrad(), *call);
}
