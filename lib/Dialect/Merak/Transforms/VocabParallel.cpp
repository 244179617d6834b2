//===- VocabParallel.cpp - merak-tensor-parallel's vocabulary split -------===//
//
// See VocabParallel.h. The rewrite, for V = tp * Vl (padded when V does not
// divide; the padding rows are zero and no id selects them; a token table
// of its own, split without a head, is the lookup part alone):
//
//   logits = tail(matmul(x, transpose(W)) [+ b])    (W [V, C]; or matmul(x, W), W [C, V])
//     -> logits_r = tail(matmul(tp_identity(x), transpose(W_r)) [+ b_r])   (split)
//   e = gather(W, ids)          (and every lookup of an untied table [V, C'])
//     -> s = ids - rank * Vl; in = 0 <= s < Vl
//        e = all_reduce_tp(where(in, gather(W_r, where(in, s, 0)), 0))
//
//===----------------------------------------------------------------------===//
#include "VocabParallel.h"

#include "merak/Dialect/Merak/Interfaces/ShardingRule.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::merak;

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The bias `b` [V] of `add`, the other operand being `head`: a float
/// parameter read only there (directly); null otherwise.
ParamOp headBias(AddOp add, MatmulOp head,
                 const llvm::StringMap<SmallVector<GetParamOp>> &getters) {
  Value other = add.getLhs() == head.getResult() ? add.getRhs() : add.getLhs();
  auto get = other.getDefiningOp<GetParamOp>();
  int64_t v = tensorOf(head.getResult()).getShape().back();
  if (!get || !other.hasOneUse() || getters.lookup(get.getName()).size() != 1 ||
      tensorOf(other).getShape() != ArrayRef<int64_t>{v})
    return {};
  auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
  return param && isa<FloatType>(param.getTensorType().getElementType()) ? param : ParamOp();
}

/// The operand of `op` whose columns `op`'s result columns are computed
/// from, column by column: by `op`'s sharding rule, the result's last
/// dimension is one parallel factor held by exactly one operand, as its last
/// dimension, and by no other dimension (the other operands broadcast along
/// it), and nothing is reduced (a matmul, the head itself, is not one).
/// Null otherwise.
Value columnSource(Operation *op) {
  auto iface = dyn_cast<ShardingRuleOpInterface>(op);
  std::optional<ShardingRule> rule = iface ? iface.getShardingRule() : std::nullopt;
  if (!rule || rule->results.size() != 1 || rule->results[0].empty() ||
      llvm::any_of(rule->factors,
                   [](const ShardingRule::Factor &f) { return f.kind != FactorKind::Parallel; }))
    return {};
  const ShardingRule::DimFactors &last = rule->results[0].back();
  if (last.size() != 1)
    return {};
  const unsigned f = last[0];
  // The dimensions of `t` holding f: its last one alone, or none.
  auto onlyLast = [&](const ShardingRule::TensorFactors &t, bool &holds) {
    auto has = [&](const ShardingRule::DimFactors &d) { return llvm::is_contained(d, f); };
    holds = llvm::any_of(t, has);
    return !holds || (llvm::count_if(t, has) == 1 && t.back().size() == 1 && has(t.back()));
  };
  bool holds;
  if (!onlyLast(rule->results[0], holds))
    return {};
  Value from;
  for (auto [operand, factors] : llvm::zip(op->getOperands(), rule->operands)) {
    if (!onlyLast(factors, holds) || (holds && from))
      return {};
    from = holds ? operand : from;
  }
  return from;
}

/// `get`'s reads other than `except` that are lookups `merak.gather
/// get[ids] axis = 0`; false when it is read in any other way.
bool collectLookups(GetParamOp get, SmallVectorImpl<GatherOp> &lookups,
                    Operation *except = nullptr) {
  for (Operation *user : get.getResult().getUsers()) {
    if (user == except)
      continue;
    auto g = dyn_cast<GatherOp>(user);
    if (!g || g.getData() != get.getResult() || g.getAxis() != 0)
      return false;
    lookups.push_back(g);
  }
  return true;
}

