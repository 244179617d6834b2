//===- OnnxOpsShape.cpp - ONNX shape and data-movement ops ----------------===//
//
// Shape-producing ops (Shape, Size, ConstantOfShape, Range) become
// constants from the static types; ops that take shapes or indices as
// inputs require them to be constants by the time they are imported.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

HostTensor int64Tensor(MLIRContext *ctx, ArrayRef<int64_t> values, bool scalar = false) {
  SmallVector<int64_t> shape;
  if (!scalar)
    shape.push_back(values.size());
  HostTensor t(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  for (size_t k = 0; k < values.size(); ++k)
    t.i()[k] = values[k];
  return t;
}

LogicalResult constant(NodeContext &n) {
  auto *ctx = n.getContext();
  if (const auto *a = n.attr("value")) {
    std::string err;
    auto t = decodeTensor(ctx, a->t(), "", err);
    if (failed(t))
      return n.unsupported("constant value (" + err + ")");
    n.setOutputs(n.constant(*t));
    return success();
  }
  if (const auto *a = n.attr("value_float")) {
    HostTensor t(RankedTensorType::get({}, Float32Type::get(ctx)));
    t.setFromDouble(0, a->f());
    n.setOutputs(n.constant(t));
    return success();
  }
  if (const auto *a = n.attr("value_floats")) {
    HostTensor t(RankedTensorType::get({(int64_t)a->floats_size()}, Float32Type::get(ctx)));
    for (int k = 0; k < a->floats_size(); ++k)
      t.setFromDouble(k, a->floats(k));
    n.setOutputs(n.constant(t));
    return success();
  }
  if (const auto *a = n.attr("value_int")) {
    n.setOutputs(n.constant(int64Tensor(ctx, {a->i()}, true)));
    return success();
  }
  if (const auto *a = n.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    n.setOutputs(n.constant(int64Tensor(ctx, v)));
    return success();
  }
  return n.unsupported("Constant attribute kind (only value, value_float(s), value_int(s))");
}

LogicalResult shape(NodeContext &n) {
  ArrayRef<int64_t> s = n.inputType(0).getShape();
  int64_t rank = s.size();
  int64_t start = n.getInt("start", 0), end = n.getInt("end", rank);
  auto clampIdx = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::min(std::max<int64_t>(i, 0), rank);
  };
  start = clampIdx(start);
  end = clampIdx(end);
  SmallVector<int64_t> v;
  for (int64_t i = start; i < end; ++i)
    v.push_back(s[i]);
  n.setOutputs(n.constant(int64Tensor(n.getContext(), v)));
  return success();
}

LogicalResult size(NodeContext &n) {
  n.setOutputs(n.constant(
      int64Tensor(n.getContext(), {n.inputType(0).getNumElements()}, true)));
  return success();
}

/// Validates a shape read from data: non-negative and not overflowing.
LogicalResult checkShape(NodeContext &n, ArrayRef<int64_t> shape) {
  for (int64_t d : shape)
    if (d < 0)
      return n.error("shape has a negative dimension " + Twine(d));
  auto count = checkedNumElements(shape);
  if (failed(count) || *count > kMaxElements)
    return n.error("shape has absurd dimensions (element count overflows)");
  return success();
}

LogicalResult constantOfShape(NodeContext &n) {
  auto shape = n.constantInts(0, "shape");
  if (failed(shape) || failed(checkShape(n, *shape)))
    return failure();
  Type et = Float32Type::get(n.getContext());
  double value = 0;
  if (const auto *a = n.attr("value")) {
    std::string err;
    auto t = decodeTensor(n.getContext(), a->t(), "", err);
    if (failed(t) || t->size() != 1)
      return n.unsupported("ConstantOfShape value (" + err + ")");
    et = t->getElementType();
    value = t->getAsDouble(0);
  }
  auto type = RankedTensorType::get(*shape, et);
  // A splat: never materialise the elements.
  HostTensor one(RankedTensorType::get({}, et));
  one.setFromDouble(0, value);
  Attribute elem = one.toAttr().getSplatValue<Attribute>();
  Value splat = ConstantOp::create(n.builder(), n.getLoc(),
                                  SplatElementsAttr::get(type, elem));
  n.setOutputs(splat);
  return success();
}

