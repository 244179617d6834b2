//===- OnnxOpsNN.cpp - ONNX contraction, normalisation, reduction ops -----===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

LogicalResult matmul(NodeContext &n) {
  n.setOutputs(n.create<MatmulOp>(n.input(0), n.input(1)));
  return success();
}

LogicalResult gemm(NodeContext &n) {
  Value a = n.input(0), b = n.input(1);
  if (n.inputType(0).getRank() != 2 || n.inputType(1).getRank() != 2)
    return n.error("A and B must be matrices");
  if (n.getInt("transA", 0))
    a = n.create<TransposeOp>(a, ArrayRef<int64_t>{1, 0});
  if (n.getInt("transB", 0))
    b = n.create<TransposeOp>(b, ArrayRef<int64_t>{1, 0});
  Value y = n.create<MatmulOp>(a, b);
  double alpha = n.getFloat("alpha", 1.0), beta = n.getFloat("beta", 1.0);
  if (alpha != 1.0)
    y = n.create<MulOp>(y, n.scalarLike(y, alpha));
  if (n.hasInput(2) && beta != 0.0) {
    Value c = n.input(2);
    if (beta != 1.0)
      c = n.create<MulOp>(c, n.scalarLike(c, beta));
    y = n.create<AddOp>(y, c);
  }
  n.setOutputs(y);
  return success();
}

/// Explicit [top, left, bottom, right] padding from `pads`/`auto_pad`.
FailureOr<SmallVector<int64_t>> windowPadding(NodeContext &n, ArrayRef<int64_t> in,
                                              ArrayRef<int64_t> k,
                                              ArrayRef<int64_t> s,
                                              ArrayRef<int64_t> d) {
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    auto pads = n.getInts("pads").value_or(SmallVector<int64_t>(4, 0));
    if (pads.size() != 4)
      return (void)n.error("pads must have 4 entries"), failure();
    return pads;
  }
  if (autoPad == "VALID")
    return SmallVector<int64_t>(4, 0);
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return (void)n.error("unknown auto_pad '" + autoPad + "'"), failure();
  SmallVector<int64_t> pads(4, 0);
  for (int i = 0; i < 2; ++i) {
    int64_t out = (in[i] + s[i] - 1) / s[i];
    int64_t total = std::max<int64_t>((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i], 0);
    int64_t lo = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[i] = lo;
    pads[i + 2] = total - lo;
  }
  return pads;
}

LogicalResult conv(NodeContext &n) {
  auto x = n.inputType(0), w = n.inputType(1);
  if (x.getRank() != 4)
    return n.unsupported(Twine(x.getRank() - 2) + "-d convolution (only 2-d)");
  SmallVector<int64_t> k(w.getShape().drop_front(2));
  auto s = n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
  auto d = n.getInts("dilations").value_or(SmallVector<int64_t>{1, 1});
  auto pads = windowPadding(n, x.getShape().drop_front(2), k, s, d);
  if (failed(pads))
    return failure();
  Value bias = n.hasInput(2) ? n.input(2) : Value();
  n.setOutputs(n.create<Conv2DOp>(n.input(0), n.input(1), bias, s, *pads, d,
                                  n.getInt("group", 1)));
  return success();
}

LogicalResult pool(NodeContext &n, bool isMax) {
  auto x = n.inputType(0);
  if (x.getRank() != 4)
    return n.unsupported(Twine(x.getRank() - 2) + "-d pooling (only 2-d)");
  if (n.isOutputUsed(1))
    return n.unsupported("Indices output");
  if (n.getInt("storage_order", 0))
    return n.unsupported("storage_order=1");
  auto k = n.getInts("kernel_shape");
  if (!k || k->size() != 2)
    return n.error("kernel_shape must have 2 entries");
  auto s = n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
  auto d = n.getInts("dilations").value_or(SmallVector<int64_t>{1, 1});
  if (!isMax && (d[0] != 1 || d[1] != 1))
    return n.unsupported("AveragePool dilations");
  auto pads = windowPadding(n, x.getShape().drop_front(2), *k, s, d);
  if (failed(pads))
    return failure();
  bool ceil = n.getInt("ceil_mode", 0);
  if (isMax)
    n.setOutputs(n.create<MaxPool2DOp>(n.input(0), *k, s, *pads, d, ceil));
  else
    n.setOutputs(n.create<AvgPool2DOp>(n.input(0), *k, s, *pads, ceil,
                                       (bool)n.getInt("count_include_pad", 0)));
  return success();
}
LogicalResult maxPool(NodeContext &n) { return pool(n, true); }
LogicalResult avgPool(NodeContext &n) { return pool(n, false); }

