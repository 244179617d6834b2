//===- PipelinePartition.cpp - merak-pipeline -----------------------------===//
//
// Cuts @loss (the forward graph and the loss, for one micro-batch) into
// `pp` contiguous stages and builds every stage's fragments (see Passes.td):
//
//  * Ops whose operands all come from constants and parameters ("static":
//    parameter reads, their transposes, constant masks) belong to no stage;
//    each stage clones the ones it needs. The other ("dynamic") ops are cut
//    into contiguous ranges in program order.
//  * The values crossing a cut are every dynamic value defined before it
//    and used after it (skip connections and masks included, forwarded
//    through intermediate stages). Candidate cuts are the positions where
//    the fewest activations cross (floating-point values; masks and indices
//    are forwarded but not counted; for a transformer: only the residual
//    stream), preferring positions with a trainable parameter read on both
//    sides; the partitioner picks pp-1 of them minimising
//    the most expensive stage (estimated FLOPs) and, within 5% of that,
//    the bytes sent (chooseCuts), or takes --stage-boundaries.
//  * Per stage s: @stage<s>_forward(data, acts) -> acts' (last: the loss);
//    @stage<s>_backward(data, acts, cotangents of acts') -> cotangents of
//    acts, which recomputes the forward from the stage's inputs and
//    accumulates parameter gradients into `pipeline.grad.<param>` state
//    (the forward's own parameter writes, BatchNorm's running statistics,
//    are not repeated there);
//    @stage<s>_grads() -> the accumulated gradients of the parameters the
//    stage holds (dp-averaged), from which merak-optimizer builds
//    @stage<s>_update. A parameter read by several stages (tied weights) is
//    held by each; the runtime sums its accumulators over its holders before
//    the update, and only the first holder counts it in the gradient norm.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/Analysis/StageBalance.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKPIPELINE
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-pipeline"

using namespace mlir;
using namespace mlir::merak;

static int64_t valueBytes(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() * std::max<int64_t>(1, storageElementBytes(t.getElementType()));
}

llvm::DenseSet<Operation *> mlir::merak::forwardOnlyOps(Block &body) {
  llvm::DenseSet<Operation *> only;
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (isa<SetParamOp>(op) ||
        (!op.use_empty() && isMemoryEffectFree(&op) &&
         llvm::all_of(op.getUsers(), [&](Operation *u) { return only.contains(u); })))
      only.insert(&op);
  return only;
}

