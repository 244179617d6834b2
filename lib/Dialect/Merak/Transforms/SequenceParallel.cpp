//===- SequenceParallel.cpp - merak-sequence-parallel ---------------------===//
//
// Megatron-LM's sequence parallelism between the tensor-parallel regions
// (see ShardingPasses.td). With N token rows and C the last dimension:
//
//   y = all_reduce(p) {tp, sum} : [B, T, C]
//     -> ys = reduce_scatter(reshape(p) : [N, 1, C]) {tp, sum} : [N/tp, 1, C]
//   h = add(r, y) ; n = layer_norm(h, g, b)          (r replicated, g, b [C])
//     -> hs = add(local_shard(reshape(r)), ys)
//        ns = layer_norm(hs, tp_identity(g), tp_identity(b))
//   tp_identity(n)   (the next region's start)
//     -> tp_identity(reshape(all_gather(ns) {tp} : [N, 1, C]) : [B, T, C])
//
// A split value is the original's token rows flattened, split in tp equal
// parts; the rank stays, so that the cloned ops keep their attributes (a
// norm's axis, a softmax's). An op is split when its sharding rule says
// that each result row depends on the same rows of its operands only, or
// on one whole group of them (`rowwise` below; a MoE layer's combine):
//
//   y = all_reduce(e) {tp, sum} : [N k, C]          (experts split over tp)
//   s = reduce_sum(reshape(mul(y, w)) : [N, k, C]) {axes = [1]} : [N, C]
//     -> ys = reduce_scatter(e) : [N k / tp, C]
//        ss = reduce_sum(reshape(mul(ys, local_shard(w))) : [N / tp, k, C])
//
// anything else reads the gathered value.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKSEQUENCEPARALLEL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {

RankedTensorType tensorOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// The token rows of `t`: the product of every dimension but the last.
int64_t tokenRows(RankedTensorType t) {
  int64_t n = 1;
  for (int64_t d : t.getShape().drop_back())
    n *= d;
  return n;
}

/// `t` viewed as [rows, 1, ..., 1, C] (the same rank).
RankedTensorType rowsView(RankedTensorType t, int64_t rows) {
  SmallVector<int64_t> shape(t.getRank(), 1);
  shape.front() = rows;
  shape.back() = t.getShape().back();
  return RankedTensorType::get(shape, t.getElementType());
}

/// Whether `t` can carry split token rows: a tensor of rank >= 2 whose rows
/// divide by `tp`, of floats unless `anyElement` (what is split and read
/// again must be gathered, which takes floats).
bool splittable(Type type, int64_t tp, bool anyElement = false) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() && t.getRank() >= 2 &&
         (anyElement || isa<FloatType>(t.getElementType())) && tokenRows(t) % tp == 0 &&
         tokenRows(t) > 0;
}

/// Whether `op` at most reads memory (a dropout reads the training
/// position): splitting it over rows keeps its meaning where it records its
/// positions (ShardingRuleOpInterface::viewAsRows, recordSplit).
bool readsOnly(Operation *op) {
  if (isMemoryEffectFree(op))
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  return llvm::all_of(list, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Read>(e.getEffect());
  });
}

/// How an op may be split over the token rows: for each operand, whether
/// it carries the rows (split alike), some of them with the others
/// broadcast (a position table [1, T, C]: broadcast to the rows, then
/// split) or the same rows in other dimensions (a reshape's [B T, C] read
/// as [B, T, C]: reshaped), whole groups of rows, one per result row (a sum
/// over each token's top-k expert rows, [N, k, C] -> [N, C]: the rank's
/// part of the rows holds its groups whole), or none of them (kept whole).
enum class Operand { Rows, Broadcast, Grouped, Kept };
struct RowwiseOp {
  SmallVector<Operand> operands;
  /// A Grouped operand's view: its shape with the leading dimensions that
  /// index the result's rows folded into the first (this rank's part) and
  /// the groups' dimensions kept, so that the op's axes still hold.
  SmallVector<SmallVector<int64_t>> views;
};

