//===- OnnxOpsGridSample.cpp - GridSample, AffineGrid, DeformConv --------===//
//
// GridSample-16/20/22 (x [N, C, H, W], grid [N, H', W', 2] of (x, y) in
// [-1, 1]; from 20 also 5-d, (x, y, z)) built from merak ops, so that its
// gradients (to the input through gather_elements, to the grid through the
// interpolation weights) need no new rule:
//
//   ix = (gx + 1) / 2 * (W - 1)        align_corners
//   ix = ((gx + 1) * W - 1) / 2        otherwise            (iy likewise)
//   border / reflection: ix clipped, or reflected then clipped, into
//   [0, W - 1] (for bicubic: each tap's coordinate instead)
//   a tap (xi, yi): x[n, :, yi, xi] through one gather_elements of the
//   [N, C, H*W] input at yi * W + xi (clamped), times 0 where (xi, yi) lies
//   outside the input (zeros padding)
//   bilinear: the 4 taps around (ix, iy) weighted by their distances (8 in
//   5-d: trilinear); nearest: the tap at (ix, iy) rounded half to even;
//   bicubic (4-d only): 16 taps with the cubic convolution weights
//   (A = -0.75), as PyTorch.
//
// AffineGrid (the grid of a spatial transformer) is a matmul of a constant
// base grid by theta^T.
//
// DeformConv-19/22 (torchvision's deform_conv2d) samples the same way: per
// offset group g, kernel tap k and output position l, the input's channels
// of g bilinearly (zeros outside) at the tap's position plus its learned
// offset, times the optional mask; the columns [N, C * K, L] then meet the
// weight in one grouped matmul:
//
//   col[n, c, k, l] = bilinear(x[n, c], base_k,l + offset[n, g(c), k, :, l])
//                     * mask[n, g(c), k, l]
//   y[n, grp, :, l] = W[grp] [O/group, C/group * K] @ col[n, grp] + B
//
// so the gradients reach the input, the weight, the offsets and the mask.
//
// RoiAlign-10/16/22 (Mask R-CNN's box features) samples a fixed grid of
// s x s points per output bin of each box (sampling_ratio s > 0; the
// adaptive grid, whose size depends on the boxes, is refused), at
//   y = y1 + (ph + (iy + 0.5) / s) * (y2 - y1) / out_h     (x likewise)
// each bilinear between its clamped neighbours (zero outside [-1, H]), as
// onnx's reference: one gather of the features flattened over (batch, y,
// x) per corner, then the mean (or the maximum of the weighted corners,
// mode max) of each bin's samples.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// The sampling of one GridSample node over r = 2 or 3 spatial dimensions
/// (sizes `dims`, outermost first; grid component k addresses dimension
/// r - 1 - k: x the innermost).
struct Sampler {
  NodeContext &n;
  Value data; // [N, C, prod(dims)]
  Value like; // a float tensor [N, P] (for constants)
  int64_t N, C, P;
  SmallVector<int64_t> dims;
  bool align, zeros, reflection, border;

  Value c(double v) { return n.scalarLike(like, v); }
  Value add(Value a, Value b) { return n.create<AddOp>(a, b); }
  Value sub(Value a, Value b) { return n.create<SubOp>(a, b); }
  Value mul(Value a, Value b) { return n.create<MulOp>(a, b); }
  Value floor(Value a) { return n.create<FloorOp>(a); }

