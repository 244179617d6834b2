//===- OnnxOpsResize.cpp - ONNX Resize (opsets 11-19) ----------------------===//
//
// Resize is separable: every resized axis is an interpolation with weights
// that depend only on the (static) sizes and attributes, so the importer
// computes them and emits, per axis,
//
//   nearest          gather(x, idx, axis)              idx: the source of each
//                                                     output position (any dtype)
//   linear, cubic    transpose(matmul(transpose(x), W^T))   W [out, in]: the taps'
//                                                     coefficients (float data)
//   tf_crop_and_resize   where(outside, extrapolation_value, y)
//
// Both are differentiable through the existing gather and matmul rules, so
// upsampling layers (U-Nets, FPNs, YOLO necks) train. The coordinate
// transformation, nearest rounding, cubic coefficient, antialiasing,
// exclude_outside, axes and keep_aspect_ratio_policy follow the ONNX
// definition (the reference implementation's taps: the n neighbours of the
// source coordinate, edge-clamped).
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

struct ResizeAttrs {
  std::string mode, coordMode, nearestMode;
  double cubicA = -0.75, extrapolation = 0.0;
  bool antialias = false, excludeOutside = false;
};

/// The taps' coefficients for a source position `ratio` in (0, 1] past its
/// left neighbour.
std::vector<double> coefficients(const ResizeAttrs &a, double ratio, double scale) {
  if (a.mode == "nearest") {
    if (ratio == 1.0)
      return {0, 1};
    const std::string &m = a.nearestMode;
    bool right = m == "round_prefer_ceil" ? ratio >= 0.5
                 : m == "floor"           ? false
                 : m == "ceil"            ? true
                                          : ratio > 0.5; // round_prefer_floor
    return {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
  }
  double A = a.cubicA;
  if (a.mode == "linear" && !a.antialias)
    return {1 - ratio, ratio};
  if (a.mode == "cubic" && !a.antialias) {
    double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    return {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A,
            ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
            ((A + 2) * q - (A + 3)) * q * q + 1, ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A};
  }
  // Antialiased (downsampling widens the kernel by 1 / scale).
  double s = std::min(scale, 1.0);
  std::vector<double> c;
  if (a.mode == "linear") {
    int64_t start = (int64_t)std::floor(-1 / s) + 1, footprint = 2 - 2 * start;
    for (int64_t i = start; i < start + footprint; ++i)
      c.push_back(std::clamp(1 - std::abs((i - ratio) * s), 0.0, 1.0));
  } else {
    int64_t start = (int64_t)std::floor(-2 / s) + 1, end = 2 - start;
    for (int64_t i = start; i < end; ++i) {
      double x = std::abs(s * (i - ratio)), x2 = x * x, x3 = x2 * x;
      c.push_back(x <= 1  ? (A + 2) * x3 - (A + 3) * x2 + 1
                  : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A
                          : 0.0);
    }
  }
  double sum = 0;
  for (double v : c)
    sum += v;
  for (double &v : c)
    v /= sum;
  return c;
}

/// One axis: W [out, in] and the rows that extrapolate.
struct AxisWeights {
  std::vector<double> w;
  std::vector<char> outside;
};

FailureOr<AxisWeights> axisWeights(NodeContext &n, const ResizeAttrs &a, int64_t in,
                                   int64_t out, double scale, double roiStart,
                                   double roiEnd) {
  AxisWeights r;
  r.w.assign(out * in, 0.0);
  r.outside.assign(out, 0);
  double outWidth = scale * in;
  for (int64_t y = 0; y < out; ++y) {
    const std::string &m = a.coordMode;
    double x;
    if (m == "align_corners")
      x = outWidth == 1 ? 0.0 : y * (in - 1) / (outWidth - 1);
    else if (m == "asymmetric")
      x = y / scale;
    else if (m == "tf_crop_and_resize") {
      x = outWidth == 1 ? (roiEnd - roiStart) * (in - 1) / 2
                        : y * (roiEnd - roiStart) * (in - 1) / (outWidth - 1);
      x += roiStart * (in - 1);
      r.outside[y] = x < 0 || x > in - 1;
    } else if (m == "pytorch_half_pixel")
      x = outWidth == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    else if (m == "half_pixel")
      x = (y + 0.5) / scale - 0.5;
    else if (m == "half_pixel_symmetric")
      x = in / 2.0 * (1 - out / outWidth) + (y + 0.5) / scale - 0.5;
    else
      return n.unsupported("coordinate_transformation_mode '" + m + "'");
    double xf = std::floor(x), ratio = x == xf ? 1.0 : x - xf;
    std::vector<double> c = coefficients(a, ratio, scale);
    int64_t taps = c.size(), pad = (taps + 1) / 2;
    double xp = x + pad, p = std::floor(xp), frac = xp - p;
    int64_t off = taps % 2 == 0 ? (frac == 0 ? -(taps / 2) : -(taps / 2) + 1)
                                : (frac <= 0.5 ? -((taps - 1) / 2) : -((taps - 1) / 2) + 1);
    int64_t start = (int64_t)p + off - pad;
    if (a.excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < taps; ++k) {
        if (start + k < 0 || start + k >= in)
          c[k] = 0;
        sum += c[k];
      }
      for (double &v : c)
        v /= sum == 0 ? 1.0 : sum;
    }
    for (int64_t k = 0; k < taps; ++k)
      r.w[y * in + std::clamp<int64_t>(start + k, 0, in - 1)] += c[k];
  }
  return r;
}

