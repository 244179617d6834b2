//===- Kernels.h - reference kernels of the evaluator (internal) -*- C++ -*-===//
#ifndef MERAK_LIB_EVALUATOR_KERNELS_H
#define MERAK_LIB_EVALUATOR_KERNELS_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/DropoutMask.h"
#include "merak/Evaluator/HostTensor.h"

namespace mlir::merak::kernels {

using Operands = ArrayRef<const HostTensor *>;
using Results = SmallVectorImpl<HostTensor> &;

/// Row-major strides of `shape`.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape);
/// Strides of `in` read as if broadcast to `out` (0 on broadcast dims).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> out);

/// Calls fn(linear, index) for every index of `shape` in row-major order.
template <typename Fn>
void forEachIndex(ArrayRef<int64_t> shape, Fn fn) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  SmallVector<int64_t> idx(shape.size(), 0);
  for (int64_t lin = 0; lin < n; ++lin) {
    fn(lin, ArrayRef<int64_t>(idx));
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

inline int64_t dot(ArrayRef<int64_t> idx, ArrayRef<int64_t> strides) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    o += idx[d] * strides[d];
  return o;
}

inline RankedTensorType resultType(Operation *op, unsigned i = 0) {
  return cast<RankedTensorType>(op->getResult(i).getType());
}

/// Value of an optional per-feature operand `t` (null: `dflt`) broadcast over
/// the normalised shape, at feature index `j` (layer_norm, rms_norm).
double featureValue(const HostTensor *t, ArrayRef<int64_t> normShape, int64_t j,
                    double dflt);

/// Every op the evaluator runs, as X(Op, ...). The families whose ops share
/// one kernel have their own lists; binary and reduction ops name their
/// kind in MerakOps.h's lists (X(AddOp, Add) is Bin::Add in
/// EvalElementwise.cpp).
/// The unary ops of floats only, as X(Op, f(x)) in double precision
/// (EvalElementwise.cpp).
// clang-format off
#define MERAK_EVAL_FLOAT_UNARY_OPS(X)                                          \
  X(ExpOp, std::exp(x)) X(LogOp, std::log(x)) X(SqrtOp, std::sqrt(x))          \
  X(RsqrtOp, 1.0 / std::sqrt(x)) X(TanhOp, std::tanh(x)) X(ErfOp, std::erf(x)) \
  X(SigmoidOp, 1.0 / (1.0 + std::exp(-x)))                                     \
  X(SoftplusOp, std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))))       \
  X(Expm1Op, std::expm1(x)) X(Log1pOp, std::log1p(x))                          \
  X(ReciprocalOp, 1.0 / x) X(SinOp, std::sin(x)) X(CosOp, std::cos(x))         \
  X(AsinOp, std::asin(x)) X(AcosOp, std::acos(x)) X(AtanOp, std::atan(x))       \
  X(FloorOp, std::floor(x)) X(CeilOp, std::ceil(x))
// clang-format on
/// Collectives split over `parts` ranks (EvalCollectives.cpp).
#define MERAK_EVAL_PARTS_OPS(X)                                                \
  X(ReduceScatterOp) X(AllGatherOp) X(LocalShardOp)
// clang-format off
#define MERAK_EVAL_OPS(X)                                                                          \
  X(ConstantOp)                                                                                    \
  MERAK_BINARY_OP_KINDS(X)                                                                         \
  X(WhereOp)                                                                                       \
  MERAK_EVAL_FLOAT_UNARY_OPS(X)                                                                    \
  X(ReluOp)                                                                                        \
  X(NegOp) X(AbsOp) X(SignOp) X(NotOp) X(BitNotOp) X(GeluOp) X(LeakyReluOp) X(ClampOp) X(CastOp)   \
      X(ReshapeOp) X(BroadcastOp) X(TransposeOp) X(SliceOp) X(ConcatOp) X(SplitOp) X(GatherOp)     \
          X(GatherGradOp) X(GatherElementsOp) MERAK_REDUCE_OP_KINDS(X) X(ArgMaxOp) X(ArgMinOp)     \
              X(ArgSortOp) X(SoftmaxOp) X(LogSoftmaxOp) X(CumSumOp) X(LinearScanOp)                \
                  X(LinearScanGradOp) X(SelectiveScanOp) X(SelectiveScanGradOp) X(                 \
                  LayerNormOp) X(RmsNormOp) X(BatchNormOp) X(BatchNormStatsOp) X(BatchNormGradOp)  \
                  X(SumSquaresOp) X(CrossEntropyOp) X(MatmulOp) X(Conv2DOp) X(MaxPool2DOp)         \
                      X(AvgPool2DOp) X(DropoutOp) X(GroupRankOp) X(TpIdentityOp) X(AllReduceOp)    \
                          X(AllToAllOp) MERAK_EVAL_PARTS_OPS(X) X(Conv2DBackwardDataOp)            \
                              X(Conv2DBackwardFilterOp) X(MaxPool2DGradOp) X(AvgPool2DGradOp)      \
                                  X(GatherElementsGradOp) X(GeluGradOp) X(SoftmaxGradOp)           \
                                      X(LogSoftmaxGradOp) X(LayerNormGradOp) X(CrossEntropyGradOp) \
                                          X(AttentionOp) X(AttentionGradOp) X(AdamWUpdateOp)       \
                                              X(AdanUpdateOp) X(SgdUpdateOp) X(ExpertMatmulOp)     \
                                                  X(ExpertMatmulGradWeightOp)                      \
                                                      X(ExpertShadowPlanOp) X(ExpertShadowOp)      \
                                                          X(ExpertPlaceOp) X(ExpertCapacityOp)     \
                                                              X(ExpertCompactOp)
// clang-format on

// One rule per op (EvalModels.cpp attaches them as EvaluableOpInterface
// external models); each emits its own errors.
#define MERAK_EVAL_DECLARE(OP, ...)                                            \
  LogicalResult eval(OP op, Operands in, Results out);
MERAK_EVAL_OPS(MERAK_EVAL_DECLARE)
#undef MERAK_EVAL_DECLARE

/// merak.all_to_all (or its started form) on one rank: ids in [-1,
/// experts); a dropped row (-1) is not sent (zero); `compact` rows list
/// the kept rows in order (a dispatch's result, a combine's input).
FailureOr<HostTensor> allToAllOnOneRank(Operation *op, const HostTensor &x,
                                        const HostTensor &ids, int64_t experts, bool combine,
                                        std::optional<uint64_t> compact);

/// A dropout mask of `op` (merak.dropout, or attention on its
/// probabilities) as the evaluator draws it: serial conventions (batch part
/// 0, tp rank 0), the caller's step (evaluationStep()). `shape` is the
/// masked tensor's; an error on `op` when the recorded splits do not fit it.
struct SerialDropoutMask {
  ::merak::rt::dropout::MaskLayout layout;
  uint64_t key = 0;
  double ratio = 0;
  /// The factor of element k of the local tensor: 1 / (1 - ratio) or 0.
  double factor(int64_t k) const;
};
FailureOr<SerialDropoutMask> serialDropoutMask(Operation *op, ArrayRef<int64_t> shape, double ratio,
                                               int64_t seed,
                                               std::optional<ArrayRef<int64_t>> batchSplit,
                                               std::optional<ArrayRef<int64_t>> tpSplit);

} // namespace mlir::merak::kernels

#endif
