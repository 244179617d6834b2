//===- OnnxOpsIndexing.cpp - GatherND, Scatter*, TopK, NonZero ------------===//
//
// The multi-index ops, lowered onto merak's one-axis gather and its
// scatter-add adjoint, so that they need no kernels and no derivative rules
// of their own:
//
//   GatherND(data, idx[..., k], batch_dims b)
//     = gather(reshape(data, [B * D_b..D_{b+k-1}, rest...]), linear, axis 0)
//   with linear = batch offset + sum_j wrap(idx[..., j]) * stride_j, and a
//   component outside [-d, d) made out of range of the flattened axis, so
//   that the gather reports it at run time instead of reading a
//   neighbouring row.
//
//   ScatterND / ScatterElements(data, indices, updates), reduction "none":
//     indices known at compile time (what exporters emit for `x[..., 0] =
//     v` and shifted token ids: they come from shapes), any element type:
//       src[p] = the last update written to position p, or -1
//       result = where(src >= 0, gather(updates, max(src, 0)), data)
//     per slice of the leading dimensions where every slice is written
//     alike, and over whole rows of the trailing ones where whole rows are
//     written (so that a batch dimension on either side stays separate)
//     indices computed at run time (float data only):
//       result = where(scatter_add(1, idx) > 0, scatter_add(updates, idx), data)
//   reduction "add": data + scatter_add(updates, idx).
//   reduction "mul", "min", "max" (indices known at compile time): the
//     updates that land on one position form layers (the first update of
//     each position, the second, ...), each combined into the result:
//       result = where(set_l, op(result, gather(updates, src_l)), result)
//     with run-time indices they are refused by name.
//
// Repeated indices with reduction "none" are undefined in ONNX; the
// compile-time path keeps the last write (as onnxruntime does).
//
//   TensorScatter(cache [B, .., S, ..], update [B, .., T, ..], w [B]) (24):
//   position p of batch row b reads update's t = p - w[b] (mod S when
//   circular) where 0 <= t < T, else the cache:
//     present = where(0 <= t < T, gather_elements(update, clamp(t), axis), cache)
//   (a gather, not a scatter: every position has one source). Linear writes
//   past S are dropped, as positions outside the cache have no value.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

RankedTensorType withElement(ArrayRef<int64_t> shape, Type et) {
  return RankedTensorType::get(shape, et);
}

/// Indices as int64 (Cast from int32; others are refused by the caller).
Value indicesAsI64(NodeContext &n, unsigned i) {
  Value v = n.input(i);
  auto t = n.inputType(i);
  auto i64 = n.builder().getI64Type();
  if (t.getElementType() == i64)
    return v;
  return n.create<CastOp>(withElement(t.getShape(), i64), v);
}

/// Input `i`'s value when it is a compile-time constant small enough to
/// read (no error otherwise: the run-time form is taken).
std::optional<HostTensor> knownIndices(NodeContext &n, unsigned i) {
  ElementsAttr attr;
  if (!matchPattern(n.input(i), m_Constant(&attr)) ||
      attr.getNumElements() > kMaxMaterialisedElements)
    return std::nullopt;
  auto t = HostTensor::fromAttr(attr);
  if (failed(t))
    return std::nullopt;
  return std::move(*t);
}

LogicalResult checkIndexType(NodeContext &n, unsigned i) {
  auto et = dyn_cast<IntegerType>(n.inputType(i).getElementType());
  if (!et || (et.getWidth() != 32 && et.getWidth() != 64))
    return n.error("indices must be int32 or int64");
  return success();
}

