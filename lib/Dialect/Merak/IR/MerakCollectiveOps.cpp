//===- MerakCollectiveOps.cpp - verifiers of the collective ops -----------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::merak;

LogicalResult AllReduceOp::verify() {
  StringRef group = getGroup();
  if (!isMeshGroup(group))
    return emitOpError("group must be ") << kMeshGroups << ", got \"" << group << "\"";
  StringRef red = getReduction();
  if (red != "sum" && red != "mean" && red != "max")
    return emitOpError("reduction must be \"sum\", \"mean\" or \"max\", got \"") << red
                                                                             << "\"";
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  if (getInputs().getTypes() != getResults().getTypes())
    return emitOpError("result types must equal the operand types");
  return success();
}

LogicalResult GroupRankOp::verify() {
  StringRef group = getGroup();
  if (!isMeshGroup(group))
    return emitOpError("group must be ") << kMeshGroups << ", got \"" << group << "\"";
  if (getType().getRank() != 0)
    return emitOpError("result must be a scalar tensor<i64>");
  return success();
}

std::optional<ShardLayout> mlir::merak::getShardLayout(Operation *op) {
  auto attr = op->getAttrOfType<ShardLayoutAttr>(kShardAttr);
  if (!attr)
    return std::nullopt;
  return ShardLayout{attr.getAxis(),
                     attr.getParts(),
                     attr.getBlocks(),
                     attr.getSize(),
                     attr.getGroup().str(),
                     attr.getPlacement(),
                     SmallVector<int64_t>(attr.getBlockSizes())};
}

void mlir::merak::setShardLayout(Operation *op, const ShardLayout &layout) {
  op->setAttr(kShardAttr,
              ShardLayoutAttr::get(op->getContext(), layout.axis, layout.blocks, layout.parts,
                                   layout.size, layout.group, layout.placement, layout.blockSizes));
}

RankedTensorType mlir::merak::globalShardType(RankedTensorType local,
                                              const ShardLayout &layout) {
  SmallVector<int64_t> shape(local.getShape());
  shape[layout.axis] = layout.size ? layout.size : shape[layout.axis] * layout.parts;
  return RankedTensorType::get(shape, local.getElementType());
}

//===----------------------------------------------------------------------===//
// ZeRO: reduce_scatter, all_gather, local_shard and the flat shard layout
//===----------------------------------------------------------------------===//

/// Checks `group`, and that every (operand, result) pair has the same
/// element type and trailing dimensions and leading dimensions related by
/// one factor `parts` (big = parts * small), which it returns.
static FailureOr<int64_t> verifyLeadingSplit(Operation *op, StringRef group, TypeRange big,
                                             TypeRange small, StringRef bigName,
                                             StringRef smallName) {
  if (!isMeshGroup(group))
    return op->emitOpError("group must be ") << kMeshGroups << ", got \"" << group << "\"",
           failure();
  if (big.empty())
    return op->emitOpError("needs at least one operand"), failure();
  if (big.size() != small.size())
    return op->emitOpError("needs one result per operand"), failure();
  int64_t parts = 0;
  for (auto [bt, st] : llvm::zip(big, small)) {
    auto b = cast<RankedTensorType>(bt), s = cast<RankedTensorType>(st);
    if (b.getElementType() != s.getElementType())
      return op->emitOpError("result element types must equal the operands'"), failure();
    if (b.getRank() < 1 || b.getRank() != s.getRank() ||
        b.getShape().drop_front() != s.getShape().drop_front())
      return op->emitOpError("the ") << bigName << " " << b << " and the " << smallName << " "
                                     << s << " must have the same rank (at least 1) and "
                                     << "differ in the leading dimension only",
             failure();
    if (s.getDimSize(0) < 1 || b.getDimSize(0) % s.getDimSize(0) != 0)
      return op->emitOpError("the leading dimension of the ")
                 << bigName << " (" << b.getDimSize(0) << ") is not a multiple of the "
                 << smallName << "'s (" << s.getDimSize(0) << ")",
             failure();
    int64_t p = b.getDimSize(0) / s.getDimSize(0);
    if (parts && p != parts)
      return op->emitOpError("operands split into different numbers of parts (")
                 << parts << " and " << p << "); one op is one group",
             failure();
    parts = p;
  }
  return parts;
}

