//===- OnnxOpsWindow.cpp - Windows: attributes, 3-d Conv, pooling, crops ---===//
//
// The window attributes of Conv, ConvTranspose and the pooling ops, and the
// windows merak's 2-d ops (merak.conv2d, conv2d_backward_data, max_pool2d,
// avg_pool2d) do not cover, decomposed so that training needs no new
// kernel:
//
//   Conv 3-d   y[:, :, d] = sum over kd of conv2d(x[:, :, d*sD + kd*dD], w[:, :, kd])
//              (x padded in depth): for each kernel depth kd, one 2-d
//              convolution of the strided depth slices folded into the batch
//              ([N, D', C, H, W] -> [N*D', C, H, W]), summed over kd, unfolded.
//   ConvTranspose 3-d
//              its transpose: per kd, the 2-d transposed convolution of every
//              input frame (folded into the batch) placed on output frames
//              id*sD + kd*dD (zero frames between, shifted), summed over kd,
//              then cropped by the pads.
//   MaxPool 3-d, AveragePool 3-d, AveragePool with dilations and LpPool
//   (1-3 d)    the input padded explicitly (max: -inf; average: zeros, and
//              at the far end enough for ceil_mode's last windows), then the
//              maximum or the sum of one strided slice per kernel offset;
//              an average divides by a compile-time count per output
//              position: the window's input elements, or with
//              count_include_pad its elements inside the padded input (not
//              ceil_mode's overhang), as onnx's reference and PyTorch count;
//              LpPool sums |x|^p (x * x for p = 2) and takes the p-th root
//              (a square root), padding adding nothing.
//              MaxPool's Indices: with each slice, its positions' flat
//              indices in the input (row- or column-major), kept where the
//              slice is strictly greater (the first maximum, as onnxruntime
//              picks); integers, without gradient.
//   CenterCropPad
//              per axis a centred slice or a centred zero pad.
//   MaxUnpool  the values scattered to their flat indices in the output
//              (zeros elsewhere); an index that two windows share (their
//              maximum) receives the mean of its writes, which is the one
//              value they carry:  y = scatter_add(x) / max(scatter_add(1), 1)
//   Col2Im (nn.Fold)
//              per block offset, its column [N, C, L_1.., L_r] spread to
//              stride s (zeros between), shifted to the offset in the padded
//              image, summed over the offsets; then the pads cropped:
//                y = crop(sum over b of shift_b(spread_s(cols[:, :, b])))
//
// The gradients are those of slices, sums, maxima and 2-d convolutions.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

FailureOr<Window> onnx_import::windowAttrs(NodeContext &n, ArrayRef<int64_t> inSpatial,
                                           ArrayRef<int64_t> kernel) {
  size_t r = inSpatial.size();
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = n.getInts("strides").value_or(SmallVector<int64_t>(r, 1));
  w.dilations = n.getInts("dilations").value_or(SmallVector<int64_t>(r, 1));
  if (w.kernel.size() != r || w.strides.size() != r || w.dilations.size() != r)
    return (void)n.error("kernel, strides and dilations need " + Twine(r) + " entries"),
           failure();
  auto positive = [](ArrayRef<int64_t> v) {
    return llvm::all_of(v, [](int64_t x) { return x > 0 && x <= kMaxElements; });
  };
  if (!positive(w.kernel) || !positive(w.strides) || !positive(w.dilations))
    return (void)n.error("kernel sizes, strides and dilations must be positive"), failure();
  SmallVector<int64_t> pads(2 * r, 0);
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    if (auto p = n.getInts("pads"))
      pads = *p;
    if (pads.size() != 2 * r)
      return (void)n.error("pads needs " + Twine(2 * r) + " entries"), failure();
    if (llvm::any_of(pads, [](int64_t p) { return p < 0 || p > kMaxElements; }))
      return (void)n.error("pads must be non-negative"), failure();
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < r; ++i) {
      int64_t s = w.strides[i], out = (inSpatial[i] + s - 1) / s;
      int64_t total = std::max<int64_t>(
          (out - 1) * s + (w.kernel[i] - 1) * w.dilations[i] + 1 - inSpatial[i], 0);
      int64_t lo = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i] = lo;
      pads[i + r] = total - lo;
    }
  } else if (autoPad != "VALID") {
    return (void)n.error("unknown auto_pad '" + autoPad + "'"), failure();
  }
  if (r == 1) {
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    w.padding = {0, pads[0], 0, pads[1]};
  } else {
    w.padding = pads;
  }
  return w;
}

