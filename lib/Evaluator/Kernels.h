//===- Kernels.h - reference kernels of the evaluator (internal) -*- C++ -*-===//
#ifndef MERAK_LIB_EVALUATOR_KERNELS_H
#define MERAK_LIB_EVALUATOR_KERNELS_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
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

// One entry per op family; each emits its own errors.
LogicalResult evalBinary(Operation *op, Operands in, Results out);
LogicalResult evalWhere(WhereOp op, Operands in, Results out);
LogicalResult evalUnary(Operation *op, Operands in, Results out);
LogicalResult evalCast(CastOp op, Operands in, Results out);

LogicalResult evalReshape(Operation *op, Operands in, Results out);
LogicalResult evalBroadcast(BroadcastOp op, Operands in, Results out);
LogicalResult evalTranspose(TransposeOp op, Operands in, Results out);
LogicalResult evalSlice(SliceOp op, Operands in, Results out);
LogicalResult evalConcat(ConcatOp op, Operands in, Results out);
LogicalResult evalSplit(SplitOp op, Operands in, Results out);
LogicalResult evalGather(GatherOp op, Operands in, Results out);
LogicalResult evalGatherGrad(GatherGradOp op, Operands in, Results out);
LogicalResult evalGatherElements(GatherElementsOp op, Operands in, Results out);

LogicalResult evalReduce(Operation *op, Operands in, Results out);
/// argmax (or argmin with `min`) along `axis`.
LogicalResult evalArg(Operation *op, int64_t axis, bool keepdims, bool last,
                      bool min, Operands in, Results out);
LogicalResult evalSoftmax(Operation *op, int64_t axis, bool log, Operands in,
                          Results out);
LogicalResult evalCumSum(CumSumOp op, Operands in, Results out);
LogicalResult evalLayerNorm(LayerNormOp op, Operands in, Results out);
LogicalResult evalRmsNorm(RmsNormOp op, Operands in, Results out);
LogicalResult evalBatchNorm(BatchNormOp op, Operands in, Results out);
LogicalResult evalCrossEntropy(CrossEntropyOp op, Operands in, Results out);

LogicalResult evalMatmul(MatmulOp op, Operands in, Results out);
LogicalResult evalConv2D(Conv2DOp op, Operands in, Results out);
LogicalResult evalMaxPool(MaxPool2DOp op, Operands in, Results out);
LogicalResult evalAvgPool(AvgPool2DOp op, Operands in, Results out);
LogicalResult evalDropout(DropoutOp op, Operands in, Results out);
LogicalResult evalConvBackwardData(Conv2DBackwardDataOp op, Operands in, Results out);
LogicalResult evalConvBackwardFilter(Conv2DBackwardFilterOp op, Operands in, Results out);
LogicalResult evalMaxPoolGrad(MaxPool2DGradOp op, Operands in, Results out);
LogicalResult evalAvgPoolGrad(AvgPool2DGradOp op, Operands in, Results out);
LogicalResult evalGatherElementsGrad(GatherElementsGradOp op, Operands in, Results out);
LogicalResult evalGeluGrad(GeluGradOp op, Operands in, Results out);
/// softmax_grad, or log_softmax_grad with `log`.
LogicalResult evalSoftmaxGrad(Operation *op, int64_t axis, bool log, Operands in,
                              Results out);
LogicalResult evalLayerNormGrad(LayerNormGradOp op, Operands in, Results out);
LogicalResult evalCrossEntropyGrad(CrossEntropyGradOp op, Operands in, Results out);
LogicalResult evalAttention(AttentionOp op, Operands in, Results out);
LogicalResult evalAttentionGrad(AttentionGradOp op, Operands in, Results out);

// Fused optimizer updates (EvalOptimizer.cpp).
LogicalResult evalAdamWUpdate(AdamWUpdateOp op, Operands in, Results out);
LogicalResult evalAdanUpdate(AdanUpdateOp op, Operands in, Results out);
LogicalResult evalSgdUpdate(SgdUpdateOp op, Operands in, Results out);

} // namespace mlir::merak::kernels

#endif
