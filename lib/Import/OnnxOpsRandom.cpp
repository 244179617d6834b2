//===- OnnxOpsRandom.cpp - random draws that are Bernoulli masks ----------===//
//
// Training code draws random masks besides nn.Dropout's, and torch exports
// them as a uniform draw compared with a probability:
//
//   nn.Dropout(p, inplace=True), x.bernoulli_(q), torchvision's
//   StochasticDepth, timm's DropPath:
//     u = RandomUniformLike(like x)   m = Less(u, q)   y = x * (m / q)
//   Hugging Face's drop_path:
//     u = RandomUniformLike(...)      m = Floor(Add(q, u))
//
// merak draws every random number from merak.dropout's counter-based rule,
// so that a mask depends on (seed, step, element of the whole tensor) only,
// and every parallel configuration and recomputation draws the serial
// program's. A draw is therefore imported as a placeholder, and once the
// graph is read each of its uses becomes a dropout mask over a tensor of
// ones of the draw's shape (its values unused), with u = 1 - v for the
// dropout's uniform v (keep where v >= ratio):
//
//   u <  q, u <= q, q > u, q >= u   keep mask, ratio 1 - q      (P = q)
//   u >  q, u >= q, q < u, q <= u   not(keep mask, ratio 1 - q) (P = 1 - q)
//   Floor(u + c), c in [0, 1]       cast(not(keep mask, ratio c)) (P = c)
//
// with q = (c - low) / (high - low) for the draw's [low, high) and c a
// constant. The uses of one draw share its seed, so they see the same u.
// Any other use of a draw (noise added to a value, a Gumbel sample) is an
// error naming the node: merak would not draw the distribution the module
// does. Bernoulli with a constant probability is the first form directly.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {
/// Per node, stable across imports (as merak.dropout's). A `seed`
/// attribute is not followed: merak's masks change every step by design.
int64_t drawSeed(NodeContext &n) {
  return (int64_t)(stableHash(n.getNode().output(0)) & 0x7fffffff);
}

FailureOr<Type> drawElementType(NodeContext &n, Type dflt) {
  if (!n.attr("dtype"))
    return dflt;
  int64_t dtype = n.getInt("dtype", 1);
  Type t = convertDataType(n.getContext(), dtype);
  if (!t || !isa<FloatType>(t))
    return n.unsupported("random draw of dtype " + dataTypeName(dtype) +
                         " (a float type is needed)");
  return t;
}

LogicalResult placeholder(NodeContext &n, ArrayRef<int64_t> shape, Type elem) {
  double low = n.getFloat("low", 0.0), high = n.getFloat("high", 1.0);
  if (!(high > low))
    return n.error("high (" + std::to_string(high) + ") must exceed low (" + std::to_string(low) +
                   ")");
  auto type = RankedTensorType::get(shape, elem);
  auto op =
      UnrealizedConversionCastOp::create(n.builder(), n.getLoc(), TypeRange{type}, ValueRange{});
  n.dropouts().draws.push_back(
      {op, low, high, drawSeed(n), n.getNode().op_type() + " " + describeNode(n.getNode())});
  ++n.dropouts().training;
  n.setOutputs(op.getResult(0));
  return success();
}

LogicalResult randomUniformLike(NodeContext &n) {
  auto like = n.inputType(0);
  auto elem = drawElementType(n, like.getElementType());
  if (failed(elem))
    return failure();
  if (!isa<FloatType>(*elem))
    return n.unsupported("random draw like a non-float tensor without a float dtype");
  return placeholder(n, like.getShape(), *elem);
}

LogicalResult randomUniform(NodeContext &n) {
  auto shape = n.getInts("shape");
  if (!shape)
    return n.error("needs a 'shape' attribute");
  auto count = checkedNumElements(*shape);
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }) || failed(count) ||
      *count > kMaxElements)
    return n.error("shape must hold non-negative sizes of a tensor that fits in memory");
  auto elem = drawElementType(n, n.builder().getF32Type());
  if (failed(elem))
    return failure();
  return placeholder(n, *shape, *elem);
}

/// The keep mask of merak.dropout with `ratio` over a tensor of ones of
/// `shape` (the draw's), its seed `seed`; all-true or all-false where the
/// probability leaves nothing to draw.
Value keepMask(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elem, double ratio,
               int64_t seed) {
  auto maskType = RankedTensorType::get(shape, b.getI1Type());
  if (ratio <= 0.0 || ratio >= 1.0)
    return ConstantOp::create(b, loc,
                              DenseElementsAttr::get(maskType, ArrayRef<bool>{ratio <= 0.0}));
  auto onesType = RankedTensorType::get(shape, elem);
  Value ones = ConstantOp::create(
      b, loc, DenseElementsAttr::get(onesType, ArrayRef<Attribute>{b.getFloatAttr(elem, 1.0)}));
  auto drop = DropoutOp::create(b, loc, onesType, maskType, ones, llvm::APFloat(ratio), seed,
                                DenseI64ArrayAttr(), DenseI64ArrayAttr());
  return drop.getMask();
}

/// `v` as one constant number (a scalar or a splat), if it is one.
std::optional<double> constantNumber(Value v) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto t = HostTensor::fromAttr(attr);
  if (failed(t) || t->size() == 0)
    return std::nullopt;
  double c = t->getAsDouble(0);
  for (int64_t k = 1, e = t->size(); k < e; ++k)
    if (t->getAsDouble(k) != c)
      return std::nullopt;
  return c;
}