Value onnx_import::padWith(NodeContext &n, Value x, int64_t d, int64_t before, int64_t after,
                          double value) {
  if (!x || (!before && !after))
    return x;
  auto t = cast<RankedTensorType>(x.getType());
  auto block = [&](int64_t size) {
    SmallVector<int64_t> shape(t.getShape());
    shape[d] = size;
    HostTensor v(RankedTensorType::get({}, t.getElementType()));
    v.setFromDouble(0, value);
    return n.broadcastTo(n.constant(v), shape);
  };
  SmallVector<Value> parts;
  if (before)
    parts.push_back(block(before));
  parts.push_back(x);
  if (after)
    parts.push_back(block(after));
  return n.create<ConcatOp>(parts, d);
}

namespace {

/// Output extent of a window (the merak pooling ops' rule, ceil_mode's last
/// window starting inside the left-padded input); <= 0 when none fits.
int64_t windowExtent(int64_t in, int64_t k, int64_t s, int64_t lo, int64_t hi, int64_t d,
                     bool ceil) {
  int64_t avail = in + lo + hi - (d * (k - 1) + 1);
  if (avail < 0)
    return 0;
  int64_t out = (ceil ? (avail + s - 1) / s : avail / s) + 1;
  if (ceil && (out - 1) * s >= in + lo)
    --out;
  return out;
}

/// The flat input index (within one (batch, channel) plane: row-major, or
/// column-major for storage_order 1) of the element that kernel offset `at`
/// reads at each output position, as a constant [1, 1, out..]; -1 in the
/// padding.
Value tapIndices(NodeContext &n, ArrayRef<int64_t> at, ArrayRef<int64_t> in,
                 ArrayRef<int64_t> out, ArrayRef<int64_t> s, ArrayRef<int64_t> d,
                 ArrayRef<int64_t> lo, bool columnMajor) {
  const int64_t r = in.size();
  SmallVector<int64_t> shape{1, 1}, stride(r, 1);
  shape.append(out.begin(), out.end());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < r; ++j)
      if (columnMajor ? j < i : j > i)
        stride[i] *= in[j];
  HostTensor t(RankedTensorType::get(shape, n.builder().getI64Type()));
  for (int64_t e = 0; e < t.size(); ++e) {
    int64_t flat = 0;
    for (int64_t i = r - 1, rest = e; i >= 0 && flat >= 0; --i) {
      int64_t pos = (rest % out[i]) * s[i] + at[i] * d[i] - lo[i];
      rest /= out[i];
      flat = pos < 0 || pos >= in[i] ? -1 : flat + pos * stride[i];
    }
    t.setFromInt(e, flat);
  }
  return n.constant(t);
}

/// `z` with s - 1 zeros after each element along dimension `dim` but the
/// last: element l moves to l * s.
Value spread(NodeContext &n, Value z, int64_t dim, int64_t s) {
  if (s == 1 || !z)
    return z;
  SmallVector<int64_t> shape(cast<RankedTensorType>(z.getType()).getShape());
  int64_t len = shape[dim];
  SmallVector<int64_t> split(shape);
  split.insert(split.begin() + dim + 1, 1);
  z = padWith(n, n.reshape(z, split), dim + 1, 0, s - 1, 0.0);
  shape[dim] = len * s;
  return n.sliceDim(n.reshape(z, shape), dim, 0, (len - 1) * s + 1);
}

} // namespace