LogicalResult range(NodeContext &n) {
  auto start = n.constantInput(0, "start"), limit = n.constantInput(1, "limit"),
       delta = n.constantInput(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  if (start->size() != 1 || limit->size() != 1 || delta->size() != 1)
    return n.error("start, limit and delta must be scalars");
  if (limit->getElementType() != start->getElementType() ||
      delta->getElementType() != start->getElementType()) {
    std::string types;
    llvm::raw_string_ostream os(types);
    os << start->getElementType() << ", " << limit->getElementType() << " and "
       << delta->getElementType();
    return n.error("start, limit and delta must have one element type, got " + types);
  }
  double s = start->getAsDouble(0), l = limit->getAsDouble(0), d = delta->getAsDouble(0);
  if (d == 0)
    return n.error("delta is zero");
  double steps = std::ceil((l - s) / d);
  if (!std::isfinite(steps))
    return n.error("range length is not finite (start " + std::to_string(s) +
                   ", limit " + std::to_string(l) + ", delta " + std::to_string(d) + ")");
  // Range is materialised as a constant; bound it like other folded values.
  if (steps > (double)kMaxMaterialisedElements)
    return n.error("range of " + std::to_string(steps) + " elements is too large to "
                   "materialise (limit " + Twine(kMaxMaterialisedElements) + ")");
  int64_t count = std::max<int64_t>((int64_t)steps, 0);
  HostTensor t(RankedTensorType::get({count}, start->getElementType()));
  for (int64_t k = 0; k < count; ++k) {
    if (t.isFloat()) {
      t.setFromDouble(k, s + k * d);
      continue;
    }
    // The length came from doubles: near the ends of int64 the last value
    // may not be representable.
    int64_t v;
    if (__builtin_mul_overflow(k, delta->i()[0], &v) ||
        __builtin_add_overflow(v, start->i()[0], &v))
      return n.error("range value " + Twine(k) + " (start " + Twine(start->i()[0]) +
                     " + " + Twine(k) + " * delta " + Twine(delta->i()[0]) +
                     ") overflows int64");
    t.setFromInt(k, v);
  }
  n.setOutputs(n.constant(t));
  return success();
}

LogicalResult reshape(NodeContext &n) {
  auto target = n.constantInts(1, "shape");
  if (failed(target))
    return failure();
  auto in = n.inputType(0);
  bool allowZero = n.getInt("allowzero", 0);
  SmallVector<int64_t> shape;
  int64_t inferAt = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= (size_t)in.getRank())
        return n.error("shape copies dimension " + Twine(i) + " of a rank-" +
                       Twine(in.getRank()) + " input");
      d = in.getDimSize(i);
    }
    if (d == -1) {
      if (inferAt >= 0)
        return n.error("shape has more than one -1");
      inferAt = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return n.error("shape has a negative dimension " + Twine(d));
    shape.push_back(d);
    if (d != 0 && known > kMaxElements / d)
      return n.error("shape has absurd dimensions (element count overflows)");
    known *= d;
  }
  if (inferAt >= 0) {
    if (known == 0 || in.getNumElements() % known)
      return n.error("cannot infer -1 reshaping " + Twine(in.getNumElements()) +
                     " elements");
    shape[inferAt] = in.getNumElements() / known;
  }
  if (failed(checkShape(n, shape)))
    return failure();
  auto count = checkedNumElements(shape);
  if (*count != in.getNumElements())
    return n.error("cannot reshape " + Twine(in.getNumElements()) +
                   " elements into " + Twine(*count));
  n.setOutputs(n.reshape(n.input(0), shape));
  return success();
}

