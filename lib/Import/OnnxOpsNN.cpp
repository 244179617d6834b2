//===- OnnxOpsNN.cpp - ONNX contraction, normalisation, reduction ops -----===//
#include "ImporterImpl.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

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

/// [N, C, L] -> [N, C, 1, L] for 1-d windows; unchanged for 2-d.
Value lift(NodeContext &n, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() != 3)
    return v;
  return n.reshape(v, {t.getDimSize(0), t.getDimSize(1), 1, t.getDimSize(2)});
}
/// Inverse of `lift` on a result.
Value lower(NodeContext &n, Value v, bool wasLifted) {
  if (!wasLifted || !v)
    return v;
  auto t = cast<RankedTensorType>(v.getType());
  return n.reshape(v, {t.getDimSize(0), t.getDimSize(1), t.getDimSize(3)});
}

LogicalResult conv(NodeContext &n) {
  auto x = n.inputType(0), w = n.inputType(1);
  if (x.getRank() == 5)
    return importConv3D(n);
  if (x.getRank() != 3 && x.getRank() != 4)
    return n.unsupported(Twine(x.getRank() - 2) + "-d convolution (1-d to 3-d only)");
  if (w.getRank() != x.getRank())
    return n.error("weight rank differs from input rank");
  auto win = windowAttrs(n, x.getShape().drop_front(2), w.getShape().drop_front(2));
  if (failed(win))
    return failure();
  Value bias = n.hasInput(2) ? n.input(2) : Value();
  Value y = n.create<Conv2DOp>(lift(n, n.input(0)), lift(n, n.input(1)), bias,
                               win->strides, win->padding, win->dilations,
                               n.getInt("group", 1));
  n.setOutputs(lower(n, y, x.getRank() == 3));
  return success();
}

/// ConvTranspose: the data gradient of the convolution it inverts (whose
/// weight layout [C_in, C_out/group, k...] it shares), plus the bias. The
/// full extent is s*(in-1) + output_padding + (k-1)*d + 1; the result is
/// cropped by the pads, or, with output_shape or auto_pad SAME_* (output
/// in*s), by pads computed as onnx's spec says (the larger half at the end,
/// at the start for SAME_UPPER). An output larger than the full extent gets
/// zeros (and the bias) at the end.
LogicalResult convTranspose(NodeContext &n) {
  auto x = n.inputType(0), w = n.inputType(1);
  int64_t rank = x.getRank(), r = rank - 2;
  if (rank < 3 || rank > 5)
    return n.unsupported(Twine(r) + "-d transposed convolution (1-d to 3-d only)");
  if (w.getRank() != rank)
    return n.error("weight rank differs from input rank");
  int64_t group = n.getInt("group", 1);
  if (group < 1 || x.getDimSize(1) != w.getDimSize(0) || w.getDimSize(0) % group)
    return n.error("the weight's first dimension must be the input's " +
                   Twine(x.getDimSize(1)) + " channels, a multiple of group " + Twine(group));
  auto win = windowAttrs(n, x.getShape().drop_front(2), w.getShape().drop_front(2));
  if (failed(win))
    return failure();
  SmallVector<int64_t> outPad = n.getInts("output_padding").value_or(SmallVector<int64_t>(r, 0));
  auto outShape = n.getInts("output_shape");
  if ((int64_t)outPad.size() != r || (outShape && (int64_t)outShape->size() != r))
    return n.error("output_padding and output_shape need " + Twine(r) + " entries");
  // Per spatial dim (in the lifted 2-d form for 1-d): begin/end pads.
  int64_t off = r == 1 ? 1 : 0, ends = r == 1 ? 2 : r;
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  SmallVector<int64_t> shape{x.getDimSize(0), w.getDimSize(1) * group}, excess(r, 0);
  if (r == 1)
    shape.push_back(1);
  for (int64_t i = 0; i < r; ++i) {
    int64_t s = win->strides[off + i], k = win->kernel[off + i], d = win->dilations[off + i];
    if (outPad[i] < 0 || outPad[i] >= std::max(s, d))
      return n.error("output_padding " + Twine(outPad[i]) +
                     " must be smaller than the stride or the dilation");
    int64_t full = s * (x.getDimSize(2 + i) - 1) + outPad[i] + (k - 1) * d + 1;
    int64_t &lo = win->padding[off + i], &hi = win->padding[off + i + ends];
    if (same || outShape) {
      int64_t want = outShape ? (*outShape)[i] : x.getDimSize(2 + i) * s;
      if (want <= 0 || want > kMaxElements)
        return n.error("the output would have " + Twine(want) + " elements along spatial "
                       "dimension " + Twine(i));
      int64_t total = full - want;
      excess[i] = std::max<int64_t>(-total, 0);
      total = std::max<int64_t>(total, 0);
      lo = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      hi = total - lo;
    }
    int64_t extent = full - lo - hi;
    if (extent <= 0)
      return n.error("the output would have " + Twine(extent) + " elements along spatial "
                     "dimension " + Twine(i));
    shape.push_back(extent);
  }
  Value y;
  if (rank == 5) {
    y = importConvTranspose3D(n, *win, shape, outPad[0]);
  } else {
    auto type = RankedTensorType::get(shape, x.getElementType());
    y = n.create<Conv2DBackwardDataOp>(type, lift(n, n.input(0)), lift(n, n.input(1)),
                                       win->strides, win->padding, win->dilations, group);
  }
  for (int64_t i = 0; i < r; ++i)
    y = padWith(n, y, 2 + off + i, 0, excess[i], 0.0);
  if (n.hasFailed() || !y) // a malformed window or weight (reported)
    return failure();
  if (n.hasInput(2)) {
    SmallVector<int64_t> bshape(cast<RankedTensorType>(y.getType()).getRank(), 1);
    bshape[1] = shape[1];
    y = n.create<AddOp>(y, n.reshape(n.input(2), bshape));
  }
  if (n.hasFailed())
    return failure();
  n.setOutputs(lower(n, y, rank == 3));
  return success();
}