template <typename OpTy>
LogicalResult globalPool(NodeContext &n) {
  int64_t rank = n.inputType(0).getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  n.setOutputs(n.create<OpTy>(n.input(0), axes, /*keepdims=*/true));
  return success();
}

LogicalResult batchNorm(NodeContext &n) {
  // BN-9 signals training by asking for the running statistics (5 outputs);
  // BN-14/15 have `training_mode`.
  bool training = n.getOpset() >= 14 ? n.getInt("training_mode", 0) != 0
                                     : n.numOutputs() > 1;
  for (unsigned i = 1; i < n.numOutputs(); ++i)
    if (n.isOutputUsed(i))
      return n.unsupported("running-statistics outputs");
  n.setOutputs(n.create<BatchNormOp>(
      n.inputType(0), n.input(0), n.input(1), n.input(2), n.input(3), n.input(4),
      llvm::APFloat(n.getFloat("epsilon", 1e-5)), training));
  return success();
}

LogicalResult layerNorm(NodeContext &n) {
  auto x = n.inputType(0);
  if (n.isOutputUsed(1) || n.isOutputUsed(2))
    return n.unsupported("Mean/InvStdDev outputs");
  if (n.getInt("stash_type", 1) != 1)
    return n.unsupported("stash_type other than float");
  auto ax = n.axis(n.getInt("axis", -1), x.getRank());
  if (failed(ax))
    return failure();
  Value bias = n.hasInput(2) ? n.input(2) : Value();
  n.setOutputs(n.create<LayerNormOp>(
      x, n.input(0), n.input(1), bias, *ax,
      llvm::APFloat(n.getFloat("epsilon", 1e-5))));
  return success();
}

