//===- Overlap.cpp - merak-overlap ----------------------------------------===//
//
// Splits collectives into a start and a wait placed so that computation
// runs while they are in flight; optionally sub-pipelines the tensor-parallel
// all-reduces (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "OverlapPipelineGrads.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKOVERLAP
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-overlap"

using namespace mlir;
using namespace mlir::merak;

namespace {
StringRef groupOf(Operation *op) {
  auto g = op->getAttrOfType<StringAttr>("group");
  return g ? g.getValue() : StringRef();
}

bool isCollective(Operation *op) {
  if (auto a2a = dyn_cast<AllToAllOp>(op)) // two exchanges: stays blocking
    return !a2a.getHierarchical();
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op);
}

/// The start op of a blocking collective `op`, built at `b` on `inputs`.
Value buildStart(OpBuilder &b, Operation *op, ValueRange inputs) {
  Location loc = op->getLoc();
  auto request = RequestType::get(b.getContext());
  if (auto a = dyn_cast<AllReduceOp>(op))
    return AllReduceStartOp::create(b, loc, request, inputs, a.getGroupAttr(),
                                    a.getReductionAttr());
  if (auto a = dyn_cast<AllToAllOp>(op))
    return AllToAllStartOp::create(b, loc, request, inputs[0], inputs[1], a.getGroupAttr(),
                                   a.getCombineAttr(), a.getExpertsPerRankAttr(),
                                   a.getShadowSlotsAttr(), b.getI64IntegerAttr(a.getParts()),
                                   a.getCompactAttr());
  if (auto r = dyn_cast<ReduceScatterOp>(op))
    return ReduceScatterStartOp::create(b, loc, request, inputs, r.getGroupAttr(),
                                        r.getReductionAttr(),
                                        b.getI64IntegerAttr(r.getParts()));
  auto g = cast<AllGatherOp>(op);
  return AllGatherStartOp::create(b, loc, request, inputs, g.getGroupAttr(),
                                  b.getI64IntegerAttr(g.getParts()));
}

/// One collective to split: where its start and wait go. A gap g is the
/// place right before the block's g-th op (in the original order).
struct Placement {
  Operation *op;
  int64_t startGap = 0, waitGap = 0;
};

/// Replaces the collectives of `block` that `selected` accepts by a start
/// and a wait (see Passes.td). Linear in the block's ops and uses, plus the
/// sort of the events that share a gap.
void scheduleBlock(Block &block, llvm::function_ref<bool(Operation *)> selected) {
  DenseMap<Operation *, int64_t> index;
  SmallVector<Operation *> ops;
  for (Operation &op : block) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  if (ops.empty() || !block.mightHaveTerminator())
    return;
  const int64_t terminator = (int64_t)ops.size() - 1;

  SmallVector<Placement> placements;
  DenseMap<Operation *, int64_t> placementOf;
  int64_t previousStart = 0;
  for (Operation *op : ops) {
    if (!isCollective(op) || !selected(op))
      continue;
    Placement p{op};
    // Start: after its operands (a collective's operand: after that one's
    // wait) and after the previous start.
    p.startGap = previousStart;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != &block)
        continue;
      auto it = placementOf.find(def);
      int64_t g = it != placementOf.end() ? placements[it->second].waitGap : index[def] + 1;
      p.startGap = std::max(p.startGap, g);
    }
    // Wait: before the first op that reads a result.
    p.waitGap = terminator;
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers())
        if (Operation *anc = block.findAncestorOpInBlock(*user))
          p.waitGap = std::min(p.waitGap, index[anc]);
    previousStart = p.startGap;
    placementOf[op] = placements.size();
    placements.push_back(p);
  }
  if (placements.empty())
    return;

  // Events per gap, in collective order, a start before its own wait.
  struct Event {
    int64_t collective;
    bool wait;
  };
  DenseMap<int64_t, SmallVector<Event, 2>> events;
  for (auto [i, p] : llvm::enumerate(placements)) {
    events[p.startGap].push_back({(int64_t)i, false});
    events[p.waitGap].push_back({(int64_t)i, true});
  }
  SmallVector<int64_t> gaps;
  for (auto &[g, list] : events) {
    gaps.push_back(g);
    llvm::stable_sort(list, [](const Event &a, const Event &b) {
      return std::make_pair(a.collective, a.wait) < std::make_pair(b.collective, b.wait);
    });
  }
  llvm::sort(gaps);

  // Build them; results of collectives read by later starts are mapped to
  // their waits' results.
  DenseMap<Value, Value> completed;
  SmallVector<Value> requests(placements.size());
  OpBuilder b(block.getParentOp()->getContext());
  for (int64_t g : gaps) {
    b.setInsertionPoint(ops[g]);
    for (const Event &e : events[g]) {
      Operation *op = placements[e.collective].op;
      if (!e.wait) {
        SmallVector<Value> inputs;
        for (Value v : op->getOperands())
          inputs.push_back(completed.lookup(v) ? completed.lookup(v) : v);
        requests[e.collective] = buildStart(b, op, inputs);
        continue;
      }
      auto wait = WaitOp::create(b, op->getLoc(), op->getResultTypes(), requests[e.collective]);
      for (auto [from, to] : llvm::zip(op->getResults(), wait.getResults()))
        completed[from] = to;
    }
  }
  for (Placement &p : placements) {
    for (Value r : p.op->getResults())
      r.replaceAllUsesWith(completed.lookup(r));
    p.op->erase();
  }
}