  Value unnormalize(Value g, int64_t size) {
    if (align)
      return mul(add(g, c(1)), c(0.5 * double(size - 1)));
    return mul(sub(mul(add(g, c(1)), c(double(size))), c(1)), c(0.5));
  }
  Value clip(Value v, int64_t size) {
    auto &b = n.builder();
    return n.create<ClampOp>(v, b.getF64FloatAttr(0.0), b.getF64FloatAttr(double(size - 1)));
  }
  /// PyTorch's reflect_coordinates over [lo2 / 2, hi2 / 2], then clipped.
  Value reflect(Value v, int64_t size) {
    const double lo2 = align ? 0 : -1, hi2 = align ? 2.0 * double(size - 1) : 2.0 * size - 1;
    if (lo2 == hi2)
      return mul(v, c(0));
    const double lo = lo2 / 2, span = (hi2 - lo2) / 2;
    Value d = n.create<AbsOp>(sub(v, c(lo)));
    Value flips = floor(mul(d, c(1 / span)));
    Value extra = sub(d, mul(flips, c(span)));
    Value odd = n.create<NeOp>(sub(flips, mul(floor(mul(flips, c(0.5))), c(2))), c(0));
    Value r = n.create<WhereOp>(odd, add(sub(c(span), extra), c(lo)), add(extra, c(lo)));
    return clip(r, size);
  }
  /// The padding mode's transform of dimension d's coordinate.
  Value coords(Value v, size_t d) {
    return border ? clip(v, dims[d]) : reflection ? reflect(v, dims[d]) : v;
  }
  /// [N, P] -> [N, 1, P], to scale every channel.
  Value perSample(Value w) { return n.reshape(w, {N, 1, P}); }
  Value weighted(Value v, Value w) { return mul(v, perSample(w)); }

  /// The input at the taps `at` (one integer-valued [N, P] per dimension):
  /// [N, C, P], zero outside the input with zeros padding.
  Value tap(ArrayRef<Value> at) {
    // The linear index in I64 (a float holds integers exactly only up to
    // 2^11 in f16, 2^8 in bf16, 2^24 in f32).
    auto it = RankedTensorType::get({N, P}, n.builder().getI64Type());
    Value lin, in;
    for (size_t d = 0; d < dims.size(); ++d) {
      Value ci = n.create<CastOp>(it, clip(at[d], dims[d]));
      lin = lin ? n.create<AddOp>(n.create<MulOp>(lin, n.scalarLike(ci, double(dims[d]))), ci)
                : ci;
      Value ok = n.create<AndOp>(n.create<GeOp>(at[d], c(0)),
                                 n.create<LeOp>(at[d], c(double(dims[d] - 1))));
      in = in ? n.create<AndOp>(in, ok) : ok;
    }
    Value idx = n.broadcastTo(n.reshape(lin, {N, 1, P}), {N, C, P});
    Value v = n.create<GatherElementsOp>(data, idx, 2);
    return zeros ? n.create<WhereOp>(perSample(in), v, n.scalarLike(v, 0)) : v;
  }

  /// Bilinear / trilinear: the 2^r taps around `at`, weighted by distance.
  Value linear(ArrayRef<Value> at) {
    SmallVector<Value> lo, w1;
    for (Value v : at) {
      lo.push_back(floor(v));
      w1.push_back(sub(v, lo.back()));
    }
    Value r;
    for (unsigned corner = 0; corner < (1u << at.size()); ++corner) {
      SmallVector<Value> t;
      Value w;
      for (size_t d = 0; d < at.size(); ++d) {
        const bool up = corner >> (at.size() - 1 - d) & 1;
        t.push_back(up ? add(lo[d], c(1)) : lo[d]);
        Value wd = up ? w1[d] : sub(c(1), w1[d]);
        w = w ? mul(w, wd) : wd;
      }
      Value term = weighted(tap(t), w);
      r = r ? add(r, term) : term;
    }
    return r;
  }
  /// Round half to even (nearbyint).
  Value roundEven(Value v) {
    Value f = floor(v), frac = sub(v, f);
    Value odd = n.create<EqOp>(sub(f, mul(floor(mul(f, c(0.5))), c(2))), c(1));
    Value up = n.create<OrOp>(n.create<GtOp>(frac, c(0.5)),
                              n.create<AndOp>(n.create<EqOp>(frac, c(0.5)), odd));
    return n.create<WhereOp>(up, add(f, c(1)), f);
  }
  /// The cubic convolution weights of taps -1, 0, 1, 2 at fraction t.
  SmallVector<Value> cubic(Value t) {
    const double A = -0.75;
    auto far = [&](Value d) { // |d| in [1, 2]
      return sub(mul(add(mul(sub(mul(c(A), d), c(5 * A)), d), c(8 * A)), d), c(4 * A));
    };
    auto near = [&](Value d) { // |d| in [0, 1]
      return add(mul(mul(sub(mul(c(A + 2), d), c(A + 3)), d), d), c(1));
    };
    Value u = sub(c(1), t);
    return {far(add(t, c(1))), near(t), near(u), far(add(u, c(1)))};
  }
  /// Bicubic (2-d): 16 taps, each coordinate through the padding mode.
  Value bicubic(Value iy, Value ix) {
    Value y0 = floor(iy), x0 = floor(ix);
    SmallVector<Value> wy = cubic(sub(iy, y0)), wx = cubic(sub(ix, x0));
    Value r;
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        Value t = weighted(tap({coords(add(y0, c(j - 1)), 0), coords(add(x0, c(i - 1)), 1)}),
                           mul(wy[j], wx[i]));
        r = r ? add(r, t) : t;
      }
    return r;
  }
};