LogicalResult flatten(NodeContext &n) {
  auto matrix = n.flattenedAt(n.getInt("axis", 1));
  if (failed(matrix))
    return failure();
  n.setOutputs(n.reshape(n.input(0), {matrix->first, matrix->second}));
  return success();
}

/// Axes from the `axes` input (opset >= 13) or attribute (older).
FailureOr<SmallVector<int64_t>> axesOf(NodeContext &n, unsigned inputIdx,
                                       bool fromInput) {
  if (fromInput) {
    if (!n.hasInput(inputIdx))
      return SmallVector<int64_t>();
    return n.constantInts(inputIdx, "axes");
  }
  return n.getInts("axes").value_or(SmallVector<int64_t>());
}

LogicalResult unsqueezeImpl(NodeContext &n, bool fromInput) {
  auto axes = axesOf(n, 1, fromInput);
  if (failed(axes))
    return failure();
  auto in = n.inputType(0);
  int64_t rank = in.getRank() + axes->size();
  SmallVector<bool> isNew(rank, false);
  for (int64_t a : *axes) {
    auto ax = n.axis(a, rank);
    if (failed(ax))
      return failure();
    if (isNew[*ax])
      return n.error("duplicate axis " + Twine(a));
    isNew[*ax] = true;
  }
  SmallVector<int64_t> shape;
  int64_t src = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(isNew[d] ? 1 : in.getDimSize(src++));
  n.setOutputs(n.reshape(n.input(0), shape));
  return success();
}
LogicalResult unsqueeze13(NodeContext &n) { return unsqueezeImpl(n, true); }
LogicalResult unsqueeze11(NodeContext &n) { return unsqueezeImpl(n, false); }

LogicalResult squeezeImpl(NodeContext &n, bool fromInput) {
  auto axes = axesOf(n, 1, fromInput);
  if (failed(axes))
    return failure();
  auto in = n.inputType(0);
  SmallVector<bool> drop(in.getRank(), false);
  if (axes->empty()) {
    for (int64_t d = 0; d < in.getRank(); ++d)
      drop[d] = in.getDimSize(d) == 1;
  }
  for (int64_t a : *axes) {
    auto ax = n.axis(a, in.getRank());
    if (failed(ax))
      return failure();
    if (in.getDimSize(*ax) != 1)
      return n.error("cannot squeeze dimension " + Twine(a) + " of size " +
                     Twine(in.getDimSize(*ax)));
    drop[*ax] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!drop[d])
      shape.push_back(in.getDimSize(d));
  n.setOutputs(n.reshape(n.input(0), shape));
  return success();
}
LogicalResult squeeze13(NodeContext &n) { return squeezeImpl(n, true); }
LogicalResult squeeze11(NodeContext &n) { return squeezeImpl(n, false); }

LogicalResult expand(NodeContext &n) {
  auto target = n.constantInts(1, "shape");
  if (failed(target))
    return failure();
  auto shape = broadcastShapes(n.inputType(0).getShape(), *target);
  if (failed(shape))
    return n.error("cannot expand " + Twine(n.inputType(0).getRank()) +
                   "-d input to the given shape");
  if (failed(checkShape(n, *shape)))
    return failure();
  n.setOutputs(n.broadcastTo(n.input(0), *shape));
  return success();
}

LogicalResult transpose(NodeContext &n) {
  auto in = n.inputType(0);
  SmallVector<int64_t> perm;
  if (auto p = n.getInts("perm")) {
    perm = *p;
    // torch's TorchScript exporter writes permute's negative dims as they
    // are (Mamba-2's `permute(0, -2, -1, 1)`); ONNX wants 0..rank-1.
    const int64_t rank = in.getRank();
    if (llvm::any_of(perm, [&](int64_t d) { return d < 0 && d >= -rank; })) {
      for (int64_t &d : perm)
        d += d < 0 && d >= -rank ? rank : 0;
      n.readLeniently("Transpose perm with negative axes (as torch's TorchScript exporter "
                      "writes permute(..., -1, ...)), read as counted from the last axis; "
                      "ONNX allows only 0..rank-1 and onnxruntime refuses the file");
    }
  } else
    for (int64_t d = in.getRank() - 1; d >= 0; --d)
      perm.push_back(d);
  n.setOutputs(n.create<TransposeOp>(n.input(0), perm));
  return success();
}

