//===- MerakFolds.cpp - structural folders of merak ops -------------------===//
//
// Identity and composition folds that need no arithmetic. General constant
// folding of small tensors is the `merak-fold-constants` pass, which runs
// the reference evaluator on ops whose operands are all constant.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::merak;

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

/// A splat (or reshaped dense) constant of a new type, or null.
static Attribute retypeConstant(Attribute attr, RankedTensorType type) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return {};
  if (dense.isSplat())
    return SplatElementsAttr::get(type, dense.getSplatValue<Attribute>());
  return {};
}

/// Every value of float type `from` is exactly a value of float type `to`
/// (bf16/f16 -> f32/f64, f32 -> f64).
static bool exactWidening(Type from, Type to) {
  if (from.isBF16() || from.isF16())
    return to.isF32() || to.isF64();
  return from.isF32() && to.isF64();
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // cast(cast(x, wider), x's type) is x: the widening was exact.
  if (auto inner = getInput().getDefiningOp<CastOp>())
    if (inner.getInput().getType() == getType() &&
        exactWidening(getType().getElementType(), inner.getType().getElementType()))
      return inner.getInput();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (!dense || !dense.isSplat())
    return {};
  Type from = dense.getElementType(), to = getType().getElementType();
  Attribute v = dense.getSplatValue<Attribute>();
  // Splat casts between floats, and from int to float, are exact enough to
  // fold here; the rest is left to merak-fold-constants.
  if (auto f = dyn_cast<FloatType>(to)) {
    double d;
    if (auto fa = dyn_cast<FloatAttr>(v))
      d = fa.getValueAsDouble();
    else if (from.isInteger(1))
      d = cast<IntegerAttr>(v).getValue().getBoolValue() ? 1.0 : 0.0;
    else
      d = from.isUnsignedInteger()
              ? (double)cast<IntegerAttr>(v).getValue().getZExtValue()
              : (double)cast<IntegerAttr>(v).getValue().getSExtValue();
    return SplatElementsAttr::get(getType(), FloatAttr::get(f, d));
  }
  // Integer (or bool) to integer: to bool is "nonzero" (ones_like(ids) as a
  // bool mask); otherwise extended by the source's signedness or truncated.
  auto toInt = dyn_cast<IntegerType>(to);
  auto iv = dyn_cast<IntegerAttr>(v);
  if (!toInt || !iv || !from.isInteger())
    return {};
  const APInt &x = iv.getValue();
  APInt y = toInt.getWidth() == 1                           ? APInt(1, !x.isZero())
            : from.isUnsignedInteger() || from.isInteger(1) ? x.zextOrTrunc(toInt.getWidth())
                                                            : x.sextOrTrunc(toInt.getWidth());
  return SplatElementsAttr::get(getType(), IntegerAttr::get(toInt, y));
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    setOperand(producer.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

/// True when `attr` is a splat constant equal to one.
static bool isSplatOne(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  if (isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().isExactlyValue(1.0);
  return dense.getSplatValue<APInt>().isOne();
}

// x * 1 and x / 1 are x exactly (also for NaN, infinities and -0), when the
// constant does not broadcast x to a larger shape.
OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOne(adaptor.getRhs()) && getLhs().getType() == getType())
    return getLhs();
  if (isSplatOne(adaptor.getLhs()) && getRhs().getType() == getType())
    return getRhs();
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOne(adaptor.getRhs()) && getLhs().getType() == getType())
    return getLhs();
  return {};
}

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

OpFoldResult NotOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NotOp>())
    return inner.getInput();
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // broadcast(broadcast(x)) is one broadcast of x.
  if (auto producer = getInput().getDefiningOp<BroadcastOp>()) {
    setOperand(producer.getInput());
    return getResult();
  }
  return retypeConstant(adaptor.getInput(), getType());
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    // transpose(transpose(x, p1), p2)[i] = x[p1[p2[i]]].
    ArrayRef<int64_t> inner = producer.getPerm();
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(inner[p]);
    setOperand(producer.getInput());
    setPerm(composed);
    return getResult();
  }
  return retypeConstant(adaptor.getInput(), getType());
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  return retypeConstant(adaptor.getInput(), getType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

/// Whether `v` is computed from merak.constants alone (no argument, no
/// parameter), looking at most `limit` ops back.
static bool fromConstantsOnly(Value v, int64_t limit = 256) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || isa<GetParamOp>(def) || def->getNumRegions() || !isMemoryEffectFree(def))
      return false;
    if (!seen.insert(def).second || isa<ConstantOp>(def))
      continue;
    if ((int64_t)seen.size() > limit)
      return false;
    llvm::append_range(work, def->getOperands());
  }
  return true;
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto table = dyn_cast_or_null<DenseElementsAttr>(adaptor.getData());
  if (!table || !table.isSplat() || !getType().hasStaticShape() || !fromConstantsOnly(getIndices()))
    return {};
  return SplatElementsAttr::get(getType(), table.getSplatValue<Attribute>());
}

/// `v` broadcast to `type` (itself when it has that type already).
static Value broadcastTo(PatternRewriter &rewriter, Location loc, Value v, RankedTensorType type) {
  if (v.getType() == type)
    return v;
  return BroadcastOp::create(rewriter, loc, type, v);
}

LogicalResult AndOp::canonicalize(AndOp op, PatternRewriter &rewriter) {
  for (auto [x, other] : {std::pair{op.getLhs(), op.getRhs()}, {op.getRhs(), op.getLhs()}}) {
    DenseElementsAttr c;
    if (!matchPattern(other, m_Constant(&c)) || !c.isSplat() || !c.getSplatValue<bool>())
      continue;
    rewriter.replaceOp(op, broadcastTo(rewriter, op.getLoc(), x, op.getType()));
    return success();
  }
  return failure();
}

LogicalResult WhereOp::canonicalize(WhereOp op, PatternRewriter &rewriter) {
  auto bc = op.getCondition().getDefiningOp<BroadcastOp>();
  if (!bc)
    return failure();
  auto cond = cast<RankedTensorType>(bc.getInput().getType());
  // The select at the condition's own shape must have that shape: x and y
  // broadcast into it without growing it.
  SmallVector<int64_t> shape(cond.getShape());
  for (Value v : {op.getLhs(), op.getRhs()}) {
    SmallVector<int64_t> joined;
    if (!OpTrait::util::getBroadcastedShape(shape, cast<RankedTensorType>(v.getType()).getShape(),
                                            joined) ||
        ArrayRef<int64_t>(joined) != cond.getShape())
      return failure();
  }
  auto type = RankedTensorType::get(cond.getShape(), op.getType().getElementType());
  Value small =
      WhereOp::create(rewriter, op.getLoc(), type, bc.getInput(), op.getLhs(), op.getRhs());
  rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(), small);
  return success();
}
