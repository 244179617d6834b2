//===- OptimizerUpdates.cpp - Lowering the fused optimizer updates --------===//
#include "OptimizerUpdates.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }
} // namespace

FailureOr<bool> mlir::merak::emitc_lowering::lowerOptimizerUpdate(Operation *op, Emitter &e) {
  return llvm::TypeSwitch<Operation *, FailureOr<bool>>(op)
      .Case([&](AdamWUpdateOp u) -> FailureOr<bool> {
        auto call = e.call("adamwUpdate");
        call.dtype(u.getParam().getType());
        if (failed(call.ptrs({u.getParam(), u.getGrad(), u.getExpAvg(), u.getExpAvgSq(),
                                u.getLr(), u.getStep(), u.getClip(), u.getNewParam(),
                                u.getNewExpAvg(), u.getNewExpAvgSq()})))
          return failure();
        call.i64(elements(u.getParam()))
            .f64(u.getBeta1().convertToDouble())
            .f64(u.getBeta2().convertToDouble())
            .f64(u.getEps().convertToDouble())
            .f64(u.getWeightDecay().convertToDouble())
            .emit();
        return true;
      })
      .Case([&](AdanUpdateOp u) -> FailureOr<bool> {
        auto call = e.call("adanUpdate");
        call.dtype(u.getParam().getType());
        if (failed(call.ptrs({u.getParam(), u.getGrad(), u.getExpAvg(), u.getExpAvgDiff(),
                                u.getExpAvgSq(), u.getPrevGrad(), u.getLr(), u.getStep(),
                                u.getClip(), u.getNewParam(), u.getNewExpAvg(),
                                u.getNewExpAvgDiff(), u.getNewExpAvgSq(),
                                u.getNewPrevGrad()})))
          return failure();
        call.i64(elements(u.getParam()))
            .f64(u.getBeta1().convertToDouble())
            .f64(u.getBeta2().convertToDouble())
            .f64(u.getBeta3().convertToDouble())
            .f64(u.getEps().convertToDouble())
            .f64(u.getWeightDecay().convertToDouble())
            .emit();
        return true;
      })
      .Case([&](SgdUpdateOp u) -> FailureOr<bool> {
        auto call = e.call("sgdUpdate");
        call.dtype(u.getParam().getType());
        Value bufOut = u.getMomentumBuffer() ? u.getResult(1) : Value();
        if (failed(call.ptrs({u.getParam(), u.getGrad(), u.getMomentumBuffer(), u.getLr(),
                                u.getClip(), u.getResult(0), bufOut})))
          return failure();
        call.i64(elements(u.getParam()))
            .f64(u.getMomentum().convertToDouble())
            .f64(u.getWeightDecay().convertToDouble())
            .boolean(u.getNesterov())
            .emit();
        return true;
      })
      .Default([](Operation *) -> FailureOr<bool> { return false; });
}
