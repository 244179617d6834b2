//===- ReportStageCosts.cpp - the report's numbers for the cost model -----===//
//
// What the simulator (Simulate.cpp) and the planner read of a compiled
// pipelined program: per stage, the collected report's FLOPs, memory and
// traffic (Report.cpp), each fragment's ops with their roofline work or
// measured seconds (--op-costs), the bytes the runner still copies around
// a fragment call, and the recomputation's ops.
//
//===----------------------------------------------------------------------===//
#include "ReportModel.h"
#include "merak/Dialect/Merak/Analysis/OpCosts.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::report;

int64_t mlir::merak::fragmentCopyBytes(func::FuncOp fragment) {
  auto copied = [](StringAttr name) {
    if (!name)
      return true;
    StringRef kind = name.getValue().split(':').first;
    return !llvm::is_contained({"act", "cot", "stash", "rstash", "wstash"}, kind);
  };
  auto bytesOf = [](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return r && r.hasStaticShape() ? report::tensorBytes(r) : 0;
  };
  int64_t bytes = 0;
  for (unsigned i = 0; i < fragment.getNumArguments(); ++i)
    if (auto n = fragment.getArgAttrOfType<StringAttr>(i, "merak.name");
        n && n.getValue() == "step")
      bytes += bytesOf(fragment.getArgumentTypes()[i]);
  for (unsigned i = 0; i < fragment.getNumResults(); ++i)
    if (copied(fragment.getResultAttrOfType<StringAttr>(i, "merak.name")))
      bytes += bytesOf(fragment.getResultTypes()[i]);
  return bytes;
}

static OpWork opWork(CostOpInterface op, const MeasuredOpCosts *measured) {
  OpWork w{op.getFlops(), op.getBytesAccessed(), std::nullopt};
  auto routed = [&](auto gemm, Value weight) {
    w.routed = gemm.getFirst() != nullptr;
    w.weightExperts = cast<RankedTensorType>(weight.getType()).getDimSize(0);
    w.totalExperts = gemm.getTotalExperts().value_or(0);
  };
  if (auto mm = dyn_cast<ExpertMatmulOp>(op.getOperation())) {
    routed(mm, mm.getWeight());
    w.withCopies = mm.getShadow() != nullptr;
  } else if (auto gw = dyn_cast<ExpertMatmulGradWeightOp>(op.getOperation()))
    routed(gw, gw.getResult());
  if (measured)
    w.seconds = measured->lookup(op);
  return w;
}

SmallVector<Operation *> mlir::merak::recomputedOps(func::FuncOp f, func::FuncOp forward) {
  llvm::DenseSet<Value> reached;
  for (BlockArgument a : f.getArguments())
    if (auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(), "merak.name");
        n && n.getValue().starts_with("cot:"))
      reached.insert(a);
  // Seeded by the loss (the last stage): the forward's ops by signature.
  const bool seededByLoss = reached.empty() && forward;
  llvm::StringSet<> forwardOps; // by opCostKey: name, types, inherent attributes
  if (seededByLoss)
    for (Operation &op : forward.getBody().front().without_terminator())
      forwardOps.insert(opCostKey(&op));
  SmallVector<Operation *> ahead;
  for (Operation &op : f.getBody().front().without_terminator()) {
    if (op.getNumRegions() > 0 || (seededByLoss && !forwardOps.contains(opCostKey(&op))) ||
        llvm::any_of(op.getOperands(), [&](Value v) { return reached.contains(v); }))
      reached.insert(op.getResults().begin(), op.getResults().end());
    else
      ahead.push_back(&op);
  }
  return ahead;
}

/// The recomputation of backward fragment `f` (recomputedOps): its ops'
/// work and the bytes it holds for the rest of the backward.
static void collectRecompute(func::FuncOp f, func::FuncOp forward, StageCosts &c,
                             const MeasuredOpCosts *measured) {
  SmallVector<Operation *> ahead = recomputedOps(f, forward);
  for (Operation *op : ahead)
    if (auto cost = dyn_cast<CostOpInterface>(op); cost && !report::collectiveKind(cost))
      c.recomputeOps.push_back(opWork(cost, measured));
  llvm::DenseSet<Operation *> aheadSet(ahead.begin(), ahead.end());
  for (Operation *op : ahead)
    for (Value v : op->getResults())
      if (llvm::any_of(v.getUsers(), [&](Operation *u) { return !aheadSet.contains(u); }))
        if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.hasStaticShape())
          c.recomputeHeldBytes += report::messageSlotBytes(t);
}

FailureOr<std::vector<StageCosts>> mlir::merak::collectStageCosts(ModuleOp module,
                                                                  const ReportOptions &options,
                                                                  const MeasuredOpCosts *measured) {
  Report report(options, module);
  if (failed(report.collect()))
    return failure();
  std::vector<StageCosts> costs;
  for (const StageInfo &st : report.stages) {
    StageCosts c;
    c.forwardFlops = st.forwardFlops;
    c.backwardFlops = st.backwardFlops;
    c.updateFlops = st.updateFlops;
    c.paramBytes = st.paramBytes;
    c.stateBytes = st.stateBytes;
    c.accumulatorBytes = st.accumulatorBytes;
    c.arenaPeakBytes = st.arenaPeak();
    c.stashBytes = st.stashBytes;
    c.forward = st.byFragment[0];
    c.backward = st.byFragment[1];
    c.update = st.byFragment[2];
    auto opCosts = [&](StringRef kind) {
      std::vector<OpWork> v;
      if (auto f = report.fn(module, report.fragment(costs.size(), kind)))
        f.walk([&](CostOpInterface op) {
          if (!mlir::merak::report::collectiveKind(op))
            v.push_back(opWork(op, measured));
        });
      return v;
    };
    c.forwardOps = opCosts("forward");
    c.backwardOps = opCosts("backward");
    auto copies = [&](StringRef kind) {
      func::FuncOp f = report.fn(module, report.fragment(costs.size(), kind));
      return f ? fragmentCopyBytes(f) : 0;
    };
    c.forwardCopyBytes = copies("forward");
    c.backwardCopyBytes = copies("backward") + copies("recompute") + copies("backward_weight");
    c.updateCopyBytes = copies("update");
    c.updateOps = opCosts("update");
    std::vector<OpWork> prepare = opCosts("prepare"); // once a step, as the update
    c.updateOps.insert(c.updateOps.end(), prepare.begin(), prepare.end());
    for (StringRef kind : {"recompute", "backward_weight"}) {
      std::vector<OpWork> part = opCosts(kind);
      c.backwardOps.insert(c.backwardOps.end(), part.begin(), part.end());
    }
    // The recomputation: merak-split-backward's @stage<s>_recompute (what
    // it carries to the backward, "rstash:i", is held until then), else the
    // backward's ops no incoming gradient reaches.
    if (auto r = report.fn(module, report.fragment(costs.size(), "recompute"))) {
      c.recomputeOps = opCosts("recompute");
      for (Type t : r.getResultTypes())
        if (auto rt = dyn_cast<RankedTensorType>(t); rt && rt.hasStaticShape())
          c.recomputeHeldBytes += report::messageSlotBytes(rt);
    } else if (auto b = report.fn(module, report.fragment(costs.size(), "backward"))) {
      collectRecompute(b, report.fn(module, report.fragment(costs.size(), "forward")), c, measured);
    }
    costs.push_back(std::move(c));
  }
  return costs;
}
