//===- VJPRules.h - the per-op VJP rules (internal) -------------*- C++ -*-===//
//
// One `rule` overload per differentiable op; VJPModels.cpp attaches them as
// DifferentiableOpInterface external models. `g` holds the result
// gradients (null where none), `out` receives one gradient per operand
// (null for operands without one).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_AUTODIFF_VJPRULES_H
#define MERAK_LIB_AUTODIFF_VJPRULES_H

#include "VJPBuilder.h"

namespace mlir::merak::vjp {

using Grads = SmallVectorImpl<Value>;

// clang-format off
#define MERAK_VJP_OPS(X)                                                       \
  X(AddOp) X(SubOp) X(MulOp) X(DivOp) X(PowOp) X(MaxOp) X(MinOp) X(WhereOp)    \
  X(ExpOp) X(LogOp) X(SqrtOp) X(RsqrtOp) X(TanhOp) X(ErfOp) X(SigmoidOp)       \
  X(SoftplusOp) X(Expm1Op) X(Log1pOp)                                          \
  X(ReciprocalOp) X(SinOp) X(CosOp) X(FloorOp) X(CeilOp) X(ReluOp) X(NegOp)    \
  X(AsinOp) X(AcosOp) X(AtanOp)                                                \
  X(AbsOp) X(SignOp) X(GeluOp) X(LeakyReluOp) X(ClampOp) X(CastOp)             \
  X(ReshapeOp) X(BroadcastOp) X(TransposeOp) X(SliceOp) X(ConcatOp)            \
  X(SplitOp) X(GatherOp) X(ReduceSumOp) X(ReduceMeanOp) X(ReduceMaxOp)         \
  X(ReduceMinOp) X(SoftmaxOp) X(LogSoftmaxOp) X(LayerNormOp) X(RmsNormOp)      \
  X(CrossEntropyOp) X(DropoutOp) X(MatmulOp) X(CumSumOp) X(LinearScanOp)       \
  X(SelectiveScanOp) X(Conv2DOp)                                               \
  X(MaxPool2DOp) X(AvgPool2DOp) X(GatherElementsOp) X(BatchNormOp)         \
  X(GatherGradOp) X(GatherElementsGradOp) X(Conv2DBackwardDataOp)             \
  X(AllReduceOp) X(TpIdentityOp) X(AllGatherOp) X(ReduceScatterOp)            \
  X(LocalShardOp)                                                              \
  X(AllToAllOp) X(ExpertShadowOp)                                             \
  X(AttentionOp) X(ExpertMatmulOp)

// clang-format on

#define MERAK_VJP_DECLARE(OP)                                                  \
  LogicalResult rule(OP op, Emitter &e, ValueRange g, Grads &out);
MERAK_VJP_OPS(MERAK_VJP_DECLARE)
#undef MERAK_VJP_DECLARE

} // namespace mlir::merak::vjp

#endif