template <typename OpTy>
LogicalResult softmax(NodeContext &n) {
  auto ax = n.axis(n.getInt("axis", -1), n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  n.setOutputs(n.create<OpTy>(n.input(0), *ax));
  return success();
}

/// ReduceX: axes from input (ReduceSum >= 13) or attribute; empty axes
/// reduce everything unless noop_with_empty_axes.
template <typename OpTy>
LogicalResult reduceImpl(NodeContext &n, bool axesFromInput) {
  auto x = n.inputType(0);
  SmallVector<int64_t> axes;
  if (axesFromInput) {
    if (n.hasInput(1)) {
      auto a = n.constantInts(1, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
  } else {
    axes = n.getInts("axes").value_or(SmallVector<int64_t>());
  }
  if (axes.empty()) {
    if (n.getInt("noop_with_empty_axes", 0)) {
      n.setOutputs(n.input(0));
      return success();
    }
    for (int64_t d = 0; d < x.getRank(); ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes) {
    auto ax = n.axis(a, x.getRank());
    if (failed(ax))
      return failure();
    a = *ax;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  n.setOutputs(n.create<OpTy>(n.input(0), axes, (bool)n.getInt("keepdims", 1)));
  return success();
}
template <typename OpTy>
LogicalResult reduceAttr(NodeContext &n) { return reduceImpl<OpTy>(n, false); }
template <typename OpTy>
LogicalResult reduceInput(NodeContext &n) { return reduceImpl<OpTy>(n, true); }

LogicalResult argImpl(NodeContext &n, bool isMin) {
  auto ax = n.axis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  Value x = n.input(0);
  if (isMin)
    x = n.create<NegOp>(x);
  n.setOutputs(n.create<ArgMaxOp>(x, *ax, (bool)n.getInt("keepdims", 1),
                                  (bool)n.getInt("select_last_index", 0)));
  return success();
}
LogicalResult argMax(NodeContext &n) { return argImpl(n, false); }
LogicalResult argMin(NodeContext &n) { return argImpl(n, true); }

LogicalResult dropout(NodeContext &n) {
  bool training = false;
  if (n.hasInput(2)) {
    auto t = n.constantInput(2, "training_mode");
    if (failed(t))
      return failure();
    training = t->getAsDouble(0) != 0;
  }
  double ratio = 0.5;
  if (n.hasInput(1)) {
    auto r = n.constantInput(1, "ratio");
    if (failed(r))
      return failure();
    ratio = r->getAsDouble(0);
  }
  Value x = n.input(0);
  auto xt = n.inputType(0);
  auto maskType = RankedTensorType::get(xt.getShape(), n.builder().getI1Type());
  if (!training || ratio == 0.0) {
    // Inference (or p = 0): identity with an all-true mask.
    HostTensor one(RankedTensorType::get({}, n.builder().getI1Type()));
    one.i()[0] = 1;
    Value mask = n.isOutputUsed(1) ? n.broadcastTo(n.constant(one), xt.getShape()) : Value();
    n.setOutputs({x, mask});
    return success();
  }
  if (ratio < 0 || ratio >= 1)
    return n.error("ratio must be in [0, 1)");
  // Seeds are per node, stable across imports of the same model.
  int64_t seed = n.getInt("seed", (int64_t)llvm::hash_value(n.getNode().name()) & 0x7fffffff);
  auto r = n.createMulti<DropoutOp>(xt, maskType, x,
                                    llvm::APFloat(ratio), seed);
  n.setOutputs(r);
  return success();
}

LogicalResult softmaxCrossEntropy(NodeContext &n) {
  if (n.hasInput(2))
    return n.unsupported("class weights");
  if (n.isOutputUsed(1))
    return n.unsupported("log_prob output");
  std::string red = n.getString("reduction", "mean");
  auto ignore = n.attr("ignore_index");
  IntegerAttr ignoreAttr =
      ignore ? n.builder().getI64IntegerAttr(ignore->i()) : IntegerAttr();
  n.setOutputs(n.create<CrossEntropyOp>(n.input(0), n.input(1),
                                        n.builder().getI64IntegerAttr(1),
                                        n.builder().getStringAttr(red), ignoreAttr));
  return success();
}

} // namespace

void onnx_import::registerNNOps(OpRegistry &r) {
  r.add("MatMul", 9, matmul);
  r.add("Gemm", 11, gemm);
  r.add("Conv", 11, conv);
  r.add("MaxPool", 12, maxPool);
  r.add("AveragePool", 11, avgPool);
  r.add("GlobalAveragePool", 1, globalPool<ReduceMeanOp>);
  r.add("GlobalMaxPool", 1, globalPool<ReduceMaxOp>);
  r.add("BatchNormalization", 9, batchNorm);
  r.add("LayerNormalization", 17, layerNorm);
  r.add("Softmax", 13, softmax<SoftmaxOp>);
  r.add("LogSoftmax", 13, softmax<LogSoftmaxOp>);
  r.add("ReduceSum", 11, reduceAttr<ReduceSumOp>);
  r.add("ReduceSum", 13, reduceInput<ReduceSumOp>);
  r.add("ReduceMean", 11, reduceAttr<ReduceMeanOp>);
  r.add("ReduceMax", 11, reduceAttr<ReduceMaxOp>);
  r.add("ReduceMin", 11, reduceAttr<ReduceMinOp>);
  r.add("ReduceProd", 11, reduceAttr<ReduceProdOp>);
  r.add("ArgMax", 12, argMax);
  r.add("ArgMin", 12, argMin);
  r.add("Dropout", 13, dropout);
  r.add("SoftmaxCrossEntropyLoss", 13, softmaxCrossEntropy);
}
