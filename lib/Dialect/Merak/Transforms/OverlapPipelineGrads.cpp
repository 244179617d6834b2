//===- OverlapPipelineGrads.cpp - dp all-reduce under the last backward ---===//
//
// merak-overlap's data-parallel overlap in a pipeline (see Passes.td): a
// stage's gradient accumulators are final once its last micro-batch's
// backward (or, zero bubble, weight-gradient) fragment has added to them,
// which it does parameter by parameter, last layer first. So that the dp
// all-reduce runs under the rest of that fragment (Megatron's
// overlap-grad-reduce), the fragment is cloned as "<name>_last", in which
// each accumulator update is followed by the all-reduce of its bucket (the
// buckets filled in the order the updates happen, up to `bucketBytes`)
// and the reduced values are written back at the end; the all-reduce of
// the same accumulators in @stage<s>_update becomes the identity (under
// interleaving, rank r's update covers all its chunks: each chunk's copy
// reduces the accumulators it finishes). The
// runtime runs the "_last" fragment for a stage's last micro-batch; the
// scheduling of the block (Overlap.cpp) then splits each bucket's
// all-reduce into a start right after its last accumulation and a wait
// before the write-back at the end.
//
//===----------------------------------------------------------------------===//
#include "OverlapPipelineGrads.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::merak;

namespace {

/// The dp all-reduce of @update whose every operand reads a gradient
/// accumulator (what merak-pipeline's @stage<s>_grads does), or null.
AllReduceOp accumulatorAllReduce(func::FuncOp update, llvm::StringSet<> &names) {
  AllReduceOp found;
  update.walk([&](AllReduceOp ar) {
    if (ar.getGroup() != "dp" || ar.getReduction() != "mean" || found)
      return;
    llvm::StringSet<> seen;
    for (Value v : ar.getOperands()) {
      auto get = v.getDefiningOp<GetParamOp>();
      if (!get || !get.getName().starts_with(kGradAccumulatorPrefix))
        return;
      seen.insert(get.getName());
    }
    found = ar;
    names = std::move(seen);
  });
  return found;
}

/// Clones `fn` as "<name>_last" (fragment kind "<kind>_last") with the
/// accumulator updates of `names` all-reduced in buckets and written back
/// at the end. Returns false (and builds nothing) unless `fn` writes each
/// of them exactly once.
bool buildLast(func::FuncOp fn, const llvm::StringSet<> &names, int64_t bucketBytes) {
  SmallVector<SetParamOp> writes;
  llvm::StringSet<> written;
  bool once = true;
  fn.walk([&](SetParamOp set) {
    if (names.contains(set.getName())) {
      writes.push_back(set);
      once &= written.insert(set.getName()).second;
    }
  });
  if (!once || written.size() != names.size())
    return false;
  func::FuncOp last = fn.clone();
  last.setSymName((fn.getSymName() + "_last").str());
  OpBuilder b(fn);
  b.setInsertionPointAfter(fn);
  b.insert(last);
  if (auto frag = fn->getAttrOfType<DictionaryAttr>(kFragmentAttr)) {
    NamedAttrList attrs(frag);
    if (auto kind = frag.getAs<StringAttr>("kind"))
      attrs.set("kind", b.getStringAttr(kind.getValue() + "_last"));
    last->setAttr(kFragmentAttr, attrs.getDictionary(fn.getContext()));
  }
  writes.clear();
  last.walk([&](SetParamOp set) {
    if (names.contains(set.getName()))
      writes.push_back(set);
  });
  // merak-pipeline accumulates every gradient after the whole reverse
  // sweep; here each accumulation (read, add) moves right after its
  // gradient is computed, so it is final as early as the data allow.
  Block &body = last.getBody().front();
  auto finalValue = [](SetParamOp set) { return set.getValue(); };
  // Moves `op` up to right after the last of its operands' definitions.
  auto hoist = [&](Operation *op) {
    Operation *after = nullptr;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp(); d && d->getBlock() == &body)
        if (!after || after->isBeforeInBlock(d))
          after = d;
    if (after && after->isBeforeInBlock(op))
      op->moveAfter(after);
    else if (!after)
      op->moveBefore(&body.front());
  };
  for (SetParamOp set : writes) {
    auto add = finalValue(set).getDefiningOp<AddOp>();
    if (!add)
      continue;
    // The ops that only feed this gradient (e.g. the transpose back to the
    // weight's layout, which the reverse sweep reaches last because the
    // forward read and transposed the weights first) move up as well,
    // producers first.
    SmallVector<Operation *> chain, work;
    llvm::SmallPtrSet<Operation *, 8> inChain;
    for (Value v : add->getOperands())
      if (Operation *d = v.getDefiningOp(); d && d->getBlock() == &body && d->hasOneUse() &&
                                            !isa<GetParamOp>(d) && inChain.insert(d).second)
        work.push_back(d);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      chain.push_back(op);
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp(); d && d->getBlock() == &body && d->hasOneUse() &&
                                              !isa<GetParamOp>(d) && inChain.insert(d).second)
          work.push_back(d);
    }
    llvm::sort(chain, [](Operation *a, Operation *b2) { return a->isBeforeInBlock(b2); });
    for (Operation *op : chain)
      hoist(op);
    for (unsigned i = 0; i < 2; ++i) {
      auto get = add->getOperand(i).getDefiningOp<GetParamOp>();
      Operation *g = add->getOperand(1 - i).getDefiningOp();
      if (!get || get.getName() != set.getName() || !get->hasOneUse())
        continue;
      if (g && g->getBlock() == &body) {
        get->moveAfter(g);
        add->moveAfter(get);
      } else {
        get->moveBefore(&body.front());
        add->moveAfter(get);
      }
      break;
    }
  }
  // Buckets in the order the accumulators become final; each bucket's
  // all-reduce right after its last update, every write-back at the end.
  auto defOf = [&](SetParamOp set) -> Operation * {
    Operation *d = finalValue(set).getDefiningOp();
    return d && d->getBlock() == &body ? d : nullptr;
  };
  llvm::stable_sort(writes, [&](SetParamOp a, SetParamOp b2) {
    Operation *da = defOf(a), *db = defOf(b2);
    if (!da || !db)
      return !da && db;
    return da->isBeforeInBlock(db);
  });
  Operation *ret = body.getTerminator();
  SmallVector<SetParamOp> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty())
      return;
    SmallVector<Value> values;
    for (SetParamOp set : bucket)
      values.push_back(set.getValue());
    Operation *after = defOf(bucket.back());
    OpBuilder ob(&body, body.begin());
    if (after)
      ob.setInsertionPointAfter(after);
    auto ar = AllReduceOp::create(ob, bucket.back().getLoc(), values, "dp", "mean");
    for (auto [set, reduced] : llvm::zip(bucket, ar.getResults())) {
      OpBuilder rb(ret);
      SetParamOp::create(rb, set.getLoc(), set.getNameAttr(), reduced);
      set.erase();
    }
    bucket.clear();
    bytes = 0;
  };
  for (SetParamOp set : writes) {
    auto t = cast<RankedTensorType>(set.getValue().getType());
    bucket.push_back(set);
    bytes += t.getNumElements() * storageElementBytes(t.getElementType());
    if (bytes >= bucketBytes)
      flush();
  }
  flush();
  return true;
}

} // namespace