LogicalResult gridSample(NodeContext &n) {
  auto xt = n.inputType(0), gt = n.inputType(1);
  const int64_t rank = xt.getRank(), r = rank - 2;
  if (rank != 4 && rank != 5)
    return n.unsupported("GridSample of a " + Twine(rank) + "-d input (4-d and 5-d only)");
  if (!isa<FloatType>(xt.getElementType()) || gt.getElementType() != xt.getElementType())
    return n.unsupported("GridSample with a non-float input or a grid of another type");
  const int64_t N = xt.getDimSize(0), C = xt.getDimSize(1);
  if (gt.getRank() != rank || gt.getDimSize(0) != N || gt.getDimSize(rank - 1) != r)
    return n.error("the grid must be [N, spatial out..., " + Twine(r) + "] with the input's N");
  std::string mode = n.getString("mode", "bilinear"), pad = n.getString("padding_mode", "zeros");
  mode = mode == "linear" ? "bilinear" : mode == "cubic" ? "bicubic" : mode;
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return n.error("unknown mode '" + mode + "'");
  if (mode == "bicubic" && r != 2)
    return n.error("the cubic mode takes a 4-d input only");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return n.error("unknown padding_mode '" + pad + "'");
  SmallVector<int64_t> dims(xt.getShape().drop_front(2)), out(gt.getShape().slice(1, r));
  int64_t P = 1, volume = 1;
  for (int64_t k = 0; k < r; ++k) {
    P *= out[k];
    volume *= dims[k];
  }
  // Grid component k addresses spatial dimension r - 1 - k.
  SmallVector<Value> at(r);
  for (int64_t k = 0; k < r; ++k) {
    SmallVector<int64_t> starts(rank, 0), limits(gt.getShape()), steps(rank, 1);
    starts[rank - 1] = k;
    limits[rank - 1] = k + 1;
    at[r - 1 - k] = n.reshape(n.create<SliceOp>(n.input(1), starts, limits, steps), {N, P});
  }
  Sampler s{n,    n.reshape(n.input(0), {N, C, volume}), at[0], N, C, P, dims,
            (bool)n.getInt("align_corners", 0), pad == "zeros", pad == "reflection",
            pad == "border"};
  for (int64_t d = 0; d < r; ++d)
    at[d] = s.unnormalize(at[d], dims[d]);
  Value y;
  if (mode == "bicubic") {
    y = s.bicubic(at[0], at[1]);
  } else {
    for (int64_t d = 0; d < r; ++d)
      at[d] = s.coords(at[d], d);
    if (mode == "bilinear") {
      y = s.linear(at);
    } else {
      for (Value &v : at)
        v = s.roundEven(v);
      y = s.tap(at);
    }
  }
  if (n.hasFailed())
    return failure();
  SmallVector<int64_t> shape{N, C};
  shape.append(out.begin(), out.end());
  n.setOutputs(n.reshape(y, shape));
  return success();
}