/// Col2Im-18 (nn.Fold): input [N, C * prod(block_shape), L] with L the
/// windows' count over the padded image; output [N, C, image_shape..].
LogicalResult onnx_import::importCol2Im(NodeContext &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  auto xt = n.inputType(0);
  auto image = n.constantInts(1, "image_shape of Col2Im");
  auto block = n.constantInts(2, "block_shape of Col2Im");
  if (failed(image) || failed(block))
    return failure();
  const int64_t r = image->size();
  if (r < 1 || (int64_t)block->size() != r)
    return n.error("image_shape and block_shape must have the same, non-zero length");
  if (xt.getRank() != 3)
    return n.error("the input must be [N, C * prod(block_shape), L], it has rank " +
                   Twine(xt.getRank()));
  SmallVector<int64_t> dil = n.getInts("dilations").value_or(SmallVector<int64_t>(r, 1));
  SmallVector<int64_t> str = n.getInts("strides").value_or(SmallVector<int64_t>(r, 1));
  SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>(2 * r, 0));
  if ((int64_t)dil.size() != r || (int64_t)str.size() != r || (int64_t)pads.size() != 2 * r)
    return n.error("dilations and strides need " + Twine(r) + " values, pads " + Twine(2 * r));
  int64_t K = 1, windows = 1;
  SmallVector<int64_t> L(r), padded(r);
  for (int64_t i = 0; i < r; ++i) {
    int64_t k = (*block)[i];
    auto bad = [](int64_t v, int64_t lo) { return v < lo || v > kMaxElements; };
    if (bad(k, 1) || bad(dil[i], 1) || bad(str[i], 1) || bad(pads[i], 0) ||
        bad(pads[r + i], 0) || bad((*image)[i], 1) || k > 4096)
      return n.error("block_shape, dilations, strides and image_shape must be positive, "
                     "pads non-negative, all at most 2^40 (spatial dimension " + Twine(i) + ")");
    padded[i] = (*image)[i] + pads[i] + pads[r + i];
    int64_t span = dil[i] * (k - 1) + 1;
    if (padded[i] < span)
      return n.error("a block of " + Twine(span) + " elements does not fit the padded image's " +
                     Twine(padded[i]) + " along spatial dimension " + Twine(i));
    L[i] = (padded[i] - span) / str[i] + 1;
    K *= k;
    windows *= L[i];
    if (K > 4096 || padded[i] > kMaxElements)
      return n.unsupported("a block of more than 4096 elements");
  }
  const int64_t N = xt.getDimSize(0), CK = xt.getDimSize(1);
  if (CK % K || xt.getDimSize(2) != windows)
    return n.error("the input is [" + Twine(N) + ", " + Twine(CK) + ", " +
                   Twine(xt.getDimSize(2)) + "], expected [N, C * " + Twine(K) + ", " +
                   Twine(windows) + "] for these blocks and image");
  const int64_t C = CK / K;
  SmallVector<int64_t> cols{N, C, K};
  cols.append(L.begin(), L.end());
  SmallVector<Value> parts = n.unstack(n.reshape(n.input(0), cols), 2);
  Value sum;
  SmallVector<int64_t> at(r, 0);
  for (int64_t b = 0; b < (int64_t)parts.size() && !n.hasFailed(); ++b) {
    for (int64_t i = r - 1, rest = b; i >= 0; --i) {
      at[i] = rest % (*block)[i];
      rest /= (*block)[i];
    }
    Value z = parts[b];
    for (int64_t i = 0; i < r; ++i) {
      int64_t shift = at[i] * dil[i], extent = (L[i] - 1) * str[i] + 1;
      z = padWith(n, spread(n, z, 2 + i, str[i]), 2 + i, shift, padded[i] - shift - extent, 0.0);
    }
    sum = sum ? n.create<AddOp>(sum, z) : z;
  }
  for (int64_t i = 0; i < r; ++i)
    sum = n.sliceDim(sum, 2 + i, pads[i], pads[i] + (*image)[i]);
  if (n.hasFailed())
    return failure();
  n.setOutputs(sum);
  return success();
}

