//===- MerakOps.cpp - merak op verifiers and type inference ---------------===//
//
// Result-type inference doubles as shape verification: every op with
// InferTypeOpInterface reports malformed shapes/attributes from
// `inferReturnTypes`, and the generic verifier compares the declared result
// types with the inferred ones.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::merak;

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> mlir::merak::broadcastShapes(ArrayRef<int64_t> a,
                                                             ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool mlir::merak::isBroadcastableTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i])
      return false;
  return true;
}

FailureOr<int64_t> mlir::merak::checkedNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return failure();
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return failure();
    n *= d;
  }
  return n;
}

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank);

static LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                               int64_t rank, StringRef what = "axis") {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, what, " ", axis,
                             " is out of range for rank ", rank);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class BinaryKind { Arith, Compare, Logical };

static LogicalResult inferBinary(MLIRContext *ctx, std::optional<Location> loc,
                                 Value lhs, Value rhs, BinaryKind kind,
                                 SmallVectorImpl<Type> &types) {
  auto lt = tensorType(lhs), rt = tensorType(rhs);
  if (lt.getElementType() != rt.getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             lt.getElementType(), " vs ", rt.getElementType());
  auto shape = broadcastShapes(lt.getShape(), rt.getShape());
  if (failed(shape))
    return emitOptionalError(loc, "shapes ", lt, " and ", rt,
                             " are not broadcast-compatible");
  Type elem = kind == BinaryKind::Arith ? lt.getElementType()
                                        : IntegerType::get(ctx, 1);
  types.push_back(RankedTensorType::get(*shape, elem));
  return success();
}

#define MERAK_BINARY_INFER(OP, KIND)                                           \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferBinary(ctx, loc, adaptor.getLhs(), adaptor.getRhs(),           \
                       BinaryKind::KIND, types);                               \
  }
MERAK_BINARY_INFER(AddOp, Arith)
MERAK_BINARY_INFER(SubOp, Arith)
MERAK_BINARY_INFER(MulOp, Arith)
MERAK_BINARY_INFER(DivOp, Arith)
MERAK_BINARY_INFER(PowOp, Arith)
MERAK_BINARY_INFER(MaxOp, Arith)
MERAK_BINARY_INFER(MinOp, Arith)
MERAK_BINARY_INFER(RemOp, Arith)
MERAK_BINARY_INFER(EqOp, Compare)
MERAK_BINARY_INFER(NeOp, Compare)
MERAK_BINARY_INFER(LtOp, Compare)
MERAK_BINARY_INFER(LeOp, Compare)
MERAK_BINARY_INFER(GtOp, Compare)
MERAK_BINARY_INFER(GeOp, Compare)
MERAK_BINARY_INFER(AndOp, Logical)
MERAK_BINARY_INFER(OrOp, Logical)
MERAK_BINARY_INFER(XorOp, Logical)
MERAK_BINARY_INFER(BitAndOp, Arith)
MERAK_BINARY_INFER(BitOrOp, Arith)
MERAK_BINARY_INFER(BitXorOp, Arith)
MERAK_BINARY_INFER(ShiftLeftOp, Arith)
MERAK_BINARY_INFER(ShiftRightOp, Arith)
#undef MERAK_BINARY_INFER

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto ct = tensorType(adaptor.getCondition());
  auto lt = tensorType(adaptor.getLhs()), rt = tensorType(adaptor.getRhs());
  if (lt.getElementType() != rt.getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             lt.getElementType(), " vs ", rt.getElementType());
  auto s = broadcastShapes(lt.getShape(), rt.getShape());
  if (succeeded(s))
    s = broadcastShapes(ct.getShape(), *s);
  if (failed(s))
    return emitOptionalError(loc, "shapes ", ct, ", ", lt, " and ", rt,
                             " are not broadcast-compatible");
  types.push_back(RankedTensorType::get(*s, lt.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in.getNumElements() << " elements into " << out.getNumElements();
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  if (!isBroadcastableTo(in.getShape(), out.getShape()))
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if ((int64_t)perm.size() != in.getRank())
    return emitOptionalError(loc, "perm has ", perm.size(),
                             " entries for rank ", in.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOptionalError(loc, "perm is not a permutation");
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits(),
                    strides = adaptor.getStrides();
  int64_t rank = in.getRank();
  if ((int64_t)starts.size() != rank || (int64_t)limits.size() != rank ||
      (int64_t)strides.size() != rank)
    return emitOptionalError(loc, "starts/limits/strides need ", rank,
                             " entries each");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = in.getDimSize(d), s = starts[d], l = limits[d], st = strides[d];
    if (st == 0)
      return emitOptionalError(loc, "stride of dimension ", d, " is zero");
    int64_t n;
    if (st > 0) {
      if (s < 0 || s > dim || l < 0 || l > dim)
        return emitOptionalError(loc, "slice [", s, ", ", l,
                                 ") out of bounds for dimension ", d, " of size ", dim);
      n = l > s ? llvm::divideCeil(l - s, st) : 0;
    } else {
      if (s < -1 || s >= dim || l < -1 || l >= dim)
        return emitOptionalError(loc, "slice [", s, ", ", l,
                                 ") out of bounds for dimension ", d, " of size ", dim);
      n = s > l ? llvm::divideCeil(s - l, -st) : 0;
    }
    shape.push_back(n);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = tensorType(adaptor.getInputs().front());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorType(v);
    if (t.getElementType() != first.getElementType() || t.getRank() != first.getRank())
      return emitOptionalError(loc, "inputs must share element type and rank");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "input dimension ", d,
                                 " differs: ", t.getDimSize(d), " vs ",
                                 first.getDimSize(d));
    auto sum = llvm::checkedAdd(shape[axis], t.getDimSize(axis));
    if (!sum)
      return emitOptionalError(loc, "concatenated dimension overflows");
    shape[axis] = *sum;
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto in = tensorType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, in.getRank())))
    return failure();
  int64_t total = 0;
  for (int64_t s : adaptor.getSizes()) {
    if (s < 0)
      return emitOptionalError(loc, "split size ", s, " is negative");
    auto sum = llvm::checkedAdd(total, s);
    if (!sum)
      return emitOptionalError(loc, "split sizes overflow");
    total = *sum;
    SmallVector<int64_t> shape(in.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, in.getElementType()));
  }
  if (total != in.getDimSize(axis))
    return emitOptionalError(loc, "split sizes sum to ", total,
                             " but dimension ", axis, " has size ",
                             in.getDimSize(axis));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto data = tensorType(adaptor.getData()), idx = tensorType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, data.getRank())))
    return failure();
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, idx.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  types.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