void mlir::merak::overlapPipelineGradients(ModuleOp module, int64_t bucketBytes) {
  PipelinePlanAttr plan = getPipelinePlan(module);
  if (!plan)
    return;
  int64_t chunks = plan.getVirtualStages(), ranks = plan.getRanks();
  auto fragment = [&](int64_t s, StringRef kind) {
    return module.lookupSymbol<func::FuncOp>(("stage" + Twine(s) + "_" + kind).str());
  };
  // Rank r's update reduces the accumulators of all its chunks (model
  // stages r, r + ranks, ...): each chunk's last accumulating fragment
  // takes over those it writes, each exactly once.
  for (int64_t r = 0; r < ranks; ++r) {
    func::FuncOp update = fragment(r, "update");
    if (!update)
      continue;
    llvm::StringSet<> names;
    AllReduceOp ar = accumulatorAllReduce(update, names);
    if (!ar)
      continue;
    SmallVector<std::pair<func::FuncOp, llvm::StringSet<>>> parts;
    llvm::StringSet<> covered;
    bool disjoint = true;
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t k = c * ranks + r;
      func::FuncOp weight = fragment(k, "backward_weight");
      func::FuncOp finalFn = weight ? weight : fragment(k, "backward");
      if (!finalFn)
        continue;
      llvm::StringSet<> mine;
      finalFn.walk([&](SetParamOp set) {
        if (names.contains(set.getName()))
          mine.insert(set.getName());
      });
      for (const auto &n : mine)
        disjoint &= covered.insert(n.getKey()).second;
      if (!mine.empty())
        parts.push_back({finalFn, std::move(mine)});
    }
    if (!disjoint || covered.size() != names.size())
      continue; // an accumulator no chunk or two chunks finish: keep the update's
    bool built = true;
    for (auto &[fn, mine] : parts)
      built &= buildLast(fn, mine, bucketBytes);
    if (!built) {
      // buildLast builds nothing when it declines; undo the others.
      for (auto &[fn, mine] : parts)
        if (auto last = module.lookupSymbol<func::FuncOp>((fn.getSymName() + "_last").str()))
          last.erase();
      continue;
    }
    // The accumulators arrive reduced (mean over dp).
    ar.replaceAllUsesWith(ar.getOperands());
    ar.erase();
  }
}