LogicalResult pool(NodeContext &n, bool isMax) {
  auto x = n.inputType(0);
  if (x.getRank() < 3 || x.getRank() > 5)
    return n.unsupported(Twine(x.getRank() - 2) + "-d pooling (1-d to 3-d only)");
  // The Indices (in storage_order) come with the slices' maximum.
  if (isMax && n.isOutputUsed(1) && !isa<FloatType>(x.getElementType()))
    return n.unsupported("Indices output of a MaxPool of integers");
  auto dilations = n.getInts("dilations");
  if (x.getRank() == 5 || (isMax && n.isOutputUsed(1)) ||
      (!isMax && dilations && llvm::any_of(*dilations, [](int64_t d) { return d != 1; })))
    return importPoolBySlices(n, isMax ? PoolKind::Max : PoolKind::Average);
  auto k = n.getInts("kernel_shape");
  if (!k)
    return n.error("kernel_shape is required");
  auto win = windowAttrs(n, x.getShape().drop_front(2), *k);
  if (failed(win))
    return failure();
  bool ceil = n.getInt("ceil_mode", 0);
  Value in = lift(n, n.input(0)), y;
  // MaxPool-12's int8/uint8: pooled in float32, which holds every 8- and
  // 16-bit integer exactly (the max picks one of them).
  Type elem = x.getElementType();
  bool viaFloat = isa<IntegerType>(elem) && !elem.isInteger(1);
  if (viaFloat && (!isMax || elem.getIntOrFloatBitWidth() > 16))
    return n.unsupported((isMax ? "MaxPool of " : "AveragePool of ") + Twine("integer type ") +
                         (elem.isUnsignedInteger() ? "u" : "") + "int" +
                         Twine(elem.getIntOrFloatBitWidth()));
  if (viaFloat)
    in = n.create<CastOp>(
        RankedTensorType::get(cast<RankedTensorType>(in.getType()).getShape(),
                              n.builder().getF32Type()),
        in);
  if (isMax)
    y = n.create<MaxPool2DOp>(in, win->kernel, win->strides, win->padding,
                              win->dilations, ceil);
  else
    y = n.create<AvgPool2DOp>(in, win->kernel, win->strides, win->padding, ceil,
                              (bool)n.getInt("count_include_pad", 0));
  if (viaFloat && y)
    y = n.create<CastOp>(
        RankedTensorType::get(cast<RankedTensorType>(y.getType()).getShape(), elem), y);
  n.setOutputs(lower(n, y, x.getRank() == 3));
  return success();
}
LogicalResult maxPool(NodeContext &n) { return pool(n, true); }
LogicalResult avgPool(NodeContext &n) { return pool(n, false); }
/// LpPool-2/11/18 (18 adds ceil_mode and dilations, which the slices take).
LogicalResult lpPool(NodeContext &n) {
  int64_t rank = n.inputType(0).getRank();
  if (rank < 3 || rank > 5)
    return n.unsupported(Twine(rank - 2) + "-d pooling (1-d to 3-d only)");
  return importPoolBySlices(n, PoolKind::Lp);
}