/// AffineGrid-20: theta [N, 2, 3] (or [N, 3, 4]) and a constant size
/// [N, C, H, W] (or [N, C, D, H, W]) give the grid [N, H, W, 2] (or
/// [N, D, H, W, 3]) of theta times (x, y[, z], 1) at every output position,
/// the base coordinates spanning [-1, 1] (align_corners) or the pixel
/// centres inside it: one matmul of a constant base by theta^T, so that the
/// gradient reaches theta.
LogicalResult affineGrid(NodeContext &n) {
  auto tt = n.inputType(0);
  auto size = n.constantInts(1, "size");
  if (failed(size))
    return failure();
  const int64_t r = static_cast<int64_t>(size->size()) - 2;
  if ((r != 2 && r != 3) || tt.getRank() != 3 || tt.getDimSize(1) != r ||
      tt.getDimSize(2) != r + 1 || tt.getDimSize(0) != (*size)[0])
    return n.error("theta must be [N, " + Twine(r) + ", " + Twine(r + 1) +
                   "] for a size of " + Twine(size->size()) + " entries (4 or 5)");
  if (!isa<FloatType>(tt.getElementType()))
    return n.error("theta must be a float tensor");
  const bool align = n.getInt("align_corners", 0);
  SmallVector<int64_t> dims(size->begin() + 2, size->end());
  int64_t P = 1;
  for (int64_t d : dims) {
    if (d < 1 || d > kMaxElements)
      return n.error("the output size must be positive");
    P *= d;
  }
  if (P > kMaxElements / (r + 1))
    return n.error("the grid would be too large");
  // base [P, r + 1]: per position (innermost dimension first: x, y[, z]), then 1.
  HostTensor base(RankedTensorType::get({P, r + 1}, tt.getElementType()));
  for (int64_t p = 0; p < P; ++p) {
    int64_t rest = p;
    for (int64_t d = r - 1; d >= 0; --d) {
      const int64_t i = rest % dims[d], len = dims[d];
      rest /= len;
      const double v = len == 1 ? 0.0
                       : align  ? -1.0 + 2.0 * double(i) / double(len - 1)
                                : (2.0 * double(i) + 1.0) / double(len) - 1.0;
      base.setFromDouble(p * (r + 1) + (r - 1 - d), v);
    }
    base.setFromDouble(p * (r + 1) + r, 1.0);
  }
  const int64_t N = tt.getDimSize(0);
  Value thetaT = n.create<TransposeOp>(n.input(0), ArrayRef<int64_t>{0, 2, 1});
  Value grid = n.create<MatmulOp>(n.reshape(n.constant(base), {1, P, r + 1}), thetaT);
  SmallVector<int64_t> shape{N};
  shape.append(dims.begin(), dims.end());
  shape.push_back(r);
  n.setOutputs(n.reshape(grid, shape));
  return success();
}

/// The sampled columns of one DeformConv offset group: x's channels
/// [N, Cg, H * W] at the taps' positions plus dy, dx ([N, P], P = K * L),
/// times the mask ([N, P] or null): [N, Cg, P].
Value deformColumns(NodeContext &n, Value x, Value dy, Value dx, Value mask, Value baseY,
                    Value baseX, int64_t H, int64_t W) {
  auto t = cast<RankedTensorType>(x.getType());
  const int64_t N = t.getDimSize(0), C = t.getDimSize(1);
  const int64_t P = cast<RankedTensorType>(dy.getType()).getDimSize(1);
  Sampler s{n, x, dy, N, C, P, {H, W}, false, true, false, false};
  Value v = s.linear({s.add(dy, baseY), s.add(dx, baseX)});
  return mask ? s.weighted(v, mask) : v;
}

