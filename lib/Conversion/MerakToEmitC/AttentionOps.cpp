//===- AttentionOps.cpp - Lowering merak.attention and its gradient -------===//
#include "AttentionOps.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/ADT/SmallVectorExtras.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

FailureOr<bool> mlir::merak::emitc_lowering::lowerAttention(Operation *op, Emitter &e,
                                                             bool &unsupported) {
  if (!isa<AttentionOp, AttentionGradOp>(op))
    return false;
  // Both ops start (query, key, value, ...): the shared leading arguments
  // (dtype, q, q's dims, k, v, the key count).
  Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
  Type elem = cast<RankedTensorType>(q.getType()).getElementType();
  if (!elem.isF32() && !elem.isBF16()) {
    unsupported = true; // the kernels are float32 and bf16
    return true;
  }
  const bool grad = isa<AttentionGradOp>(op);
  auto call = e.call(grad ? "attentionGrad" : "attention");
  call.dtype(q.getType());
  if (failed(call.ptrs({q})))
    return failure();
  call.dims(q.getType());
  if (failed(call.ptrs({k, v})))
    return failure();
  // The key count: k's sequence dim (rank-2, or rank-3 when seq_major).
  const bool seqMajor = op->hasAttr("seq_major");
  ArrayRef<int64_t> ks = cast<RankedTensorType>(k.getType()).getShape();
  call.i64(ks[ks.size() - (seqMajor ? 3 : 2)]);
  auto scaleAndCausal = [&](auto o) {
    call.f64(o.getScale().convertToDouble()).boolean(o.getCausal());
  };
  // Results nobody reads are null pointers, which the kernels skip.
  if (auto a = dyn_cast<AttentionOp>(op)) {
    scaleAndCausal(a);
    if (failed(call.ptrs({a.getResult(), Emitter::readOrNull(a.getLse())})))
      return failure();
  } else {
    auto g = cast<AttentionGradOp>(op);
    if (failed(call.ptrs({g.getResult(), g.getLse(), g.getGrad()})))
      return failure();
    scaleAndCausal(g);
    SmallVector<Value> outs = llvm::map_to_vector(g.getResults(), Emitter::readOrNull);
    if (failed(call.ptrs(outs)))
      return failure();
  }
  if (seqMajor)
    call.boolean(true); // operands [..., T, H, D], read in place
  call.emit();
  return true;
}