LogicalResult onnx_import::importConv3D(NodeContext &n) {
  auto xt = n.inputType(0), wt = n.inputType(1);
  if (wt.getRank() != 5)
    return n.error("weight rank differs from input rank");
  auto win = windowAttrs(n, xt.getShape().drop_front(2), wt.getShape().drop_front(2));
  if (failed(win))
    return failure();
  const int64_t N = xt.getDimSize(0), C = xt.getDimSize(1), D = xt.getDimSize(2);
  const int64_t O = wt.getDimSize(0), kD = wt.getDimSize(2);
  const int64_t sD = win->strides[0], dD = win->dilations[0];
  const int64_t lo = win->padding[0], hi = win->padding[3];
  if (kD < 1)
    return n.error("the kernel has depth " + Twine(kD) + "; it needs at least 1");
  if (n.hasInput(2) && n.inputType(2).getShape() != ArrayRef<int64_t>{O})
    return n.error("the bias must be [" + Twine(O) + "] (one value per output channel)");
  const int64_t outD = windowExtent(D, kD, sD, lo, hi, dD, false);
  if (outD <= 0)
    return n.error("the kernel's depth " + Twine(kD) + " (dilation " + Twine(dD) +
                   ") does not fit the padded input depth " + Twine(D + lo + hi));
  // [N, C, D, H, W] -> padded in depth -> [N, Dp, C, H, W].
  Value x = padWith(n, n.input(0), 2, lo, hi, 0.0);
  x = n.create<TransposeOp>(x, ArrayRef<int64_t>{0, 2, 1, 3, 4});
  const int64_t H = xt.getDimSize(3), W = xt.getDimSize(4);
  const SmallVector<int64_t> strides2{win->strides[1], win->strides[2]},
      dil2{win->dilations[1], win->dilations[2]},
      pad2{win->padding[1], win->padding[2], win->padding[4], win->padding[5]};
  Value sum;
  for (int64_t kd = 0; kd < kD && !n.hasFailed(); ++kd) {
    const int64_t first = kd * dD;
    Value xs = n.create<SliceOp>(x, ArrayRef<int64_t>{0, first, 0, 0, 0},
                                 ArrayRef<int64_t>{N, first + sD * (outD - 1) + 1, C, H, W},
                                 ArrayRef<int64_t>{1, sD, 1, 1, 1});
    xs = n.reshape(xs, {N * outD, C, H, W});
    Value wk = n.create<SliceOp>(
        n.input(1), ArrayRef<int64_t>{0, 0, kd, 0, 0},
        ArrayRef<int64_t>{O, wt.getDimSize(1), kd + 1, wt.getDimSize(3), wt.getDimSize(4)},
        ArrayRef<int64_t>{1, 1, 1, 1, 1});
    wk = n.reshape(wk, {O, wt.getDimSize(1), wt.getDimSize(3), wt.getDimSize(4)});
    Value y = n.create<Conv2DOp>(xs, wk, Value(), strides2, pad2, dil2, n.getInt("group", 1));
    sum = sum ? n.create<AddOp>(sum, y) : y;
  }
  if (n.hasFailed())
    return failure();
  if (n.hasInput(2))
    sum = n.create<AddOp>(sum, n.reshape(n.input(2), {1, O, 1, 1}));
  if (n.hasFailed() || !sum)
    return failure();
  auto yt = cast<RankedTensorType>(sum.getType()); // [N*D', O, H', W']
  Value y = n.reshape(sum, {N, outD, O, yt.getDimSize(2), yt.getDimSize(3)});
  n.setOutputs(n.create<TransposeOp>(y, ArrayRef<int64_t>{0, 2, 1, 3, 4}));
  return success();
}