int64_t mlir::merak::estimateOpFlops(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

namespace {
Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return ConstantOp::create(b, loc, SplatElementsAttr::get(t, b.getZeroAttr(t.getElementType())));
}

DictionaryAttr nameAttr(Builder &b, const Twine &name) {
  return b.getDictionaryAttr(b.getNamedAttr("merak.name", b.getStringAttr(name)));
}

struct MerakPipelinePass : merak::impl::MerakPipelineBase<MerakPipelinePass> {
  using Base::Base;

  FrozenParams fixed;
  bool isTrainable(StringRef name) const {
    return !name.starts_with("optimizer.") && !name.starts_with(kGradAccumulatorPrefix) &&
           !fixed.contains(name);
  }

  // The analysed @loss.
  func::FuncOp fn;
  SmallVector<Operation *> dyn;               // dynamic ops, program order
  llvm::DenseSet<Operation *> staticOps;      // ops cloned per stage
  llvm::DenseMap<Value, int64_t> defIndex;    // dynamic value -> its op's index
  llvm::DenseMap<Value, int64_t> lastUse;     // dynamic value -> last user index
  SmallVector<Value> dynValues;               // definition order

  /// The values crossing the cut before dynamic op k.
  SmallVector<Value> crossing(int64_t k) {
    SmallVector<Value> out;
    for (Value v : dynValues)
      if (defIndex[v] < k && lastUse.lookup(v) >= k)
        out.push_back(v);
    return out;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    symbols.emplace(module);
    fn = symbols->lookup<func::FuncOp>("loss");
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-pipeline: no single-block @loss (run merak-attach-loss)");
      return signalPassFailure();
    }
    if (pp < 1 || microbatches < 1 || dp < 1) {
      module.emitError("merak-pipeline: pp, microbatches and dp must be at least 1");
      return signalPassFailure();
    }
    if (virtualStages < 1 || pp % virtualStages != 0 ||
        (virtualStages > 1 && pp / virtualStages < 2)) {
      module.emitError("merak-pipeline: virtual-stages (")
          << (int64_t)virtualStages << ") must divide pp (" << (int64_t)pp
          << ") into at least 2 ranks";
      return signalPassFailure();
    }
    std::string error;
    FailureOr<FrozenParams> frozenParams = FrozenParams::get(module, *frozen, error);
    if (failed(frozenParams)) {
      module.emitError("merak-pipeline: ") << error;
      return signalPassFailure();
    }
    fixed = std::move(*frozenParams);
    if (failed(partition(module)))
      signalPassFailure();
  }

  /// Classifies the ops of @loss: static ones (computable from constants
  /// and parameters alone, replicated to the stages that need them; never
  /// a parameter write) and
  /// dynamic ones in program order, with each dynamic value's definition and
  /// last use. Returns the first and last dynamic op reading a trainable
  /// parameter (-1 without any).
  std::pair<int64_t, int64_t> scanOps(Block &body) {
    llvm::DenseSet<Value> staticValues;
    // Static values computed from a trainable parameter, and the first and
    // last dynamic ops reading one.
    llvm::DenseSet<Value> fromParam;
    int64_t firstParamUse = -1, lastParamUse = -1;
    for (Operation &op : body.without_terminator()) {
      // A parameter write is never static, even of a value computed from
      // parameters alone (a counter's get + 1): it happens in its stage.
      bool isStatic =
          op.getNumRegions() == 0 && !isa<SetParamOp>(op) &&
          llvm::all_of(op.getOperands(), [&](Value v) { return staticValues.contains(v); });
      auto get = dyn_cast<GetParamOp>(op);
      bool readsParam = (get && isTrainable(get.getName())) ||
                        llvm::any_of(op.getOperands(), [&](Value v) { return fromParam.contains(v); });
      if (isStatic) {
        staticOps.insert(&op);
        for (Value r : op.getResults()) {
          staticValues.insert(r);
          if (readsParam)
            fromParam.insert(r);
        }
        continue;
      }
      if (readsParam) {
        if (firstParamUse < 0)
          firstParamUse = dyn.size();
        lastParamUse = dyn.size();
      }
      for (Value r : op.getResults()) {
        defIndex[r] = dyn.size();
        dynValues.push_back(r);
      }
      for (Value v : op.getOperands())
        if (defIndex.count(v))
          lastUse[v] = std::max<int64_t>(lastUse.lookup(v), dyn.size());
      dyn.push_back(&op);
    }
    return {firstParamUse, lastParamUse};
  }

  /// Positions where stages may end (the cut points) and the bytes that
  /// cross each.
  struct CutCandidates {
    SmallVector<int64_t> positions, bytes;
    int64_t fewest = INT64_MAX;
  };
  CutCandidates cutCandidates(int64_t n, int64_t firstParamUse, int64_t lastParamUse) {
    // Candidate cuts: positions where the fewest floating-point values
    // (activations) cross; other crossing values (masks, indices) are
    // forwarded but do not count. Crossing counts and bytes per position by
    // a difference array over the values' live ranges.
    SmallVector<std::pair<int64_t, int64_t>> delta(n + 2, {0, 0});
    for (Value v : dynValues) {
      if (!isFloatTensor(v))
        continue;
      int64_t d = defIndex[v], u = std::min<int64_t>(lastUse.lookup(v), n - 1);
      if (u < d + 1)
        continue;
      delta[d + 1].first += 1, delta[d + 1].second += valueBytes(v);
      delta[u + 1].first -= 1, delta[u + 1].second -= valueBytes(v);
    }
    SmallVector<std::pair<int64_t, int64_t>> cross(n + 1, {0, 0});
    for (int64_t k = 1; k <= n; ++k)
      cross[k] = {cross[k - 1].first + delta[k].first, cross[k - 1].second + delta[k].second};
    // Positions with a trainable parameter read on both sides come first: a
    // cut before the first or after the last leaves a stage with nothing to
    // train (e.g. only the loss of vocabulary-split logits); the others
    // count only when a model has no such position.
    auto between = [&](int64_t k) {
      return firstParamUse >= 0 && firstParamUse < k && k <= lastParamUse;
    };
    bool anyBetween = false;
    for (int64_t k = 1; k < n; ++k)
      anyBetween |= cross[k].first > 0 && between(k);
    auto eligible = [&](int64_t k) { return cross[k].first > 0 && (!anyBetween || between(k)); };
    int64_t fewest = INT64_MAX;
    for (int64_t k = 1; k < n; ++k)
      if (eligible(k))
        fewest = std::min(fewest, cross[k].first);
    CutCandidates cut;
    cut.fewest = fewest;
    for (int64_t k = 1; k < n; ++k)
      if (eligible(k) && cross[k].first == fewest) {
        cut.positions.push_back(k);
        cut.bytes.push_back(cross[k].second);
      }
    return cut;

  }

  LogicalResult partition(ModuleOp module) {
    Block &body = fn.getBody().front();
    auto [firstParamUse, lastParamUse] = scanOps(body);
    int64_t n = dyn.size();
    Value loss = body.getTerminator()->getOperand(0);
    if (!defIndex.count(loss))
      return fn.emitError("merak-pipeline: the loss does not depend on the inputs");
    lastUse[loss] = n;

    CutCandidates cut = cutCandidates(n, firstParamUse, lastParamUse);
    ArrayRef<int64_t> candidates = cut.positions;
    const int64_t fewest = cut.fewest;

    SmallVector<int64_t> prefix(n + 1, 0);
    for (int64_t i = 0; i < n; ++i)
      prefix[i + 1] = prefix[i] + estimateOpFlops(dyn[i]);
    // Static ops count on the stages that use them; their cost is small.

    SmallVector<int64_t> chosen; // candidate indices
    if (!boundaries.empty()) {
      if ((int64_t)boundaries.size() != pp - 1)
        return fn.emitError("merak-pipeline: ")
               << boundaries.size() << " stage boundaries given for " << (int64_t)pp
               << " stages (expected " << pp - 1 << ")";
      for (auto [i, c] : llvm::enumerate(boundaries)) {
        if (c < 0 || c >= (int64_t)candidates.size())
          return fn.emitError("merak-pipeline: stage boundary ")
                 << c << " is not a cut point (the model has " << candidates.size()
                 << ", numbered from 0)";
        if (i > 0 && c <= boundaries[i - 1])
          return fn.emitError("merak-pipeline: stage boundaries must increase");
        chosen.push_back(c);
      }
    } else if ((int64_t)candidates.size() < pp - 1) {
      return fn.emitError("merak-pipeline: the model has ")
             << candidates.size() << " cut points (positions where only "
             << (fewest == INT64_MAX ? 0 : fewest) << " activation(s) cross), too few for "
             << (int64_t)pp << " stages";
    } else {
      chosen = chooseStageCuts(candidates, cut.bytes, prefix, n, pp);
    }

    SmallVector<int64_t> bounds{0};
    for (int64_t c : chosen)
      bounds.push_back(candidates[c]);
    bounds.push_back(n);

    // Trainable parameters each stage reads (its copy to update).
    SmallVector<llvm::SetVector<StringRef>> owned(pp);
    for (int64_t s = 0; s < pp; ++s)
      for (Operation *op : neededStatics(bounds[s], bounds[s + 1]))
        if (auto get = dyn_cast<GetParamOp>(op); get && isTrainable(get.getName()))
          owned[s].insert(get.getName());
    // Parameters no stage reads still train (with zero gradients) on stage 0.
    for (ParamOp p : module.getOps<ParamOp>())
      if (isTrainable(p.getSymName()) &&
          llvm::none_of(owned, [&](auto &o) { return o.contains(p.getSymName()); }))
        owned[0].insert(p.getSymName());

    OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
    SmallVector<int64_t> costs;
    SmallVector<Attribute> owners;
    for (int64_t s = 0; s < pp; ++s) {
      if (failed(buildStage(module, mb, s, bounds[s], bounds[s + 1], owned)))
        return failure();
      costs.push_back(prefix[bounds[s + 1]] - prefix[bounds[s]]);
      SmallVector<Attribute> names;
      for (StringRef p : owned[s])
        names.push_back(mb.getStringAttr(p));
      owners.push_back(mb.getArrayAttr(names));
    }
    if (virtualStages > 1) {
      // Interleaved: rank r runs model stages r, r + ranks, ...; one update
      // per rank over the parameters of all its chunks (one gradient norm),
      // a tied copy counted by the lowest rank holding it.
      int64_t ranks = pp / virtualStages;
      SmallVector<llvm::SetVector<StringRef>> byRank(ranks);
      for (int64_t k = 0; k < pp; ++k)
        byRank[k % ranks].insert(owned[k].begin(), owned[k].end());
      for (int64_t r = 0; r < ranks; ++r)
        buildGrads(module, mb, r, byRank[r].getArrayRef(), [&](StringRef p) {
          for (int64_t t = 0; t < r; ++t)
            if (byRank[t].contains(p))
              return true;
          return false;
        });
    }
    SmallVector<int64_t> chosen64(chosen.begin(), chosen.end());
    LLVM_DEBUG({
      llvm::dbgs() << "merak-pipeline: " << pp << " stages over " << candidates.size()
                   << " cut points, cuts";
      for (int64_t c : chosen64)
        llvm::dbgs() << " " << c;
      llvm::dbgs() << ", forward FLOPs";
      for (int64_t c : costs)
        llvm::dbgs() << " " << c;
      llvm::dbgs() << "\n";
    });
    module->setAttr(kPipelineAttr,
                    PipelinePlanAttr::get(module.getContext(), pp, microbatches,
                                          candidates.size(), chosen64, costs,
                                          mb.getArrayAttr(owners), virtualStages, {},
                                          ArrayAttr(), {}, {}, StringAttr()));
    return success();
  }

  /// The static ops the dynamic ops [lo, hi) need, in program order.
  SmallVector<Operation *> neededStatics(int64_t lo, int64_t hi) {
    llvm::DenseSet<Operation *> need;
    SmallVector<Operation *> work;
    auto use = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (def && staticOps.contains(def) && need.insert(def).second)
        work.push_back(def);
    };
    for (int64_t i = lo; i < hi; ++i)
      for (Value v : dyn[i]->getOperands())
        use(v);
    if (hi == (int64_t)dyn.size())
      for (Value v : fn.getBody().front().getTerminator()->getOperands())
        use(v);
    while (!work.empty())
      for (Value v : work.pop_back_val()->getOperands())
        use(v);
    SmallVector<Operation *> out;
    for (Operation &op : fn.getBody().front())
      if (need.contains(&op))
        out.push_back(&op);
    return out;
  }

  /// Whether a crossing value carries a gradient back (float and computed
  /// from a trainable parameter).
  bool needsGrad(Value v) {
    if (!isFloatTensor(v))
      return false;
    if (!gradAnalysed) {
      gradAnalysed = true;
      for (Operation &op : fn.getBody().front().without_terminator()) {
        auto get = dyn_cast<GetParamOp>(op);
        bool reached = (get && isTrainable(get.getName())) ||
                       llvm::any_of(op.getOperands(), [&](Value x) { return gradCache.contains(x); });
        if (reached)
          for (Value r : op.getResults())
            if (isFloatTensor(r))
              gradCache.insert(r);
      }
    }
    return gradCache.contains(v);
  }
  llvm::DenseSet<Value> gradCache;
  bool gradAnalysed = false;

  /// The module's symbols, with the accumulators the pass adds (a lookup
  /// per parameter would walk the whole module each time).
  std::optional<SymbolTable> symbols;

  ParamOp accumulator(StringRef param) {
    std::string name = (kGradAccumulatorPrefix + param).str();
    if (auto existing = symbols->lookup<ParamOp>(name))
      return existing;
    auto p = symbols->lookup<ParamOp>(param);
    OpBuilder pb(p);
    pb.setInsertionPointAfter(p);
    auto type = p.getTensorType();
    auto acc = ParamOp::create(pb, p.getLoc(), pb.getStringAttr(name), TypeAttr::get(type),
                               SplatElementsAttr::get(type, pb.getZeroAttr(type.getElementType())));
    // Zeroed by the runtime before every step, so not part of checkpoints
    // (its shape is a tensor-parallel shard's, and a serial program lacks it).
    acc->setAttr(kKindAttr, pb.getStringAttr("scratch"));
    symbols->insert(acc);
    return acc;
  }

  LogicalResult buildStage(ModuleOp module, OpBuilder &mb, int64_t s, int64_t lo, int64_t hi,
                           ArrayRef<llvm::SetVector<StringRef>> owned) {
    MLIRContext *ctx = module.getContext();
    Location loc = fn.getLoc();
    bool last = s == pp - 1;
    SmallVector<Value> liveIn = s ? crossing(lo) : SmallVector<Value>();
    SmallVector<Value> liveOut = last ? SmallVector<Value>() : crossing(hi);
    SmallVector<Operation *> statics = neededStatics(lo, hi);
    llvm::SetVector<BlockArgument> dataArgs;
    for (int64_t i = lo; i < hi; ++i)
      for (Value v : dyn[i]->getOperands())
        if (auto a = dyn_cast<BlockArgument>(v))
          dataArgs.insert(a);
    SmallVector<BlockArgument> data(dataArgs.begin(), dataArgs.end());
    llvm::sort(data, [](BlockArgument a, BlockArgument b) { return a.getArgNumber() < b.getArgNumber(); });
    Value loss = fn.getBody().front().getTerminator()->getOperand(0);

    // Arguments shared by both fragments: data inputs, then activations.
    SmallVector<Type> inTypes;
    SmallVector<DictionaryAttr> inAttrs;
    for (BlockArgument a : data) {
      inTypes.push_back(a.getType());
      inAttrs.push_back(fn.getArgAttrDict(a.getArgNumber()));
    }
    for (auto [i, v] : llvm::enumerate(liveIn)) {
      inTypes.push_back(v.getType());
      inAttrs.push_back(nameAttr(mb, "act:" + Twine(i)));
    }
    auto makeFn = [&](StringRef name, ArrayRef<Type> args, ArrayRef<Type> results,
                      StringRef kind) {
      auto f = func::FuncOp::create(mb, loc, name, FunctionType::get(ctx, args, results));
      f.addEntryBlock();
      f->setAttr(kFragmentAttr, mb.getDictionaryAttr({
                                    mb.getNamedAttr("stage", mb.getI64IntegerAttr(s)),
                                    mb.getNamedAttr("kind", mb.getStringAttr(kind)),
                                }));
      return f;
    };
    // Clones the stage's ops into `f` (arguments first as in inTypes),
    // recording each op's copy in `copies`, and leaving out those whose
    // copy in the forward fragment (`fwdCopies`) is in `skip`.
    llvm::DenseMap<Operation *, Operation *> fwdCopies;
    auto cloneBody = [&](func::FuncOp f, IRMapping &map, OpBuilder &b,
                         llvm::DenseMap<Operation *, Operation *> *copies,
                         const llvm::DenseSet<Operation *> &skip) {
      for (auto [i, a] : llvm::enumerate(data))
        map.map(a, f.getArgument(i));
      for (auto [i, v] : llvm::enumerate(liveIn))
        map.map(v, f.getArgument(data.size() + i));
      SmallVector<Operation *> ops(statics);
      ops.append(dyn.begin() + lo, dyn.begin() + hi);
      for (Operation *op : ops) {
        if (skip.contains(fwdCopies.lookup(op)))
          continue;
        Operation *copy = b.clone(*op, map);
        if (copies)
          (*copies)[op] = copy;
      }
    };

    // Forward.
    SmallVector<Type> outTypes;
    SmallVector<DictionaryAttr> outAttrs;
    if (last) {
      outTypes.push_back(loss.getType());
      outAttrs.push_back(nameAttr(mb, "loss"));
    }
    for (auto [i, v] : llvm::enumerate(liveOut)) {
      outTypes.push_back(v.getType());
      outAttrs.push_back(nameAttr(mb, "act:" + Twine(i)));
    }
    std::string prefix = ("stage" + Twine(s) + "_").str();
    func::FuncOp fwd = makeFn(prefix + "forward", inTypes, outTypes, "forward");
    {
      IRMapping map;
      OpBuilder b = OpBuilder::atBlockEnd(&fwd.getBody().front());
      cloneBody(fwd, map, b, &fwdCopies, {});
      SmallVector<Value> results;
      if (last)
        results.push_back(map.lookup(loss));
      for (Value v : liveOut)
        results.push_back(map.lookup(v));
      func::ReturnOp::create(b, loc, results);
      fwd.setAllArgAttrs(inAttrs);
      fwd.setAllResultAttrs(outAttrs);
    }

    // Backward: recompute (without the forward's own parameter writes,
    // which happen once per micro-batch), then the reverse sweep seeded by
    // the output cotangents (the last stage: d loss = 1/microbatches, so the
    // accumulated gradient is that of the mean over micro-batches).
    SmallVector<Type> bwdTypes(inTypes);
    SmallVector<DictionaryAttr> bwdAttrs(inAttrs);
    SmallVector<int64_t> cotOut;
    for (auto [i, v] : llvm::enumerate(liveOut))
      if (needsGrad(v)) {
        bwdTypes.push_back(v.getType());
        bwdAttrs.push_back(nameAttr(mb, "cot:" + Twine(i)));
        cotOut.push_back(i);
      }
    SmallVector<Type> cotInTypes;
    SmallVector<DictionaryAttr> cotInAttrs;
    SmallVector<int64_t> cotIn;
    for (auto [i, v] : llvm::enumerate(liveIn))
      if (needsGrad(v)) {
        cotInTypes.push_back(v.getType());
        cotInAttrs.push_back(nameAttr(mb, "cot:" + Twine(i)));
        cotIn.push_back(i);
      }
    func::FuncOp bwd = makeFn(prefix + "backward", bwdTypes, cotInTypes, "backward");
    {
      IRMapping map;
      OpBuilder b = OpBuilder::atBlockEnd(&bwd.getBody().front());
      cloneBody(bwd, map, b, nullptr, forwardOnlyOps(fwd.getBody().front()));
      SmallVector<std::pair<Value, Value>> seeds;
      if (last) {
        auto lt = cast<RankedTensorType>(loss.getType());
        seeds.push_back({map.lookup(loss),
                         ConstantOp::create(b, loc,
                                            SplatElementsAttr::get(
                                                lt, b.getFloatAttr(lt.getElementType(),
                                                                   1.0 / (double)microbatches)))});
      }
      for (auto [j, i] : llvm::enumerate(cotOut))
        seeds.push_back({map.lookup(liveOut[i]), bwd.getArgument(inTypes.size() + j)});
      SmallVector<Value> sources;
      for (int64_t i : cotIn)
        sources.push_back(bwd.getArgument(data.size() + i));
      llvm::DenseMap<Value, Value> argGrads;
      llvm::StringMap<Value> paramGrads;
      if (failed(buildReverseSweep(b, bwd.getBody().front(), seeds, sources, "merak-pipeline",
                                   [&](StringRef p) { return isTrainable(p); }, argGrads,
                                   paramGrads)))
        return failure();
      // Accumulate, in parameter declaration order.
      for (ParamOp p : module.getOps<ParamOp>()) {
        Value g = paramGrads.lookup(p.getSymName());
        if (!g)
          continue;
        auto acc = FlatSymbolRefAttr::get(ctx, accumulator(p.getSymName()).getSymName());
        Value old = GetParamOp::create(b, loc, g.getType(), acc);
        SetParamOp::create(b, loc, acc, AddOp::create(b, loc, old, g));
      }
      SmallVector<Value> results;
      for (Value a : sources) {
        Value g = argGrads.lookup(a);
        results.push_back(g ? g : zerosLike(b, loc, a.getType()));
      }
      func::ReturnOp::create(b, loc, results);
      bwd.setAllArgAttrs(bwdAttrs);
      bwd.setAllResultAttrs(cotInAttrs);
    }

    if (virtualStages == 1)
      buildGrads(module, mb, s, owned[s].getArrayRef(), [&](StringRef p) {
        for (int64_t t = 0; t < s; ++t)
          if (owned[t].contains(p))
            return true;
        return false;
      });
    return success();
  }

  /// @stage<s>_grads: the accumulated gradients of `params` (dp-averaged,
  /// or this rank's ZeRO-1 part), for merak-optimizer, which builds
  /// @stage<s>_update from it. `countedElsewhere` names the tied copies
  /// another stage counts in the gradient norm.
  void buildGrads(ModuleOp module, OpBuilder &mb, int64_t s, ArrayRef<StringRef> params,
                  llvm::function_ref<bool(StringRef)> countedElsewhere) {
    MLIRContext *ctx = module.getContext();
    Location loc = fn.getLoc();
    Value loss = fn.getBody().front().getTerminator()->getOperand(0);
    std::string prefix = ("stage" + Twine(s) + "_").str();
    auto lossType = cast<RankedTensorType>(loss.getType());
    SmallVector<Value> grads;
    SmallVector<DictionaryAttr> gradAttrs{nameAttr(mb, "loss")};
    SmallVector<Type> gradTypes{lossType};
    SmallVector<Attribute> skip;
    SmallVector<bool> expertParam; // per param: an expert shard (expert parallelism)
    auto g = func::FuncOp::create(mb, loc, prefix + "grads", FunctionType::get(ctx, {}, {}));
    OpBuilder b = OpBuilder::atBlockEnd(g.addEntryBlock());
    for (StringRef p : params) {
      auto param = symbols->lookup<ParamOp>(p);
      expertParam.push_back(isExpertShard(param));
      auto acc = FlatSymbolRefAttr::get(ctx, accumulator(p).getSymName());
      grads.push_back(GetParamOp::create(b, loc, param.getTensorType(), acc));
      gradTypes.push_back(param.getTensorType());
      gradAttrs.push_back(nameAttr(mb, "grad:" + p));
      if (countedElsewhere(p))
        skip.push_back(mb.getStringAttr(p));
    }
    if (dp > 1 && !grads.empty()) {
      // Expert shards (expert parallelism) over "edp", the others over
      // "dp"; with ZeRO-1 each rank keeps its part of every flattened,
      // padded, averaged gradient (the tied-weight exchange has summed the
      // accumulators).
      const int64_t ep = getMesh(module).ep;
      for (bool expert : {false, true}) {
        SmallVector<unsigned> mine;
        for (auto [i, e] : llvm::enumerate(expertParam))
          if (e == expert)
            mine.push_back(i);
        if (mine.empty())
          continue;
        SmallVector<Value> values = llvm::map_to_vector(mine, [&](unsigned i) { return grads[i]; });
        const int64_t n = !zero ? 1 : expert ? dp / ep : dp;
        if (n == 1) {
          values = buildGradientMean(b, loc, values, expert, dp, ep);
        } else {
          for (auto [k, i] : llvm::enumerate(mine)) {
            auto full = cast<RankedTensorType>(values[k].getType());
            ZeroLayout layout{n, SmallVector<int64_t>(full.getShape())};
            gradTypes[i + 1] = RankedTensorType::get({layout.partSize()}, full.getElementType());
            NamedAttrList attrs(gradAttrs[i + 1]);
            attrs.set(kZeroAttr, zeroLayoutAttr(ctx, layout));
            gradAttrs[i + 1] = attrs.getDictionary(ctx);
          }
          values = buildZeroGradientMean(b, loc, values, expert, n, ep);
        }
        for (auto [k, i] : llvm::enumerate(mine))
          grads[i] = values[k];
      }
    }
    grads.insert(grads.begin(), zerosLike(b, loc, lossType));
    func::ReturnOp::create(b, loc, grads);
    g.setType(FunctionType::get(ctx, {}, gradTypes));
    g.setAllResultAttrs(gradAttrs);
    g->setAttr(kUpdateAttr, mb.getStringAttr(prefix + "update"));
    if (pp / virtualStages > 1)
      g->setAttr(kNormGroupAttr, mb.getStringAttr("pp"));
    if (!skip.empty())
      g->setAttr(kNormSkipAttr, mb.getArrayAttr(skip));
  }
};
} // namespace