/// The embedding tables among the parameters: float [N, C] ones not yet
/// split, read only by lookups (appended to `lookups`), that `keep` accepts
/// (the table's type and its lookups), in name order. An LM head's weight is
/// never one (the head reads it through a transpose or a matmul).
SmallVector<ParamOp> lookupTables(const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                                  function_ref<bool(RankedTensorType, ArrayRef<GatherOp>)> keep,
                                  SmallVectorImpl<GatherOp> &lookups) {
  SmallVector<std::pair<StringRef, ParamOp>> found;
  for (const auto &[name, gets] : getters) {
    if (gets.empty())
      continue;
    GetParamOp first = gets.front();
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(first, first.getNameAttr());
    auto t = param ? param.getTensorType() : RankedTensorType();
    if (!t || t.getRank() != 2 || !isa<FloatType>(t.getElementType()) || getShardLayout(param))
      continue;
    SmallVector<GatherOp> reads;
    if (llvm::all_of(gets, [&](GetParamOp g) { return collectLookups(g, reads); }) &&
        !reads.empty() && keep(t, reads)) {
      found.push_back({param.getSymName(), param});
      lookups.append(reads);
    }
  }
  llvm::sort(found, [](auto &a, auto &b) { return a.first < b.first; });
  return llvm::to_vector(llvm::make_second_range(found));
}

} // namespace

FailureOr<VocabHead>
mlir::merak::findVocabHead(func::FuncOp fn, const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                           int64_t tp, std::string &why) {
  auto fail = [&](const Twine &reason) -> FailureOr<VocabHead> {
    why = reason.str();
    return failure();
  };
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  if (ret.getNumOperands() != 1)
    return fail("needs @" + fn.getSymName() + " to return the logits only");
  VocabHead h;
  Value logits = ret.getOperand(0);
  for (Operation *def = logits.getDefiningOp(); def && logits.hasOneUse();
       def = logits.getDefiningOp()) {
    Value from = columnSource(def);
    if (!from)
      break;
    h.tail.push_back(def);
    logits = from;
  }
  std::reverse(h.tail.begin(), h.tail.end());
  if ((h.biasAdd = logits.getDefiningOp<AddOp>())) {
    for (Value in : h.biasAdd->getOperands())
      if (auto mm = in.getDefiningOp<MatmulOp>(); mm && !h.head)
        h.head = mm;
    if (h.head && !(h.bias = headBias(h.biasAdd, h.head, getters)))
      return fail("the LM head's bias is not a [V] parameter read only there");
  } else {
    h.head = logits.getDefiningOp<MatmulOp>();
  }
  h.transpose = h.head ? h.head.getRhs().getDefiningOp<TransposeOp>() : TransposeOp();
  GetParamOp get = h.transpose ? h.transpose.getInput().getDefiningOp<GetParamOp>()
                   : h.head    ? h.head.getRhs().getDefiningOp<GetParamOp>()
                               : GetParamOp();
  auto rowParallel = [](Value v) { return v && v.getDefiningOp<AllReduceOp>(); };
  if (!h.head &&
      (rowParallel(logits) || (h.biasAdd && llvm::any_of(h.biasAdd->getOperands(), rowParallel))))
    return fail("the last matmul is the row-parallel end of a Linear pair (already split on "
                "its input features)");
  if (!h.head || !h.head.getResult().hasOneUse() || !get ||
      (h.transpose &&
       (h.transpose.getPerm() != ArrayRef<int64_t>{1, 0} || !h.transpose.getResult().hasOneUse())))
    return fail("the result is not an LM head matmul(x, transpose(W)) with W [V, C] or "
                "matmul(x, W) with W [C, V] (plus a bias, then column-wise ops), W a parameter");
  h.weight = SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
  auto wt = h.weight.getTensorType();
  if (wt.getRank() != 2 || !isa<FloatType>(wt.getElementType()))
    return fail("the LM head weight is not a 2-d float parameter");
  if (!h.transpose) {
    // [C, V]: read by the head alone (a lookup table would be [V, C]); a
    // padded split of the columns is not supported.
    h.axis = 1;
    if (!get.getResult().hasOneUse() || getters.lookup(h.weight.getSymName()).size() != 1)
      return fail("the [C, V] LM head weight '" + h.weight.getSymName() +
                  "' is read by something other than the head");
    if (wt.getDimSize(1) % tp)
      return fail("the LM head '" + h.weight.getSymName() + "' is [C, V] = [" +
                  Twine(wt.getDimSize(0)) + ", " + Twine(wt.getDimSize(1)) + "] and V does not " +
                  "divide by tp " + Twine(tp) + " (only a [V, C] head is padded)");
  }
  for (GetParamOp read : getters.lookup(h.weight.getSymName())) {
    if (h.transpose && !collectLookups(read, h.lookups, h.transpose))
      return fail("'" + h.weight.getSymName() +
                  "' is read by something other than the LM head and embedding "
                  "lookups (merak.gather axis = 0)");
  }
  // Untied input embeddings of the same vocabulary (Llama's embed_tokens).
  int64_t v = wt.getDimSize(h.axis);
  h.tables = lookupTables(
      getters, [&](RankedTensorType t, ArrayRef<GatherOp>) { return t.getDimSize(0) == v; },
      h.lookups);
  return h;
}

