//===- EvalModels.cpp - attach the evaluator's rules as external models ---===//
#include "merak/Evaluator/EvaluableOpInterface.h"
#include "merak/Evaluator/Evaluator.h"
#include "Kernels.h"

#include "merak/Dialect/Merak/IR/MerakDialect.h"

#include "merak/Evaluator/EvaluableOpInterface.cpp.inc"

using namespace mlir;
using namespace mlir::merak;

namespace {
template <typename OpTy>
struct EvalModel
    : EvaluableOpInterface::ExternalModel<EvalModel<OpTy>, OpTy> {
  LogicalResult evaluate(Operation *op, ArrayRef<const HostTensor *> operands,
                         SmallVectorImpl<HostTensor> &results) const {
    return kernels::eval(cast<OpTy>(op), operands, results);
  }
};
} // namespace

void mlir::merak::registerEvaluatorExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MerakDialect *) {
#define MERAK_EVAL_ATTACH(OP, ...) OP::attachInterface<EvalModel<OP>>(*ctx);
    MERAK_EVAL_OPS(MERAK_EVAL_ATTACH)
#undef MERAK_EVAL_ATTACH
  });
}