/// The rowwise form of `op` (see the file comment), or nullopt.
std::optional<RowwiseOp> rowwise(Operation *op, int64_t tp) {
  auto iface = dyn_cast<ShardingRuleOpInterface>(op);
  if (!iface || op->getNumResults() == 0 || !readsOnly(op))
    return std::nullopt;
  std::optional<ShardingRule> rule = iface.getShardingRule();
  if (!rule || rule->results.size() != op->getNumResults() ||
      rule->operands.size() != op->getNumOperands())
    return std::nullopt;
  const ShardingRule::TensorFactors &first = rule->results.front();
  const size_t rank = first.size();
  if (rank < 2)
    return std::nullopt;
  // The row dimensions' factors, all parallel.
  ArrayRef<ShardingRule::DimFactors> rows(first.begin(), first.end() - 1);
  llvm::SmallDenseSet<unsigned, 8> rowFactors;
  for (const ShardingRule::DimFactors &d : rows)
    for (unsigned f : d) {
      if (rule->factors[f].kind != FactorKind::Parallel)
        return std::nullopt;
      rowFactors.insert(f);
    }
  auto sameRows = [&](const ShardingRule::TensorFactors &t) {
    if (t.size() != rank)
      return false;
    for (size_t d = 0; d + 1 < rank; ++d)
      if (t[d] != rows[d])
        return false;
    return llvm::none_of(t.back(), [&](unsigned f) { return rowFactors.count(f); });
  };
  auto noRows = [&](const ShardingRule::TensorFactors &t) {
    for (const ShardingRule::DimFactors &d : t)
      for (unsigned f : d)
        if (rowFactors.count(f))
          return false;
    return true;
  };
  // A result read nowhere yet (a dropout's mask, for its gradient) may be
  // of any element type.
  for (auto [result, factors] : llvm::zip(op->getResults(), rule->results))
    if (!sameRows(factors) || !splittable(result.getType(), tp, result.use_empty()) ||
        tokenRows(tensorOf(result)) != tokenRows(tensorOf(op->getResult(0))))
      return std::nullopt;
  // Some rows, each row dimension either the result's or broadcast (a 1, or
  // missing in front: numpy's right-aligned broadcasting).
  auto someRows = [&](Value v, const ShardingRule::TensorFactors &t) {
    if (t.empty() || t.size() > rank || !splittable(v.getType(), 1))
      return false;
    ArrayRef<int64_t> shape = tensorOf(v).getShape();
    const size_t missing = rank - t.size();
    for (size_t d = missing; d + 1 < rank; ++d)
      if (t[d - missing] != rows[d] && !(t[d - missing].empty() && shape[d - missing] == 1))
        return false;
    return llvm::none_of(t.back(), [&](unsigned f) { return rowFactors.count(f); });
  };
  // The row factors of a tensor in row-major order, whatever its dimensions.
  auto flatRows = [](const ShardingRule::TensorFactors &t) {
    SmallVector<unsigned> flat;
    for (size_t d = 0; d + 1 < t.size(); ++d)
      flat.append(t[d].begin(), t[d].end());
    return flat;
  };
  const SmallVector<unsigned> resultRows = flatRows(first);
  auto regrouped = [&](const ShardingRule::TensorFactors &t) {
    return t.size() >= 2 && flatRows(t) == resultRows &&
           llvm::none_of(t.back(), [&](unsigned f) { return rowFactors.count(f); });
  };
  // Groups: the operand's leading dimensions carry the result's rows, the
  // next ones factors that no result has (reduced within each group), its
  // last dimension the result's.
  const int64_t n = tokenRows(tensorOf(op->getResult(0)));
  auto groupedView =
      [&](Value v, const ShardingRule::TensorFactors &t) -> std::optional<SmallVector<int64_t>> {
    if (t.size() < 2 || t.back() != first.back() || !splittable(v.getType(), tp))
      return std::nullopt;
    SmallVector<unsigned> flat = flatRows(t);
    if (flat.size() <= resultRows.size() ||
        !llvm::equal(ArrayRef(flat).take_front(resultRows.size()), resultRows))
      return std::nullopt;
    for (unsigned f : ArrayRef(flat).drop_front(resultRows.size()))
      for (const ShardingRule::TensorFactors &res : rule->results)
        for (const ShardingRule::DimFactors &d : res)
          if (llvm::is_contained(d, f))
            return std::nullopt;
    size_t lead = 0, seen = 0;
    while (seen < resultRows.size())
      seen += t[lead++].size();
    if (seen != resultRows.size())
      return std::nullopt;
    SmallVector<int64_t> view(tensorOf(v).getShape());
    std::fill(view.begin(), view.begin() + lead, 1);
    view.front() = n / tp;
    return view;
  };
  RowwiseOp r;
  for (auto [operand, factors] : llvm::zip(op->getOperands(), rule->operands)) {
    std::optional<SmallVector<int64_t>> view;
    if (sameRows(factors) && splittable(operand.getType(), tp) && tokenRows(tensorOf(operand)) == n)
      r.operands.push_back(Operand::Rows);
    else if (noRows(factors))
      r.operands.push_back(Operand::Kept);
    else if (someRows(operand, factors) ||
             (regrouped(factors) && splittable(operand.getType(), tp) &&
              tokenRows(tensorOf(operand)) == n))
      r.operands.push_back(Operand::Broadcast);
    else if ((view = groupedView(operand, factors)))
      r.operands.push_back(Operand::Grouped);
    else
      return std::nullopt;
    r.views.push_back(view.value_or(SmallVector<int64_t>{}));
  }
  return r;
}