/// Linear positions into `dims` (the indexed axes) of the index tuples
/// `idx[..., k]` (k = dims.size()), wrapped from negative; a tuple with a
/// component outside [-d, d) maps to product(dims), one past the end.
Value linearIndex(NodeContext &n, Value idx, ArrayRef<int64_t> dims) {
  auto t = cast<RankedTensorType>(idx.getType());
  SmallVector<int64_t> outer(t.getShape().drop_back());
  int64_t k = dims.size(), total = product(dims);
  Value zero = n.scalarLike(idx, 0);
  Value linear = n.broadcastTo(zero, outer), valid;
  for (int64_t j = 0; j < k; ++j) {
    int64_t stride = product(dims.drop_front(j + 1)); // (dims may hold a 0)
    SmallVector<int64_t> start(t.getRank(), 0), limit(t.getShape()),
        step(t.getRank(), 1);
    start.back() = j;
    limit.back() = j + 1;
    Value comp = n.create<SliceOp>(idx, start, limit, step);
    comp = n.reshape(comp, outer);
    Value d = n.scalarLike(idx, dims[j]);
    Value neg = n.create<LtOp>(comp, zero);
    comp = n.create<WhereOp>(neg, n.create<AddOp>(comp, d), comp);
    Value ok = n.create<AndOp>(n.create<GeOp>(comp, zero), n.create<LtOp>(comp, d));
    valid = valid ? n.create<AndOp>(valid, ok) : ok;
    linear = n.create<AddOp>(linear, n.create<MulOp>(comp, n.scalarLike(idx, stride)));
  }
  if (valid)
    linear = n.create<WhereOp>(valid, linear, n.scalarLike(idx, total));
  return linear;
}

LogicalResult gatherND(NodeContext &n) {
  if (failed(checkIndexType(n, 1)))
    return failure();
  auto data = n.inputType(0), idxT = n.inputType(1);
  int64_t r = data.getRank(), q = idxT.getRank(), b = n.getInt("batch_dims", 0);
  if (q < 1)
    return n.error("indices must have rank >= 1");
  int64_t k = idxT.getShape().back();
  if (b < 0 || b >= std::min(r, q))
    return n.error("batch_dims " + Twine(b) + " must be in [0, min(rank(data), "
                   "rank(indices)) = " + Twine(std::min(r, q)) + ")");
  if (k < 0 || k > r - b)
    return n.error("indices' last dimension " + Twine(k) + " exceeds rank(data) - "
                   "batch_dims = " + Twine(r - b));
  if (data.getShape().take_front(b) != idxT.getShape().take_front(b))
    return n.error("the first batch_dims dimensions of data and indices differ");
  Value idx = indicesAsI64(n, 1);
  ArrayRef<int64_t> dshape = data.getShape();
  Value linear = linearIndex(n, idx, dshape.slice(b, k));
  int64_t block = product(dshape.slice(b, k));
  if (b > 0) {
    // Batch position j of the leading b dimensions starts at j * block.
    SmallVector<int64_t> offShape(idxT.getShape().take_front(b));
    offShape.append(q - 1 - b, 1);
    HostTensor off(withElement(offShape, n.builder().getI64Type()));
    for (int64_t j = 0, e = off.size(); j < e; ++j)
      off.setFromInt(j, j * block);
    linear = n.create<AddOp>(linear, n.constant(off));
  }
  SmallVector<int64_t> flat{product(dshape.take_front(b + k))};
  flat.append(dshape.begin() + b + k, dshape.end());
  n.setOutputs(n.gather(n.reshape(n.input(0), flat), linear, 0));
  return success();
}

/// A scatter's reduction attribute.
enum class Reduction { None, Add, Mul, Min, Max };

/// The reduction attribute of a scatter with valid indices.
FailureOr<Reduction> scatterReduction(NodeContext &n) {
  if (failed(checkIndexType(n, 1)))
    return failure();
  std::string red = n.getString("reduction", "none");
  if (red == "none")
    return Reduction::None;
  if (red == "add")
    return Reduction::Add;
  if (red == "mul")
    return Reduction::Mul;
  if (red == "min")
    return Reduction::Min;
  if (red == "max")
    return Reduction::Max;
  return n.error("unknown reduction '" + red + "'");
}

/// Compile-time scatter maps are [total] constants: within the importer's
/// materialisation limit.
LogicalResult fitsScatterMap(NodeContext &n, int64_t total) {
  if (total > kMaxMaterialisedElements)
    return n.error("data of " + Twine(total) + " elements is too large for a "
                   "compile-time scatter map (limit " +
                   Twine(kMaxMaterialisedElements) + ")");
  return success();
}