LogicalResult GatherGradOp::verify() {
  auto data = getType(), grad = getGrad().getType(), idx = getIndices().getType();
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, data.getRank())))
    return failure();
  SmallVector<int64_t> expected(data.getShape().take_front(axis));
  llvm::append_range(expected, idx.getShape());
  llvm::append_range(expected, data.getShape().drop_front(axis + 1));
  if (grad.getShape() != ArrayRef<int64_t>(expected) ||
      grad.getElementType() != data.getElementType())
    return emitOpError("grad ") << grad << " is not the gather result type of "
                                << data << " and " << idx;
  if (getAcc() && getAcc().getType() != data)
    return emitOpError("accumulator ") << getAcc().getType() << " is not the result type " << data;
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  auto data = tensorType(adaptor.getData()), idx = tensorType(adaptor.getIndices());
  if (failed(checkAxis(loc, adaptor.getAxis(), data.getRank())))
    return failure();
  if (idx.getRank() != data.getRank())
    return emitOptionalError(loc, "indices rank ", idx.getRank(),
                             " differs from data rank ", data.getRank());
  for (int64_t d = 0; d < idx.getRank(); ++d)
    if (d != (int64_t)adaptor.getAxis() && idx.getDimSize(d) > data.getDimSize(d))
      return emitOptionalError(loc, "indices dimension ", d, " (", idx.getDimSize(d),
                               ") exceeds the data's (", data.getDimSize(d), ")");
  types.push_back(RankedTensorType::get(idx.getShape(), data.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(std::optional<Location> loc, Value input,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 Type elem, SmallVectorImpl<Type> &types) {
  auto in = tensorType(input);
  SmallVector<bool> reduced(in.getRank(), false);
  int64_t prev = -1;
  for (int64_t a : axes) {
    if (failed(checkAxis(loc, a, in.getRank())))
      return failure();
    if (a <= prev)
      return emitOptionalError(loc, "axes must be sorted and distinct");
    prev = a;
    reduced[a] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (!reduced[d])
      shape.push_back(in.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, elem ? elem : in.getElementType()));
  return success();
}

#define MERAK_REDUCE_INFER(OP)                                                 \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),             \
                       adaptor.getKeepdims(), Type(), types);                  \
  }
