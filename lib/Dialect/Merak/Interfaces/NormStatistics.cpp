//===- NormStatistics.cpp - norms over features split over ranks ----------===//
//
// A layer or RMS norm over features that a tensor-parallel region splits
// (OLMo 2's q and k norms over the whole projection, before the heads are
// taken apart) keeps the split: each rank sums its own features, `sum`
// (the pass's collective) makes the sums whole, and the rest is computed on
// the local features. With x the local part, n its normalised elements, p
// the ranks and the sums kept as [..., 1, ..., 1]:
//
//   rms_norm:    r = rsqrt(sum(reduce_sum(x * x)) / (n p) + eps)
//                y = x * r * scale
//   layer_norm:  mean = sum(reduce_sum(x)) / (n p),  xc = x - mean
//                var  = sum(reduce_sum(xc * xc)) / (n p)
//                y    = xc * rsqrt(var + eps) * scale + bias
//
// (the variance in two passes, as the kernel keeps its precision). The
// scale and bias are the rank's part of them, split alike by the pass.
//
//===----------------------------------------------------------------------===//
#include "NormStatistics.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// The normalised dimensions [axis, rank) of `x`, and their local size.
std::pair<SmallVector<int64_t>, int64_t> normalised(Value x, int64_t axis) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> axes;
  int64_t n = 1;
  for (int64_t d = axis < 0 ? axis + t.getRank() : axis; d < t.getRank(); ++d) {
    axes.push_back(d);
    n *= t.getDimSize(d);
  }
  return {axes, n};
}

Value scalar(OpBuilder &b, Location loc, Value like, double v) {
  Type elt = getElementTypeOrSelf(like.getType());
  auto t = RankedTensorType::get({}, elt);
  return ConstantOp::create(b, loc, SplatElementsAttr::get(t, b.getFloatAttr(elt, v)));
}

/// sum(reduce_sum(v over `axes`)) / count, kept as [..., 1, ..., 1].
Value wholeMean(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> axes, double count,
                SumOverRanks sum) {
  Value local = ReduceSumOp::create(b, loc, v, axes, true);
  return MulOp::create(b, loc, sum(b, local), scalar(b, loc, v, 1.0 / count));
}
} // namespace

bool mlir::merak::canSplitNormStatistics(Value input, int64_t axis, unsigned operand, int64_t dim) {
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  return operand == 0 && dim >= (axis < 0 ? axis + rank : axis) && dim < rank;
}

Value mlir::merak::splitNormStatistics(RmsNormOp op, OpBuilder &b, int64_t parts,
                                       SumOverRanks sum) {
  Location loc = op.getLoc();
  Value x = op.getInput();
  auto [axes, n] = normalised(x, op.getAxis());
  Value ms = wholeMean(b, loc, MulOp::create(b, loc, x, x), axes, double(n) * parts, sum);
  Value eps = scalar(b, loc, x, op.getEpsilon().convertToDouble());
  Value y = MulOp::create(b, loc, x, RsqrtOp::create(b, loc, AddOp::create(b, loc, ms, eps)));
  if (Value scale = op.getScale())
    y = MulOp::create(b, loc, y, scale);
  return y;
}

Value mlir::merak::splitNormStatistics(LayerNormOp op, OpBuilder &b, int64_t parts,
                                       SumOverRanks sum) {
  Location loc = op.getLoc();
  Value x = op.getInput();
  auto [axes, n] = normalised(x, op.getAxis());
  double count = double(n) * parts;
  Value xc = SubOp::create(b, loc, x, wholeMean(b, loc, x, axes, count, sum));
  Value var = wholeMean(b, loc, MulOp::create(b, loc, xc, xc), axes, count, sum);
  Value eps = scalar(b, loc, x, op.getEpsilon().convertToDouble());
  Value y = MulOp::create(b, loc, xc, RsqrtOp::create(b, loc, AddOp::create(b, loc, var, eps)));
  if (Value scale = op.getScale())
    y = MulOp::create(b, loc, y, scale);
  if (Value bias = op.getBias())
    y = AddOp::create(b, loc, y, bias);
  return y;
}
