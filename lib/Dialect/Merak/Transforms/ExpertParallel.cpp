//===- ExpertParallel.cpp - merak-expert-parallel -------------------------===//
//
// Expert parallelism with Megatron-LM's all-gather dispatcher (see
// ShardingPasses.td). Per expert GEMM, with W a parameter [E, ...] read only
// by expert GEMMs:
//
//   expert_matmul(x [S, K], W [E, O, K][e [S]])                  -> [S, O]
//     => reduce_scatter_ep(expert_matmul(all_gather_ep(x) [ep S, K],
//            W [E/ep, O, K][all_gather_ep(e) first group_rank_ep * E/ep]))
//
// W becomes this rank's E/ep experts (merak.shard axis 0, group "ep"). A
// row of another rank's expert is a zero row here, so the sum of the
// reduce-scatter is exact. With the all-to-all dispatcher (the default)
// the all-gather of x and the reduce-scatter become merak.all_to_all's
// dispatch and combine, which move only the rows each rank's experts need
// and give the same values; the ids are all-gathered either way. The
// all-gathers and dispatches of one value and the `first` of one E/ep are
// built once, before the first GEMM that reads them.
//
// Dynamic shadowing (`shadow` = M slots, alltoall only; FasterMoE):
//
//   %r, %slots = expert_shadow_plan %eg       // once per layer (its ids)
//   %ws = expert_shadow %w, %slots            // the hot experts' weights
//   %yl = expert_matmul %xd, %w[%r first %first]
//             shadow %ws[first E + group_rank_ep * M]   // one grouped GEMM
//
// with %xd and the combine routed by %r (`shadow_slots = M`): the rows of
// a shadowed expert stay on their rank and meet its copy there.
//
// Dynamic placement (`rebalance-every` = K > 0; FlexMoE), per layer n:
//
//   merak.param @moe.placement.n : tensor<Exi64> = [0, 1, .. E-1]  // "frozen"
//   %eg = expert_place all_gather_ep(e), @moe.placement.n table = n
//
// before the shadowing plan and the dispatch: logical expert l lives in
// slot placement[l]. The layer's weights' merak.shard names table n; the
// trainer permutes those experts (and their optimizer state) every K
// steps and writes the new table.
//
// One dispatch per expert MLP with compact rows (an expert capacity): the
// row-wise ops between a GEMM's combine and the next GEMM's dispatch by the
// same ids (the activation: SwiGLU's slices, sigmoid and products) run on
// the experts' side instead,
//
//   dispatch(f(combine(y)))                   -> f(y)
//   dispatch(local_shard_tp(f(all_gather_tp(combine(y))))) -> f(y)   (tp)
//
// on the dispatched rows, as Megatron-Core dispatches once per layer.
// Positional rows (ep x the tokens, zero where another rank's expert) keep
// both exchanges: the activation on them would cost more than they do;
// with tp the activation runs on the tp rank's own combined rows instead,
//
//   local_shard_tp(f(all_gather_tp(combine(y)))) -> f(combine(y)).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKEXPERTPARALLEL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A builder right after `v`'s definition (at its block's start for an
/// argument).
OpBuilder after(Value v) {
  OpBuilder b(v.getContext());
  b.setInsertionPointAfterValue(v);
  return b;
}

/// `t` with its leading dimension multiplied by `factor`.
RankedTensorType scaleLeading(RankedTensorType t, int64_t num, int64_t den) {
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = shape[0] * num / den;
  return RankedTensorType::get(shape, t.getElementType());
}