struct SequenceParallelPass : public merak::impl::MerakSequenceParallelBase<SequenceParallelPass> {
  using Base::Base;

  /// Original value -> its split rows [N/tp, 1, ..., C], and back.
  DenseMap<Value, Value> split, originalOf;
  /// Caches: a split value's gather, a replicated value's local rows, a
  /// kept operand's tp_identity.
  DenseMap<Value, Value> gathered, localRows, identity, broadcasts;

  Value gather(OpBuilder &b, Value original) {
    if (Value g = gathered.lookup(original))
      return g;
    RankedTensorType t = tensorOf(original);
    Location loc = original.getLoc();
    // Split rows that are reshaped split rows of another value (a router's
    // probabilities read as [N, 1, E] and as [N, E]): that value's gather,
    // reshaped (both keep the row-major order), one all-gather for both.
    Value rows = split.lookup(original);
    while (auto view = rows.getDefiningOp<ReshapeOp>()) {
      rows = view.getInput();
      if (Value from = originalOf.lookup(rows)) {
        Value g = ReshapeOp::create(b, loc, t, gather(b, from));
        return gathered[original] = g;
      }
    }
    Value all = AllGatherOp::create(b, loc, TypeRange{rowsView(t, tokenRows(t))},
                                    ValueRange{split.lookup(original)}, "tp")
                    .getResult(0);
    return gathered[original] = ReshapeOp::create(b, loc, t, all);
  }

  Value rowsOf(OpBuilder &b, Value v) {
    if (Value s = split.lookup(v))
      return s;
    Value &l = localRows[v];
    if (!l) {
      RankedTensorType t = tensorOf(v);
      Value view = ReshapeOp::create(b, v.getLoc(), rowsView(t, tokenRows(t)), v);
      l = LocalShardOp::create(b, v.getLoc(), rowsView(t, tokenRows(t) / tp), view, "tp");
    }
    return l;
  }

  /// This rank's rows of `v` broadcast to the row dimensions of `op`'s
  /// first result (its own last dimension kept): a reshape of its rows when
  /// only dimensions of size 1 differ (the same rows in another rank), else
  /// the broadcast's rows (a position table); null for a split value whose
  /// rows are not the op's.
  Value broadcastRows(OpBuilder &b, Value v, Operation *op) {
    SmallVector<int64_t> shape(tensorOf(op->getResult(0)).getShape());
    shape.back() = tensorOf(v).getShape().back();
    auto full = RankedTensorType::get(shape, tensorOf(v).getElementType());
    const int64_t n = tokenRows(full);
    if (tokenRows(tensorOf(v)) == n)
      return ReshapeOp::create(b, v.getLoc(), rowsView(full, n / tp), rowsOf(b, v));
    if (split.count(v))
      return {};
    Value &wide = broadcasts[v];
    if (!wide)
      wide = BroadcastOp::create(b, v.getLoc(), full, v);
    return rowsOf(b, wide);
  }

  /// This rank's rows of `v` viewed as `view` (whole groups of rows).
  Value groupedRows(OpBuilder &b, Value v, ArrayRef<int64_t> view) {
    auto type = RankedTensorType::get(view, tensorOf(v).getElementType());
    return ReshapeOp::create(b, v.getLoc(), type, rowsOf(b, v));
  }

