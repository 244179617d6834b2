//===- OptimizerRules.cpp - Lowering the fused optimizer updates ----------===//
//
// merak.adamw_update, adan_update and sgd_update: one runtime call per op
// (adamwUpdate / adanUpdate / sgdUpdate), a null pointer for an absent clip
// coefficient or momentum buffer.
//
//===----------------------------------------------------------------------===//
#include "LoweringRules.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

FailureOr<Lowering> emitc_lowering::rule(AdamWUpdateOp u, Emitter &e, LoweringContext &) {
  auto call = e.call(kernels::adamwUpdate);
  call.dtype(u.getParam().getType());
  if (failed(call.ptrs({u.getParam(), u.getGrad(), u.getExpAvg(), u.getExpAvgSq(),
                        u.getLr(), u.getStep(), u.getClip(), u.getNewParam(),
                        u.getNewExpAvg(), u.getNewExpAvgSq()})))
    return failure();
  call.i64(numElements(u.getParam().getType()))
      .f64(u.getBeta1().convertToDouble())
      .f64(u.getBeta2().convertToDouble())
      .f64(u.getEps().convertToDouble())
      .f64(u.getWeightDecay().convertToDouble())
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(AdanUpdateOp u, Emitter &e, LoweringContext &) {
  auto call = e.call(kernels::adanUpdate);
  call.dtype(u.getParam().getType());
  if (failed(call.ptrs({u.getParam(), u.getGrad(), u.getExpAvg(), u.getExpAvgDiff(),
                        u.getExpAvgSq(), u.getPrevGrad(), u.getLr(), u.getStep(),
                        u.getClip(), u.getNewParam(), u.getNewExpAvg(),
                        u.getNewExpAvgDiff(), u.getNewExpAvgSq(),
                        u.getNewPrevGrad()})))
    return failure();
  call.i64(numElements(u.getParam().getType()))
      .f64(u.getBeta1().convertToDouble())
      .f64(u.getBeta2().convertToDouble())
      .f64(u.getBeta3().convertToDouble())
      .f64(u.getEps().convertToDouble())
      .f64(u.getWeightDecay().convertToDouble())
      .emit();
  return Lowering::Done;
}

FailureOr<Lowering> emitc_lowering::rule(SgdUpdateOp u, Emitter &e, LoweringContext &) {
  auto call = e.call(kernels::sgdUpdate);
  call.dtype(u.getParam().getType());
  Value bufOut = u.getMomentumBuffer() ? u.getResult(1) : Value();
  if (failed(call.ptrs({u.getParam(), u.getGrad(), u.getMomentumBuffer(), u.getLr(),
                        u.getClip(), u.getResult(0), bufOut})))
    return failure();
  call.i64(numElements(u.getParam().getType()))
      .f64(u.getMomentum().convertToDouble())
      .f64(u.getWeightDecay().convertToDouble())
      .boolean(u.getNesterov())
      .emit();
  return Lowering::Done;
}