MERAK_REDUCE_INFER(ReduceSumOp)
MERAK_REDUCE_INFER(ReduceMeanOp)
MERAK_REDUCE_INFER(ReduceMaxOp)
MERAK_REDUCE_INFER(ReduceMinOp)
MERAK_REDUCE_INFER(ReduceProdOp)
#undef MERAK_REDUCE_INFER

#define MERAK_ARG_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    int64_t axis = adaptor.getAxis();                                          \
    return inferReduce(loc, adaptor.getInput(), ArrayRef<int64_t>(axis),       \
                       adaptor.getKeepdims(), IntegerType::get(ctx, 64),       \
                       types);                                                 \
  }
MERAK_ARG_INFER(ArgMaxOp)
MERAK_ARG_INFER(ArgMinOp)
#undef MERAK_ARG_INFER

/// Verifier form of checkAxis: "'merak.x' op axis ... out of range".
static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult ArgSortOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if (in.getShape() != out.getShape())
    return emitOpError("result shape must equal the input's");
  return verifyAxis(*this, getAxis(), in.getRank());
}

LogicalResult CumSumOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

LogicalResult LinearScanOp::verify() {
  return verifyAxis(*this, getAxis(), getResult().getType().getRank());
}
LogicalResult LinearScanGradOp::verify() {
  return verifyAxis(*this, getAxis(), getDecay().getType().getRank());
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

/// Checks an optional per-feature operand of a normalisation over [axis, rank).
static LogicalResult checkNormOperand(Operation *op, Value v, StringRef name,
                                      RankedTensorType in, int64_t axis) {
  if (!v)
    return success();
  auto t = tensorType(v);
  if (t.getElementType() != in.getElementType())
    return op->emitOpError(name) << " element type differs from the input's";
  if (!isBroadcastableTo(t.getShape(), in.getShape().drop_front(axis)))
    return op->emitOpError(name) << " shape " << t
                                 << " does not broadcast to the normalised shape";
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto in = getInput().getType();
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be non-negative");
  if (getType() != in)
    return emitOpError("result type must equal the input type");
  if (failed(checkNormOperand(*this, getScale(), "scale", in, getAxis())))
    return failure();
  return checkNormOperand(*this, getBias(), "bias", in, getAxis());
}

LogicalResult RmsNormOp::verify() {
  auto in = getInput().getType();
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be non-negative");
  if (getType() != in)
    return emitOpError("result type must equal the input type");
  return checkNormOperand(*this, getScale(), "scale", in, getAxis());
}

LogicalResult SumSquaresOp::verify() {
  auto want = RankedTensorType::get({}, getInput().getType().getElementType());
  if (getType() != want)
    return emitOpError("result must be ") << want << ", got " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Contraction, convolution, pooling
//===----------------------------------------------------------------------===//

/// The result type of numpy.matmul; `transposeL` / `transposeR` read that
/// operand with its last two dimensions swapped (merak.matmul_t).
static LogicalResult inferMatmul(std::optional<Location> loc, RankedTensorType lt,
                                 RankedTensorType rt, bool transposeL, bool transposeR,
                                 SmallVectorImpl<Type> &types) {
  if (lt.getElementType() != rt.getElementType())
    return emitOptionalError(loc, "operand element types differ");
  if (lt.getRank() < 1 || rt.getRank() < 1)
    return emitOptionalError(loc, "operands must have rank >= 1");
  if ((transposeL && lt.getRank() < 2) || (transposeR && rt.getRank() < 2))
    return emitOptionalError(loc, "a transposed operand must have rank >= 2");
  SmallVector<int64_t> l(lt.getShape()), r(rt.getShape());
  if (transposeL)
    std::swap(l[l.size() - 2], l.back());
  if (transposeR)
    std::swap(r[r.size() - 2], r.back());
  bool lVec = l.size() == 1, rVec = r.size() == 1;
  if (lVec)
    l.insert(l.begin(), 1);
  if (rVec)
    r.push_back(1);
  int64_t m = l[l.size() - 2], k = l.back(), k2 = r[r.size() - 2], n = r.back();
  if (k != k2)
    return emitOptionalError(loc, "contracting dimensions differ: ", k, " vs ", k2);
  auto batch = broadcastShapes(ArrayRef<int64_t>(l).drop_back(2),
                               ArrayRef<int64_t>(r).drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "batch dimensions of ", lt, " and ", rt,
                             " are not broadcast-compatible");
  SmallVector<int64_t> shape(*batch);
  if (!lVec)
    shape.push_back(m);
  if (!rVec)
    shape.push_back(n);
  types.push_back(RankedTensorType::get(shape, lt.getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferMatmul(loc, tensorType(adaptor.getLhs()), tensorType(adaptor.getRhs()), false,
                     false, types);
}

/// The inferred result, or (bf16 operands) the same shape in f32.
static bool gemmResultCompatible(TypeRange inferred, TypeRange actual) {
  if (inferred == actual)
    return true;
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  auto i = dyn_cast<RankedTensorType>(inferred[0]), a = dyn_cast<RankedTensorType>(actual[0]);
  return i && a && i.getShape() == a.getShape() && i.getElementType().isBF16() &&
         a.getElementType().isF32();
}

bool MatmulOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return gemmResultCompatible(inferred, actual);
}

bool MatmulTOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return gemmResultCompatible(inferred, actual);
}

LogicalResult MatmulTOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto lt = tensorType(adaptor.getLhs()), rt = tensorType(adaptor.getRhs());
  if (lt.getRank() < 2 || rt.getRank() < 2)
    return emitOptionalError(loc, "operands must have rank >= 2");
  return inferMatmul(loc, lt, rt, adaptor.getTransposeLhs(), adaptor.getTransposeRhs(), types);
}

LogicalResult MatmulTOp::verify() {
  Value acc = getAcc();
  if (!acc)
    return success();
  if (acc.getType() != getType())
    return emitOpError("accumulator type ")
           << acc.getType() << " differs from the result type " << getType();
  if (!cast<RankedTensorType>(getType()).getElementType().isF32())
    return emitOpError("an accumulated product must be f32, got ") << getType();
  return success();
}

/// Output extent of a sliding window (convolution or pooling).
static FailureOr<int64_t> windowOut(std::optional<Location> loc, int64_t in,
                                    int64_t k, int64_t stride, int64_t padLo,
                                    int64_t padHi, int64_t dilation, bool ceil) {
  if (k <= 0 || stride <= 0 || dilation <= 0 || padLo < 0 || padHi < 0)
    return emitOptionalError(loc, "window sizes, strides and dilations must be "
                                  "positive and padding non-negative");
  auto span = llvm::checkedMul(dilation, k - 1);
  auto padded = llvm::checkedAdd(in, padLo);
  if (padded)
    padded = llvm::checkedAdd(*padded, padHi);
  if (!span || *span == std::numeric_limits<int64_t>::max() || !padded)
    return emitOptionalError(loc, "window attributes overflow");
  *span += 1;
  int64_t avail = *padded - *span;
  if (avail < 0)
    return emitOptionalError(loc, "window of extent ", *span,
                             " does not fit padded input of size ", *padded);
  int64_t out = (ceil ? llvm::divideCeil(avail, stride) : avail / stride) + 1;
  // With ceil_mode the last window must start inside the (left-padded) input.
  if (ceil && (out - 1) * stride >= in + padLo)
    --out;
  return out;
}

static LogicalResult checkArray(std::optional<Location> loc, ArrayRef<int64_t> a,
                                size_t n, StringRef name) {
  if (a.size() != n)
    return emitOptionalError(loc, name, " needs ", n, " entries, got ", a.size());
  return success();
}

/// The conv2d result type for input `in` and weight `w` (bias checked by
/// the caller); shared by conv2d and its backward ops' verifiers.
static FailureOr<RankedTensorType>
convResultType(std::optional<Location> loc, RankedTensorType in,
               RankedTensorType w, ArrayRef<int64_t> s, ArrayRef<int64_t> p,
               ArrayRef<int64_t> d, int64_t groups) {
  if (in.getRank() != 4 || w.getRank() != 4)
    return emitOptionalError(loc, "input and weight must have rank 4");
  if (failed(checkArray(loc, s, 2, "strides")) ||
      failed(checkArray(loc, p, 4, "padding")) ||
      failed(checkArray(loc, d, 2, "dilations")))
    return failure();
  if (w.getElementType() != in.getElementType())
    return emitOptionalError(loc, "weight element type ", w.getElementType(),
                             " differs from the input's ", in.getElementType());
  int64_t c = in.getDimSize(1), o = w.getDimSize(0);
  if (groups <= 0 || c % groups || o % groups || w.getDimSize(1) * groups != c)
    return emitOptionalError(loc, "weight ", w, " does not match ", c,
                             " input channels in ", groups, " groups");
  auto h = windowOut(loc, in.getDimSize(2), w.getDimSize(2), s[0], p[0], p[2], d[0], false);
  if (failed(h))
    return failure();
  auto wd = windowOut(loc, in.getDimSize(3), w.getDimSize(3), s[1], p[1], p[3], d[1], false);
  if (failed(wd))
    return failure();
  return RankedTensorType::get({in.getDimSize(0), o, *h, *wd}, in.getElementType());
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto in = tensorType(adaptor.getInput()), w = tensorType(adaptor.getWeight());
  auto result = convResultType(loc, in, w, adaptor.getStrides(), adaptor.getPadding(),
                               adaptor.getDilations(), adaptor.getGroups());
  if (failed(result))
    return failure();
  int64_t o = w.getDimSize(0);
  if (Value b = adaptor.getBias()) {
    auto bt = tensorType(b);
    if (bt.getRank() != 1 || bt.getDimSize(0) != o)
      return emitOptionalError(loc, "bias must be tensor<", o, "x...>");
    if (bt.getElementType() != in.getElementType())
      return emitOptionalError(loc, "bias element type ", bt.getElementType(),
                               " differs from the input's ", in.getElementType());
  }
  types.push_back(*result);
  return success();
}

LogicalResult Conv2DBackwardDataOp::verify() {
  auto result = convResultType(getLoc(), getType(), getWeight().getType(), getStrides(),
                               getPadding(), getDilations(), getGroups());
  if (failed(result))
    return failure();
  if (*result != getGrad().getType())
    return emitOpError("grad ") << getGrad().getType() << " is not the conv2d result "
                                << *result << " of this input and weight";
  return success();
}

LogicalResult Conv2DBackwardFilterOp::verify() {
  auto result = convResultType(getLoc(), getInput().getType(), getType(), getStrides(),
                               getPadding(), getDilations(), getGroups());
  if (failed(result))
    return failure();
  if (*result != getGrad().getType())
    return emitOpError("grad ") << getGrad().getType() << " is not the conv2d result "
                                << *result << " of this input and weight";
  return success();
}

static LogicalResult inferPoolType(std::optional<Location> loc, RankedTensorType in,
                                   ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                                   ArrayRef<int64_t> p, ArrayRef<int64_t> d,
                                   bool ceil, SmallVectorImpl<Type> &types);

static LogicalResult inferPool(std::optional<Location> loc, Value input,
                               ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                               ArrayRef<int64_t> p, ArrayRef<int64_t> d,
                               bool ceil, SmallVectorImpl<Type> &types) {
  return inferPoolType(loc, tensorType(input), k, s, p, d, ceil, types);
}

static LogicalResult inferPoolType(std::optional<Location> loc, RankedTensorType in,
                                   ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                                   ArrayRef<int64_t> p, ArrayRef<int64_t> d,
                                   bool ceil, SmallVectorImpl<Type> &types) {
  if (in.getRank() != 4)
    return emitOptionalError(loc, "input must have rank 4 (NCHW)");
  if (failed(checkArray(loc, k, 2, "kernel")) ||
      failed(checkArray(loc, s, 2, "strides")) ||
      failed(checkArray(loc, p, 4, "padding")) ||
      failed(checkArray(loc, d, 2, "dilations")))
    return failure();
  if (k[0] <= 0 || k[1] <= 0)
    return emitOptionalError(loc, "window sizes, strides and dilations must be "
                                  "positive and padding non-negative");
  if (p[0] >= k[0] || p[2] >= k[0] || p[1] >= k[1] || p[3] >= k[1])
    return emitOptionalError(loc, "padding must be smaller than the kernel");
  auto h = windowOut(loc, in.getDimSize(2), k[0], s[0], p[0], p[2], d[0], ceil);
  if (failed(h))
    return failure();
  auto w = windowOut(loc, in.getDimSize(3), k[1], s[1], p[1], p[3], d[1], ceil);
  if (failed(w))
    return failure();
  types.push_back(RankedTensorType::get(
      {in.getDimSize(0), in.getDimSize(1), *h, *w}, in.getElementType()));
  return success();
}

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferPool(loc, adaptor.getInput(), adaptor.getKernel(),
                   adaptor.getStrides(), adaptor.getPadding(),
                   adaptor.getDilations(), adaptor.getCeilMode(), types);
}