/// result = data combined by `red` (mul, min, max) with every update at the
/// compile-time flat positions `pos`, in layers of one update per position.
LogicalResult scatterReduceConstant(NodeContext &n, ArrayRef<int64_t> pos, Reduction red) {
  auto data = n.inputType(0);
  int64_t total = data.getNumElements();
  if (failed(fitsScatterMap(n, total)))
    return failure();
  SmallVector<int64_t> seen(total, 0);
  int64_t layers = 0;
  for (int64_t p : pos) {
    if (p < 0 || p >= total)
      return n.error("an index is out of range of data's shape");
    layers = std::max(layers, ++seen[p]);
  }
  // Each layer is a [total] map: their sum is bounded like one constant.
  if (layers * total > kMaxMaterialisedElements)
    return n.error("a position receives " + Twine(layers) + " updates of data of " +
                   Twine(total) + " elements: " + Twine(layers * total) +
                   " map elements, more than the compile-time limit " +
                   Twine(kMaxMaterialisedElements));
  auto i64 = n.builder().getI64Type(), i1 = n.builder().getI1Type();
  Value upd = n.reshape(n.input(2), {(int64_t)pos.size()});
  Value out = n.reshape(n.input(0), {total});
  std::vector<bool> used(pos.size(), false); // combined in an earlier layer
  for (int64_t l = 0; l < layers; ++l) {
    HostTensor src(withElement({total}, i64)), isSet(withElement({total}, i1));
    for (int64_t u = 0, e = pos.size(); u < e; ++u)
      if (!used[u] && !isSet.i()[pos[u]]) {
        src.i()[pos[u]] = u;
        isSet.i()[pos[u]] = 1;
        used[u] = true;
      }
    Value picked = n.create<GatherOp>(upd, n.constant(src), 0);
    Value combined = red == Reduction::Mul   ? n.create<MulOp>(out, picked)
                     : red == Reduction::Min ? n.create<MinOp>(out, picked)
                                             : n.create<MaxOp>(out, picked);
    out = n.create<WhereOp>(n.constant(isSet), combined, out);
  }
  n.setOutputs(n.reshape(out, data.getShape()));
  return success();
}

LogicalResult scatterConstant(NodeContext &n, ArrayRef<int64_t> pos);

/// The constant-index form of a scatter with reduction `red` at the flat
/// positions `pos` (none: the last write; mul/min/max: layered). No
/// positions (empty updates: Qwen3.5's interleaved M-RoPE assigns an empty
/// strided slice at small head sizes) leave data as it is.
LogicalResult scatterAtPositions(NodeContext &n, ArrayRef<int64_t> pos, Reduction red) {
  if (pos.empty()) {
    n.setOutputs(n.input(0));
    return success();
  }
  return red == Reduction::None ? scatterConstant(n, pos) : scatterReduceConstant(n, pos, red);
}

/// The most leading dimensions of data (at most rank - 1) over which the
/// scatter at flat positions `pos` is the same in every slice: update u
/// lands in slice u / (U / outer), at the position within its slice that
/// update u mod (U / outer) has in slice 0. 0 when none.
int64_t sliceLocalDims(ArrayRef<int64_t> shape, ArrayRef<int64_t> pos) {
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  for (int64_t lead = (int64_t)shape.size() - 1; lead >= 1; --lead) {
    int64_t outer = 1;
    for (int64_t d = 0; d < lead; ++d)
      outer *= shape[d];
    int64_t inner = total / outer, count = pos.size();
    if (outer <= 1 || count % outer != 0)
      continue;
    int64_t per = count / outer;
    bool local = true;
    for (int64_t u = 0; local && u < count; ++u)
      local = pos[u] >= 0 && pos[u] < total && pos[u] / inner == u / per &&
              pos[u] % inner == pos[u % per] % inner;
    if (local)
      return lead;
  }
  return 0;
}

/// The size of the largest rows of data's trailing dimensions (after the
/// `lead` slice-local ones, at least one dimension left before them) that
/// the scatter at flat positions `pos` writes whole: the updates in runs of
/// a row's size, each run one row in order. 1 when none.
int64_t wholeRowSize(ArrayRef<int64_t> shape, int64_t lead, ArrayRef<int64_t> pos) {
  int64_t count = pos.size();
  for (int64_t trail = lead + 1; trail < (int64_t)shape.size(); ++trail) {
    int64_t row = 1;
    for (int64_t d = trail; d < (int64_t)shape.size(); ++d)
      row *= shape[d];
    if (row <= 1 || count % row != 0)
      continue;
    bool whole = true;
    for (int64_t u = 0; whole && u < count; ++u)
      whole = pos[u] % row == u % row && pos[u] - u % row == pos[u - u % row];
    if (whole)
      return row;
  }
  return 1;
}