/// Resizes `x` along `axis` to `out`.
Value resizeAxis(NodeContext &n, const ResizeAttrs &a, Value x, int64_t axis, int64_t out,
                 const AxisWeights &wts) {
  auto t = cast<RankedTensorType>(x.getType());
  int64_t in = t.getDimSize(axis), rank = t.getRank();
  Value y;
  if (a.mode == "nearest") {
    HostTensor idx(RankedTensorType::get({out}, n.builder().getI64Type()));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        if (wts.w[o * in + i] != 0)
          idx.i()[o] = i;
    y = n.create<GatherOp>(x, n.constant(idx), axis);
  } else {
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis)
        perm.push_back(d);
    perm.push_back(axis);
    HostTensor wt(RankedTensorType::get({in, out}, t.getElementType()));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        wt.setFromDouble(i * out + o, wts.w[o * in + i]);
    Value moved = axis == rank - 1 ? x : n.create<TransposeOp>(x, perm);
    y = n.create<MatmulOp>(moved, n.constant(wt));
    if (axis != rank - 1) {
      SmallVector<int64_t> back(rank);
      for (int64_t d = 0; d < rank; ++d)
        back[perm[d]] = d;
      y = n.create<TransposeOp>(y, back);
    }
  }
  if (llvm::is_contained(wts.outside, 1)) {
    SmallVector<int64_t> shape(rank, 1);
    shape[axis] = out;
    HostTensor mask(RankedTensorType::get(shape, n.builder().getI1Type()));
    for (int64_t o = 0; o < out; ++o)
      mask.i()[o] = wts.outside[o];
    y = n.create<WhereOp>(n.constant(mask), n.scalarLike(x, a.extrapolation), y);
  }
  return y;
}

/// An optional float/int list input (empty or absent: nullopt).
FailureOr<std::optional<std::vector<double>>> listInput(NodeContext &n, unsigned i,
                                                        StringRef what) {
  if (!n.hasInput(i) || n.inputType(i).getNumElements() == 0)
    return std::optional<std::vector<double>>();
  auto c = n.constantInput(i, what);
  if (failed(c))
    return failure();
  std::vector<double> v;
  for (int64_t k = 0; k < c->size(); ++k)
    v.push_back(c->getAsDouble(k));
  return std::optional(std::move(v));
}