  Value kept(OpBuilder &b, Value v) {
    if (!isa<FloatType>(getElementTypeOrSelf(v.getType())))
      return v;
    Value &k = identity[v];
    if (!k) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(v);
      k = TpIdentityOp::create(b, v.getLoc(), v);
    }
    return k;
  }

  /// Splits `op` over the rows (its clone) or returns failure, leaving
  /// nothing behind.
  LogicalResult splitOp(OpBuilder &b, Operation *op, const RowwiseOp &r) {
    IRMapping map;
    // A split value the rule reads without its rows (a contraction's
    // operand) is read whole: the op is not split.
    for (auto [operand, kind] : llvm::zip(op->getOperands(), r.operands))
      if (kind == Operand::Kept && split.count(operand))
        return failure();
    for (auto [operand, kind, view] : llvm::zip(op->getOperands(), r.operands, r.views)) {
      Value mapped = kind == Operand::Rows        ? rowsOf(b, operand)
                     : kind == Operand::Broadcast ? broadcastRows(b, operand, op)
                     : kind == Operand::Grouped   ? groupedRows(b, operand, view)
                                                  : kept(b, operand);
      if (!mapped)
        return failure();
      map.map(operand, mapped);
    }
    Operation *clone = b.clone(*op, map);
    for (Value res : clone->getResults()) {
      RankedTensorType t = tensorOf(res);
      res.setType(rowsView(t, tokenRows(t) / tp));
    }
    auto iface = cast<ShardingRuleOpInterface>(clone);
    if (failed(iface.viewAsRows(tensorOf(op->getResult(0)).getShape()))) {
      clone->erase();
      return failure();
    }
    {
      ScopedDiagnosticHandler quiet(op->getContext(), [](Diagnostic &) { return success(); });
      if (failed(verify(clone))) {
        clone->erase();
        return failure();
      }
    }
    iface.recordSplit("tp", 0, 1, tp);
    for (auto [res, rows] : llvm::zip(op->getResults(), clone->getResults())) {
      split[res] = rows;
      originalOf[rows] = res;
    }
    return success();
  }

  void runOnOperation() override {
    // The maps hold this run's values only (a pass instance may run again).
    split.clear(), originalOf.clear(), gathered.clear(), localRows.clear(), identity.clear(),
        broadcasts.clear();
    if (tp <= 1)
      return;
    auto fn = getOperation().lookupSymbol<func::FuncOp>(entry);
    if (!fn || fn.getBody().empty())
      return;
    Block &body = fn.getBody().front();
    OpBuilder b(&getContext());
    SmallVector<Operation *> replaced;
    bool remarked = false;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      b.setInsertionPoint(&op);
      // A block whose token rows do not divide (Megatron-LM requires a
      // sequence divisible by tp): said once.
      if (auto end = dyn_cast<AllReduceOp>(op);
          end && !remarked && end.getGroup() == "tp" && end.getNumOperands() == 1 &&
          splittable(end.getType(0), 1) && !splittable(end.getType(0), tp)) {
        end.emitRemark("merak-sequence-parallel: ")
            << tokenRows(tensorOf(end.getResult(0))) << " token rows per micro-batch do not "
            << "divide by tp=" << static_cast<int64_t>(tp)
            << ": this block's neighbours stay replicated";
        remarked = true;
      }
      // A region's end (not one that only region starts read, as a norm's
      // statistics summed inside a region: gathered again at once).
      if (auto end = dyn_cast<AllReduceOp>(op);
          end && end.getGroup() == "tp" && end.getReduction() == "sum" &&
          end.getNumOperands() == 1 && splittable(end.getType(0), tp) &&
          llvm::any_of(end->getUsers(),
                       [&](Operation *u) { return !isa<TpIdentityOp>(u) && rowwise(u, tp); })) {
        RankedTensorType t = tensorOf(end.getResult(0));
        int64_t n = tokenRows(t);
        Value view = ReshapeOp::create(b, end.getLoc(), rowsView(t, n), end.getOperand(0));
        Value rows = ReduceScatterOp::create(b, end.getLoc(), TypeRange{rowsView(t, n / tp)},
                                             ValueRange{view}, "tp", "sum")
                         .getResult(0);
        split[end.getResult(0)] = rows;
        originalOf[rows] = end.getResult(0);
        replaced.push_back(&op);
        continue;
      }
      if (llvm::none_of(op.getOperands(), [&](Value v) { return split.count(v); }))
        continue;
      // A region's start reads the gathered rows (its operand is replicated
      // over tp by definition).
      std::optional<RowwiseOp> r;
      if (!isa<TpIdentityOp>(op))
        r = rowwise(&op, tp);
      if (r && succeeded(splitOp(b, &op, *r))) {
        replaced.push_back(&op);
        continue;
      }
      for (OpOperand &use : op.getOpOperands())
        if (split.count(use.get()))
          use.set(gather(b, use.get()));
    }
    for (Operation *op : llvm::reverse(replaced)) {
      if (!op->use_empty()) {
        op->emitError("merak-sequence-parallel: a split op is still read whole");
        return signalPassFailure();
      }
      op->erase();
    }
  }
};

} // namespace