/// result = where(set, updates[src], data) with src and set computed here
/// from the compile-time flat positions `pos` of the updates (in their
/// row-major order; out-of-range positions refused). Where the scatter is
/// the same in every slice of the leading dimensions (T5's decoder ids
/// shifted right in every row), the map covers one slice and the gather
/// runs along the slice, so the leading (batch) rows stay independent.
/// Where it writes whole rows of the trailing dimensions (dynamo's
/// `x[:, 1:] = y`, transposed so that the batch is last: BART's shifted
/// decoder ids), the map is over rows and the gather takes whole rows, so
/// the trailing (batch) columns stay independent too.
LogicalResult scatterConstant(NodeContext &n, ArrayRef<int64_t> pos) {
  auto data = n.inputType(0);
  int64_t total = data.getNumElements();
  if (failed(fitsScatterMap(n, total)))
    return failure();
  for (int64_t p : pos)
    if (p < 0 || p >= total)
      return n.error("an index is out of range of data's shape");
  int64_t outer = 1, lead = sliceLocalDims(data.getShape(), pos);
  for (int64_t d = 0; d < lead; ++d)
    outer *= data.getDimSize(d);
  int64_t inner = total / outer, per = (int64_t)pos.size() / outer;
  int64_t row = wholeRowSize(data.getShape(), lead, pos), rows = inner / row;
  auto i64 = n.builder().getI64Type();
  SmallVector<int64_t> setShape{rows};
  if (row > 1)
    setShape.push_back(1); // broadcast along the row
  HostTensor src(withElement({rows}, i64)), isSet(withElement(setShape, n.builder().getI1Type()));
  std::fill(src.i().begin(), src.i().end(), 0);
  for (int64_t u = 0; u < per; u += row) {
    src.i()[pos[u] % inner / row] = u / row;
    isSet.i()[pos[u] % inner / row] = 1;
  }
  auto shaped = [&](int64_t n1) {
    return row > 1 ? SmallVector<int64_t>{outer, n1, row} : SmallVector<int64_t>{outer, n1};
  };
  Value upd = n.reshape(n.input(2), shaped(per / row));
  Value picked = n.create<GatherOp>(upd, n.constant(src), 1);
  Value whole = n.reshape(n.input(0), shaped(rows));
  Value out = n.create<WhereOp>(n.constant(isSet), picked, whole);
  n.setOutputs(n.reshape(out, data.getShape()));
  return success();
}

/// result = data + scatter_add(updates) (add), or the masked form (none),
/// with `scatter(v)` the scatter-add of v (updates-shaped) into data's shape.
template <typename ScatterFn>
LogicalResult scatterRuntime(NodeContext &n, bool add, ScatterFn scatter) {
  auto data = n.inputType(0);
  if (!isa<FloatType>(data.getElementType()))
    return n.error("data of element type other than float needs indices known "
                   "at compile time (these are computed at run time)");
  Value sum = scatter(n.input(2));
  if (add) {
    n.setOutputs(n.create<AddOp>(n.input(0), sum));
    return success();
  }
  Value ones = n.broadcastTo(n.scalarLike(n.input(2), 1.0), n.inputType(2).getShape());
  Value hit = n.create<GtOp>(scatter(ones), n.scalarLike(n.input(0), 0.0));
  n.setOutputs(n.create<WhereOp>(hit, sum, n.input(0)));
  return success();
}

/// The run-time-index form: none or add only (mul, min and max need the
/// indices at compile time).
FailureOr<bool> runtimeAdd(NodeContext &n, Reduction red) {
  if (red == Reduction::None || red == Reduction::Add)
    return red == Reduction::Add;
  std::string what = "the indices of a scatter with reduction '" +
                     n.getString("reduction", "none") + "'";
  (void)n.constantInput(1, what);
  return failure();
}