/// Input 0 resized along `axes` to `out` (scales `scale`, region `roi`:
/// begins then ends), one axis after another.
LogicalResult resizeAxes(NodeContext &n, const ResizeAttrs &a, ArrayRef<int64_t> axes,
                         ArrayRef<double> scale, ArrayRef<int64_t> out,
                         const std::optional<std::vector<double>> &roi) {
  auto xt = n.inputType(0);
  int64_t na = axes.size();
  Value x = n.input(0);
  for (int64_t i = 0; i < na; ++i) {
    int64_t in = xt.getDimSize(axes[i]);
    if (out[i] < 0 || out[i] > kMaxMaterialisedElements / std::max<int64_t>(in, 1))
      return n.error("output size " + Twine(out[i]) + " along axis " + Twine(axes[i]) +
                     " is out of range");
    double r0 = roi ? (*roi)[i] : 0.0, r1 = roi ? (*roi)[na + i] : 1.0;
    bool crop = a.coordMode == "tf_crop_and_resize";
    if (std::abs(scale[i] - 1.0) < 1e-9 && out[i] == in && (!crop || (r0 == 0 && r1 == 1)))
      continue; // identity along this axis
    if (in == 0 || out[i] == 0)
      return n.unsupported("resizing an empty dimension");
    auto w = axisWeights(n, a, in, out[i], scale[i], r0, r1);
    if (failed(w))
      return failure();
    x = resizeAxis(n, a, x, axes[i], out[i], *w);
  }
  n.setOutputs(x);
  return success();
}