LogicalResult slice(NodeContext &n) {
  auto in = n.inputType(0);
  int64_t rank = in.getRank();
  auto starts = n.constantInts(1, "starts"), ends = n.constantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (n.hasInput(3)) {
    auto a = n.constantInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.hasInput(4)) {
    auto s = n.constantInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return n.error("starts, ends, axes and steps must have equal lengths");
  SmallVector<int64_t> st(rank, 0), lim(in.getShape()), str(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts->size(); ++i) {
    auto ax = n.axis(axes[i], rank);
    if (failed(ax))
      return failure();
    if (seen[*ax])
      return n.error("axis " + Twine(axes[i]) + " repeats");
    seen[*ax] = true;
    int64_t dim = in.getDimSize(*ax), s = (*starts)[i], e = (*ends)[i], step = steps[i];
    if (step == 0)
      return n.error("step is zero");
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else if (dim == 0) {
      s = e = -1; // nothing to take
    } else {
      // ONNX Slice: starts clamp into [0, dim-1], ends into [-1, dim-1].
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // INT64_MAX/MIN sentinels were clamped above; the start of an empty
    // negative slice on an empty dimension stays 0 / -1.
    st[*ax] = s;
    lim[*ax] = e;
    str[*ax] = step;
  }
  n.setOutputs(n.create<SliceOp>(n.input(0), st, lim, str));
  return success();
}

LogicalResult concat(NodeContext &n) {
  SmallVector<Value> inputs;
  for (unsigned i = 0; i < n.numInputs(); ++i)
    if (n.hasInput(i))
      inputs.push_back(n.input(i));
  auto ax = n.axis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  n.setOutputs(n.create<ConcatOp>(inputs, *ax));
  return success();
}

LogicalResult splitImpl(NodeContext &n, bool sizesFromInput) {
  auto in = n.inputType(0);
  auto ax = n.axis(n.getInt("axis", 0), in.getRank());
  if (failed(ax))
    return failure();
  SmallVector<int64_t> sizes;
  if (sizesFromInput && n.hasInput(1)) {
    auto s = n.constantInts(1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (!sizesFromInput && n.getInts("split")) {
    sizes = *n.getInts("split");
  } else {
    int64_t parts = n.numOutputs(), dim = in.getDimSize(*ax);
    if (dim % parts)
      return n.error("dimension " + Twine(dim) + " does not split evenly into " +
                     Twine(parts) + " outputs");
    sizes.assign(parts, dim / parts);
  }
  if ((int64_t)sizes.size() != n.numOutputs())
    return n.error("split has " + Twine(sizes.size()) + " sizes for " +
                   Twine(n.numOutputs()) + " outputs");
  n.setOutputs(n.createSplit(n.input(0), *ax, sizes));
  return success();
}
LogicalResult split13(NodeContext &n) { return splitImpl(n, true); }
/// Split-18: the `split` input, or num_outputs parts of ceil(dim / parts)
/// elements, the last one smaller.
LogicalResult split18(NodeContext &n) {
  const onnx::AttributeProto *numAttr = n.attr("num_outputs");
  if (n.hasInput(1) && numAttr)
    return n.error("takes either the split input or num_outputs, not both");
  if (n.hasInput(1))
    return splitImpl(n, true);
  if (!numAttr)
    return n.error("needs the split input or num_outputs");
  int64_t parts = n.getInt("num_outputs", 0);
  if (parts < 1 || parts != n.numOutputs())
    return n.error("num_outputs is " + Twine(parts) + " but the node has " +
                   Twine(n.numOutputs()) + " outputs");
  auto in = n.inputType(0);
  auto ax = n.axis(n.getInt("axis", 0), in.getRank());
  if (failed(ax))
    return failure();
  int64_t dim = in.getDimSize(*ax), chunk = (dim + parts - 1) / parts;
  if (chunk * (parts - 1) >= dim && parts > 1)
    return n.error("dimension " + Twine(dim) + " cannot be split into " +
                   Twine(parts) + " non-empty parts of " + Twine(chunk));
  SmallVector<int64_t> sizes(parts - 1, chunk);
  sizes.push_back(dim - chunk * (parts - 1));
  n.setOutputs(n.createSplit(n.input(0), *ax, sizes));
  return success();
}
LogicalResult split11(NodeContext &n) { return splitImpl(n, false); }

LogicalResult gather(NodeContext &n) {
  auto ax = n.axis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  n.setOutputs(n.gather(n.input(0), n.input(1), *ax));
  return success();
}

LogicalResult gatherElements(NodeContext &n) {
  auto ax = n.axis(n.getInt("axis", 0), n.inputType(0).getRank());
  if (failed(ax))
    return failure();
  n.setOutputs(n.create<GatherElementsOp>(n.input(0), n.input(1), *ax));
  return success();
}

/// Trilu as a select against a compile-time triangular mask (computed by
/// the program instead when the matrix is too large to materialise).
LogicalResult trilu(NodeContext &n) {
  auto in = n.inputType(0);
  if (in.getRank() < 2)
    return n.error("input must have rank >= 2");
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto kv = n.constantInts(1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return n.error("k must be a scalar");
    // Beyond the matrix, the mask is all-true or all-false anyway.
    k = std::clamp<int64_t>((*kv)[0], -kMaxElements, kMaxElements);
  }
  bool upper = n.getInt("upper", 1);
  int64_t rows = in.getDimSize(in.getRank() - 2), cols = in.getDimSize(in.getRank() - 1);
  MLIRContext *ctx = n.getContext();
  Value mask;
  if (rows * cols <= kMaxMaterialisedElements) {
    // One step per element: an empty matrix may still have 2^40 rows.
    HostTensor m(RankedTensorType::get({rows, cols}, IntegerType::get(ctx, 1)));
    for (int64_t e = 0; e < rows * cols; ++e) {
      int64_t i = e / cols, j = e % cols;
      m.i()[e] = upper ? (j - i >= k) : (j - i <= k);
    }
    mask = n.constant(m);
  } else {
    // A declared matrix too large for a constant mask (rows x cols stays
    // under kMaxElements, but may be 2^40): the program computes it, as
    // (column - row) against k over a [rows, 1] and a [1, cols] index vector.
    if (rows > kMaxMaterialisedElements || cols > kMaxMaterialisedElements)
      return n.error("a " + Twine(rows) + "x" + Twine(cols) +
                     " matrix is too large for Trilu's index vectors (limit " +
                     Twine(kMaxMaterialisedElements) + " per dimension)");
    HostTensor rowIdx(RankedTensorType::get({rows, 1}, IntegerType::get(ctx, 64)));
    HostTensor colIdx(RankedTensorType::get({1, cols}, IntegerType::get(ctx, 64)));
    for (int64_t i = 0; i < rows; ++i)
      rowIdx.i()[i] = i;
    for (int64_t j = 0; j < cols; ++j)
      colIdx.i()[j] = j;
    Value diag = n.create<SubOp>(n.constant(colIdx), n.constant(rowIdx));
    Value kv = n.constant(int64Tensor(ctx, {k}, /*scalar=*/true));
    mask = upper ? n.create<GeOp>(diag, kv) : n.create<LeOp>(diag, kv);
  }
  Value x = n.input(0);
  n.setOutputs(n.create<WhereOp>(mask, x, n.scalarLike(x, 0.0)));
  return success();
}

/// Tile: reshape to interleaved [1, d0, 1, d1, ...], broadcast to
/// [r0, d0, r1, d1, ...], reshape to [r0*d0, r1*d1, ...]; a dimension
/// repeated once, or of size 1, needs no extra axis (so repeat_interleave's
/// rank-5 Tile stays rank 5, within the runtime's rank limit).
LogicalResult tile(NodeContext &n) {
  auto in = n.inputType(0);
  auto reps = n.constantInts(1, "repeats");
  if (failed(reps))
    return failure();
  if ((int64_t)reps->size() != in.getRank())
    return n.error("repeats has " + Twine(reps->size()) + " entries for rank " +
                   Twine(in.getRank()));
  SmallVector<int64_t> inter, wide, out;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if ((*reps)[d] < 0)
      return n.error("repeats must be non-negative");
    if (in.getDimSize(d) && (*reps)[d] > kMaxElements / in.getDimSize(d))
      return n.error("repeats give absurd dimensions (element count overflows)");
    int64_t size = in.getDimSize(d), rep = (*reps)[d];
    if (rep == 1 || size == 1) {
      inter.push_back(size);
      wide.push_back(rep * size);
    } else {
      inter.append({1, size});
      wide.append({rep, size});
    }
    out.push_back(rep * size);
  }
  if (failed(checkShape(n, out)))
    return failure();
  Value x = n.broadcastTo(n.reshape(n.input(0), inter), wide);
  n.setOutputs(n.reshape(x, out));
  return success();
}

/// DepthToSpace / SpaceToDepth as reshape-transpose-reshape.
LogicalResult depthToSpace(NodeContext &n) {
  auto in = n.inputType(0);
  int64_t b = n.getInt("blocksize", 0);
  // C % b and (C / b) % b rather than C % (b * b), which can overflow.
  if (in.getRank() != 4 || b <= 0 || in.getDimSize(1) % b ||
      (in.getDimSize(1) / b) % b)
    return n.error("needs NCHW input with C divisible by blocksize^2");
  int64_t N = in.getDimSize(0), C = in.getDimSize(1), H = in.getDimSize(2),
          W = in.getDimSize(3), c = C / b / b;
  bool crd = n.getString("mode", "DCR") == "CRD";
  Value x = crd ? n.reshape(n.input(0), {N, c, b, b, H, W})
                : n.reshape(n.input(0), {N, b, b, c, H, W});
  SmallVector<int64_t> perm = crd ? SmallVector<int64_t>{0, 1, 4, 2, 5, 3}
                                  : SmallVector<int64_t>{0, 3, 4, 1, 5, 2};
  x = n.create<TransposeOp>(x, perm);
  n.setOutputs(n.reshape(x, {N, c, H * b, W * b}));
  return success();
}

/// SpaceToDepth: the b x b blocks of every channel become channels, block
/// position major (DCR: channel (i b + j) C + c; the only order before
/// opset 28) or channel major (CRD: c b^2 + i b + j, SpaceToDepth-28's mode).
LogicalResult spaceToDepthImpl(NodeContext &n, bool crd) {
  auto in = n.inputType(0);
  int64_t b = n.getInt("blocksize", 0);
  if (in.getRank() != 4 || b <= 0 || in.getDimSize(2) % b || in.getDimSize(3) % b ||
      (in.getDimSize(1) && b > kMaxElements / b / in.getDimSize(1)))
    return n.error("needs NCHW input with H and W divisible by blocksize");
  int64_t N = in.getDimSize(0), C = in.getDimSize(1), H = in.getDimSize(2) / b,
          W = in.getDimSize(3) / b;
  Value x = n.reshape(n.input(0), {N, C, H, b, W, b});
  x = n.create<TransposeOp>(x, crd ? ArrayRef<int64_t>{0, 1, 3, 5, 2, 4}
                                   : ArrayRef<int64_t>{0, 3, 5, 1, 2, 4});
  n.setOutputs(n.reshape(x, {N, C * b * b, H, W}));
  return success();
}
LogicalResult spaceToDepth(NodeContext &n) { return spaceToDepthImpl(n, false); }
LogicalResult spaceToDepth28(NodeContext &n) {
  std::string mode = n.getString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    return n.error("mode '" + mode + "' is neither DCR nor CRD");
  return spaceToDepthImpl(n, mode == "CRD");
}

/// Pad (constant, edge, reflect) as slices and concatenations, one
/// dimension at a time; negative pads crop.
LogicalResult padImpl(NodeContext &n, ArrayRef<int64_t> pads, double value,
                      StringRef mode) {
  auto t = n.inputType(0);
  int64_t rank = t.getRank();
  if ((int64_t)pads.size() != 2 * rank)
    return n.error("pads needs " + Twine(2 * rank) + " entries, got " +
                   Twine(pads.size()));
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    return n.unsupported("Pad mode '" + mode + "'");
  Value x = n.input(0);
  for (int64_t d = 0; d < rank && x; ++d) {
    int64_t before = pads[d], after = pads[d + rank];
    if (std::abs(std::max<int64_t>(before, -kMaxElements)) >= kMaxElements ||
        std::abs(std::max<int64_t>(after, -kMaxElements)) >= kMaxElements)
      return n.error("pads are absurdly large");
    int64_t dim = cast<RankedTensorType>(x.getType()).getDimSize(d);
    // Crop first (negative pads), then grow.
    if (before < 0 || after < 0) {
      int64_t lo = std::max<int64_t>(-before, 0), hi = dim - std::max<int64_t>(-after, 0);
      if (lo > hi)
        return n.error("negative pads crop more than dimension " + Twine(d) + " holds");
      x = n.sliceDim(x, d, lo, hi, 1);
      dim = hi - lo;
      before = std::max<int64_t>(before, 0);
      after = std::max<int64_t>(after, 0);
    }
    if (!before && !after)
      continue;
    if (mode == "constant") {
      x = padWith(n, x, d, before, after, value);
      continue;
    }
    if (dim == 0)
      return n.error("cannot " + mode + "-pad an empty dimension");
    if (mode == "reflect" && (before >= dim || after >= dim))
      return n.error("reflect pads must be smaller than the dimension");
    if (mode == "wrap" && (before > dim || after > dim))
      return n.unsupported("wrap pads larger than the dimension");
    auto xt = cast<RankedTensorType>(x.getType());
    auto block = [&](int64_t size, bool atEnd) -> Value {
      SmallVector<int64_t> shape(xt.getShape());
      shape[d] = size;
      if (mode == "edge") {
        Value edge = atEnd ? n.sliceDim(x, d, dim - 1, dim, 1) : n.sliceDim(x, d, 0, 1, 1);
        return n.broadcastTo(edge, shape);
      }
      if (mode == "wrap") // the other end's elements, in order
        return atEnd ? n.sliceDim(x, d, 0, size, 1) : n.sliceDim(x, d, dim - size, dim, 1);
      // reflect, excluding the edge element itself.
      return atEnd ? n.sliceDim(x, d, dim - 2, dim - 2 - size, -1)
                   : n.sliceDim(x, d, size, 0, -1);
    };
    SmallVector<Value> parts;
    if (before)
      parts.push_back(block(before, false));
    parts.push_back(x);
    if (after)
      parts.push_back(block(after, true));
    x = n.create<ConcatOp>(parts, d);
  }
  n.setOutputs(x);
  return success();
}

/// Pad's optional constant_value input (input 2), 0 when absent.
FailureOr<double> padValue(NodeContext &n) {
  return n.hasInput(2) ? n.constantScalar(2, "constant_value") : FailureOr<double>(0.0);
}

LogicalResult pad11(NodeContext &n) {
  auto pads = n.constantInts(1, "pads");
  auto value = padValue(n);
  if (failed(pads) || failed(value))
    return failure();
  return padImpl(n, *pads, *value, n.getString("mode", "constant"));
}

/// Pad-18: pads (and constant_value) for the dimensions in the optional
/// `axes` input only; 19 adds mode "wrap".
LogicalResult pad18(NodeContext &n) {
  if (!n.hasInput(3))
    return pad11(n);
  auto pads = n.constantInts(1, "pads");
  auto axes = n.constantInts(3, "axes");
  if (failed(pads) || failed(axes))
    return failure();
  int64_t rank = n.inputType(0).getRank(), k = axes->size();
  if ((int64_t)pads->size() != 2 * k)
    return n.error("pads needs " + Twine(2 * k) + " entries for " + Twine(k) +
                   " axes, got " + Twine(pads->size()));
  SmallVector<int64_t> full(2 * rank, 0);
  SmallVector<bool> seen(rank, false);
  for (int64_t i = 0; i < k; ++i) {
    auto ax = n.axis((*axes)[i], rank);
    if (failed(ax))
      return failure();
    if (seen[*ax])
      return n.error("axis " + Twine(*ax) + " is repeated in axes");
    seen[*ax] = true;
    full[*ax] = (*pads)[i];
    full[*ax + rank] = (*pads)[i + k];
  }
  auto value = padValue(n);
  if (failed(value))
    return failure();
  return padImpl(n, full, *value, n.getString("mode", "constant"));
}

LogicalResult pad2(NodeContext &n) {
  auto pads = n.getInts("pads");
  if (!pads)
    return n.error("pads is required");
  return padImpl(n, *pads, n.getFloat("value", 0.0), n.getString("mode", "constant"));
}

} // namespace

void onnx_import::registerShapeOps(OpRegistry &r) {
  r.add("Constant", 1, constant);
  r.add("Shape", 1, shape); // start/end (opset 15) default to the full shape
  r.add("Size", 1, size);
  r.add("ConstantOfShape", 9, constantOfShape);
  r.add("Range", 11, range);
  r.add("Reshape", 5, reshape); // allowzero (14) defaults to 0
  r.add("Flatten", 1, flatten);
  r.add("Unsqueeze", 1, unsqueeze11);
  r.add("Unsqueeze", 13, unsqueeze13);
  r.add("Squeeze", 1, squeeze11);
  r.add("Squeeze", 13, squeeze13);
  r.add("Expand", 8, expand);
  r.add("Transpose", 1, transpose);
  r.add("Slice", 10, slice);
  r.add("Concat", 4, concat);
  r.add("Split", 2, split11);
  r.add("Split", 13, split13);
  r.add("Split", 18, split18);
  r.add("Gather", 1, gather);
  r.add("GatherElements", 11, gatherElements);
  r.add("Trilu", 14, trilu);
  r.add("Tile", 6, tile);
  r.add("Pad", 2, pad2);
  r.add("Pad", 11, pad11);
  r.add("Pad", 18, pad18);
  r.sameAs("Pad", 19, 18); // mode "wrap", which padImpl implements
  r.sameAs("Pad", 21, 18); // float8, int4
  r.sameAs("Pad", 23, 18); // float4
  r.sameAs("Pad", 24, 18); // float8e8m0
  r.sameAs("Pad", 25, 18); // int2, uint2

  // Versions after 17 that only add dtypes (float8, int4, float4 up to 23;
  // float8e8m0 at 24; int2/uint2 at 25).
  for (int64_t v : {19, 21, 23, 24, 25}) {
    r.sameAs("Constant", v, 1);
    r.sameAs("Reshape", v, 5);
    r.sameAs("Shape", v, 1);
    r.sameAs("Size", v, 1);
  }
  for (int64_t v : {20, 21, 23, 24, 25})
    r.sameAs("ConstantOfShape", v, 9);
  for (int64_t v : {21, 23, 24, 25}) {
    r.sameAs("Flatten", v, 1);
    r.sameAs("Squeeze", v, 13);
    r.sameAs("Unsqueeze", v, 13);
    r.sameAs("Transpose", v, 1);
  }
  r.sameAs("Range", 27, 11); // stash_type: float16/bfloat16 only
  r.add("DepthToSpace", 11, depthToSpace);
  r.sameAs("DepthToSpace", 28, 11); // schema unchanged
  r.add("SpaceToDepth", 13, spaceToDepth);
  r.add("SpaceToDepth", 28, spaceToDepth28);
}