LogicalResult scatterND(NodeContext &n) {
  auto red = scatterReduction(n);
  if (failed(red))
    return failure();
  auto data = n.inputType(0), idxT = n.inputType(1), updT = n.inputType(2);
  int64_t r = data.getRank(), q = idxT.getRank();
  if (q < 1)
    return n.error("indices must have rank >= 1");
  int64_t k = idxT.getShape().back();
  if (k < 1 || k > r)
    return n.error("indices' last dimension " + Twine(k) + " must be in [1, rank(data) = " +
                   Twine(r) + "]");
  SmallVector<int64_t> want(idxT.getShape().drop_back());
  want.append(data.getShape().begin() + k, data.getShape().end());
  if (updT.getShape() != ArrayRef<int64_t>(want) ||
      updT.getElementType() != data.getElementType())
    return n.error("updates must have data's element type and shape "
                   "indices.shape[:-1] + data.shape[k:]");
  ArrayRef<int64_t> dims = data.getShape().take_front(k);
  int64_t block = product(data.getShape().drop_front(k));
  if (auto c = knownIndices(n, 1); c && *red != Reduction::Add) {
    SmallVector<int64_t> pos;
    int64_t tuples = idxT.getNumElements() / std::max<int64_t>(k, 1);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t lin = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = c->i()[t * k + j];
        if (v < -dims[j] || v >= dims[j])
          return n.error("index " + Twine(v) + " is out of range of dimension " +
                         Twine(j) + " (size " + Twine(dims[j]) + ")");
        lin = lin * dims[j] + (v < 0 ? v + dims[j] : v);
      }
      for (int64_t e = 0; e < block; ++e)
        pos.push_back(lin * block + e);
    }
    return scatterAtPositions(n, pos, *red);
  }
  auto add = runtimeAdd(n, *red);
  if (failed(add))
    return failure();
  SmallVector<int64_t> flat{product(dims)};
  flat.append(data.getShape().begin() + k, data.getShape().end());
  Value linear = linearIndex(n, indicesAsI64(n, 1), dims);
  auto flatType = withElement(flat, data.getElementType());
  return scatterRuntime(n, *add, [&](Value v) {
    Value s = n.create<GatherGradOp>(flatType, v, linear, 0);
    return n.reshape(s, data.getShape());
  });
}

LogicalResult scatterElements(NodeContext &n) {
  auto red = scatterReduction(n);
  if (failed(red))
    return failure();
  auto data = n.inputType(0), idxT = n.inputType(1), updT = n.inputType(2);
  auto ax = n.axis(n.getInt("axis", 0), data.getRank());
  if (failed(ax))
    return failure();
  if (updT.getShape() != idxT.getShape() || updT.getElementType() != data.getElementType() ||
      idxT.getRank() != data.getRank())
    return n.error("updates must have indices' shape and data's element type, "
                   "and indices data's rank");
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *ax && idxT.getDimSize(d) > data.getDimSize(d))
      return n.error("indices' dimension " + Twine(d) + " exceeds data's");
  if (auto c = knownIndices(n, 1); c && *red != Reduction::Add) {
    ArrayRef<int64_t> ishape = idxT.getShape(), dshape = data.getShape();
    int64_t rank = ishape.size(), dim = dshape[*ax];
    SmallVector<int64_t> pos, at(rank, 0);
    for (int64_t e = 0, end = idxT.getNumElements(); e < end; ++e) {
      int64_t v = c->i()[e];
      if (v < -dim || v >= dim)
        return n.error("index " + Twine(v) + " is out of range of axis " + Twine(*ax) +
                       " (size " + Twine(dim) + ")");
      int64_t lin = 0;
      for (int64_t d = 0; d < rank; ++d)
        lin = lin * dshape[d] + (d == *ax ? (v < 0 ? v + dim : v) : at[d]);
      pos.push_back(lin);
      for (int64_t d = rank - 1; d >= 0 && ++at[d] == ishape[d]; --d)
        at[d] = 0;
    }
    return scatterAtPositions(n, pos, *red);
  }
  auto add = runtimeAdd(n, *red);
  if (failed(add))
    return failure();
  Value idx = indicesAsI64(n, 1);
  return scatterRuntime(n, *add, [&](Value v) {
    return n.create<GatherElementsGradOp>(data, v, idx, *ax);
  });
}

