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

/// Ends the call: operands [..., T, H, D], read in place, when seq_major;
/// the sliding window and the soft-capping when there are; the bias and
/// its dims (attention_grad: and the scores' gradient `biasGrad`, null
/// when nothing reads it) when there is one.
FailureOr<Lowering> emitWithLayout(Operation *op, int64_t window, double softcap, Value bias,
                                   Value biasGrad, Emitter::Call &call) {
  if (op->hasAttr("seq_major") || window || softcap || bias)
    call.boolean(op->hasAttr("seq_major"));
  if (window || softcap || bias)
    call.i64(window);
  if (softcap || bias)
    call.f64(softcap);
  if (bias) {
    if (failed(call.ptrs({bias})))
      return failure();
    call.dims(bias.getType());
    if (biasGrad && failed(call.ptrs({Emitter::readOrNull(biasGrad)})))
      return failure();
  }
  call.emit();
  return Lowering::Done;
}
} // namespace

FailureOr<Lowering> emitc_lowering::rule(AttentionOp a, Emitter &e, LoweringContext &) {
  if (!hasKernel(a))
    return Lowering::NoKernel;
  FailureOr<Emitter::Call> call = attentionCall(a, kernels::attention, e);
  if (failed(call))
    return failure();
  call->f64(a.getScale().convertToDouble()).boolean(a.getCausal());
  // Results nobody reads are null pointers, which the kernels skip.
  if (failed(call->ptrs({a.getResult(), Emitter::readOrNull(a.getLse())})))
    return failure();
  return emitWithLayout(a, a.getWindow(), a.getSoftcap().convertToDouble(), a.getBias(),
                        Value(), *call);
}

FailureOr<Lowering> emitc_lowering::rule(AttentionGradOp g, Emitter &e, LoweringContext &) {
  if (!hasKernel(g))
    return Lowering::NoKernel;
  FailureOr<Emitter::Call> call = attentionCall(g, kernels::attentionGrad, e);
  if (failed(call) || failed(call->ptrs({g.getResult(), g.getLse(), g.getGrad()})))
    return failure();
  call->f64(g.getScale().convertToDouble()).boolean(g.getCausal());
  if (failed(call->ptrs(
          llvm::map_to_vector(g.getResults().take_front(3), Emitter::readOrNull))))
    return failure();
  return emitWithLayout(g, g.getWindow(), g.getSoftcap().convertToDouble(), g.getBias(),
                        g.getBiasGrad(), *call);
}