LogicalResult deformConv(NodeContext &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  auto xt = n.inputType(0), wt = n.inputType(1), ot = n.inputType(2);
  if (xt.getRank() != 4)
    return n.unsupported("DeformConv of a " + Twine(xt.getRank() - 2) + "-d input (2-d only)");
  Type et = xt.getElementType();
  if (!isa<FloatType>(et) || wt.getElementType() != et || ot.getElementType() != et)
    return n.error("the input, weight and offsets must be float tensors of one type");
  const int64_t N = xt.getDimSize(0), C = xt.getDimSize(1), H = xt.getDimSize(2),
                W = xt.getDimSize(3);
  if (wt.getRank() != 4)
    return n.error("the weight must be [O, C / group, kH, kW]");
  const int64_t O = wt.getDimSize(0), Cg = wt.getDimSize(1), kH = wt.getDimSize(2),
                kW = wt.getDimSize(3), K = kH * kW;
  const int64_t group = n.getInt("group", 1), G = n.getInt("offset_group", 1);
  if (group < 1 || G < 1 || C < 1 || G > C || C != Cg * group || O % group || C % G)
    return n.error("the input's " + Twine(C) + " channels must be the weight's " + Twine(Cg) +
                   " times group " + Twine(group) + " and divide by offset_group " + Twine(G) +
                   ", the weight's " + Twine(O) + " outputs by group");
  if (auto k = n.getInts("kernel_shape"); k && *k != SmallVector<int64_t>{kH, kW})
    return n.error("kernel_shape differs from the weight's");
  SmallVector<int64_t> st = n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> dil = n.getInts("dilations").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>(4, 0));
  auto bad = [](int64_t v, int64_t lo) { return v < lo || v > kMaxElements; };
  if (st.size() != 2 || dil.size() != 2 || pads.size() != 4 || bad(st[0], 1) ||
      bad(st[1], 1) || bad(dil[0], 1) || bad(dil[1], 1) ||
      llvm::any_of(pads, [&](int64_t p) { return bad(p, 0); }))
    return n.error("strides and dilations need 2 positive values, pads 4 non-negative ones "
                   "(each at most 2^40)");
  const int64_t oH = (H + pads[0] + pads[2] - (dil[0] * (kH - 1) + 1)) / st[0] + 1;
  const int64_t oW = (W + pads[1] + pads[3] - (dil[1] * (kW - 1) + 1)) / st[1] + 1;
  if (oH < 1 || oW < 1)
    return n.error("the kernel does not fit the padded input");
  if (oH > kMaxMaterialisedElements / oW || K > kMaxMaterialisedElements / (oH * oW))
    return n.unsupported("a DeformConv of more than " + Twine(kMaxMaterialisedElements) +
                         " sampled positions (their base coordinates are constants)");
  const int64_t L = oH * oW, P = K * L;
  if (ot.getShape() != ArrayRef<int64_t>{N, G * K * 2, oH, oW})
    return n.error("the offsets must be [N, offset_group * kH * kW * 2, oH, oW] = [" + Twine(N) +
                   ", " + Twine(G * K * 2) + ", " + Twine(oH) + ", " + Twine(oW) + "]");
  Value mask = n.hasInput(4) ? n.input(4) : Value();
  if (mask && n.inputType(4).getShape() != ArrayRef<int64_t>{N, G * K, oH, oW})
    return n.error("the mask must be [N, offset_group * kH * kW, oH, oW]");
  // The taps' positions without offsets, [1, P] (k-major, then l).
  HostTensor by(RankedTensorType::get({1, P}, et)), bx(by.getType());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t l = 0; l < L; ++l) {
      by.setFromDouble(k * L + l, double((l / oW) * st[0] - pads[0] + (k / kW) * dil[0]));
      bx.setFromDouble(k * L + l, double((l % oW) * st[1] - pads[1] + (k % kW) * dil[1]));
    }
  Value baseY = n.constant(by), baseX = n.constant(bx);
  // offset [N, G, K, 2, L]: (dy, dx) per tap.
  SmallVector<Value> yx = n.createSplit(n.reshape(n.input(2), {N, G, K, 2, L}), 3, {1, 1});
  Value x = n.reshape(n.input(0), {N, C, H * W});
  if (mask)
    mask = n.reshape(mask, {N, G, P});
  SmallVector<Value> cols;
  for (int64_t g = 0; g < G && yx.size() == 2 && !n.hasFailed(); ++g) {
    auto part = [&](Value v) { return n.reshape(n.sliceDim(v, 1, g, g + 1), {N, P}); };
    cols.push_back(deformColumns(n, n.sliceDim(x, 1, g * (C / G), (g + 1) * (C / G)),
                                 part(yx[0]), part(yx[1]), mask ? part(mask) : Value(), baseY,
                                 baseX, H, W));
  }
  if (n.hasFailed())
    return failure();
  Value col = cols.size() == 1 ? cols[0] : n.create<ConcatOp>(ValueRange(cols), 1);
  col = n.reshape(col, {N, group, Cg * K, L});
  Value w = n.reshape(n.input(1), {1, group, O / group, Cg * K});
  Value y = n.reshape(n.create<MatmulOp>(w, col), {N, O, oH, oW});
  if (n.hasInput(3))
    y = n.create<AddOp>(y, n.reshape(n.input(3), {1, O, 1, 1}));
  if (n.hasFailed())
    return failure();
  n.setOutputs(y);
  return success();
}