static int64_t leadingRatio(Type big, Type small) {
  int64_t s = cast<RankedTensorType>(small).getDimSize(0);
  return s > 0 ? cast<RankedTensorType>(big).getDimSize(0) / s : 1;
}

LogicalResult ReduceScatterOp::verify() {
  StringRef red = getReduction();
  if (red != "sum" && red != "mean")
    return emitOpError("reduction must be \"sum\" or \"mean\", got \"") << red << "\"";
  return verifyLeadingSplit(*this, getGroup(), getInputs().getTypes(), getResults().getTypes(),
                            "operand", "result");
}

int64_t ReduceScatterOp::getParts() {
  return leadingRatio(getInputs()[0].getType(), getResults()[0].getType());
}

LogicalResult AllGatherOp::verify() {
  return verifyLeadingSplit(*this, getGroup(), getResults().getTypes(), getInputs().getTypes(),
                            "result", "operand");
}

int64_t AllGatherOp::getParts() {
  return leadingRatio(getResults()[0].getType(), getInputs()[0].getType());
}

LogicalResult AllToAllOp::verify() {
  if (!isMeshGroup(getGroup()))
    return emitOpError("group must be ") << kMeshGroups << ", got \"" << getGroup() << "\"";
  auto in = cast<RankedTensorType>(getInput().getType());
  auto ids = cast<RankedTensorType>(getExperts().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getRank() != 2 || out.getRank() != 2 || ids.getRank() != 1)
    return emitOpError("expects rows (rank 2) in and out and one expert id per row of the "
                       "group (rank 1)");
  if (in.getElementType() != out.getElementType() || in.getDimSize(1) != out.getDimSize(1))
    return emitOpError("input and result must have one element type and row width");
  RankedTensorType all = getCombine() ? in : out, mine = getCombine() ? out : in;
  if (std::optional<uint64_t> compact = getCompact()) {
    if (static_cast<int64_t>(*compact) < 1 || all.getDimSize(0) != static_cast<int64_t>(*compact))
      return emitOpError("the ") << (getCombine() ? "input" : "result") << " must have the "
                                 << static_cast<int64_t>(*compact) << " compact rows, got "
                                 << all.getDimSize(0);
    if (getShadowSlots() != 0)
      return emitOpError("compact rows and shadow slots do not combine");
  } else if (all.getDimSize(0) != ids.getDimSize(0)) {
    return emitOpError("the ") << (getCombine() ? "input" : "result") << " must have one row "
                               << "per expert id (" << ids.getDimSize(0) << "), got "
                               << all.getDimSize(0);
  }
  if (mine.getDimSize(0) < 1 || ids.getDimSize(0) % mine.getDimSize(0) != 0)
    return emitOpError("the group's ") << ids.getDimSize(0) << " rows are not a multiple of "
                                       << "this rank's " << mine.getDimSize(0);
  if (static_cast<int64_t>(getExpertsPerRank()) < 1)
    return emitOpError("experts_per_rank must be at least 1");
  if (static_cast<int64_t>(getShadowSlots()) < 0)
    return emitOpError("shadow_slots must not be negative");
  return success();
}

LogicalResult ExpertShadowOp::verify() {
  if (!isMeshGroup(getGroup()))
    return emitOpError("group must be ") << kMeshGroups << ", got \"" << getGroup() << "\"";
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  auto slots = cast<RankedTensorType>(getSlots().getType());
  if (slots.getRank() != 1)
    return emitOpError("expects the slots' expert ids (rank 1), got ") << slots;
  RankedTensorType shadows = getReduce() ? in : out, weights = getReduce() ? out : in;
  if (in.getRank() < 1 || in.getElementType() != out.getElementType() ||
      in.getShape().drop_front() != out.getShape().drop_front())
    return emitOpError("input and result must be expert matrices of one type and shape, got ")
           << in << " and " << out;
  if (shadows.getDimSize(0) != slots.getDimSize(0))
    return emitOpError("the ") << (getReduce() ? "input" : "result") << " must have one matrix "
                               << "per slot (" << slots.getDimSize(0) << "), got "
                               << shadows.getDimSize(0);
  if (weights.getDimSize(0) < 1 || static_cast<int64_t>(getParts()) < 1)
    return emitOpError("expects at least one expert per rank and one part");
  return success();
}