Value onnx_import::importConvTranspose3D(NodeContext &n, const Window &win,
                                         ArrayRef<int64_t> shape, int64_t outPadD) {
  auto xt = n.inputType(0), wt = n.inputType(1);
  const int64_t N = xt.getDimSize(0), C = xt.getDimSize(1), D = xt.getDimSize(2);
  const int64_t H = xt.getDimSize(3), W = xt.getDimSize(4), O = shape[1], kD = wt.getDimSize(2);
  const int64_t sD = win.strides[0], dD = win.dilations[0], lo = win.padding[0];
  const int64_t full = sD * (D - 1) + outPadD + (kD - 1) * dD + 1;
  // [N, C, D, H, W] -> [N*D, C, H, W]: each input frame's 2-d transposed
  // convolution with the kernel's frame kd lands on output frame
  // id*sD + kd*dD (before the crop).
  Value x = n.create<TransposeOp>(n.input(0), ArrayRef<int64_t>{0, 2, 1, 3, 4});
  x = n.reshape(x, {N * D, C, H, W});
  auto frames = RankedTensorType::get({N * D, O, shape[3], shape[4]}, xt.getElementType());
  const SmallVector<int64_t> strides2{win.strides[1], win.strides[2]},
      dil2{win.dilations[1], win.dilations[2]},
      pad2{win.padding[1], win.padding[2], win.padding[4], win.padding[5]};
  Value sum;
  for (int64_t kd = 0; kd < kD && !n.hasFailed(); ++kd) {
    Value wk = n.create<SliceOp>(
        n.input(1), ArrayRef<int64_t>{0, 0, kd, 0, 0},
        ArrayRef<int64_t>{wt.getDimSize(0), wt.getDimSize(1), kd + 1, wt.getDimSize(3),
                          wt.getDimSize(4)},
        ArrayRef<int64_t>{1, 1, 1, 1, 1});
    wk = n.reshape(wk, {wt.getDimSize(0), wt.getDimSize(1), wt.getDimSize(3), wt.getDimSize(4)});
    Value z = n.create<Conv2DBackwardDataOp>(frames, x, wk, strides2, pad2, dil2,
                                             n.getInt("group", 1));
    // Frames sD apart: [N, D, 1, ...] then sD - 1 zero frames after each.
    z = n.reshape(z, {N, D, 1, O, shape[3], shape[4]});
    z = padWith(n, z, 2, 0, sD - 1, 0.0);
    z = n.reshape(z, {N, D * sD, O, shape[3], shape[4]});
    z = n.create<SliceOp>(z, ArrayRef<int64_t>{0, 0, 0, 0, 0},
                          ArrayRef<int64_t>{N, (D - 1) * sD + 1, O, shape[3], shape[4]},
                          ArrayRef<int64_t>{1, 1, 1, 1, 1});
    z = padWith(n, z, 1, kd * dD, full - kd * dD - ((D - 1) * sD + 1), 0.0);
    sum = sum ? n.create<AddOp>(sum, z) : z;
  }
  if (n.hasFailed())
    return Value();
  Value y = n.create<SliceOp>(sum, ArrayRef<int64_t>{0, lo, 0, 0, 0},
                              ArrayRef<int64_t>{N, lo + shape[2], O, shape[3], shape[4]},
                              ArrayRef<int64_t>{1, 1, 1, 1, 1});
  return n.create<TransposeOp>(y, ArrayRef<int64_t>{0, 2, 1, 3, 4});
}