/// The longest axis TopK ranks by pairs (its [.., n, n] comparisons).
constexpr int64_t kMaxPairwiseTopK = 256;

/// TopK: a whole-axis sort (`torch.sort`, a dispatch that orders its rows
/// by expert) or an axis longer than kMaxPairwiseTopK is the first k of
/// merak.argsort (stable, descending for largest=1: ONNX's order for
/// ties). A short axis (a router's choice among experts) is ranked by
/// pairs: rank[j] = #{l : x[l] beats x[j]} where l beats j when it is
/// larger (smaller for largest=0), or equal at a smaller index; the i-th
/// result is the position of rank i, all in ops the sharding rules follow.
/// Either way exact for ties and infinities; the values are a
/// gather_elements of x (differentiable).
LogicalResult topKImpl(NodeContext &n, int64_t k) {
  auto xt = n.inputType(0);
  int64_t rank = xt.getRank();
  auto ax = n.axis(n.getInt("axis", -1), rank);
  if (failed(ax))
    return failure();
  int64_t len = xt.getDimSize(*ax);
  if (k < 0 || k > len)
    return n.error("k = " + Twine(k) + " is not in [0, " + Twine(len) + "]");
  if (k == 0)
    return n.unsupported("k = 0 (empty results)");
  bool largest = n.getInt("largest", 1);
  if (k == len || len > kMaxPairwiseTopK) {
    auto i64 = n.builder().getI64Type();
    Value idx =
        n.create<ArgSortOp>(RankedTensorType::get(xt.getShape(), i64), n.input(0), *ax, largest);
    if (k < len)
      idx = n.sliceDim(idx, *ax, 0, k);
    n.setOutputs({n.create<GatherElementsOp>(n.input(0), idx, *ax), idx});
    return success();
  }
  SmallVector<int64_t> perm, back(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != *ax)
      perm.push_back(d);
  perm.push_back(*ax);
  for (int64_t d = 0; d < rank; ++d)
    back[perm[d]] = d;
  Value x = *ax == rank - 1 ? n.input(0) : n.create<TransposeOp>(n.input(0), perm);
  auto moved = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> rows(moved.getShape().drop_back());
  auto shapeWith = [&](ArrayRef<int64_t> tail) {
    SmallVector<int64_t> s(rows);
    s.append(tail.begin(), tail.end());
    return s;
  };
  Value xj = n.reshape(x, shapeWith({len, 1})), xl = n.reshape(x, shapeWith({1, len}));
  Value better = largest ? n.create<GtOp>(xl, xj) : n.create<LtOp>(xl, xj);
  auto i1 = n.builder().getI1Type(), i64 = n.builder().getI64Type();
  HostTensor earlier(RankedTensorType::get({len, len}, i1));
  for (int64_t j = 0; j < len; ++j)
    for (int64_t l = 0; l < j; ++l)
      earlier.i()[j * len + l] = 1;
  Value tie = n.create<AndOp>(n.create<EqOp>(xl, xj), n.constant(earlier));
  Value beats = n.create<OrOp>(better, tie);
  Value ranks = n.create<ReduceSumOp>(
      n.create<CastOp>(RankedTensorType::get(shapeWith({len, len}), i64), beats),
      SmallVector<int64_t>{(int64_t)rows.size() + 1}, /*keepdims=*/false);
  HostTensor wanted(RankedTensorType::get({k, 1}, i64));
  for (int64_t i = 0; i < k; ++i)
    wanted.i()[i] = i;
  Value hit = n.create<EqOp>(n.reshape(ranks, shapeWith({1, len})), n.constant(wanted));
  Value hitInt = n.create<CastOp>(RankedTensorType::get(shapeWith({k, len}), i64), hit);
  Value idx = n.create<ArgMaxOp>(hitInt, (int64_t)rows.size() + 1, false, false);
  Value vals = n.create<GatherElementsOp>(x, idx, (int64_t)rows.size());
  if (*ax != rank - 1) {
    vals = n.create<TransposeOp>(vals, back);
    idx = n.create<TransposeOp>(idx, back);
  }
  n.setOutputs({vals, idx});
  return success();
}