LogicalResult bernoulli(NodeContext &n) {
  ElementsAttr probability;
  if (!matchPattern(n.input(0), m_Constant(&probability)))
    return n.unsupported("Bernoulli of a probability computed at run time (merak draws "
                         "Bernoulli masks of one constant probability)");
  std::optional<double> q = constantNumber(n.input(0));
  if (!q)
    return n.unsupported("Bernoulli of per-element probabilities (merak draws Bernoulli "
                         "masks of one constant probability)");
  auto xt = n.inputType(0);
  auto elem = drawElementType(n, xt.getElementType());
  if (failed(elem))
    return failure();
  Value mask = keepMask(n.builder(), n.getLoc(), xt.getShape(), n.builder().getF32Type(), 1.0 - *q,
                        drawSeed(n));
  ++n.dropouts().training; // only training code draws
  n.setOutputs(n.create<CastOp>(RankedTensorType::get(xt.getShape(), *elem), mask));
  return success();
}

/// Replaces `op`'s single result by `v`, recording it in `renamed` for the
/// graph's names (resolveRandomDraws updates them once).
void replaceResult(Operation *op, Value v, DenseMap<Value, Value> &renamed) {
  renamed[op->getResult(0)] = v;
  op->getResult(0).replaceAllUsesWith(v);
  op->erase();
}

/// The op reading a draw, for an error: its node's name where the
/// importer gave it one, and merak's op.
std::string describeUser(Operation *user) {
  std::string what = "'" + user->getName().getStringRef().str() + "'";
  if (auto name = dyn_cast<NameLoc>(user->getLoc()))
    return "node '" + name.getName().str() + "' (" + what + ")";
  return what;
}

/// One use of a draw, rewritten into a mask; failure when it is not a form
/// of the file comment.
LogicalResult resolveUse(RandomDraw &d, Operation *user, DenseMap<Value, Value> &renamed) {
  auto type = cast<RankedTensorType>(d.op.getResult(0).getType());
  Value u = d.op.getResult(0);
  OpBuilder b(user);
  Location loc = user->getLoc();
  auto q = [&](double c) { return (c - d.low) / (d.high - d.low); };
  auto mask = [&](double ratio) {
    return keepMask(b, loc, type.getShape(), type.getElementType(), ratio, d.seed);
  };
  if (isa<LtOp, LeOp, GtOp, GeOp>(user)) {
    if (cast<RankedTensorType>(user->getResult(0).getType()).getShape() != type.getShape())
      return failure();
    bool drawFirst = user->getOperand(0) == u;
    auto c = constantNumber(user->getOperand(drawFirst ? 1 : 0));
    if (!c || user->getOperand(0) == user->getOperand(1))
      return failure();
    // u < c (or c > u) is the keep mask; u > c its negation.
    bool less = isa<LtOp, LeOp>(user) == drawFirst;
    Value m = mask(1.0 - q(*c));
    replaceResult(user, less ? m : NotOp::create(b, loc, m.getType(), m).getResult(), renamed);
    return success();
  }
  if (isa<AddOp>(user) && d.low == 0.0 && d.high == 1.0) {
    auto c = constantNumber(user->getOperand(user->getOperand(0) == u ? 1 : 0));
    Value sum = user->getResult(0);
    if (!c || *c < 0.0 || *c > 1.0 || sum.getType() != type || sum.use_empty() ||
        !llvm::all_of(sum.getUsers(), [](Operation *f) { return isa<FloorOp>(f); }))
      return failure();
    // floor(u + c) = 1 where u >= 1 - c, i.e. v <= c: not(v >= c).
    Value keep = mask(*c);
    Value m = NotOp::create(b, loc, keep.getType(), keep);
    Value one = CastOp::create(b, loc, type, m);
    for (Operation *floor : llvm::make_early_inc_range(sum.getUsers()))
      replaceResult(floor, one, renamed);
    renamed[sum] = Value();
    user->erase();
    return success();
  }
  return failure();
}
} // namespace

LogicalResult onnx_import::resolveRandomDraws(DropoutLedger &ledger, llvm::StringMap<Value> &values,
                                              const onnx::GraphProto &graph) {
  for (const auto &out : graph.output())
    for (RandomDraw &d : ledger.draws)
      if (values.lookup(out.name()) == d.op.getResult(0))
        return emitError(d.op.getLoc())
               << "unsupported: the random draw of " << d.node
               << " is a graph output (merak draws random numbers only as Bernoulli masks)";
  DenseMap<Value, Value> renamed; // a use's result -> its mask; a draw -> null
  for (RandomDraw &d : ledger.draws) {
    for (Operation *user : llvm::make_early_inc_range(d.op->getUsers()))
      if (failed(resolveUse(d, user, renamed)))
        return emitError(user->getLoc())
               << "unsupported use of the random draw of " << d.node << ": read by "
               << describeUser(user)
               << " (merak draws random numbers only as Bernoulli masks: the draw compared "
                  "with a constant probability, as torch exports bernoulli_, in-place dropout "
                  "and stochastic depth, or floor(draw + p), Hugging Face's drop_path)";
    renamed[d.op.getResult(0)] = Value();
    d.op->erase();
  }
  for (auto &entry : values) // once, for the names later nodes no longer read
    if (auto it = renamed.find(entry.getValue()); it != renamed.end())
      entry.getValue() = it->second;
  ledger.draws.clear();
  return success();
}

void onnx_import::registerRandomOps(OpRegistry &r) {
  r.add("RandomUniformLike", 1, randomUniformLike);
  r.sameAs("RandomUniformLike", 22, 1);
  r.add("RandomUniform", 1, randomUniform);
  r.sameAs("RandomUniform", 22, 1);
  r.add("Bernoulli", 15, bernoulli);
  r.sameAs("Bernoulli", 22, 15);
}