void mlir::merak::printPipelinePlan(ModuleOp module, llvm::raw_ostream &os) {
  PipelinePlanAttr plan = getPipelinePlan(module);
  if (!plan)
    return;
  os << "// pipeline: " << plan.getStages() << " stages, " << plan.getMicrobatches()
     << " micro-batches; " << plan.getCutPoints() << " cut points, chosen:";
  for (int64_t c : plan.getCuts())
    os << " " << c;
  os << "\n";
  if (ArrayAttr rc = plan.getRecompute()) {
    ArrayRef<int64_t> stash = plan.getStashBytes(), mem = plan.getMemoryEstimate();
    os << "// recompute (merak-recompute):";
    for (auto [s, mode] : llvm::enumerate(rc)) {
      os << " stage " << s << " " << cast<StringAttr>(mode).getValue();
      if (s < stash.size())
        os << " (stash " << stash[s] << " bytes/micro-batch";
      if (s < mem.size())
        os << ", estimate " << mem[s] << " bytes";
      os << ")" << (s + 1 < rc.size() ? ";" : "");
    }
    os << "\n";
    if (!plan.getScpKept().empty()) {
      os << "// shifted critical path: fwd-keep micro-batches per stage:";
      for (int64_t k : plan.getScpKept())
        os << " " << k;
      os << "\n";
    }
  }
  ArrayRef<int64_t> costs = plan.getCosts();
  ArrayAttr owners = plan.getOwners();
  for (int64_t s = 0; s < plan.getStages(); ++s) {
    auto fwd = module.lookupSymbol<func::FuncOp>(("stage" + Twine(s) + "_forward").str());
    if (!fwd)
      continue;
    int64_t ops = 0;
    fwd.walk([&](Operation *op) { ops += !isa<func::FuncOp, func::ReturnOp>(op); });
    os << "// stage " << s << ": " << ops << " ops, "
       << costs[s] << " FLOPs (estimated forward); params:";
    for (Attribute p : cast<ArrayAttr>(owners[s]))
      os << " " << cast<StringAttr>(p).getValue();
    os << "\n//   inputs:";
    for (auto [i, t] : llvm::enumerate(fwd.getArgumentTypes())) {
      auto name = fwd.getArgAttrOfType<StringAttr>(i, "merak.name");
      os << " " << (name ? name.getValue() : "?") << ":" << t;
    }
    os << "\n//   outputs:";
    for (auto [i, t] : llvm::enumerate(fwd.getResultTypes())) {
      auto name = fwd.getResultAttrOfType<StringAttr>(i, "merak.name");
      os << " " << (name ? name.getValue() : "?") << ":" << t;
    }
    os << "\n";
  }
}
