//===- VJPCollectives.cpp - VJP rules of the collective ops ---------------===//
//
// Megatron-LM's conjugate pair of tensor parallelism: f (merak.tp_identity)
// is the identity forward and sums the gradient over "tp" backward; g
// (merak.all_reduce, tp, sum) sums forward and is the identity backward,
// since everything after it is computed identically on every rank of the
// group, so the incoming gradient is already replicated.
//
//===----------------------------------------------------------------------===//
#include "VJPRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::vjp;

namespace mlir::merak::vjp {

LogicalResult rule(AllReduceOp op, Emitter &e, ValueRange g, Grads &out) {
  if (op.getGroup() != "tp" || op.getReduction() != "sum")
    return op.emitError("no derivative rule for merak.all_reduce over \"")
           << op.getGroup() << "\" with reduction \"" << op.getReduction()
           << "\" (only tensor parallelism's tp/sum is differentiated)";
  out.assign(g.begin(), g.end());
  return success();
}

LogicalResult rule(TpIdentityOp op, Emitter &e, ValueRange g, Grads &out) {
  if (!g[0]) {
    out.assign({Value()});
    return success();
  }
  out.assign({AllReduceOp::create(e.b, e.loc, ValueRange{g[0]}, "tp", "sum").getResult(0)});
  return success();
}

} // namespace mlir::merak::vjp