LogicalResult resize(NodeContext &n) {
  ResizeAttrs a;
  a.mode = n.getString("mode", "nearest");
  a.coordMode = n.getString("coordinate_transformation_mode", "half_pixel");
  a.nearestMode = n.getString("nearest_mode", "round_prefer_floor");
  a.cubicA = n.getFloat("cubic_coeff_a", -0.75);
  a.extrapolation = n.getFloat("extrapolation_value", 0.0);
  a.antialias = n.getInt("antialias", 0);
  a.excludeOutside = n.getInt("exclude_outside", 0);
  std::string policy = n.getString("keep_aspect_ratio_policy", "stretch");
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return n.unsupported("mode '" + a.mode + "'");
  if (a.mode == "nearest" && a.antialias)
    return n.error("antialias applies to the linear and cubic modes only");
  if (!llvm::is_contained({"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"},
                          a.nearestMode))
    return n.unsupported("nearest_mode '" + a.nearestMode + "'");
  if (!llvm::is_contained({"stretch", "not_larger", "not_smaller"}, policy))
    return n.unsupported("keep_aspect_ratio_policy '" + policy + "'");
  auto xt = n.inputType(0);
  int64_t rank = xt.getRank();
  if (a.mode != "nearest" && !isa<FloatType>(xt.getElementType()))
    return n.unsupported(a.mode + " mode on non-float data");
  SmallVector<int64_t> axes;
  if (auto given = n.getInts("axes")) {
    for (int64_t ax : *given) {
      auto norm = n.axis(ax, rank);
      if (failed(norm))
        return failure();
      if (llvm::is_contained(axes, *norm))
        return n.error("axes repeats axis " + Twine(*norm));
      axes.push_back(*norm);
    }
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  auto roi = listInput(n, 1, "roi");
  auto scales = listInput(n, 2, "scales");
  auto sizes = listInput(n, 3, "sizes");
  if (failed(roi) || failed(scales) || failed(sizes))
    return failure();
  if (scales->has_value() == sizes->has_value())
    return n.error("exactly one of scales and sizes must be given");
  int64_t na = axes.size();
  const std::vector<double> &given = scales->has_value() ? **scales : **sizes;
  if ((int64_t)given.size() != na)
    return n.error((scales->has_value() ? "scales" : "sizes") + Twine(" has ") +
                   Twine(given.size()) + " values for " + Twine(na) + " axes");
  if (roi->has_value() && (int64_t)(*roi)->size() != 2 * na)
    return n.error("roi has " + Twine((*roi)->size()) + " values, not 2 x " + Twine(na));
  SmallVector<double> scale(na);
  SmallVector<int64_t> out(na);
  if (scales->has_value()) {
    for (int64_t i = 0; i < na; ++i) {
      scale[i] = given[i];
      if (!(scale[i] > 0) || !std::isfinite(scale[i]))
        return n.error("scale " + std::to_string(scale[i]) + " is not positive");
      out[i] = (int64_t)(scale[i] * xt.getDimSize(axes[i]));
    }
  } else {
    for (int64_t i = 0; i < na; ++i)
      scale[i] = given[i] / xt.getDimSize(axes[i]);
    if (policy != "stretch") {
      double s = policy == "not_larger" ? *llvm::min_element(scale) : *llvm::max_element(scale);
      for (int64_t i = 0; i < na; ++i) {
        scale[i] = s;
        out[i] = (int64_t)(s * xt.getDimSize(axes[i]) + 0.5);
      }
    } else {
      for (int64_t i = 0; i < na; ++i)
        out[i] = (int64_t)given[i];
    }
  }
  return resizeAxes(n, a, axes, scale, out, *roi);
}

/// Upsample (7: scales as an attribute; 9: as an input), and Resize-10,
/// which is Upsample renamed: every axis scaled, the output floor(scale x
/// input), asymmetric coordinates, nearest rounding down.
LogicalResult upsample(NodeContext &n) {
  ResizeAttrs a;
  a.mode = n.getString("mode", "nearest");
  a.coordMode = "asymmetric";
  a.nearestMode = "floor";
  if (a.mode != "nearest" && a.mode != "linear")
    return n.unsupported("mode '" + a.mode + "'");
  auto xt = n.inputType(0);
  int64_t rank = xt.getRank();
  std::vector<double> given;
  if (n.getOpset() < 9) {
    const onnx::AttributeProto *attr = n.attr("scales");
    if (!attr)
      return n.error("needs the scales attribute");
    given.assign(attr->floats().begin(), attr->floats().end());
  } else {
    auto scales = listInput(n, 1, "scales");
    if (failed(scales))
      return failure();
    if (scales->has_value())
      given = **scales;
  }
  if ((int64_t)given.size() != rank)
    return n.error("scales has " + Twine(given.size()) + " values for rank " + Twine(rank));
  if (a.mode != "nearest" && !isa<FloatType>(xt.getElementType()))
    return n.unsupported(a.mode + " mode on non-float data");
  SmallVector<int64_t> axes, out;
  SmallVector<double> scale;
  bool up = n.getNode().op_type() == "Upsample";
  for (int64_t d = 0; d < rank; ++d) {
    if (!(given[d] > 0) || !std::isfinite(given[d]))
      return n.error("scale " + std::to_string(given[d]) + " is not positive");
    if (up && given[d] < 1)
      return n.error("scale " + std::to_string(given[d]) +
                     " is below 1 (Upsample only enlarges; Resize shrinks)");
    axes.push_back(d);
    scale.push_back(given[d]);
    out.push_back((int64_t)std::floor(given[d] * xt.getDimSize(d)));
  }
  return resizeAxes(n, a, axes, scale, out, std::nullopt);
}

} // namespace

void onnx_import::registerResizeOps(OpRegistry &r) {
  r.add("Upsample", 7, upsample);
  r.add("Upsample", 9, upsample); // scales as an input
  r.add("Resize", 10, upsample);  // Upsample-9 renamed
  r.add("Resize", 11, resize);
  r.sameAs("Resize", 13, 11);  // bfloat16; roi, scales optional
  r.add("Resize", 18, resize); // antialias, axes, keep_aspect_ratio_policy
  r.add("Resize", 19, resize); // half_pixel_symmetric
}