template <typename OpTy>
LogicalResult globalPool(NodeContext &n) {
  int64_t rank = n.inputType(0).getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  n.setOutputs(n.create<OpTy>(n.input(0), axes, /*keepdims=*/true));
  return success();
}

/// The shortest decimal that a float32 attribute rounds from: torch writes
/// BatchNorm's momentum as float(1 - 0.1), and 1 minus it should be 0.1,
/// not 0.100000024.
double writtenDecimal(double value) {
  for (int digits = 1; digits <= 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*e", digits - 1, value);
    double d = std::strtod(text, nullptr);
    if (static_cast<float>(d) == static_cast<float>(value))
      return d;
  }
  return value;
}

LogicalResult batchNorm(NodeContext &n) {
  // BN-14/15 have `training_mode`; BN-9 signals training by asking for the
  // running statistics (5 outputs); BN-6/7 also by is_test=0, and have
  // `spatial` (only the default, per-channel statistics, is supported).
  if (n.getOpset() < 9 && !n.getInt("spatial", 1))
    return n.unsupported("spatial=0");
  bool training = n.getOpset() >= 14 ? n.getInt("training_mode", 0) != 0
                                     : n.numOutputs() > 1 && !n.getInt("is_test", 0);
  // torch's dynamo exporter writes training-mode batch norms without
  // training_mode; its metadata says how the module trains.
  if (!training && n.getOpset() >= 14 && n.exportTrainsBatchNorm())
    training = true;
  bool stats = false;
  for (unsigned i = 1; i < n.numOutputs(); ++i)
    stats |= n.isOutputUsed(i);
  // Training without the running statistics as outputs (torch's export of
  // nn.BatchNorm*): the training step updates them (merak-batch-norm-stats).
  FloatAttr momentum =
      training && !stats ? n.builder().getF64FloatAttr(writtenDecimal(n.getFloat("momentum", 0.9)))
                         : FloatAttr();
  SmallVector<Value> outs{n.create<BatchNormOp>(
      n.inputType(0), n.input(0), n.input(1), n.input(2), n.input(3), n.input(4),
      llvm::APFloat(n.getFloat("epsilon", 1e-5)), training, momentum)};
  if (stats) {
    // The running statistics (momentum m): mean * m + batch mean * (1 - m),
    // var likewise with the batch's population variance; BN-9 and earlier
    // also give the batch's mean and variance (outputs 3 and 4).
    if (!training)
      return n.error("the running statistics are outputs in training mode only");
    auto x = n.inputType(0);
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2; d < x.getRank(); ++d)
      axes.push_back(d);
    Value in = n.input(0);
    Value meanKept = n.create<ReduceMeanOp>(in, axes, true);
    Value centered = n.create<SubOp>(in, meanKept);
    Value var = n.create<ReduceMeanOp>(n.create<MulOp>(centered, centered), axes, false);
    Value mean = n.create<ReduceMeanOp>(in, axes, false);
    double m = n.getFloat("momentum", 0.9);
    auto running = [&](Value old, Value batch) {
      return n.create<AddOp>(n.create<MulOp>(old, n.scalarLike(old, m)),
                             n.create<MulOp>(batch, n.scalarLike(batch, 1 - m)));
    };
    outs.append({running(n.input(3), mean), running(n.input(4), var), mean, var});
    outs.resize(n.numOutputs());
  }
  n.setOutputs(outs);
  return success();
}

LogicalResult layerNorm(NodeContext &n) {
  auto x = n.inputType(0);
  if (n.getInt("stash_type", 1) != 1)
    return n.unsupported("stash_type other than float");
  auto ax = n.axis(n.getInt("axis", -1), x.getRank());
  if (failed(ax))
    return failure();
  Value bias = n.hasInput(2) ? n.input(2) : Value();
  double eps = n.getFloat("epsilon", 1e-5);
  Value y = n.create<LayerNormOp>(x, n.input(0), n.input(1), bias, *ax,
                                  llvm::APFloat(eps));
  Value mean, invStd;
  if (n.isOutputUsed(1) || n.isOutputUsed(2)) {
    // The saved statistics, shaped [d0..d(axis-1), 1, ..., 1].
    SmallVector<int64_t> axes;
    for (int64_t d = *ax; d < x.getRank(); ++d)
      axes.push_back(d);
    Value in = n.input(0);
    mean = n.create<ReduceMeanOp>(in, axes, true);
    Value centered = n.create<SubOp>(in, mean);
    Value var = n.create<ReduceMeanOp>(n.create<MulOp>(centered, centered), axes, true);
    invStd = n.create<RsqrtOp>(n.create<AddOp>(var, n.scalarLike(in, eps)));
  }
  n.setOutputs({y, mean, invStd});
  return success();
}

