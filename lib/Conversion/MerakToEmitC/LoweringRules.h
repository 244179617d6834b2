//===- LoweringRules.h - merak-to-emitc's per-op rules (internal) -*- C++ -*-===//
//
// One `rule` overload per op with a runtime lowering, defined by family
// (ElementwiseRules.cpp, ShapeRules.cpp, ReductionRules.cpp, NNRules.cpp,
// LinalgRules.cpp, CollectiveRules.cpp, OptimizerRules.cpp,
// AttentionRules.cpp); LoweringModels.cpp attaches them as
// LowerToRuntimeOpInterface external models. Ops sharing one runtime entry
// point with an enum argument (binary, unary, reduce) are listed with their
// enum value, and their rules are one line each.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_LOWERINGRULES_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_LOWERINGRULES_H

#include "CallBuilder.h"
#include "LoweringContext.h"

#include "merak/Conversion/MerakToEmitC/LowerToRuntimeOpInterface.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"

namespace mlir::merak::emitc_lowering {

// binary(Binary::KIND, ...) and reduce(Reduce::KIND, ...) ops: MerakOps.h's
// MERAK_BINARY_OP_KINDS and MERAK_REDUCE_OP_KINDS.

/// unary(Unary::KIND, ...) ops without attributes (gelu, leaky_relu and
/// clamp have rules of their own).
// clang-format off
#define MERAK_UNARY_OPS(X)                                                     \
  X(ExpOp, Exp) X(LogOp, Log) X(SqrtOp, Sqrt) X(RsqrtOp, Rsqrt)                \
  X(TanhOp, Tanh) X(ErfOp, Erf) X(SigmoidOp, Sigmoid) X(SoftplusOp, Softplus)  \
  X(ReciprocalOp, Reciprocal) X(SinOp, Sin) X(CosOp, Cos) X(FloorOp, Floor)    \
  X(CeilOp, Ceil) X(ReluOp, Relu) X(NegOp, Neg) X(AbsOp, Abs) X(SignOp, Sign)  \
  X(NotOp, Not) X(AsinOp, Asin) X(AcosOp, Acos) X(AtanOp, Atan)                \
  X(BitNotOp, BitNot) X(Expm1Op, Expm1) X(Log1pOp, Log1p)
// clang-format on

// clang-format off
/// Every other op with a rule.
#define MERAK_LOWERING_OPS(X)                                                                      \
  /* ElementwiseRules.cpp */                                                                       \
  X(GeluOp)                                                                                        \
  X(LeakyReluOp)                                                                                   \
  X(ClampOp)                                                                                       \
  X(WhereOp)                                                                                       \
  X(CastOp) /* ShapeRules.cpp */                                                                   \
  X(ConstantOp)                                                                                    \
  X(ReshapeOp) X(TpIdentityOp) X(GetParamOp) X(SetParamOp) X(BroadcastOp) X(TransposeOp)           \
      X(SliceOp) X(ConcatOp) X(SplitOp) X(GatherOp) X(GatherGradOp) X(GatherElementsOp)            \
          X(GatherElementsGradOp) /* ReductionRules.cpp */                                         \
      X(ArgMaxOp) X(ArgMinOp) X(ArgSortOp) X(CumSumOp) X(LinearScanOp) X(LinearScanGradOp)          \
      X(SelectiveScanOp) X(SelectiveScanGradOp) /* NNRules.cpp */                                  \
      X(SoftmaxOp) X(LogSoftmaxOp) X(LayerNormOp) X(RmsNormOp) X(BatchNormOp) X(BatchNormStatsOp)  \
          X(BatchNormGradOp) X(SumSquaresOp) X(DropoutOp) X(CrossEntropyOp) X(GeluGradOp)          \
              X(SoftmaxGradOp) X(LogSoftmaxGradOp) X(LayerNormGradOp)                              \
                  X(CrossEntropyGradOp) /* LinalgRules.cpp */                                      \
      X(MatmulOp) X(MatmulTOp) X(Conv2DOp) X(Conv2DBackwardDataOp) X(Conv2DBackwardFilterOp)       \
          X(MaxPool2DOp) X(AvgPool2DOp) X(MaxPool2DGradOp) X(AvgPool2DGradOp) X(ExpertMatmulOp)    \
              X(ExpertMatmulGradWeightOp) X(ExpertShadowPlanOp) X(ExpertPlaceOp)                   \
                  X(ExpertCapacityOp) X(ExpertCompactOp) /* CollectiveRules.cpp */                 \
      X(AllReduceOp) X(ReduceScatterOp) X(AllGatherOp) X(AllToAllOp) X(ExpertShadowOp)             \
          X(GroupRankOp) X(LocalShardOp) X(AllReduceStartOp) X(ReduceScatterStartOp)               \
              X(AllGatherStartOp) X(AllToAllStartOp) X(WaitOp) /* OptimizerRules.cpp */            \
      X(AdamWUpdateOp) X(AdanUpdateOp) X(SgdUpdateOp)          /* AttentionRules.cpp */            \
      X(AttentionOp) X(AttentionGradOp)
// clang-format on

/// Emits the runtime calls of `op`: failure after a diagnostic, NoKernel
/// (nothing emitted) when the target has none for it.
#define MERAK_LOWERING_DECLARE(OP)                                             \
  FailureOr<Lowering> rule(OP op, Emitter &e, LoweringContext &ctx);
#define MERAK_LOWERING_DECLARE_KIND(OP, KIND) MERAK_LOWERING_DECLARE(OP)
MERAK_LOWERING_OPS(MERAK_LOWERING_DECLARE)
MERAK_BINARY_OP_KINDS(MERAK_LOWERING_DECLARE_KIND)
MERAK_UNARY_OPS(MERAK_LOWERING_DECLARE_KIND)
MERAK_REDUCE_OP_KINDS(MERAK_LOWERING_DECLARE_KIND)
#undef MERAK_LOWERING_DECLARE_KIND
#undef MERAK_LOWERING_DECLARE

/// Defines the rule of family op OP as `LOWER(op, e, "ENUM::KIND")`, the
/// family's lowering given the op's enum value (MERAK_BINARY_OP_KINDS etc.).
#define MERAK_DEFINE_KIND_RULE(OP, KIND, LOWER, ENUM)                                  \
  FailureOr<Lowering> emitc_lowering::rule(OP op, Emitter &e, LoweringContext &) {     \
    return LOWER(op, e, ENUM "::" #KIND);                                              \
  }

/// Whether the rule of an op calls a kernel (opMark, kernelOps): every
/// op's but those of the overloads below (ShapeRules.cpp).
template <typename OpTy> bool emitsKernel(OpTy) { return true; }
bool emitsKernel(ConstantOp);
bool emitsKernel(ReshapeOp);
bool emitsKernel(TpIdentityOp);
bool emitsKernel(GetParamOp op);

/// Whether, while a started collective is in flight, an op's calls are
/// followed by a collectiveProgress() poll: every op's but a start's or a
/// wait's (MPI calls themselves) and a fused optimizer update's (never
/// polled after; the generated code is kept as it was).
template <typename OpTy> bool pollsCollectives(OpTy) { return true; }
inline bool pollsCollectives(AllReduceStartOp) { return false; }
inline bool pollsCollectives(ReduceScatterStartOp) { return false; }
inline bool pollsCollectives(AllGatherStartOp) { return false; }
inline bool pollsCollectives(AllToAllStartOp) { return false; }
inline bool pollsCollectives(WaitOp) { return false; }
inline bool pollsCollectives(AdamWUpdateOp) { return false; }
inline bool pollsCollectives(AdanUpdateOp) { return false; }
inline bool pollsCollectives(SgdUpdateOp) { return false; }

} // namespace mlir::merak::emitc_lowering

/// Declares `Value name` = the planned pointer of `value`, or returns
/// failure (after getPlannedBuffer's diagnostic).
#define PTR(name, value)                                                       \
  FailureOr<Value> name##OrErr = e.pointer(value);                             \
  if (failed(name##OrErr))                                                     \
    return failure();                                                          \
  Value name = *name##OrErr;

#endif