LogicalResult topK1(NodeContext &n) { return topKImpl(n, n.getInt("k", -1)); }
LogicalResult topK10(NodeContext &n) {
  auto k = n.constantInts(1, "K");
  if (failed(k))
    return failure();
  if (k->size() != 1)
    return n.error("K must hold one value");
  return topKImpl(n, (*k)[0]);
}

/// Whether `v` derives, within a few ops, from an argmax: the indices of an
/// imported TopK (a Mixture-of-Experts router's choice).
static bool nearTopK(Value v) {
  SmallVector<std::pair<Value, int>> work{{v, 0}};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    auto [value, depth] = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def || depth > 12 || !seen.insert(def).second)
      continue;
    if (isa<ArgMaxOp>(def))
      return true;
    for (Value in : def->getOperands())
      work.push_back({in, depth + 1});
  }
  return false;
}

/// NonZero of a compile-time constant (a shape computation); on run-time
/// data its result's shape would depend on the values.
LogicalResult nonZero(NodeContext &n) {
  ElementsAttr attr;
  if (!matchPattern(n.input(0), m_Constant(&attr))) {
    if (nearTopK(n.input(0)))
      return n.unsupported(
          "NonZero of a value computed at run time (its result's shape depends on the "
          "data); it selects by a top-k routing, like transformers' \"eager\" Mixture-of-"
          "Experts loops, in a form merak does not batch: export the model with "
          "config._experts_implementation = \"batched_mm\" (docs/models.md)");
    return n.unsupported("NonZero of a value computed at run time (its result's shape "
                         "depends on the data)");
  }
  auto t = HostTensor::fromAttr(attr);
  if (failed(t))
    return n.error("cannot read the constant input");
  ArrayRef<int64_t> shape = t->getShape();
  int64_t rank = shape.size();
  SmallVector<int64_t> hits;
  for (int64_t e = 0; e < t->size(); ++e)
    if (t->getAsDouble(e) != 0)
      hits.push_back(e);
  int64_t count = hits.size();
  HostTensor out(RankedTensorType::get({std::max<int64_t>(rank, 1), count},
                                       n.builder().getI64Type()));
  for (int64_t c = 0; c < count; ++c) {
    int64_t rest = hits[c];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out.i()[d * count + c] = rest % shape[d];
      rest /= shape[d];
    }
  }
  n.setOutputs(n.constant(out));
  return success();
}

} // namespace