/// RoiAlign's coordinate along one axis ([R, Q]: per box, per sample), as
/// the clamped position's two neighbours and the upper one's weight, and
/// whether the sample lies in [-1, size].
struct RoiAxis {
  Value low, high, frac, inside;
};
RoiAxis roiAxis(NodeContext &n, Value pos, int64_t size) {
  auto &b = n.builder();
  Value inside = n.create<AndOp>(n.create<GeOp>(pos, n.scalarLike(pos, -1.0)),
                                 n.create<LeOp>(pos, n.scalarLike(pos, double(size))));
  Value c = n.create<ClampOp>(pos, b.getF64FloatAttr(0.0), b.getF64FloatAttr(double(size - 1)));
  Value low = n.create<FloorOp>(c);
  Value high = n.create<ClampOp>(n.create<AddOp>(low, n.scalarLike(low, 1.0)),
                                 b.getF64FloatAttr(0.0), b.getF64FloatAttr(double(size - 1)));
  return {low, high, n.create<SubOp>(c, low), inside};
}

LogicalResult roiAlign(NodeContext &n) {
  if (failed(n.requireInputs(3)))
    return failure();
  auto xt = n.inputType(0), rt = n.inputType(1), it = n.inputType(2);
  Type et = xt.getElementType();
  if (xt.getRank() != 4 || !isa<FloatType>(et) || rt.getElementType() != et)
    return n.error("X must be a float [N, C, H, W] and rois of its type");
  const int64_t N = xt.getDimSize(0), C = xt.getDimSize(1), H = xt.getDimSize(2),
                W = xt.getDimSize(3), R = rt.getRank() == 2 ? rt.getDimSize(0) : -1;
  if (rt.getRank() != 2 || rt.getDimSize(1) != 4 || it.getShape() != ArrayRef<int64_t>{R} ||
      !isa<IntegerType>(it.getElementType()))
    return n.error("rois must be [R, 4] and batch_indices integers [R]");
  const int64_t oh = n.getInt("output_height", 1), ow = n.getInt("output_width", 1);
  const int64_t s = n.getInt("sampling_ratio", 0);
  if (s <= 0)
    return n.unsupported("adaptive sampling (sampling_ratio " + Twine(s) +
                         "): its sample count depends on the boxes' sizes");
  if (oh < 1 || ow < 1 || s > 64 || N < 1 || H < 1 || W < 1 || R < 1 ||
      oh > kMaxMaterialisedElements / ow ||
      oh * ow > kMaxMaterialisedElements / (s * s) ||
      R > kMaxMaterialisedElements / (oh * ow * s * s))
    return n.error("output_height, output_width, sampling_ratio (at most 64), the boxes and "
                   "the input must be non-empty and their samples at most 2^24");
  std::string mode = n.getString("mode", "avg");
  if (mode != "avg" && mode != "max")
    return n.error("unknown mode '" + mode + "'");
  const bool halfPixel = n.getOpset() >= 16 &&
                         n.getString("coordinate_transformation_mode", "half_pixel") ==
                             "half_pixel";
  const double scale = n.getFloat("spatial_scale", 1.0);
  // Per box: its corners scaled (and shifted by half a pixel), sizes, bins.
  SmallVector<Value> box = n.createSplit(n.input(1), 1, {1, 1, 1, 1});
  if (box.size() != 4)
    return failure();
  for (Value &v : box) {
    v = n.create<MulOp>(v, n.scalarLike(v, scale));
    if (halfPixel)
      v = n.create<SubOp>(v, n.scalarLike(v, 0.5));
  }
  Value bw = n.create<SubOp>(box[2], box[0]), bh = n.create<SubOp>(box[3], box[1]);
  if (!halfPixel) { // malformed boxes forced to 1 x 1
    bw = n.create<MaxOp>(bw, n.scalarLike(bw, 1.0));
    bh = n.create<MaxOp>(bh, n.scalarLike(bh, 1.0));
  }
  // The samples' bin fractions, [1, Q] (bin-major: ph, pw, then iy, ix).
  const int64_t Q = oh * ow * s * s;
  HostTensor fy(RankedTensorType::get({1, Q}, et)), fx(fy.getType());
  for (int64_t q = 0; q < Q; ++q) {
    int64_t ix = q % s, iy = q / s % s, pw = q / (s * s) % ow, ph = q / (s * s * ow);
    fy.setFromDouble(q, (double(ph) + (iy + 0.5) / double(s)) / double(oh));
    fx.setFromDouble(q, (double(pw) + (ix + 0.5) / double(s)) / double(ow));
  }
  Value y = n.create<AddOp>(box[1], n.create<MulOp>(bh, n.constant(fy))); // [R, Q]
  Value x = n.create<AddOp>(box[0], n.create<MulOp>(bw, n.constant(fx)));
  RoiAxis ay = roiAxis(n, y, H), ax = roiAxis(n, x, W);
  if (n.hasFailed())
    return failure();
  // Each corner's feature: one gather over (batch, y, x) flattened; its
  // batch from batch_indices (out of range: the gather's check stops it).
  auto i64 = n.builder().getI64Type();
  auto flatT = RankedTensorType::get({R, Q}, i64);
  Value batch = n.create<CastOp>(RankedTensorType::get({R, 1}, i64), n.reshape(n.input(2), {R, 1}));
  Value data = n.reshape(n.create<TransposeOp>(n.input(0), ArrayRef<int64_t>{1, 0, 2, 3}),
                         {1, C, N * H * W});
  auto corner = [&](Value yy, Value xx) {
    Value lin = n.create<AddOp>(
        n.create<MulOp>(n.create<AddOp>(n.create<MulOp>(batch, n.scalarLike(batch, double(H))),
                                        n.create<CastOp>(flatT, yy)),
                        n.scalarLike(batch, double(W))),
        n.create<CastOp>(flatT, xx));
    Value idx = n.broadcastTo(n.reshape(lin, {1, 1, R * Q}), {1, C, R * Q});
    return n.create<GatherElementsOp>(data, idx, 2); // [1, C, R * Q]
  };
  auto perSample = [&](Value w) { return n.reshape(w, {1, 1, R * Q}); };
  Value one = n.scalarLike(ay.frac, 1.0);
  Value hy = n.create<SubOp>(one, ay.frac), hx = n.create<SubOp>(one, ax.frac);
  Value terms[4] = {
      n.create<MulOp>(corner(ay.low, ax.low), perSample(n.create<MulOp>(hy, hx))),
      n.create<MulOp>(corner(ay.low, ax.high), perSample(n.create<MulOp>(hy, ax.frac))),
      n.create<MulOp>(corner(ay.high, ax.low), perSample(n.create<MulOp>(ay.frac, hx))),
      n.create<MulOp>(corner(ay.high, ax.high), perSample(n.create<MulOp>(ay.frac, ax.frac)))};
  Value v = terms[0];
  for (int k = 1; k < 4; ++k)
    v = mode == "avg" ? n.create<AddOp>(v, terms[k]) : n.create<MaxOp>(v, terms[k]);
  Value inside = perSample(n.create<AndOp>(ay.inside, ax.inside));
  v = n.create<WhereOp>(inside, v, n.scalarLike(v, 0.0));
  v = n.reshape(v, {C, R, oh, ow, s * s});
  v = mode == "avg" ? n.create<MulOp>(n.create<ReduceSumOp>(v, ArrayRef<int64_t>{4}, false),
                                      n.scalarLike(v, 1.0 / double(s * s)))
                    : n.create<ReduceMaxOp>(v, ArrayRef<int64_t>{4}, false);
  v = n.create<TransposeOp>(v, ArrayRef<int64_t>{1, 0, 2, 3});
  if (n.hasFailed())
    return failure();
  n.setOutputs(v);
  return success();
}

} // namespace

void onnx_import::registerGridSampleOps(OpRegistry &r) {
  r.add("RoiAlign", 10, roiAlign);
  r.add("RoiAlign", 16, roiAlign); // coordinate_transformation_mode (half_pixel)
  r.sameAs("RoiAlign", 22, 16);    // bfloat16
  r.add("DeformConv", 19, deformConv);
  r.sameAs("DeformConv", 22, 19); // bfloat16
  r.add("GridSample", 16, gridSample);
  r.add("GridSample", 20, gridSample); // linear/cubic names, 5-d
  r.sameAs("GridSample", 22, 20);      // bfloat16
  r.add("AffineGrid", 20, affineGrid);
}