struct MerakExpertParallelPass : merak::impl::MerakExpertParallelBase<MerakExpertParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ep < 1) {
      module.emitError("merak-expert-parallel: ep must be at least 1, got ") << (int64_t)ep;
      return signalPassFailure();
    }
    if (dispatcher != "alltoall" && dispatcher != "allgather") {
      module.emitError("merak-expert-parallel: dispatcher must be alltoall or allgather, got '")
          << dispatcher << "'";
      return signalPassFailure();
    }
    if (shadow < 0 || shadowMinRows < 0 || rebalanceEvery < 0) {
      module.emitError("merak-expert-parallel: shadow, shadow-min-rows and rebalance-every must "
                       "not be negative");
      return signalPassFailure();
    }
    if (chunks < 1 || (chunks > 1 && (shadow > 0 || dispatcher != "alltoall"))) {
      module.emitError("merak-expert-parallel: chunks must be at least 1, and more than 1 "
                       "needs the alltoall dispatcher without shadowing");
      return signalPassFailure();
    }
    if ((shadow > 0 || hierarchical) && dispatcher != "alltoall") {
      module.emitError("merak-expert-parallel: ")
          << (hierarchical ? "the hierarchical all-to-all" : "shadowing")
          << " needs the alltoall dispatcher, not '" << dispatcher << "'";
      return signalPassFailure();
    }
    if (ep == 1)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-expert-parallel: no single-block func.func @") << entry;
      return signalPassFailure();
    }
    SmallVector<ExpertMatmulOp> gemms;
    fn.walk([&](ExpertMatmulOp op) {
      if (!op.getFirst())
        gemms.push_back(op);
    });
    if (gemms.empty()) {
      fn.emitError("merak-expert-parallel: --ep ")
          << (int64_t)ep
          << " needs a Mixture-of-Experts model, but @" << entry
          << " has no expert GEMM (merak.expert_matmul, formed by merak-fuse-experts from "
             "transformers' batched_mm experts)";
      return signalPassFailure();
    }
    FailureOr<SmallVector<ParamOp>> params = checkWeights(module, fn, gemms);
    if (failed(params))
      return signalPassFailure();
    // With tp, each tp rank takes its share of every GEMM's rows (not with
    // rebalancing: the tp ranks' own row counts could place the replicated
    // experts differently).
    const bool splitTp = tp > 1 && rebalanceEvery == 0;
    for (ExpertMatmulOp op : gemms) {
      int64_t rows = tensorOf(op.getInput()).getDimSize(0);
      if (splitTp && rows % tp == 0)
        rows /= tp;
      if (rows % chunks != 0) {
        op.emitError("merak-expert-parallel: ")
            << rows << " rows do not split into " << (int64_t)chunks << " chunks";
        return signalPassFailure();
      }
    }
    if (rebalanceEvery > 0 && failed(assignTables(module, gemms)))
      return signalPassFailure();
    for (ParamOp p : *params)
      shardParam(module, fn, p);
    if (splitTp)
      for (ExpertMatmulOp &op : gemms)
        op = splitOverTp(op);
    if (shadow > 0 || rebalanceEvery > 0)
      for (ExpertMatmulOp op : gemms)
        layers[ids64(op)].push_back(op);
    for (ExpertMatmulOp op : gemms)
      rewrite(op);
    if (chunks == 1 && dispatcher == "alltoall") {
      SmallVector<AllToAllOp> dispatches;
      fn.walk([&](AllToAllOp d) {
        if (!d.getCombine())
          dispatches.push_back(d);
      });
      for (AllToAllOp d : dispatches)
        dispatchOnce(d);
    }
  }

  /// Whether `op` computes each row of its [rows, C] results (a split's
  /// several) from the same row of the operands that have rows (`rowsOf`:
  /// the others have none: scalars, broadcast vectors), by its sharding
  /// rule; at most reads memory.
  static bool rowwise(Operation *op, int64_t rows, SmallVectorImpl<Value> &rowsOf) {
    auto iface = dyn_cast<ShardingRuleOpInterface>(op);
    if (!iface || op->getNumResults() == 0 || !isMemoryEffectFree(op))
      return false;
    std::optional<ShardingRule> rule = iface.getShardingRule();
    if (!rule || rule->operands.size() != op->getNumOperands() ||
        rule->results.size() != op->getNumResults() || rule->results[0].size() != 2 ||
        rule->results[0].front().size() != 1)
      return false;
    const unsigned f = rule->results[0].front().front();
    if (rule->factors[f].kind != FactorKind::Parallel)
      return false;
    for (auto [r, t] : llvm::zip(op->getResults(), rule->results))
      if (tensorOf(r).getRank() != 2 || tensorOf(r).getDimSize(0) != rows || t.size() != 2 ||
          t.front() != ShardingRule::DimFactors{f})
        return false;
    for (auto [v, t] : llvm::zip(op->getOperands(), rule->operands)) {
      bool carries = !t.empty() && t.front().size() == 1 && t.front().front() == f;
      for (size_t d = carries ? 1 : 0; d < t.size(); ++d)
        if (llvm::is_contained(t[d], f))
          return false;
      if (carries && (t.size() != 2 || tensorOf(v).getDimSize(0) != rows))
        return false;
      if (carries)
        rowsOf.push_back(v);
    }
    return true;
  }

  /// The dispatch `d` of row-wise functions of one combine's rows, by the
  /// same ids and layout, folded onto the experts' side (see the file
  /// comment) when nothing else reads the combine or the functions, and the
  /// rows are compact: positional rows are ep x the tokens (each group
  /// rank's rows, zero where another rank's expert), on which the functions
  /// would cost more than the exchanges they save.
  void dispatchOnce(AllToAllOp d) {
    Value in = d.getInput();
    auto cut = in.getDefiningOp<LocalShardOp>();
    if (cut && (cut.getGroup() != "tp" || !cut->hasOneUse()))
      return;
    // Positional rows: with tp, the functions on this tp rank's combined
    // rows (no all-gather and cut between); else nothing.
    const bool expertSide = d.getCompact().has_value();
    if (!expertSide && !cut)
      return;
    if (cut)
      in = cut.getInput();
    const int64_t rows = tensorOf(in).getDimSize(0);
    llvm::SetVector<Operation *> chain; // the functions and the tp gathers
    AllToAllOp combine;
    SmallVector<Value> work{in};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def)
        return;
      if (auto g = dyn_cast<AllGatherOp>(def);
          g && cut && g.getGroup() == "tp" && g.getNumOperands() == 1)
        def = g.getInputs()[0].getDefiningOp(), chain.insert(g);
      if (auto c = dyn_cast_or_null<AllToAllOp>(def); c && c.getCombine()) {
        if (combine && combine != c)
          return;
        combine = c;
        continue;
      }
      SmallVector<Value> next;
      if (!def || isa<AllGatherOp>(def) || !rowwise(def, rows, next))
        return;
      if (chain.insert(def))
        work.append(next);
    }
    if (!combine || combine.getExperts() != d.getExperts() ||
        combine.getExpertsPerRank() != d.getExpertsPerRank() ||
        combine.getShadowSlots() != d.getShadowSlots() ||
        combine.getHierarchical() != d.getHierarchical() ||
        combine.getCompact() != d.getCompact() ||
        (cut && llvm::none_of(chain, [](Operation *op) { return isa<AllGatherOp>(op); })))
      return;
    if (expertSide) // else kept: the functions read it
      chain.insert(combine);
    Operation *end = cut ? cut.getOperation() : d.getOperation();
    for (Operation *op : chain)
      for (Operation *user : op->getUsers())
        if (user != end && !chain.contains(user))
          return;
    // The functions in program order on the experts' rows (or, positional
    // with tp, on this tp rank's combined rows).
    Value y = expertSide ? combine.getInput() : combine.getResult();
    SmallVector<Operation *> order = llvm::to_vector(llvm::make_filter_range(
        chain, [](Operation *op) { return !isa<AllToAllOp, AllGatherOp>(op); }));
    llvm::sort(order, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    IRMapping map;
    map.map(combine.getResult(), y);
    for (Operation *op : chain)
      if (auto g = dyn_cast<AllGatherOp>(op))
        map.map(g.getResult(0), y);
    OpBuilder b(end);
    const int64_t expertRows = tensorOf(y).getDimSize(0);
    for (Operation *op : order) {
      Operation *c = b.clone(*op, map);
      for (Value r : c->getResults()) {
        RankedTensorType t = tensorOf(r);
        r.setType(RankedTensorType::get({expertRows, t.getDimSize(1)}, t.getElementType()));
      }
      cast<ShardingRuleOpInterface>(c).adaptToLocalTypes();
      map.map(op->getResults(), c->getResults());
    }
    (expertSide ? d.getResult() : cut.getResult()).replaceAllUsesWith(map.lookup(in));
    if (expertSide)
      d.erase();
    if (cut)
      cut.erase();
    for (Operation *op : llvm::reverse(order))
      op->erase();
    for (Operation *op : chain)
      if (isa<AllGatherOp>(op))
        op->erase();
    if (expertSide)
      combine.erase();
  }

  /// The expert GEMM `op` on this tp rank's rows: its input and ids cut by
  /// `merak.local_shard` over "tp" (once per value), its weight read
  /// through `merak.tp_identity` (the ranks' partial weight gradients
  /// summed), its result all-gathered over "tp"; returns the new GEMM (`op`
  /// itself, kept, when its rows do not divide by tp).
  ExpertMatmulOp splitOverTp(ExpertMatmulOp op) {
    if (tensorOf(op.getInput()).getDimSize(0) % tp != 0)
      return op;
    auto once = [&](Value v, DenseMap<Value, Value> &cache, auto build) {
      Value &done = cache[v];
      if (!done) {
        OpBuilder b = after(v);
        done = build(b, v);
      }
      return done;
    };
    auto rows = [&](OpBuilder &b, Value v) -> Value {
      return LocalShardOp::create(b, v.getLoc(), scaleLeading(tensorOf(v), 1, tp), v, "tp");
    };
    auto summed = [&](OpBuilder &b, Value w) -> Value {
      return TpIdentityOp::create(b, w.getLoc(), w);
    };
    Value x = once(op.getInput(), tpRows, rows), ids = once(ids64(op), tpRows, rows),
          w = once(op.getWeight(), tpWeights, summed);
    OpBuilder b(op);
    RankedTensorType all = tensorOf(op.getResult());
    auto local = ExpertMatmulOp::create(b, op.getLoc(), scaleLeading(all, 1, tp), x, w, ids,
                                        Value(), Value(), Value(), op.getTransposeWeight(),
                                        op.getTotalExpertsAttr(), op.getGroupRowsAttr());
    Value y =
        AllGatherOp::create(b, op.getLoc(), TypeRange{all}, ValueRange{local}, "tp").getResult(0);
    op.getResult().replaceAllUsesWith(y);
    op.erase();
    return local;
  }

  /// Dynamic placement: one table per layer (by its ids), named on each of
  /// its weights; a weight two layers read cannot follow both.
  LogicalResult assignTables(ModuleOp module, ArrayRef<ExpertMatmulOp> gemms) {
    for (ExpertMatmulOp op : gemms) {
      Value ids = ids64(op);
      auto [it, added] = tables.try_emplace(ids, (int64_t)tables.size());
      auto get = op.getWeight().getDefiningOp<GetParamOp>();
      auto [pt, fresh] = paramTable.try_emplace(get.getNameAttr().getAttr(), it->second);
      if (!fresh && pt->second != it->second)
        return op.emitError("merak-expert-parallel: the expert weight @")
               << get.getName()
               << " is read by two Mixture-of-Experts layers, so one placement table "
                  "(--moe-rebalance-every) cannot order it",
               failure();
    }
    return success();
  }

  /// The weights' parameters, after checking every one (before any change).
  FailureOr<SmallVector<ParamOp>> checkWeights(ModuleOp module, func::FuncOp fn,
                                               ArrayRef<ExpertMatmulOp> gemms) {
    llvm::SetVector<Operation *> params;
    for (ExpertMatmulOp op : gemms) {
      auto get = op.getWeight().getDefiningOp<GetParamOp>();
      if (auto stack = op.getWeight().getDefiningOp<ConcatOp>(); stack && stack.getAxis() == 0)
        return op.emitError("merak-expert-parallel: the expert weight is stacked from ")
                   << stack.getInputs().size()
                   << " tensors (one parameter per expert, as transformers 4.x's module per "
                      "expert exports it), not one parameter [E, ...], so it cannot be split "
                      "over the ep ranks; export the experts as one parameter (transformers "
                      "5's batched experts) or split them with --tp",
               failure();
      if (!get)
        return op.emitError("merak-expert-parallel: the expert weight is not a parameter "
                            "(merak.get_param), so it cannot be split over the ep ranks"),
               failure();
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
      int64_t experts = tensorOf(op.getWeight()).getDimSize(0);
      if (experts % ep != 0)
        return op.emitError("merak-expert-parallel: ")
                   << experts << " experts do not divide by --ep " << (int64_t)ep,
               failure();
      params.insert(param);
    }
    for (Operation *p : params) {
      auto param = cast<ParamOp>(p);
      if (param->hasAttr(kShardAttr))
        return param.emitError("merak-expert-parallel: the expert weight @")
                   << param.getSymName() << " is already sharded",
               failure();
      std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(param, module);
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto get = dyn_cast<GetParamOp>(use.getUser());
        bool ok = get && get->getParentOfType<func::FuncOp>() == fn &&
                  llvm::all_of(get->getUses(), [](OpOperand &u) {
                    auto mm = dyn_cast<ExpertMatmulOp>(u.getOwner());
                    return mm && u.getOperandNumber() == 1;
                  });
        if (!ok)
          return use.getUser()->emitError("merak-expert-parallel: the expert weight @")
                     << param.getSymName()
                     << " is read here other than as an expert GEMM's weight, so it cannot "
                        "be split over the ep ranks",
                 failure();
      }
    }
    return llvm::map_to_vector(params, [](Operation *p) { return cast<ParamOp>(p); });
  }

  /// The param holds this rank's E / ep experts; its reads are retyped.
  void shardParam(ModuleOp module, func::FuncOp fn, ParamOp param) {
    RankedTensorType local = scaleLeading(param.getTensorType(), 1, ep);
    param.setTypeAttr(TypeAttr::get(local));
    ShardLayout layout;
    layout.axis = 0;
    layout.parts = ep;
    layout.group = "ep";
    layout.placement = paramTable.lookup_or(param.getSymNameAttr(), -1);
    setShardLayout(param, layout);
    fn.walk([&](GetParamOp get) {
      if (get.getName() == param.getSymName())
        get.getResult().setType(local);
    });
  }

  /// `v` gathered over the ep group, built once right after `v` is defined
  /// (or at the function's start for an argument).
  Value gathered(Value v) {
    if (Value done = gathers.lookup(v))
      return done;
    OpBuilder b = after(v);
    Value g = AllGatherOp::create(b, v.getLoc(), TypeRange{scaleLeading(tensorOf(v), ep, 1)},
                                  ValueRange{v}, "ep")
                  .getResult(0);
    gathers[v] = g;
    return g;
  }

  /// `offset + group_rank("ep") * local`: the first expert (or shadow
  /// slot's id) this rank holds, built once per pair at the function's start.
  Value firstExpert(func::FuncOp fn, Location loc, int64_t local, int64_t offset = 0) {
    if (Value done = firsts.lookup({local, offset}))
      return done;
    OpBuilder b = OpBuilder::atBlockBegin(&fn.getBody().front());
    auto i64 = RankedTensorType::get({}, b.getI64Type());
    auto constant = [&](int64_t v) {
      return ConstantOp::create(b, loc, DenseElementsAttr::get(i64, b.getI64IntegerAttr(v)));
    };
    if (!rank)
      rank = GroupRankOp::create(b, loc, i64, "ep");
    else
      b.setInsertionPointAfter(rank.getDefiningOp());
    Value first = MulOp::create(b, loc, rank, constant(local));
    if (offset)
      first = AddOp::create(b, loc, first, constant(offset));
    firsts[{local, offset}] = first;
    return first;
  }

  /// The GEMM's ids as i64 (the gather concatenates i64), cast once per value.
  Value ids64(ExpertMatmulOp op) {
    Value ids = op.getExperts();
    if (!tensorOf(ids).getElementType().isInteger(32))
      return ids;
    if (Value done = casts.lookup(ids))
      return done;
    OpBuilder b = after(ids);
    Value c = CastOp::create(b, op.getLoc(),
                             RankedTensorType::get(tensorOf(ids).getShape(), b.getI64Type()), ids);
    casts[ids] = c;
    return c;
  }

  /// Shadowing's threshold: `shadow-min-rows`, or the cost of one expert's
  /// weights (shadowing pays from there).
  int64_t minRows(Value ids) { return shadowMinRows > 0 ? shadowMinRows : weightRows(ids); }

  /// One expert of `ids`' layer: its weights (every GEMM's O K elements)
  /// cost what this many of its rows cost on the all-to-all (each GEMM's O
  /// combined, each distinct input's K dispatched).
  int64_t weightRows(Value ids) {
    int64_t weight = 0, row = 0;
    llvm::SmallDenseSet<Value, 4> inputs;
    for (ExpertMatmulOp op : layers.lookup(ids)) {
      RankedTensorType w = tensorOf(op.getWeight());
      weight += w.getNumElements() / w.getDimSize(0);
      row += tensorOf(op.getResult()).getDimSize(1);
      if (inputs.insert(op.getInput()).second)
        row += tensorOf(op.getInput()).getDimSize(1);
    }
    return std::max<int64_t>(1, (weight + row - 1) / std::max<int64_t>(1, row));
  }

  /// The gathered ids `e` (of the GEMM ids `ids`) through their layer's
  /// placement table, built once right after them with the table's
  /// parameter (the identity).
  Value placed(ModuleOp module, func::FuncOp fn, Value ids, Value e, int64_t experts) {
    if (Value done = placements.lookup(e))
      return done;
    const int64_t n = tables.lookup(ids);
    auto type = RankedTensorType::get({experts}, IntegerType::get(module.getContext(), 64));
    OpBuilder pb(module.getContext());
    pb.setInsertionPoint(fn);
    std::string name = placementParamName(n);
    auto param = ParamOp::create(pb, fn.getLoc(), pb.getStringAttr(name), TypeAttr::get(type),
                                 DenseElementsAttr::get(type, ArrayRef<int64_t>(llvm::to_vector(
                                                                  llvm::seq<int64_t>(0, experts)))));
    param->setAttr(kKindAttr, pb.getStringAttr("frozen"));
    OpBuilder b(e.getContext());
    b.setInsertionPointAfter(e.getDefiningOp());
    Value table = GetParamOp::create(b, e.getLoc(), type, FlatSymbolRefAttr::get(param));
    Value p = ExpertPlaceOp::create(b, e.getLoc(), tensorOf(e), e, table, b.getI64IntegerAttr(n),
                                    b.getI64IntegerAttr(weightRows(ids)),
                                    b.getI64IntegerAttr(rebalanceEvery));
    placements[e] = p;
    return p;
  }

  /// The shadowing plan of the gathered ids `e` (of the GEMM ids `ids`),
  /// built once right after them: the routed ids and the slots.
  ExpertShadowPlanOp shadowPlan(Value ids, Value e, int64_t perRank) {
    if (ExpertShadowPlanOp done = plans.lookup(e))
      return done;
    OpBuilder b(e.getContext());
    b.setInsertionPointAfter(e.getDefiningOp());
    auto plan = ExpertShadowPlanOp::create(
        b, e.getLoc(), tensorOf(e), RankedTensorType::get({(int64_t)shadow}, b.getI64Type()), e,
        b.getI64IntegerAttr(perRank), b.getI64IntegerAttr(ep), b.getI64IntegerAttr(minRows(ids)));
    plans[e] = plan;
    return plan;
  }

  /// The shadowed experts' copies of weight `w`, built once per (w, plan).
  Value shadowWeights(ExpertMatmulOp op, ExpertShadowPlanOp plan) {
    Value w = op.getWeight();
    auto key = std::make_pair(w, plan.getSlots());
    if (Value done = shadows.lookup(key))
      return done;
    OpBuilder b(op);
    SmallVector<int64_t> shape(tensorOf(w).getShape());
    shape[0] = shadow;
    Value ws = ExpertShadowOp::create(b, op.getLoc(),
                                      RankedTensorType::get(shape, tensorOf(w).getElementType()),
                                      w, plan.getSlots(), b.getStringAttr("ep"), UnitAttr(),
                                      b.getI64IntegerAttr(ep))
                   .getResult();
    shadows[key] = ws;
    return ws;
  }

  /// `op`'s input dispatched to the experts' ranks by the gathered ids `e`
  /// (into `compact` rows when > 0), built once per (input, ids) before the
  /// first GEMM reading it.
  Value dispatched(ExpertMatmulOp op, Value e, int64_t perRank, int64_t compact) {
    Value x = op.getInput();
    auto key = std::make_pair(x, e);
    if (Value done = dispatches.lookup(key))
      return done;
    OpBuilder b(op);
    RankedTensorType rows = tensorOf(x);
    Value d = AllToAllOp::create(b, op.getLoc(),
                                 compact ? scaleLeading(rows, compact, rows.getDimSize(0))
                                         : scaleLeading(rows, ep, 1),
                                 x, e, b.getStringAttr("ep"), UnitAttr(),
                                 b.getI64IntegerAttr(perRank), b.getI64IntegerAttr(shadow),
                                 hierarchical ? b.getUnitAttr() : UnitAttr(),
                                 compactAttr(b, compact))
                  .getResult();
    dispatches[key] = d;
    return d;
  }

  /// With an expert capacity on the layer's ids (merak.expert_capacity), no
  /// shadowing and the alltoall dispatcher: the rows this rank's experts can
  /// get of `groupRows` rows of the ep group, each at most the capacity of
  /// each group rank's; 0 (the positional rows) when that is not fewer.
  int64_t compactRows(Value ids, int64_t groupRows, int64_t perRank) {
    if (auto cut = ids.getDefiningOp<LocalShardOp>()) // a tp rank's rows: at most as many
      ids = cut.getInput();
    auto capacity = ids.getDefiningOp<ExpertCapacityOp>();
    if (!capacity || shadow > 0 || dispatcher != "alltoall")
      return 0;
    const int64_t rows = perRank * ep * static_cast<int64_t>(capacity.getCapacity());
    return rows < groupRows ? rows : 0;
  }

  IntegerAttr compactAttr(OpBuilder &b, int64_t compact) {
    return compact ? b.getI64IntegerAttr(compact) : IntegerAttr();
  }

  /// The ids of this rank's `compact` rows of the gathered ids `e` (`e`
  /// itself for positional rows), built once after `e`.
  Value compactIds(Value e, Value first, int64_t perRank, int64_t compact) {
    if (!compact)
      return e;
    if (Value done = compacted.lookup(e))
      return done;
    OpBuilder b = after(e);
    if (first.getDefiningOp() && !first.getDefiningOp()->isBeforeInBlock(&*b.getInsertionPoint()))
      b.setInsertionPointAfter(first.getDefiningOp());
    Value c = ExpertCompactOp::create(b, e.getLoc(),
                                      RankedTensorType::get({compact}, b.getI64Type()), e, first,
                                      perRank);
    compacted[e] = c;
    return c;
  }

  /// Chunk c of `v` [n, ...] along its rows (`parts` blocks of n / parts
  /// rows, each cut into `chunks`: group rank i's rows of chunk c), at `b`.
  Value chunkRows(OpBuilder &b, Location loc, Value v, int64_t parts, int64_t c) {
    RankedTensorType t = tensorOf(v);
    const int64_t rows = t.getDimSize(0) / parts, each = rows / chunks;
    SmallVector<int64_t> blocked{parts, rows};
    blocked.append(t.getShape().begin() + 1, t.getShape().end());
    Value x = parts > 1 ? ReshapeOp::create(b, loc, RankedTensorType::get(blocked,
                                                                          t.getElementType()), v)
                              .getResult()
                        : v;
    const int64_t axis = parts > 1 ? 1 : 0;
    RankedTensorType xt = tensorOf(x);
    SmallVector<int64_t> starts(xt.getRank(), 0), limits(xt.getShape()), strides(xt.getRank(), 1),
        shape(xt.getShape());
    starts[axis] = c * each;
    limits[axis] = (c + 1) * each;
    shape[axis] = each;
    Value part = SliceOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), x,
                                 starts, limits, strides);
    if (parts == 1)
      return part;
    SmallVector<int64_t> flat{parts * each};
    flat.append(t.getShape().begin() + 1, t.getShape().end());
    return ReshapeOp::create(b, loc, RankedTensorType::get(flat, t.getElementType()), part);
  }

  /// `op` in `chunks` chunks (see ShardingPasses.td): every chunk's
  /// dispatch, then each chunk's GEMM and combine, then their concat.
  Value rewriteChunked(ExpertMatmulOp op, Value e, Value first, int64_t perRank) {
    Location loc = op.getLoc();
    const int64_t compact =
        compactRows(ids64(op), tensorOf(e).getDimSize(0) / chunks, perRank);
    auto key = std::make_pair(op.getInput(), e);
    if (!chunkedIds.count(e)) {
      OpBuilder b = after(e);
      for (int64_t c = 0; c < chunks; ++c)
        chunkedIds[e].push_back(chunkRows(b, loc, e, ep, c));
    }
    ArrayRef<Value> ids = chunkedIds[e];
    OpBuilder b(op);
    auto allToAll = [&](RankedTensorType type, Value x, Value routed, bool combine) {
      return AllToAllOp::create(b, loc, type, x, routed, b.getStringAttr("ep"),
                                combine ? b.getUnitAttr() : UnitAttr(),
                                b.getI64IntegerAttr(perRank), b.getI64IntegerAttr(0),
                                hierarchical ? b.getUnitAttr() : UnitAttr(),
                                compactAttr(b, compact))
          .getResult();
    };
    if (!chunkedDispatches.count(key)) {
      // One split (its gradient a concat), not K slices (each padded back
      // with zeros and summed).
      RankedTensorType part = scaleLeading(tensorOf(op.getInput()), 1, chunks);
      auto split = SplitOp::create(b, loc, SmallVector<Type>(chunks, part), op.getInput(),
                                   int64_t(0), SmallVector<int64_t>(chunks, part.getDimSize(0)));
      for (int64_t c = 0; c < chunks; ++c) {
        Value x = split.getResult(c);
        RankedTensorType rows = tensorOf(x);
        chunkedDispatches[key].push_back(
            allToAll(compact ? scaleLeading(rows, compact, rows.getDimSize(0))
                             : scaleLeading(rows, ep, 1),
                     x, ids[c], /*combine=*/false));
      }
    }
    RankedTensorType rows = tensorOf(op.getResult());
    RankedTensorType part = scaleLeading(rows, 1, chunks),
                     all = compact ? scaleLeading(part, compact, part.getDimSize(0))
                                   : scaleLeading(part, ep, 1);
    SmallVector<Value> mine;
    for (int64_t c = 0; c < chunks; ++c) {
      Value y = ExpertMatmulOp::create(
          b, loc, all, chunkedDispatches[key][c], op.getWeight(),
          compactIds(ids[c], first, perRank, compact), first, Value(), Value(),
          op.getTransposeWeight(), b.getI64IntegerAttr(perRank * ep),
          compact ? b.getI64IntegerAttr(ep * part.getDimSize(0)) : IntegerAttr());
      mine.push_back(allToAll(part, y, ids[c], /*combine=*/true));
    }
    return ConcatOp::create(b, loc, rows, mine, b.getI64IntegerAttr(0));
  }

  void rewrite(ExpertMatmulOp op) {
    auto fn = op->getParentOfType<func::FuncOp>();
    Location loc = op.getLoc();
    Value ids = ids64(op);
    const int64_t perRank = tensorOf(op.getWeight()).getDimSize(0), experts = perRank * ep;
    Value e = gathered(ids);
    if (rebalanceEvery > 0)
      e = placed(fn->getParentOfType<ModuleOp>(), fn, ids, e, experts);
    if (chunks > 1) {
      op.getResult().replaceAllUsesWith(rewriteChunked(op, e, firstExpert(fn, loc, perRank),
                                                       perRank));
      op.erase();
      return;
    }
    ExpertShadowPlanOp plan = shadow > 0 ? shadowPlan(ids, e, perRank) : ExpertShadowPlanOp();
    if (plan)
      e = plan.getRouted();
    Value first = firstExpert(fn, loc, perRank);
    const bool allToAll = dispatcher == "alltoall";
    const int64_t compact = compactRows(ids, tensorOf(e).getDimSize(0), perRank);
    Value x = allToAll ? dispatched(op, e, perRank, compact) : gathered(op.getInput());
    OpBuilder b(op);
    RankedTensorType rows = tensorOf(op.getResult()),
                     all = compact ? scaleLeading(rows, compact, rows.getDimSize(0))
                                   : scaleLeading(rows, ep, 1);
    // With a plan, the rows of shadowed experts meet this rank's copies.
    Value local = ExpertMatmulOp::create(
        b, loc, all, x, op.getWeight(), compactIds(e, first, perRank, compact), first,
        plan ? shadowWeights(op, plan) : Value(),
        plan ? firstExpert(fn, loc, shadow, experts) : Value(), op.getTransposeWeight(),
        b.getI64IntegerAttr(experts),
        compact ? b.getI64IntegerAttr(tensorOf(e).getDimSize(0)) : IntegerAttr());
    Value mine =
        allToAll
            ? AllToAllOp::create(b, loc, rows, local, e, b.getStringAttr("ep"), b.getUnitAttr(),
                                 b.getI64IntegerAttr(perRank), b.getI64IntegerAttr(shadow),
                                 hierarchical ? b.getUnitAttr() : UnitAttr(),
                                 compactAttr(b, compact))
                  .getResult()
            : ReduceScatterOp::create(b, loc, TypeRange{rows}, ValueRange{local}, "ep", "sum")
                  .getResult(0);
    op.getResult().replaceAllUsesWith(mine);
    op.erase();
  }

  Value rank; // group_rank("ep")
  DenseMap<Value, Value> gathers, casts;
  DenseMap<Value, Value> tpRows, tpWeights; // splitOverTp's cuts and weight reads
  DenseMap<std::pair<Value, Value>, Value> dispatches, shadows;
  DenseMap<std::pair<int64_t, int64_t>, Value> firsts;
  /// Shadowing: each layer's GEMMs by their (i64) ids, and its plan by the
  /// gathered ids.
  DenseMap<Value, SmallVector<ExpertMatmulOp>> layers;
  DenseMap<Value, ExpertShadowPlanOp> plans;
  /// Dynamic placement: each layer's table by its (i64) ids, each weight's
  /// table by its name, and the placed ids by the gathered ones.
  DenseMap<Value, int64_t> tables;
  DenseMap<StringAttr, int64_t> paramTable;
  DenseMap<Value, Value> placements;
  /// Chunks: the gathered ids' chunks, and each (input, ids)'s dispatches.
  DenseMap<Value, SmallVector<Value>> chunkedIds;
  DenseMap<Value, Value> compacted; // gathered ids -> this rank's compact ids
  DenseMap<std::pair<Value, Value>, SmallVector<Value>> chunkedDispatches;
};
} // namespace