namespace {

/// Shards `param` on `axis` over `tp` ranks (ceil(N / tp) each, the last
/// padded with zeros when N does not divide); returns the local length.
int64_t shardRows(ParamOp param, const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                  int64_t tp, int64_t axis = 0) {
  auto t = param.getTensorType();
  int64_t n = t.getDimSize(axis), nl = (n + tp - 1) / tp;
  SmallVector<int64_t> shape(t.getShape());
  shape[axis] = nl;
  auto local = RankedTensorType::get(shape, t.getElementType());
  param.setTypeAttr(TypeAttr::get(local));
  setShardLayout(param, ShardLayout{axis, tp, 1, nl * tp == n ? 0 : n});
  for (GetParamOp get : getters.lookup(param.getSymName()))
    get.getResult().setType(local);
  return nl;
}

/// A lookup of a table split in shards of `rows`: ids - rank * rows,
/// masked to [0, rows), the rows of other ranks zeroed, summed over tp.
void maskLookup(GatherOp g, int64_t rows) {
  OpBuilder b(g);
  Location loc = g.getLoc();
  auto i64 = b.getI64Type();
  auto scalar = [&](Type type, Attribute value) -> Value {
    auto st = RankedTensorType::get({}, type);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(st, value));
  };
  Value ids = g.getIndices();
  auto idsType = tensorOf(ids);
  if (idsType.getElementType() != i64)
    ids = CastOp::create(b, loc, RankedTensorType::get(idsType.getShape(), i64), ids);
  Value rank = GroupRankOp::create(b, loc, RankedTensorType::get({}, i64), "tp");
  Value offset = MulOp::create(b, loc, rank, scalar(i64, b.getI64IntegerAttr(rows)));
  Value shifted = SubOp::create(b, loc, ids, offset);
  Value lo = GeOp::create(b, loc, shifted, scalar(i64, b.getI64IntegerAttr(0)));
  Value hi = LtOp::create(b, loc, shifted, scalar(i64, b.getI64IntegerAttr(rows)));
  Value inside = AndOp::create(b, loc, lo, hi);
  Value safe = WhereOp::create(b, loc, inside, shifted, scalar(i64, b.getI64IntegerAttr(0)));
  g.getIndicesMutable().assign(safe);
  b.setInsertionPointAfter(g);
  SmallVector<int64_t> maskShape(idsType.getShape());
  maskShape.push_back(1);
  Value mask = ReshapeOp::create(b, loc, RankedTensorType::get(maskShape, b.getI1Type()), inside);
  Type et = tensorOf(g.getResult()).getElementType();
  Value zero = scalar(et, b.getFloatAttr(et, 0.0));
  Value part = WhereOp::create(b, loc, mask, g.getResult(), zero);
  auto sum = AllReduceOp::create(b, loc, ValueRange{part}, "tp", "sum");
  g.getResult().replaceAllUsesExcept(sum.getResult(0), part.getDefiningOp());
}