int64_t AllToAllOp::getLocalRows() {
  return cast<RankedTensorType>(getCombine() ? getType() : getInput().getType()).getDimSize(0);
}

int64_t AllToAllOp::getParts() {
  return cast<RankedTensorType>(getExperts().getType()).getDimSize(0) / getLocalRows();
}

LogicalResult LocalShardOp::verify() {
  return verifyLeadingSplit(*this, getGroup(), TypeRange{getInput().getType()},
                            TypeRange{getResult().getType()}, "operand", "result");
}

int64_t LocalShardOp::getParts() {
  return leadingRatio(getInput().getType(), getResult().getType());
}

int64_t ZeroLayout::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::optional<ZeroLayout> mlir::merak::getZeroLayout(Attribute attr) {
  auto zero = dyn_cast_or_null<ZeroLayoutAttr>(attr);
  if (!zero || zero.getParts() < 1 ||
      llvm::any_of(zero.getShape(), [](int64_t d) { return d < 0; }))
    return std::nullopt;
  ZeroLayout layout;
  layout.parts = zero.getParts();
  layout.shape.assign(zero.getShape().begin(), zero.getShape().end());
  return layout;
}

std::optional<ZeroLayout> mlir::merak::getZeroLayout(Operation *op) {
  return getZeroLayout(op->getAttr(kZeroAttr));
}

Attribute mlir::merak::zeroLayoutAttr(MLIRContext *ctx, const ZeroLayout &layout) {
  return ZeroLayoutAttr::get(ctx, layout.parts, layout.shape);
}

Value mlir::merak::buildZeroFlatten(OpBuilder &b, Location loc, Value full, int64_t parts) {
  auto type = cast<RankedTensorType>(full.getType());
  int64_t n = type.getNumElements(), padded = (n + parts - 1) / parts * parts;
  Type elem = type.getElementType();
  Value flat = full;
  if (type.getRank() != 1)
    flat = ReshapeOp::create(b, loc, RankedTensorType::get({n}, elem), full);
  if (padded == n)
    return flat;
  auto padType = RankedTensorType::get({padded - n}, elem);
  Value zeros = ConstantOp::create(b, loc, SplatElementsAttr::get(padType, b.getZeroAttr(elem)));
  return ConcatOp::create(b, loc, ValueRange{flat, zeros}, 0);
}

bool mlir::merak::isExpertShard(Operation *param) {
  std::optional<ShardLayout> layout = getShardLayout(param);
  return layout && layout->group == "ep";
}

SmallVector<Value> mlir::merak::buildGradientMean(OpBuilder &b, Location loc, ValueRange grads,
                                                  bool expert, int64_t dp, int64_t ep) {
  if (!expert)
    return SmallVector<Value>(AllReduceOp::create(b, loc, grads, "dp", "mean").getResults());
  ValueRange mean = grads;
  if (dp / ep > 1)
    mean = AllReduceOp::create(b, loc, grads, "edp", "mean").getResults();
  return ep == 1 ? SmallVector<Value>(mean) : buildScaled(b, loc, mean, 1.0 / ep);
}

SmallVector<Value> mlir::merak::buildZeroGradientMean(OpBuilder &b, Location loc,
                                                      ValueRange grads, bool expert,
                                                      int64_t parts, int64_t ep) {
  SmallVector<Value> flat;
  SmallVector<Type> types;
  for (Value g : grads) {
    flat.push_back(buildZeroFlatten(b, loc, g, parts));
    auto t = cast<RankedTensorType>(flat.back().getType());
    types.push_back(RankedTensorType::get({t.getDimSize(0) / parts}, t.getElementType()));
  }
  auto rs = ReduceScatterOp::create(b, loc, types, flat, expert ? "edp" : "dp", "mean");
  if (!expert || ep == 1)
    return SmallVector<Value>(rs.getResults());
  return buildScaled(b, loc, rs.getResults(), 1.0 / ep);
}

SmallVector<Value> mlir::merak::buildScaled(OpBuilder &b, Location loc, ValueRange values,
                                            double factor) {
  SmallVector<Value> out;
  for (Value v : values) {
    auto scalar = RankedTensorType::get({}, cast<RankedTensorType>(v.getType()).getElementType());
    Value c = ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, b.getFloatAttr(scalar.getElementType(), factor)));
    out.push_back(MulOp::create(b, loc, v, c));
  }
  return out;
}