LogicalResult onnx_import::importPoolBySlices(NodeContext &n, PoolKind kind) {
  const bool isMax = kind == PoolKind::Max;
  auto xt = n.inputType(0);
  const int64_t rank = xt.getRank(), r = rank - 2;
  auto k = n.getInts("kernel_shape");
  if (!k)
    return n.error("kernel_shape is required");
  auto win = windowAttrs(n, xt.getShape().drop_front(2), *k);
  if (failed(win))
    return failure();
  const bool ceil = n.getInt("ceil_mode", 0), includePad = n.getInt("count_include_pad", 0);
  // The window per spatial dimension (windowAttrs lifts 1-d to 2-d).
  const int64_t off = r == 1 ? 1 : 0, pr = r == 1 ? 2 : r;
  SmallVector<int64_t> in, kk, s, d, lo, hi, out;
  for (int64_t i = 0; i < r; ++i) {
    in.push_back(xt.getDimSize(2 + i));
    kk.push_back(win->kernel[off + i]);
    s.push_back(win->strides[off + i]);
    d.push_back(win->dilations[off + i]);
    lo.push_back(win->padding[off + i]);
    hi.push_back(win->padding[off + i + pr]);
    out.push_back(windowExtent(in[i], kk[i], s[i], lo[i], hi[i], d[i], ceil));
    if (out.back() <= 0)
      return n.error("a window of " + Twine(d[i] * (kk[i] - 1) + 1) +
                     " elements does not fit the padded input along spatial dimension " +
                     Twine(i));
  }
  // Pad every spatial dimension (and at its end for ceil_mode's overhang).
  const double fill = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
  Value x = n.input(0);
  double p = 2;
  if (kind == PoolKind::Lp) { // |x|^p, summed, then ^(1/p) below
    const int64_t order = n.getInt("p", 2);
    if (order < 1)
      return n.error("p must be at least 1, got " + Twine(order));
    p = static_cast<double>(order);
    x = p == 2 ? n.create<MulOp>(x, x)
               : n.create<PowOp>(n.create<AbsOp>(x), n.scalarLike(x, p));
  }
  for (int64_t i = 0; i < r; ++i) {
    int64_t need = (out[i] - 1) * s[i] + d[i] * (kk[i] - 1) + 1;
    int64_t over = std::max<int64_t>(0, need - (in[i] + lo[i] + hi[i]));
    x = padWith(n, x, 2 + i, lo[i], hi[i] + over, fill);
  }
  int64_t offsets = 1;
  for (int64_t v : kk)
    offsets *= v;
  if (offsets > 4096)
    return n.unsupported("a " + Twine(offsets) + "-element window beyond the 2-d pooling ops");
  Value acc, idx;
  const bool withIndices = isMax && n.isOutputUsed(1);
  if (withIndices) { // a constant of the output's positions per offset
    int64_t cells = 1; // saturating at kMaxMaterialisedElements + 1
    for (int64_t v : out)
      cells = v > 0 && cells > kMaxMaterialisedElements / v ? kMaxMaterialisedElements + 1
                                                             : cells * v;
    if (cells > kMaxMaterialisedElements / offsets ||
        xt.getDimSize(0) * xt.getDimSize(1) > kMaxMaterialisedElements)
      return n.unsupported("MaxPool Indices of more than " + Twine(kMaxMaterialisedElements) +
                           " window positions (their indices are compile-time constants)");
  }
  SmallVector<int64_t> at(r, 0);
  for (int64_t o = 0; o < offsets && !n.hasFailed(); ++o) {
    for (int64_t i = r - 1, rest = o; i >= 0; --i) {
      at[i] = rest % kk[i];
      rest /= kk[i];
    }
    SmallVector<int64_t> starts(rank, 0), limits(xt.getShape()), steps(rank, 1);
    for (int64_t i = 0; i < r; ++i) {
      starts[2 + i] = at[i] * d[i];
      limits[2 + i] = starts[2 + i] + (out[i] - 1) * s[i] + 1;
      steps[2 + i] = s[i];
    }
    Value sl = n.create<SliceOp>(x, starts, limits, steps);
    if (withIndices) {
      Value here = tapIndices(n, at, in, out, s, d, lo, n.getInt("storage_order", 0) != 0);
      here = n.broadcastTo(here, cast<RankedTensorType>(sl.getType()).getShape());
      idx = !acc ? here : n.create<WhereOp>(n.create<GtOp>(sl, acc), here, idx);
    }
    acc = !acc ? sl : isMax ? n.create<MaxOp>(acc, sl) : n.create<AddOp>(acc, sl);
  }
  if (n.hasFailed())
    return failure();
  if (withIndices) {
    // Plus each (batch, channel) plane's offset.
    int64_t plane = 1;
    for (int64_t v : in)
      plane *= v;
    SmallVector<int64_t> shape{xt.getDimSize(0), xt.getDimSize(1)};
    shape.append(r, 1);
    HostTensor base(RankedTensorType::get(shape, n.builder().getI64Type()));
    for (int64_t e = 0; e < base.size(); ++e)
      base.setFromInt(e, e * plane);
    n.setOutputs({acc, n.create<AddOp>(idx, n.constant(base))});
    return success();
  }
  if (kind == PoolKind::Lp) {
    n.setOutputs(p == 2 ? n.create<SqrtOp>(acc) : n.create<PowOp>(acc, n.scalarLike(acc, 1 / p)));
    return success();
  }
  if (!isMax) {
    // 1 / (elements counted per output position): a product over the
    // dimensions, each the window's positions in [0, in) (or [-lo, in + hi)
    // with count_include_pad).
    SmallVector<SmallVector<int64_t>> counts(r);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t p = 0; p < out[i]; ++p) {
        int64_t c = 0;
        for (int64_t j = 0; j < kk[i]; ++j) {
          int64_t pos = p * s[i] + j * d[i] - lo[i];
          c += includePad ? pos < in[i] + hi[i] : pos >= 0 && pos < in[i];
        }
        counts[i].push_back(c);
      }
    SmallVector<int64_t> shape{1, 1};
    shape.append(out.begin(), out.end());
    HostTensor inv(RankedTensorType::get(shape, xt.getElementType()));
    int64_t total = 1;
    for (int64_t v : out)
      total *= v;
    for (int64_t e = 0; e < total; ++e) {
      int64_t c = 1;
      for (int64_t i = r - 1, rest = e; i >= 0; --i) {
        c *= counts[i][rest % out[i]];
        rest /= out[i];
      }
      if (c == 0)
        return n.error("an average pooling window covers no input element");
      inv.setFromDouble(e, 1.0 / double(c));
    }
    acc = n.create<MulOp>(acc, n.constant(inv));
  }
  n.setOutputs(acc);
  return success();
}

