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
//   CenterCropPad
//              per axis a centred slice or a centred zero pad.
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

} // namespace

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
  Value acc;
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
    acc = !acc ? sl : isMax ? n.create<MaxOp>(acc, sl) : n.create<AddOp>(acc, sl);
  }
  if (n.hasFailed())
    return failure();
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