Value mlir::merak::buildZeroUnflatten(OpBuilder &b, Location loc, Value padded,
                                      RankedTensorType fullType) {
  int64_t n = fullType.getNumElements();
  Value flat = padded;
  if (cast<RankedTensorType>(padded.getType()).getDimSize(0) != n)
    flat = SliceOp::create(b, loc, padded, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{n},
                           ArrayRef<int64_t>{1});
  if (fullType.getRank() == 1)
    return flat;
  return ReshapeOp::create(b, loc, fullType, flat);
}

LogicalResult LocalShardOp::canonicalize(LocalShardOp op, PatternRewriter &rewriter) {
  // local_shard(reshape?(all_reduce(x) {g, sum})) -> reduce_scatter(reshape?(x)) {g, sum}:
  // this rank's part of the sum (a reshape commutes with the elementwise
  // sum; both ops split the same leading dimension, which local_shard's
  // verifier checked).
  Value in = op.getInput();
  auto view = in.getDefiningOp<ReshapeOp>();
  if (view) {
    if (!view->hasOneUse())
      return failure();
    in = view.getInput();
  }
  auto sum = in.getDefiningOp<AllReduceOp>();
  if (!sum || !sum->hasOneUse() || sum.getNumOperands() != 1 || sum.getReduction() != "sum" ||
      sum.getGroup() != op.getGroup())
    return failure();
  Value x = sum.getOperand(0);
  if (view)
    x = ReshapeOp::create(rewriter, op.getLoc(), view.getType(), x);
  rewriter.replaceOpWithNewOp<ReduceScatterOp>(op, TypeRange{op.getType()}, ValueRange{x},
                                               op.getGroup(), "sum");
  // A collective is not Pure, so the unread sum must go explicitly.
  if (view)
    rewriter.eraseOp(view);
  rewriter.eraseOp(sum);
  return success();
}

LogicalResult TpIdentityOp::canonicalize(TpIdentityOp op, PatternRewriter &rewriter) {
  // tp_identity(view(x)) -> view(tp_identity(x)) for a reshape or broadcast
  // read by the tp_identity alone: the gradient's sum over tp moves before
  // the view's (linear) VJP, to x's size, which a broadcast's is below.
  Operation *view = op.getInput().getDefiningOp();
  if (!view || !isa<ReshapeOp, BroadcastOp>(view) || !view->hasOneUse())
    return failure();
  Value x = view->getOperand(0);
  rewriter.setInsertionPoint(view);
  Value marked = TpIdentityOp::create(rewriter, op.getLoc(), x);
  rewriter.modifyOpInPlace(view, [&] { view->setOperand(0, marked); });
  rewriter.replaceOp(op, view->getResult(0));
  return success();
}

LogicalResult AllReduceOp::canonicalize(AllReduceOp op, PatternRewriter &rewriter) {
  // all_reduce(a) {tp, sum}; all_reduce(b) {tp, sum} -> all_reduce(a, b): one
  // message instead of two, for vectors only (per-parameter gradients; an
  // activation's all-reduce keeps its own op, which merak-overlap may
  // split). Adjacent, so every rank still issues them in the same order.
  auto next = dyn_cast_or_null<AllReduceOp>(op->getNextNode());
  if (!next || op.getGroup() != "tp" || next.getGroup() != "tp" || op.getReduction() != "sum" ||
      next.getReduction() != "sum")
    return failure();
  Type elem;
  for (Value v : llvm::concat<Value>(op.getInputs(), next.getInputs())) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() > 1 || (elem && t.getElementType() != elem) || v.getDefiningOp() == op)
      return failure();
    elem = t.getElementType();
  }
  SmallVector<Value> inputs(op.getInputs());
  inputs.append(next.getInputs().begin(), next.getInputs().end());
  rewriter.setInsertionPoint(next);
  auto bucket = AllReduceOp::create(rewriter, next.getLoc(), inputs, "tp", "sum");
  const unsigned first = op.getNumResults();
  rewriter.replaceOp(op, bucket.getResults().take_front(first));
  rewriter.replaceOp(next, bucket.getResults().drop_front(first));
  return success();
}
