//===- LoweringModels.cpp - attach the lowering rules as external models --===//
#include "LoweringRules.h"

#include "merak/Dialect/Merak/IR/MerakDialect.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

#include "merak/Conversion/MerakToEmitC/LowerToRuntimeOpInterface.cpp.inc"

namespace {
template <typename OpTy>
struct LoweringModel
    : LowerToRuntimeOpInterface::ExternalModel<LoweringModel<OpTy>, OpTy> {
  FailureOr<Lowering> lowerToRuntime(Operation *op, Emitter &e, LoweringContext &ctx) const {
    return rule(cast<OpTy>(op), e, ctx);
  }
  bool emitsKernel(Operation *op) const { return emitc_lowering::emitsKernel(cast<OpTy>(op)); }
  bool pollsCollectives(Operation *op) const {
    return emitc_lowering::pollsCollectives(cast<OpTy>(op));
  }
};
} // namespace

void mlir::merak::registerMerakToEmitCExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MerakDialect *) {
#define MERAK_LOWERING_ATTACH(OP) OP::attachInterface<LoweringModel<OP>>(*ctx);
#define MERAK_LOWERING_ATTACH_KIND(OP, KIND) MERAK_LOWERING_ATTACH(OP)
    MERAK_LOWERING_OPS(MERAK_LOWERING_ATTACH)
    MERAK_BINARY_OP_KINDS(MERAK_LOWERING_ATTACH_KIND)
    MERAK_UNARY_OPS(MERAK_LOWERING_ATTACH_KIND)
    MERAK_REDUCE_OP_KINDS(MERAK_LOWERING_ATTACH_KIND)
#undef MERAK_LOWERING_ATTACH_KIND
#undef MERAK_LOWERING_ATTACH
  });
}