/// `v` is a function argument, or one through casts and reshapes (the
/// token ids a model is fed).
bool fromArgument(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<CastOp, ReshapeOp>(def))
      return false;
    v = def->getOperand(0);
  }
  return isa<BlockArgument>(v);
}

} // namespace

SmallVector<ParamOp>
mlir::merak::findTokenTables(const llvm::StringMap<SmallVector<GetParamOp>> &getters) {
  SmallVector<GatherOp> lookups;
  return lookupTables(
      getters,
      [](RankedTensorType t, ArrayRef<GatherOp> reads) {
        return t.getDimSize(0) >= t.getDimSize(1) &&
               llvm::all_of(reads, [](GatherOp g) { return fromArgument(g.getIndices()); });
      },
      lookups);
}

void mlir::merak::splitTokenTables(ArrayRef<ParamOp> tables,
                                   const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                                   int64_t tp) {
  for (ParamOp table : tables) {
    SmallVector<GatherOp> lookups;
    for (GetParamOp get : getters.lookup(table.getSymName()))
      collectLookups(get, lookups);
    int64_t rows = shardRows(table, getters, tp);
    for (GatherOp g : lookups)
      maskLookup(g, rows);
  }
}

void mlir::merak::splitVocabulary(func::FuncOp fn, VocabHead h,
                                  const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                                  int64_t tp) {
  auto wt = h.weight.getTensorType();
  int64_t v = wt.getDimSize(h.axis);
  // Shard the table (and the bias); the LM head takes f on its input.
  int64_t vl = shardRows(h.weight, getters, tp, h.axis);
  for (ParamOp table : h.tables)
    shardRows(table, getters, tp);
  if (h.transpose)
    h.transpose.getResult().setType(
        RankedTensorType::get({wt.getDimSize(1), vl}, wt.getElementType()));
  auto logits = tensorOf(h.head.getResult());
  SmallVector<int64_t> logitsShape(logits.getShape());
  logitsShape.back() = vl;
  auto localLogits = RankedTensorType::get(logitsShape, logits.getElementType());
  h.head.getResult().setType(localLogits);
  if (h.bias) {
    shardRows(h.bias, getters, tp);
    h.biasAdd.getResult().setType(localLogits);
  }
  Value out = h.biasAdd ? h.biasAdd.getResult() : h.head.getResult();
  for (Operation *op : h.tail) {
    auto t = tensorOf(op->getResult(0));
    SmallVector<int64_t> shape(t.getShape());
    shape.back() = vl;
    op->getResult(0).setType(RankedTensorType::get(shape, t.getElementType()));
    auto iface = cast<ShardingRuleOpInterface>(op);
    iface.adaptToLocalTypes();
    iface.recordSplit("tp", t.getRank() - 1, 1, tp);
    out = op->getResult(0);
  }
  OpBuilder b(h.head);
  h.head.getLhsMutable().assign(TpIdentityOp::create(b, h.head.getLoc(), h.head.getLhs()));
  fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), {tensorOf(out)}));
  fn.setResultAttr(0, kVocabParallelAttr, b.getStringAttr("tp"));
  if (vl * tp != v)
    fn.setResultAttr(0, kVocabClassesAttr, b.getI64IntegerAttr(v));
  for (GatherOp g : h.lookups)
    maskLookup(g, vl);
}