namespace {
/// Compress with a compile-time condition (numpy.compress): a gather of the
/// selected indices along `axis`, or of the flattened input without one. A
/// condition longer than the dimension is an error; a shorter one selects
/// among its first entries only. A run-time condition would give a
/// data-dependent shape and is refused (constantInput names it).
LogicalResult compress(NodeContext &n) {
  auto cond = n.constantInput(1, "condition");
  if (failed(cond))
    return failure();
  auto t = n.inputType(0);
  Value x = n.input(0);
  int64_t axis = 0;
  if (n.attr("axis")) {
    auto a = n.axis(n.getInt("axis", 0), t.getRank());
    if (failed(a))
      return failure();
    axis = *a;
  } else {
    x = n.reshape(x, {t.getNumElements()});
  }
  const int64_t dim = cast<RankedTensorType>(x.getType()).getDimSize(axis);
  if (cond->size() > dim)
    return n.error("the condition has " + Twine(cond->size()) +
                   " entries for a dimension of " + Twine(dim));
  SmallVector<int64_t> picked;
  for (int64_t k = 0; k < cond->size(); ++k)
    if (cond->getAsDouble(k) != 0)
      picked.push_back(k);
  if (picked.empty())
    return n.unsupported("a condition that selects nothing (an empty result)");
  HostTensor idx(RankedTensorType::get({(int64_t)picked.size()}, n.builder().getI64Type()));
  llvm::copy(picked, idx.i().begin());
  n.setOutputs(n.create<GatherOp>(x, n.constant(idx), axis));
  return success();
}
LogicalResult tensorScatter(NodeContext &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto ct = n.inputType(0), ut = n.inputType(1);
  const int64_t rank = ct.getRank();
  auto ax = n.axis(n.getInt("axis", -2), rank);
  if (failed(ax))
    return failure();
  if (*ax == 0)
    return n.error("the axis may not be the batch axis 0, which write_indices index");
  std::string mode = n.getString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return n.error("unknown mode '" + mode + "' (linear or circular)");
  bool fits = ut.getRank() == rank && ut.getElementType() == ct.getElementType();
  for (int64_t d = 0; fits && d < rank; ++d)
    fits = d == *ax ? ut.getDimSize(d) <= ct.getDimSize(d) : ut.getDimSize(d) == ct.getDimSize(d);
  // (The update's dims are read only once its rank is known to fit.)
  if (!fits || ut.getDimSize(*ax) < 1)
    return n.error("the update must have the cache's type and shape but along the axis, "
                   "where it is non-empty and at most the cache's length");
  const int64_t B = ct.getDimSize(0), S = ct.getDimSize(*ax), T = ut.getDimSize(*ax);
  if (S > kMaxMaterialisedElements)
    return n.error("the cache's axis is too long for its position constant");
  auto i64 = n.builder().getI64Type();
  SmallVector<int64_t> pshape(rank, 1), wshape(rank, 1);
  pshape[*ax] = S;
  wshape[0] = B;
  HostTensor pos(RankedTensorType::get(pshape, i64));
  for (int64_t p = 0; p < S; ++p)
    pos.setFromInt(p, p);
  Value w;
  if (n.hasInput(2)) {
    auto wt = n.inputType(2);
    if (wt.getShape() != ArrayRef<int64_t>{B} || !isa<IntegerType>(wt.getElementType()))
      return n.error("write_indices must be integers [batch]");
    w = n.reshape(indicesAsI64(n, 2), wshape);
  } else {
    w = n.constant(HostTensor(RankedTensorType::get(wshape, i64)));
  }
  Value t = n.create<SubOp>(n.constant(pos), w); // [B, .., S, ..] broadcast
  if (mode == "circular") { // Python's %: the remainder made non-negative
    Value s = n.scalarLike(t, double(S));
    Value r = n.create<RemOp>(t, s);
    t = n.create<WhereOp>(n.create<LtOp>(r, n.scalarLike(r, 0.0)), n.create<AddOp>(r, s), r);
  }
  Value valid = n.create<AndOp>(n.create<GeOp>(t, n.scalarLike(t, 0.0)),
                                n.create<LtOp>(t, n.scalarLike(t, double(T))));
  Value src = n.create<WhereOp>(valid, t, n.scalarLike(t, 0.0));
  src = n.broadcastTo(src, ct.getShape());
  Value taken = n.create<GatherElementsOp>(n.input(1), src, *ax);
  Value present =
      n.create<WhereOp>(n.broadcastTo(valid, ct.getShape()), taken, n.input(0));
  if (n.hasFailed())
    return failure();
  n.setOutputs(present);
  return success();
}

} // namespace

void onnx_import::registerIndexingOps(OpRegistry &r) {
  r.add("TensorScatter", 24, tensorScatter);
  r.add("Compress", 9, compress);
  r.sameAs("Compress", 11, 9); // negative axis (handled)
  r.sameAs("Compress", 28, 9); // types only
  r.add("TopK", 1, topK1);
  r.add("TopK", 10, topK10);
  r.add("TopK", 11, topK10); // largest, sorted, negative axis
  r.sameAs("TopK", 24, 11);  // bfloat16
  r.add("NonZero", 9, nonZero);
  r.sameAs("NonZero", 13, 9);
  r.add("GatherND", 11, gatherND);
  r.add("GatherND", 12, gatherND); // batch_dims
  r.sameAs("GatherND", 13, 12);    // bfloat16
  r.add("ScatterND", 11, scatterND);
  r.sameAs("ScatterND", 13, 11);   // bfloat16
  r.add("ScatterND", 16, scatterND); // reduction add/mul
  r.sameAs("ScatterND", 18, 16);     // reduction min/max
  r.add("Scatter", 9, scatterElements); // ScatterElements under its old name
  r.sameAs("Scatter", 11, 9);
  r.add("ScatterElements", 11, scatterElements);
  r.sameAs("ScatterElements", 13, 11);
  r.add("ScatterElements", 16, scatterElements);
  r.sameAs("ScatterElements", 18, 16);
}
