//===- VJPModels.cpp - attach the VJP rules as external models ------------===//
#include "merak/Dialect/Merak/Autodiff/VJP.h"
#include "VJPRules.h"

#include "merak/Dialect/Merak/IR/MerakDialect.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
template <typename OpTy>
struct VJPModel
    : DifferentiableOpInterface::ExternalModel<VJPModel<OpTy>, OpTy> {
  LogicalResult buildVJP(Operation *op, OpBuilder &b, ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    vjp::Emitter e{b, op->getLoc()};
    operandGrads.clear();
    return vjp::rule(cast<OpTy>(op), e, resultGrads, operandGrads);
  }
};
} // namespace

void mlir::merak::registerVJPExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MerakDialect *) {
#define MERAK_VJP_ATTACH(OP) OP::attachInterface<VJPModel<OP>>(*ctx);
    MERAK_VJP_OPS(MERAK_VJP_ATTACH)
#undef MERAK_VJP_ATTACH
  });
}