/// CenterCropPad-18: along each axis, a crop centred as onnx's reference
/// centres it (the slice from floor((dim - s) / 2)) or a zero pad
/// (floor((s - dim) / 2) before, the rest after), in the order of `axes`.
LogicalResult onnx_import::importCenterCropPad(NodeContext &n) {
  auto x = n.inputType(0);
  int64_t rank = x.getRank();
  auto shape = n.constantInts(1, "the target shape");
  if (failed(shape))
    return failure();
  SmallVector<int64_t> axes;
  if (auto given = n.getInts("axes")) {
    for (int64_t a : *given) {
      auto ax = n.axis(a, rank);
      if (failed(ax))
        return failure();
      if (llvm::is_contained(axes, *ax))
        return n.error("axis " + Twine(*ax) + " is given twice");
      axes.push_back(*ax);
    }
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  if (axes.size() != shape->size())
    return n.error("the target shape has " + Twine(shape->size()) + " values for " +
                   Twine(axes.size()) + " axes");
  Value y = n.input(0);
  for (auto [a, s] : llvm::zip(axes, *shape)) {
    SmallVector<int64_t> cur(cast<RankedTensorType>(y.getType()).getShape());
    int64_t dim = cur[a];
    if (s < 0)
      return n.error("target size " + Twine(s) + " of axis " + Twine(a) + " is negative");
    if (s < dim) {
      SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
      starts[a] = (dim - s) / 2;
      cur[a] = starts[a] + s;
      y = n.create<SliceOp>(y, starts, cur, steps);
    } else if (s > dim) {
      int64_t before = (s - dim) / 2;
      y = padWith(n, y, a, before, s - dim - before, 0.0);
    }
  }
  if (n.hasFailed())
    return failure();
  n.setOutputs(y);
  return success();
}

/// MaxUnpool-9/11/22: X and I [N, C, in..] (I flat over the inferred output
/// [N, C, (in - 1) * s - pads + k..]), zero-padded at the end to output_shape.
LogicalResult onnx_import::importMaxUnpool(NodeContext &n) {
  auto xt = n.inputType(0), it = n.inputType(1);
  const int64_t rank = xt.getRank(), r = rank - 2;
  if (r < 1)
    return n.error("the input needs a batch, a channel and spatial dimensions");
  if (!isa<FloatType>(xt.getElementType()))
    return n.unsupported("MaxUnpool of a non-float input");
  if (it.getShape() != xt.getShape() || !isa<IntegerType>(it.getElementType()))
    return n.error("the indices must be integers of the input's shape");
  auto k = n.getInts("kernel_shape");
  if (!k || (int64_t)k->size() != r)
    return n.error("kernel_shape needs " + Twine(r) + " values");
  SmallVector<int64_t> str = n.getInts("strides").value_or(SmallVector<int64_t>(r, 1));
  SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>(2 * r, 0));
  if ((int64_t)str.size() != r || (int64_t)pads.size() != 2 * r)
    return n.error("strides need " + Twine(r) + " values, pads " + Twine(2 * r));
  SmallVector<int64_t> shape{xt.getDimSize(0), xt.getDimSize(1)};
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t v : {str[i], pads[i], pads[r + i], (*k)[i]})
      if (v < 0 || v > kMaxElements)
        return n.error("kernel_shape, strides and pads must lie in [0, 2^40]");
    shape.push_back((xt.getDimSize(2 + i) - 1) * str[i] - pads[i] - pads[r + i] + (*k)[i]);
  }
  // The indices address the inferred shape; output_shape (at least as
  // large) holds it at its origin, as onnx's reference places it.
  SmallVector<int64_t> outShape(shape);
  if (n.hasInput(2)) {
    auto given = n.constantInts(2, "output_shape of MaxUnpool");
    if (failed(given))
      return failure();
    if ((int64_t)given->size() != rank || (*given)[0] != shape[0] || (*given)[1] != shape[1] ||
        llvm::any_of(llvm::zip(*given, shape), [](auto p) {
          return std::get<0>(p) < std::get<1>(p);
        }))
      return n.error("output_shape must be [N, C, spatial..] with the input's N and C and "
                     "each spatial size at least the inferred one");
    outShape = *given;
  }
  int64_t total = 1;
  for (int64_t v : outShape) {
    if (v < 1 || v > kMaxElements || total > kMaxElements / v)
      return n.error("the output would have " + Twine(v) + " elements along a dimension, "
                     "or more than 2^40 in all");
    total *= v;
  }
  total = 1;
  for (int64_t v : shape)
    total *= v;
  const int64_t m = xt.getNumElements();
  auto flat = RankedTensorType::get({total}, xt.getElementType());
  Value idx = n.reshape(n.input(1), {m});
  if (!it.getElementType().isInteger(64))
    idx = n.create<CastOp>(RankedTensorType::get({m}, n.builder().getI64Type()), idx);
  Value sum = n.create<GatherGradOp>(flat, n.reshape(n.input(0), {m}), idx, 0);
  Value ones = n.broadcastTo(n.scalarLike(n.input(0), 1.0), {m});
  Value count = n.create<GatherGradOp>(flat, ones, idx, 0);
  Value y = n.create<DivOp>(sum, n.create<MaxOp>(count, n.scalarLike(count, 1.0)));
  y = n.reshape(y, shape);
  for (int64_t i = 0; i < r; ++i)
    y = padWith(n, y, 2 + i, 0, outShape[2 + i] - shape[2 + i], 0.0);
  if (n.hasFailed())
    return failure();
  n.setOutputs(y);
  return success();
}