/// Sub-pipelined tensor parallelism at the granularity of one matmul: the
/// "tp" all-reduce of a matmul's rows becomes two all-reduces of its halves.
void splitTpAllReduce(AllReduceOp ar) {
  if (ar.getGroup() != "tp" || ar.getInputs().size() != 1)
    return;
  auto mm = ar.getInputs()[0].getDefiningOp<MatmulOp>();
  if (!mm || !mm->hasOneUse() || mm->getBlock() != ar->getBlock())
    return;
  auto lhsType = cast<RankedTensorType>(mm.getLhs().getType());
  auto rhsType = cast<RankedTensorType>(mm.getRhs().getType());
  auto outType = cast<RankedTensorType>(mm.getType());
  if (lhsType.getRank() < 2 || rhsType.getRank() != 2 || outType.getRank() != lhsType.getRank())
    return;
  // The row dimension to split: the leading (batch) one, or the next
  // (sequence) one when the batch is 1; never the contracted last one.
  int64_t axis = 0;
  while (axis + 1 < lhsType.getRank() && lhsType.getDimSize(axis) < 2)
    ++axis;
  if (axis + 1 == lhsType.getRank()) {
    mlir::emitRemark(ar.getLoc())
        << "merak-overlap: tp-overlap=sub-pipeline does not apply to this all-reduce: its "
           "matmul has a single row (batch and sequence 1), nothing to split in two";
    return;
  }
  int64_t rows = lhsType.getDimSize(axis);
  int64_t half = rows / 2;
  OpBuilder b(mm);
  Location loc = mm.getLoc();
  auto slice = [&](Value v, int64_t from, int64_t to) {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> starts(t.getRank(), 0), strides(t.getRank(), 1),
        limits(t.getShape()), shape(t.getShape());
    starts[axis] = from;
    limits[axis] = to;
    shape[axis] = to - from;
    return SliceOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), v,
                           starts, limits, strides)
        .getResult();
  };
  auto part = [&](int64_t from, int64_t to) {
    Value x = slice(mm.getLhs(), from, to);
    SmallVector<int64_t> shape(outType.getShape());
    shape[axis] = to - from;
    Value y = MatmulOp::create(b, loc, RankedTensorType::get(shape, outType.getElementType()),
                               x, mm.getRhs());
    return AllReduceOp::create(b, ar.getLoc(), ValueRange{y}, "tp", ar.getReduction())
        .getResult(0);
  };
  Value a = part(0, half);
  Value c = part(half, rows);
  b.setInsertionPoint(ar);
  Value joined = ConcatOp::create(b, loc, outType, ValueRange{a, c}, b.getI64IntegerAttr(axis));
  ar.getResult(0).replaceAllUsesWith(joined);
  ar.erase();
  mm.erase();
}

struct MerakOverlapPass : merak::impl::MerakOverlapBase<MerakOverlapPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tpOverlap != "none" && tpOverlap != "sub-pipeline") {
      module.emitError("merak-overlap: tp-overlap must be none or sub-pipeline, got '")
          << tpOverlap << "'";
      return signalPassFailure();
    }
    const bool subPipeline = tpOverlap == "sub-pipeline";
    auto selected = [&](Operation *op) {
      StringRef g = groupOf(op);
      return (g == "dp" && dpOverlap) || (g == "tp" && subPipeline) ||
             (g == "ep" && epOverlap && isa<AllToAllOp>(op));
    };
    // A pipeline's dp gradient all-reduce: under its last backward.
    if (dpOverlap)
      overlapPipelineGradients(module, bucketBytes);
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (subPipeline) {
        SmallVector<AllReduceOp> tpReduces;
        fn.walk([&](AllReduceOp ar) { tpReduces.push_back(ar); });
        for (AllReduceOp ar : tpReduces)
          splitTpAllReduce(ar);
      }
      fn.walk([&](Block *block) { scheduleBlock(*block, selected); });
    }
  }
};
} // namespace