/// A pool backward op: `grad` must be the pool's result for `input`.
static LogicalResult verifyPoolGrad(Operation *op, RankedTensorType input,
                                    RankedTensorType grad, ArrayRef<int64_t> k,
                                    ArrayRef<int64_t> s, ArrayRef<int64_t> p,
                                    ArrayRef<int64_t> d, bool ceil) {
  SmallVector<Type> types;
  if (failed(inferPoolType(op->getLoc(), input, k, s, p, d, ceil, types)))
    return failure();
  if (types[0] != grad)
    return op->emitOpError("grad ") << grad << " is not the pool result " << types[0];
  return success();
}

LogicalResult MaxPool2DGradOp::verify() {
  if (getInput().getType() != getType())
    return emitOpError("result type must equal the input type");
  return verifyPoolGrad(*this, getType(), getGrad().getType(), getKernel(), getStrides(),
                        getPadding(), getDilations(), getCeilMode());
}

LogicalResult AvgPool2DGradOp::verify() {
  int64_t ones[2] = {1, 1};
  return verifyPoolGrad(*this, getType(), getGrad().getType(), getKernel(), getStrides(),
                        getPadding(), ones, getCeilMode());
}

LogicalResult GatherElementsGradOp::verify() {
  auto data = getType(), idx = getIndices().getType();
  if (failed(verifyAxis(*this, getAxis(), data.getRank())))
    return failure();
  if (getGrad().getType().getShape() != idx.getShape() ||
      getGrad().getType().getElementType() != data.getElementType() ||
      idx.getRank() != data.getRank())
    return emitOpError("grad must have the indices' shape and the result's element type");
  for (int64_t d = 0; d < idx.getRank(); ++d)
    if (d != (int64_t)getAxis() && idx.getDimSize(d) > data.getDimSize(d))
      return emitOpError("indices dimension ") << d << " exceeds the result's";
  return success();
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  int64_t ones[2] = {1, 1};
  return inferPool(loc, adaptor.getInput(), adaptor.getKernel(),
                   adaptor.getStrides(), adaptor.getPadding(), ones,
                   adaptor.getCeilMode(), types);
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  auto logits = tensorType(adaptor.getLogits()), labels = tensorType(adaptor.getLabels());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, logits.getRank())))
    return failure();
  SmallVector<int64_t> expected(logits.getShape());
  expected.erase(expected.begin() + axis);
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, "labels ", labels,
                             " must have the logits' shape without the class axis");
  if (auto g = adaptor.getGroupAttr()) {
    if (g.getValue() != "tp")
      return emitOptionalError(loc, "group must be \"tp\" (vocabulary parallelism), got '",
                               g.getValue(), "'");
    if (axis != logits.getRank() - 1)
      return emitOptionalError(loc, "a vocabulary-parallel cross-entropy needs the class "
                                    "axis last");
  }
  if (auto c = adaptor.getClassesAttr())
    if (!adaptor.getGroupAttr() || c.getInt() < 1)
      return emitOptionalError(loc, "classes (", c.getInt(),
                               ") must be positive and needs a group (vocabulary parallelism)");
  StringRef red = adaptor.getReduction();
  if (red == "none")
    types.push_back(RankedTensorType::get(expected, logits.getElementType()));
  else if (red == "mean" || red == "sum")
    types.push_back(RankedTensorType::get({}, logits.getElementType()));
  else
    return emitOptionalError(loc, "reduction must be mean, sum or none, got '",
                             red, "'");
  return success();
}

#define GET_OP_CLASSES
#include "merak/Dialect/Merak/IR/MerakOps.cpp.inc"