/// RMSNormalization-23: merak.rms_norm, which normalises over [axis, rank)
/// like ONNX and takes a scale that broadcasts to the normalised shape.
/// merak computes in at least the input's precision, as stash_type = 1
/// (float) asks for float inputs; other stash types are refused.
LogicalResult rmsNorm(NodeContext &n) {
  auto x = n.inputType(0);
  if (int64_t st = n.getInt("stash_type", 1); st != 1)
    return n.unsupported("stash_type " + Twine(st) + " (only 1, float, is supported)");
  auto ax = n.axis(n.getInt("axis", -1), x.getRank());
  if (failed(ax))
    return failure();
  double eps = n.getFloat("epsilon", 1e-5);
  n.setOutputs(n.create<RmsNormOp>(x, n.input(0), n.input(1), *ax, llvm::APFloat(eps)));
  return success();
}

/// RotaryEmbedding-23 as slices, products and a concat. The input is
/// [batch, heads, seq, head_size], or [batch, seq, hidden] with num_heads;
/// the caches are [batch, seq, rot/2], or [max_position, rot/2] gathered at
/// position_ids [batch, seq]. The first rot = rotary_embedding_dim (default
/// head_size) features of each head rotate, as pairs (x[2i], x[2i+1]) when
/// interleaved, else (x[i], x[i + rot/2]); the rest pass through.
LogicalResult rotaryEmbedding(NodeContext &n) {
  auto xt = n.inputType(0);
  int64_t rank = xt.getRank();
  if (rank != 3 && rank != 4)
    return n.error("input must have rank 3 or 4, got " + Twine(rank));
  bool interleaved = n.getInt("interleaved", 0);
  Value x = n.input(0);
  int64_t batch = xt.getDimSize(0), seq = xt.getDimSize(rank == 4 ? 2 : 1), headSize;
  if (rank == 4) {
    headSize = xt.getDimSize(3);
  } else {
    int64_t heads = n.getInt("num_heads", 0), hidden = xt.getDimSize(2);
    if (heads <= 0 || hidden % heads)
      return n.error("num_heads must be positive and divide the hidden size " +
                     Twine(hidden) + " of a 3-D input, got " + Twine(heads));
    headSize = hidden / heads;
    // [batch, seq, heads, head_size]: the caches broadcast over dim 2.
    x = n.reshape(x, {batch, seq, heads, headSize});
  }
  int64_t rot = n.getInt("rotary_embedding_dim", 0);
  if (rot == 0)
    rot = headSize;
  if (rot < 0 || rot > headSize || rot % 2)
    return n.error("rotary_embedding_dim must be even and at most the head size " +
                   Twine(headSize) + ", got " + Twine(rot));
  int64_t half = rot / 2;

  Value caches[2] = {n.input(1), n.input(2)};
  for (Value &c : caches) {
    auto ct = cast<RankedTensorType>(c.getType());
    if (n.hasInput(3)) {
      if (ct.getRank() != 2)
        return n.error("with position_ids the caches must be 2-D [max_position, " +
                       Twine(half) + "]");
      c = n.create<GatherOp>(c, n.input(3), 0);
      if (!c)
        return failure();
      ct = cast<RankedTensorType>(c.getType());
    }
    if (ct.getRank() != 3 || ct.getDimSize(2) != half)
      return n.error("the caches must be [batch, seq, " + Twine(half) +
                     "] (rotary_embedding_dim / 2), got " + Twine(ct.getRank()) + "-D");
    int64_t c0 = ct.getDimSize(0), c1 = ct.getDimSize(1);
    c = rank == 4 ? n.reshape(c, {c0, 1, c1, half}) : n.reshape(c, {c0, c1, 1, half});
  }
  Value cosv = caches[0], sinv = caches[1];

  auto lastDim = [&](Value v, int64_t start, int64_t limit, int64_t stride) {
    auto shape = cast<RankedTensorType>(v.getType()).getShape();
    SmallVector<int64_t> st(4, 0), lim(shape), str(4, 1);
    st[3] = start, lim[3] = limit, str[3] = stride;
    return n.create<SliceOp>(v, st, lim, str);
  };
  Value x1 = interleaved ? lastDim(x, 0, rot, 2) : lastDim(x, 0, half, 1);
  Value x2 = interleaved ? lastDim(x, 1, rot, 2) : lastDim(x, half, rot, 1);
  Value real = n.create<SubOp>(n.create<MulOp>(cosv, x1), n.create<MulOp>(sinv, x2));
  Value imag = n.create<AddOp>(n.create<MulOp>(sinv, x1), n.create<MulOp>(cosv, x2));
  if (!real || !imag)
    return failure();
  auto rs = cast<RankedTensorType>(real.getType()).getShape();
  Value rotated;
  if (interleaved) {
    SmallVector<int64_t> pairs(rs), flat(rs);
    pairs.push_back(1);
    flat[3] = rot;
    Value both = n.create<ConcatOp>(ValueRange{n.reshape(real, pairs), n.reshape(imag, pairs)}, 4);
    rotated = n.reshape(both, flat);
  } else {
    rotated = n.create<ConcatOp>(ValueRange{real, imag}, 3);
  }
  Value y = rotated;
  if (rot < headSize)
    y = n.create<ConcatOp>(ValueRange{rotated, lastDim(x, rot, headSize, 1)}, 3);
  n.setOutputs(rank == 3 ? n.reshape(y, xt.getShape()) : y);
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

/// Normalised, sorted reduction axes of a ReduceX node: from the `axes`
/// input (ReduceSum >= 13) or attribute. Empty axes reduce everything unless
/// noop_with_empty_axes, signalled by returning std::nullopt.
FailureOr<std::optional<SmallVector<int64_t>>> reduceAxes(NodeContext &n,
                                                         bool axesFromInput) {
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
    if (n.getInt("noop_with_empty_axes", 0))
      return std::optional<SmallVector<int64_t>>();
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
  return std::optional<SmallVector<int64_t>>(axes);
}

enum class ReduceKind { Plain, L1, L2, SumSquare, LogSum, LogSumExp };

/// ReduceX and its compositions: L1 = sum|x|, L2 = sqrt(sum x^2),
/// SumSquare = sum x^2, LogSum = log(sum x), LogSumExp = log(sum e^(x-m)) + m.
template <typename OpTy, ReduceKind kind = ReduceKind::Plain>
LogicalResult reduceImpl(NodeContext &n, bool axesFromInput) {
  auto axes = reduceAxes(n, axesFromInput);
  if (failed(axes))
    return failure();
  Value x = n.input(0);
  bool keep = n.getInt("keepdims", 1);
  if (!*axes) {
    // noop_with_empty_axes (ReduceSum-13, the others from 18): nothing is
    // reduced, but the element-wise part still applies (onnx's reference:
    // ReduceSumSquare gives x^2, ReduceL1 |x|, ReduceLogSum log x).
    Value r = x;
    switch (kind) {
    case ReduceKind::Plain:
    case ReduceKind::LogSumExp: // log(e^x) = x
      break;
    case ReduceKind::L1:
    case ReduceKind::L2: // sqrt(x^2)
      r = n.create<AbsOp>(x);
      break;
    case ReduceKind::SumSquare:
      r = n.create<MulOp>(x, x);
      break;
    case ReduceKind::LogSum:
      r = n.create<LogOp>(x);
      break;
    }
    n.setOutputs(r);
    return success();
  }
  ArrayRef<int64_t> ax = **axes;
  Value r;
  switch (kind) {
  case ReduceKind::Plain:
    r = n.create<OpTy>(x, ax, keep);
    break;
  case ReduceKind::L1:
    r = n.create<ReduceSumOp>(n.create<AbsOp>(x), ax, keep);
    break;
  case ReduceKind::L2:
    r = n.create<SqrtOp>(n.create<ReduceSumOp>(n.create<MulOp>(x, x), ax, keep));
    break;
  case ReduceKind::SumSquare:
    r = n.create<ReduceSumOp>(n.create<MulOp>(x, x), ax, keep);
    break;
  case ReduceKind::LogSum:
    r = n.create<LogOp>(n.create<ReduceSumOp>(x, ax, keep));
    break;
  case ReduceKind::LogSumExp: {
    // Shift by the max, except where it is -inf (an all -inf row): shift by
    // 0 there so that the result is log(0) = -inf rather than NaN.
    Value m = n.create<ReduceMaxOp>(x, ax, true);
    Value isNegInf = n.create<EqOp>(m, n.scalarLike(x, -INFINITY));
    m = n.create<WhereOp>(isNegInf, n.scalarLike(x, 0.0), m);
    Value s = n.create<ReduceSumOp>(n.create<ExpOp>(n.create<SubOp>(x, m)), ax, true);
    r = n.create<AddOp>(n.create<LogOp>(s), m);
    if (!keep && r) {
      SmallVector<int64_t> shape;
      auto rt = cast<RankedTensorType>(r.getType());
      for (int64_t d = 0; d < rt.getRank(); ++d)
        if (!llvm::is_contained(ax, d))
          shape.push_back(rt.getDimSize(d));
      r = n.reshape(r, shape);
    }
    break;
  }
  }
  n.setOutputs(r);
  return success();
}
template <typename OpTy, ReduceKind kind = ReduceKind::Plain>
LogicalResult reduceAttr(NodeContext &n) { return reduceImpl<OpTy, kind>(n, false); }
template <typename OpTy, ReduceKind kind = ReduceKind::Plain>
LogicalResult reduceInput(NodeContext &n) { return reduceImpl<OpTy, kind>(n, true); }

/// ReduceMax/ReduceMin-20 add bool inputs (any / all), which merak's
/// reductions lack: reduced as i32 and compared back.
template <typename OpTy>
LogicalResult reduceMinMax20(NodeContext &n) {
  auto t = n.inputType(0);
  if (!t.getElementType().isInteger(1))
    return reduceInput<OpTy>(n);
  auto axes = reduceAxes(n, true);
  if (failed(axes))
    return failure();
  if (!*axes) { // noop_with_empty_axes
    n.setOutputs(n.input(0));
    return success();
  }
  Value x = n.create<CastOp>(RankedTensorType::get(t.getShape(), n.builder().getI32Type()),
                             n.input(0));
  Value r = n.create<OpTy>(x, **axes, (bool)n.getInt("keepdims", 1));
  // > 0, so that an empty set (i32 max: its lowest value) is false, and
  // (min: its highest) true: the identities of any and all.
  n.setOutputs(n.create<GtOp>(r, n.scalarLike(r, 0.0)));
  return success();
}

/// Hardmax: one-hot of the first maximum along `axis`.
LogicalResult hardmax(NodeContext &n) {
  auto xt = n.inputType(0);
  auto ax = n.axis(n.getInt("axis", -1), xt.getRank());
  if (failed(ax))
    return failure();
  if (xt.getDimSize(*ax) > kMaxMaterialisedElements)
    return n.error("axis " + Twine(*ax) + " has " + Twine(xt.getDimSize(*ax)) +
                   " elements, too many for Hardmax's index constant (limit " +
                   Twine(kMaxMaterialisedElements) + ")");
  Value am = n.create<ArgMaxOp>(n.input(0), *ax, true, false);
  SmallVector<int64_t> iotaShape(xt.getRank(), 1);
  iotaShape[*ax] = xt.getDimSize(*ax);
  HostTensor iota(RankedTensorType::get(iotaShape, n.builder().getI64Type()));
  for (int64_t k = 0; k < iota.size(); ++k)
    iota.i()[k] = k;
  Value hot = n.create<EqOp>(n.constant(iota), am);
  n.setOutputs(n.create<CastOp>(xt, hot));
  return success();
}

LogicalResult cumSum(NodeContext &n) {
  auto ax = n.constantAxis(1, n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  n.setOutputs(n.create<CumSumOp>(n.input(0), *ax, (bool)n.getInt("exclusive", 0),
                                  (bool)n.getInt("reverse", 0)));
  return success();
}

LogicalResult argImpl(NodeContext &n, bool isMin) {
  auto ax = n.axis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  bool keep = n.getInt("keepdims", 1), last = n.getInt("select_last_index", 0);
  n.setOutputs(isMin ? n.create<ArgMinOp>(n.input(0), *ax, keep, last)
                     : n.create<ArgMaxOp>(n.input(0), *ax, keep, last));
  return success();
}
LogicalResult argMax(NodeContext &n) { return argImpl(n, false); }
LogicalResult argMin(NodeContext &n) { return argImpl(n, true); }

/// LRN: x / (bias + alpha / size * (sum of x^2 over the `size` channels
/// around c: floor((size-1)/2) before, ceil((size-1)/2) after))^beta, the
/// sum as shifted slices of the channel-padded squares.
LogicalResult lrn(NodeContext &n) {
  auto t = n.inputType(0);
  const int64_t size = n.getInt("size", 0);
  if (t.getRank() < 2 || size < 1 || size > kMaxElements)
    return n.error("LRN needs an input of rank >= 2 and a positive size");
  const double alpha = n.getFloat("alpha", 1e-4), beta = n.getFloat("beta", 0.75),
               bias = n.getFloat("bias", 1.0);
  const int64_t C = t.getDimSize(1), lo = (size - 1) / 2, hi = size - 1 - lo;
  Value x = n.input(0);
  Value padded = padWith(n, n.create<MulOp>(x, x), 1, lo, hi, 0.0);
  Value sum;
  for (int64_t j = 0; j < size && !n.hasFailed(); ++j) {
    SmallVector<int64_t> starts(t.getRank(), 0), limits(t.getShape()), strides(t.getRank(), 1);
    starts[1] = j;
    limits[1] = j + C;
    Value s = n.create<SliceOp>(padded, starts, limits, strides);
    sum = sum ? n.create<AddOp>(sum, s) : s;
  }
  Value base = n.create<AddOp>(n.create<MulOp>(sum, n.scalarLike(x, alpha / double(size))),
                               n.scalarLike(x, bias));
  n.setOutputs(n.create<DivOp>(x, n.create<PowOp>(base, n.scalarLike(x, beta))));
  return success();
}

/// InstanceNormalization: per (n, c) over the spatial dims.
LogicalResult instanceNorm(NodeContext &n) {
  auto t = n.inputType(0);
  if (t.getRank() < 3)
    return n.error("input must have rank >= 3 (N, C, D...)");
  SmallVector<int64_t> axes, chan(t.getRank(), 1);
  for (int64_t d = 2; d < t.getRank(); ++d)
    axes.push_back(d);
  chan[1] = t.getDimSize(1);
  Value x = n.input(0);
  Value mean = n.create<ReduceMeanOp>(x, axes, true);
  Value c = n.create<SubOp>(x, mean);
  Value var = n.create<ReduceMeanOp>(n.create<MulOp>(c, c), axes, true);
  Value inv = n.create<RsqrtOp>(n.create<AddOp>(var, n.scalarLike(x, n.getFloat("epsilon", 1e-5))));
  Value y = n.create<MulOp>(n.create<MulOp>(c, inv), n.reshape(n.input(1), chan));
  n.setOutputs(n.create<AddOp>(y, n.reshape(n.input(2), chan)));
  return success();
}

/// GroupNormalization: per (n, group) over the group's channels and the
/// spatial dims. scale and bias are per channel (21) or per group (18).
LogicalResult groupNorm(NodeContext &n, bool perGroupAffine) {
  auto t = n.inputType(0);
  if (t.getRank() < 3)
    return n.error("input must have rank >= 3 (N, C, D...)");
  if (n.getInt("stash_type", 1) != 1)
    return n.unsupported("stash_type other than float");
  int64_t groups = n.getInt("num_groups", 0), c = t.getDimSize(1);
  if (groups <= 0 || c % groups)
    return n.error("num_groups " + Twine(groups) + " does not divide the " +
                   Twine(c) + " channels");
  int64_t affine = perGroupAffine ? groups : c;
  for (unsigned i : {1u, 2u})
    if (n.inputType(i).getRank() != 1 || n.inputType(i).getDimSize(0) != affine)
      return n.error(Twine(i == 1 ? "scale" : "bias") + " must have shape [" +
                     Twine(affine) + "]");
  Value x = n.input(0);
  Value g = n.reshape(x, {t.getDimSize(0), groups, t.getNumElements() / (t.getDimSize(0) * groups)});
  Value mean = n.create<ReduceMeanOp>(g, ArrayRef<int64_t>{2}, true);
  Value centered = n.create<SubOp>(g, mean);
  Value var = n.create<ReduceMeanOp>(n.create<MulOp>(centered, centered),
                                     ArrayRef<int64_t>{2}, true);
  Value inv = n.create<RsqrtOp>(n.create<AddOp>(var, n.scalarLike(x, n.getFloat("epsilon", 1e-5))));
  Value y = n.reshape(n.create<MulOp>(centered, inv), t.getShape());
  SmallVector<int64_t> chan(t.getRank(), 1);
  chan[1] = c;
  auto perChannel = [&](Value v) {
    if (perGroupAffine) // [G] -> [G, C/G] -> [C]
      v = n.reshape(n.broadcastTo(n.reshape(v, {groups, 1}), {groups, c / groups}), {c});
    return n.reshape(v, chan);
  };
  y = n.create<MulOp>(y, perChannel(n.input(1)));
  n.setOutputs(n.create<AddOp>(y, perChannel(n.input(2))));
  return success();
}
LogicalResult groupNorm18(NodeContext &n) { return groupNorm(n, true); }
LogicalResult groupNorm21(NodeContext &n) { return groupNorm(n, false); }

} // namespace

void onnx_import::registerNNOps(OpRegistry &r) {
  r.add("MatMul", 1, matmul);
  r.add("Gemm", 6, gemm);
  r.add("Conv", 1, conv);
  r.add("ConvTranspose", 1, convTranspose);
  r.sameAs("ConvTranspose", 11, 1);  // pads and output_shape clarified
  r.sameAs("ConvTranspose", 22, 1);  // bfloat16
  r.add("MaxPool", 1, maxPool);
  r.add("AveragePool", 1, avgPool);
  r.add("LRN", 1, lrn);
  r.sameAs("LRN", 13, 1); // bfloat16
  r.add("LpPool", 2, lpPool);
  r.sameAs("LpPool", 11, 2);  // auto_pad, kernel_shape now required
  r.sameAs("LpPool", 18, 2);  // ceil_mode, dilations
  r.sameAs("LpPool", 22, 2);  // bfloat16
  r.add("CenterCropPad", 18, importCenterCropPad);
  r.add("Col2Im", 18, importCol2Im);
  r.add("MaxUnpool", 9, importMaxUnpool);
  r.sameAs("MaxUnpool", 11, 9); // output_shape's pads clarified
  r.sameAs("MaxUnpool", 22, 9); // bfloat16
  r.add("GlobalAveragePool", 1, globalPool<ReduceMeanOp>);
  r.add("GlobalMaxPool", 1, globalPool<ReduceMaxOp>);
  r.add("BatchNormalization", 6, batchNorm);
  r.add("LayerNormalization", 17, layerNorm);
  r.add("RMSNormalization", 23, rmsNorm);
  r.add("RotaryEmbedding", 23, rotaryEmbedding);
  r.add("Softmax", 13, softmax<SoftmaxOp>);
  r.add("LogSoftmax", 13, softmax<LogSoftmaxOp>);
  r.add("ReduceSum", 1, reduceAttr<ReduceSumOp>);
  r.add("ReduceSum", 13, reduceInput<ReduceSumOp>);
  r.add("ReduceMean", 1, reduceAttr<ReduceMeanOp>);
  r.add("ReduceMax", 1, reduceAttr<ReduceMaxOp>);
  r.add("ReduceMin", 1, reduceAttr<ReduceMinOp>);
  r.add("ReduceProd", 1, reduceAttr<ReduceProdOp>);
  r.add("ReduceL1", 1, reduceAttr<ReduceSumOp, ReduceKind::L1>);
  r.add("ReduceL2", 1, reduceAttr<ReduceSumOp, ReduceKind::L2>);
  r.add("ReduceSumSquare", 1, reduceAttr<ReduceSumOp, ReduceKind::SumSquare>);
  r.add("ReduceLogSum", 1, reduceAttr<ReduceSumOp, ReduceKind::LogSum>);
  r.add("ReduceLogSumExp", 1, reduceAttr<ReduceSumOp, ReduceKind::LogSumExp>);
  // 18: axes move to an optional input, with noop_with_empty_axes (as
  // ReduceSum-13).
  r.add("ReduceMean", 18, reduceInput<ReduceMeanOp>);
  r.add("ReduceMax", 18, reduceInput<ReduceMaxOp>);
  r.add("ReduceMax", 20, reduceMinMax20<ReduceMaxOp>);
  r.add("ReduceMin", 18, reduceInput<ReduceMinOp>);
  r.add("ReduceMin", 20, reduceMinMax20<ReduceMinOp>);
  r.add("ReduceProd", 18, reduceInput<ReduceProdOp>);
  r.add("ReduceL1", 18, reduceInput<ReduceSumOp, ReduceKind::L1>);
  r.add("ReduceL2", 18, reduceInput<ReduceSumOp, ReduceKind::L2>);
  r.add("ReduceSumSquare", 18, reduceInput<ReduceSumOp, ReduceKind::SumSquare>);
  r.add("ReduceLogSum", 18, reduceInput<ReduceSumOp, ReduceKind::LogSum>);
  r.add("ReduceLogSumExp", 18, reduceInput<ReduceSumOp, ReduceKind::LogSumExp>);
  r.sameAs("ReduceLogSum", 28, 18);    // integer types dropped
  r.sameAs("ReduceLogSumExp", 28, 18);
  r.add("Hardmax", 13, hardmax);
  r.add("CumSum", 11, cumSum);
  r.add("InstanceNormalization", 6, instanceNorm);
  r.add("ArgMax", 1, argMax);
  r.add("ArgMin", 1, argMin);
  r.add("GroupNormalization", 18, groupNorm18);
  r.add("GroupNormalization", 21, groupNorm21);
  // Versions after 17 that only add dtypes (bfloat16, float8) merak's
  // handlers accept or refuse by dtype; AveragePool-19 adds dilations,
  // which the pool handler already refuses by name.
  r.sameAs("AveragePool", 19, 1);
  r.sameAs("AveragePool", 22, 1);
  for (StringRef op : {"Conv", "MaxPool", "GlobalAveragePool", "GlobalMaxPool"})
    r.sameAs(op, 22, 1);
  r.sameAs("InstanceNormalization", 22, 6);
}
