//===- Recompute.cpp - merak-recompute ------------------------------------===//
//
// Chooses, per pipeline stage, which forward values the backward recomputes
// and which the forward stashes (see Passes.td and docs/parallelism.md,
// "Recomputation"):
//
//  * merak-pipeline builds @stage<s>_backward by cloning the stage's ops in
//    the same order as @stage<s>_forward, then the reverse sweep. So the
//    backward's first N ops (N: the forward's ops) are the forward's, one
//    for one: op i of the backward recomputes op i of the forward. This pass
//    relies on that correspondence (checked op by op) and therefore runs
//    right after merak-pipeline, before anything reorders or folds them.
//  * A mode picks the recomputed ops R among the backward's copy of the
//    forward: none (R empty), selective (the attention core, found by
//    structure: a softmax whose input comes from a batched matmul of two
//    activations, QK^T, through elementwise ops (scale, mask), with the ops
//    from the softmax to the batched matmul it feeds, dropout and probs x V;
//    or a fused merak.attention, whose result is then recomputed from the
//    stashed q, k, v instead of stashed with its lse),
//    or full (everything: merak-pipeline's program, unchanged). Values that
//    depend on no argument (parameter reads, transposed weights, constant
//    masks) are always recomputed: they hold no activation memory.
//  * Every activation the reverse sweep or a live recomputed op reads and
//    that R does not produce is stashed: the forward returns it ("stash:i"),
//    the backward takes it as an argument of the same name (after the
//    cotangents), the backward's copies become dead and are erased.
//  * stage-aware picks, per stage, the first of none, selective, full whose
//    estimated memory fits `memory-per-device`: (stage input bytes + stash
//    bytes) per micro-batch x the micro-batches the schedule holds in
//    flight on that stage (1F1B and ZB-H1: min(m, S - s); GPipe and
//    interleaved: m) + the bytes of the parameters the stage holds x (2 +
//    optimizer-slots): the weights, their gradient accumulators and the
//    optimizer's state (an estimate: fragment arenas are not counted).
//  * Under the shifted-critical-path schedule the last stage recomputes
//    nothing, and min(held, kept + 1) of a stage's held micro-batches
//    (the `fwd-keep` ones and the one whose `rcp` ran) count at none's
//    bytes.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKRECOMPUTE
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-recompute"

using namespace mlir;
using namespace mlir::merak;

static int64_t typeBytes(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape())
    return 0;
  return r.getNumElements() * std::max<int64_t>(1, storageElementBytes(r.getElementType()));
}

FailureOr<RecomputeMode> mlir::merak::parseRecomputeMode(StringRef name) {
  if (name == "none")
    return RecomputeMode::None;
  if (name == "selective")
    return RecomputeMode::Selective;
  if (name == "full")
    return RecomputeMode::Full;
  if (name == "stage-aware")
    return RecomputeMode::StageAware;
  return failure();
}

StringRef mlir::merak::recomputeModeName(RecomputeMode mode) {
  switch (mode) {
  case RecomputeMode::None:
    return "none";
  case RecomputeMode::Selective:
    return "selective";
  case RecomputeMode::Full:
    return "full";
  case RecomputeMode::StageAware:
    return "stage-aware";
  }
  return "full";
}

int64_t mlir::merak::inFlightMicrobatches(PipelineScheduleKind kind, int64_t stages,
                                          int64_t microbatches, int64_t stage) {
  if (kind == PipelineScheduleKind::OneFOneB || kind == PipelineScheduleKind::ZeroBubbleH1 ||
      kind == PipelineScheduleKind::ShiftedCriticalPath)
    return std::min(microbatches, stages - stage);
  return microbatches;
}

namespace {
/// One stage's forward and backward with the correspondence between the
/// forward's ops and the backward's copy of them.
struct StagePair {
  func::FuncOp fwd, bwd;
  SmallVector<Operation *> fwdOps, bwdOps; // op i of the forward, its copy
  llvm::DenseSet<Operation *> prefix;      // bwdOps as a set
  llvm::DenseSet<Value> dynamic;           // copies' results depending on arguments
};

/// Whether `op` is a batched matmul of two activations (QK^T, probs x V).
bool isActivationBmm(Operation *op, const llvm::DenseSet<Value> &dynamic) {
  auto mm = dyn_cast_or_null<MatmulOp>(op);
  if (!mm)
    return false;
  auto t = dyn_cast<RankedTensorType>(mm.getType());
  return t && t.getRank() >= 3 && dynamic.contains(mm.getLhs()) && dynamic.contains(mm.getRhs());
}

/// The attention-core ops among the backward's copy of the forward.
llvm::DenseSet<Operation *> attentionCore(const StagePair &p) {
  llvm::DenseSet<Operation *> core;
  const int kMaxChain = 6;
  for (Operation *op : p.bwdOps) {
    // merak-fuse-attention's op is the whole core.
    if (auto attn = dyn_cast<AttentionOp>(op)) {
      if (p.dynamic.contains(attn.getResult()))
        core.insert(op);
      continue;
    }
    auto sm = dyn_cast<SoftmaxOp>(op);
    if (!sm || !p.dynamic.contains(sm.getResult()))
      continue;
    // Back to QK^T through ops with exactly one activation operand.
    SmallVector<Operation *> chain{op};
    Value v = sm.getInput();
    bool found = false;
    for (int i = 0; i < kMaxChain; ++i) {
      Operation *def = v.getDefiningOp();
      if (!def || !p.prefix.contains(def))
        break;
      if (isActivationBmm(def, p.dynamic)) {
        chain.push_back(def);
        found = true;
        break;
      }
      if (isa<MatmulOp>(def) || def->getNumResults() != 1)
        break;
      SmallVector<Value> dyn;
      for (Value o : def->getOperands())
        if (p.dynamic.contains(o))
          dyn.push_back(o);
      if (dyn.size() != 1)
        break;
      chain.push_back(def);
      v = dyn.front();
    }
    if (!found)
      continue;
    core.insert(chain.begin(), chain.end());
    // Forward to probs x V through single-user ops (dropout, casts).
    Value out = sm.getResult();
    for (int i = 0; i < kMaxChain; ++i) {
      Operation *user = nullptr;
      int users = 0;
      for (Operation *u : out.getUsers())
        if (p.prefix.contains(u))
          user = u, ++users;
      if (users != 1)
        break;
      if (isActivationBmm(user, p.dynamic)) {
        core.insert(user);
        break;
      }
      if (isa<MatmulOp>(user) || user->getNumResults() == 0)
        break;
      core.insert(user);
      out = user->getResult(0);
    }
  }
  return core;
}

struct MerakRecomputePass : merak::impl::MerakRecomputeBase<MerakRecomputePass> {
  using Base::Base;

  LogicalResult pairStage(ModuleOp module, int64_t s, StagePair &p) {
    std::string prefix = ("stage" + Twine(s) + "_").str();
    p.fwd = module.lookupSymbol<func::FuncOp>(prefix + "forward");
    p.bwd = module.lookupSymbol<func::FuncOp>(prefix + "backward");
    if (!p.fwd || !p.bwd)
      return module.emitError("merak-recompute: no @") << prefix << "forward/backward (run "
                                                          "merak-pipeline first)";
    // (merak-pipeline left the forward's own parameter writes, and what
    // only they read, out of the backward.)
    llvm::DenseSet<Operation *> forwardOnly = forwardOnlyOps(p.fwd.getBody().front());
    for (Operation &op : p.fwd.getBody().front().without_terminator())
      if (!forwardOnly.contains(&op))
        p.fwdOps.push_back(&op);
    Block &bb = p.bwd.getBody().front();
    auto it = bb.begin();
    for (Operation *f : p.fwdOps) {
      if (it == bb.end() || it->getName() != f->getName() ||
          it->getNumResults() != f->getNumResults() || it->getNumOperands() != f->getNumOperands())
        return p.bwd.emitError("merak-recompute: @")
               << p.bwd.getSymName() << " does not start with a copy of @" << p.fwd.getSymName()
               << " (run merak-recompute right after merak-pipeline)";
      p.bwdOps.push_back(&*it++);
    }
    p.prefix.insert(p.bwdOps.begin(), p.bwdOps.end());
    // VJP rules build the gradients of every operand; those nothing reads
    // (e.g. of a constant scale) would count their inputs as read.
    SmallVector<Operation *> sweep;
    for (Operation &op : llvm::make_range(it, bb.end()))
      sweep.push_back(&op);
    for (Operation *op : llvm::reverse(sweep))
      if (isOpTriviallyDead(op))
        op->erase();
    for (Operation *op : p.bwdOps)
      if (llvm::any_of(op->getOperands(), [&](Value v) {
            return isa<BlockArgument>(v) || p.dynamic.contains(v);
          }))
        for (Value r : op->getResults())
          p.dynamic.insert(r);
    return success();
  }

  /// The values `mode` stashes (in program order); `recomputed` the copies
  /// still run in the backward.
  SmallVector<Value> stashFor(const StagePair &p, RecomputeMode mode,
                              const llvm::DenseSet<Operation *> &core) {
    if (mode == RecomputeMode::Full)
      return {};
    auto inR = [&](Operation *op) {
      return mode == RecomputeMode::Selective && core.contains(op);
    };
    // Live recomputed ops: in R, with a result read by the sweep or by a
    // live recomputed op (reverse program order).
    llvm::DenseSet<Operation *> live;
    auto readByLive = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *u) {
        return !p.prefix.contains(u) || live.contains(u);
      });
    };
    for (Operation *op : llvm::reverse(p.bwdOps))
      if (inR(op) && llvm::any_of(op->getResults(), readByLive))
        live.insert(op);
    SmallVector<Value> stash;
    for (Operation *op : p.bwdOps) {
      if (inR(op))
        continue;
      for (Value r : op->getResults())
        if (p.dynamic.contains(r) && readByLive(r))
          stash.push_back(r);
    }
    return stash;
  }

  /// Bytes of the narrow copies merak-cache-param-casts will keep of the
  /// parameters the stage's forward casts (each once).
  static int64_t castCopyBytes(func::FuncOp fwd) {
    llvm::StringSet<> seen;
    int64_t n = 0;
    fwd.walk([&](CastOp cast) {
      auto get = cast.getInput().getDefiningOp<GetParamOp>();
      auto from = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getInput().getType()));
      auto to = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getResult().getType()));
      if (get && from && to && to.getWidth() < from.getWidth() && seen.insert(get.getName()).second)
        n += typeBytes(cast.getResult().getType());
    });
    return n;
  }

  int64_t paramsBytes(ModuleOp module, Attribute owned) {
    int64_t n = 0;
    if (auto names = dyn_cast_or_null<ArrayAttr>(owned))
      for (Attribute a : names)
        if (auto p = module.lookupSymbol<ParamOp>(cast<StringAttr>(a).getValue()))
          n += typeBytes(p.getTensorType());
    return n;
  }

  void rewrite(StagePair &p, ArrayRef<Value> stash) {
    if (stash.empty())
      return;
    MLIRContext *ctx = p.fwd.getContext();
    Builder b(ctx);
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(p.bwdOps))
      index[op] = i;
    auto ret = cast<func::ReturnOp>(p.fwd.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    p.fwd.getAllResultAttrs(resultAttrs);
    for (auto [i, stashed] : llvm::enumerate(stash)) {
      Value v = stashed;
      auto r = cast<OpResult>(v);
      Value fv = p.fwdOps[index.lookup(r.getOwner())]->getResult(r.getResultNumber());
      results.push_back(fv);
      auto name = b.getDictionaryAttr(
          b.getNamedAttr("merak.name", b.getStringAttr("stash:" + Twine(i))));
      resultAttrs.push_back(name);
      unsigned at = p.bwd.getNumArguments();
      if (failed(p.bwd.insertArgument(at, v.getType(), name, v.getLoc())))
        return;
      v.replaceAllUsesWith(p.bwd.getArgument(at));
    }
    ret->setOperands(results);
    p.fwd.setType(FunctionType::get(ctx, p.fwd.getArgumentTypes(), ValueRange(results).getTypes()));
    p.fwd.setAllResultAttrs(resultAttrs);
    // The copies nothing reads any more (ops without results, e.g. a
    // parameter write, are left alone).
    for (Operation *op : llvm::reverse(p.bwdOps))
      if (op->getNumResults() > 0 && op->use_empty())
        op->erase();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PipelinePlanAttr plan = getPipelinePlan(module);
    if (!plan) {
      module.emitError("merak-recompute: no merak.pipeline (run merak-pipeline first)");
      return signalPassFailure();
    }
    FailureOr<RecomputeMode> modeOr = parseRecomputeMode(mode);
    if (failed(modeOr)) {
      module.emitError("merak-recompute: unknown mode '")
          << mode << "' (expected none, full, selective or stage-aware)";
      return signalPassFailure();
    }
    FailureOr<PipelineScheduleKind> kind = parsePipelineSchedule(schedule);
    if (failed(kind)) {
      module.emitError("merak-recompute: unknown schedule '") << schedule << "'";
      return signalPassFailure();
    }
    if (*modeOr == RecomputeMode::StageAware && memoryPerDevice <= 0) {
      module.emitError("merak-recompute: mode stage-aware needs memory-per-device");
      return signalPassFailure();
    }
    int64_t stages = plan.getStages();
    int64_t m = plan.getMicrobatches();
    ArrayAttr owners = plan.getOwners();

    SmallVector<Attribute> chosen;
    SmallVector<int64_t> stashAttr, memAttr;
    SmallVector<int64_t> keptAttr; // shifted critical path: fwd-keep micro-batches per stage
    Builder b(module.getContext());
    for (int64_t s = 0; s < stages; ++s) {
      StagePair p;
      if (failed(pairStage(module, s, p)))
        return signalPassFailure();
      llvm::DenseSet<Operation *> core = attentionCore(p);
      int64_t inputBytes = 0;
      for (BlockArgument a : p.fwd.getArguments())
        if (auto n = p.fwd.getArgAttrOfType<StringAttr>(a.getArgNumber(), "merak.name");
            n && n.getValue().starts_with("act:"))
          inputBytes += typeBytes(a.getType());
      auto bytesOf = [&](ArrayRef<Value> vs) {
        int64_t n = inputBytes;
        for (Value v : vs)
          n += typeBytes(v.getType());
        return n;
      };
      int64_t held = inFlightMicrobatches(*kind, stages, m, s);
      int64_t fixed = paramsBytes(module, owners ? owners[s] : Attribute()) * (2 + optimizerSlots) +
                      (castCache ? castCopyBytes(p.fwd) : 0);
      // Shifted critical path: the last stage recomputes nothing; on the
      // others the `fwd-keep` micro-batches and the one recomputed ahead of
      // its gradient hold every activation (none's stash): at the last
      // forward, min(held, kept + 1) of the held micro-batches.
      // Under a budget, a stage keeps fewer final micro-batches than the
      // paper's min(m, S - s - 1) when that is what fits (`kept`, recorded
      // as "scp_kept" for the schedule).
      const bool scp = *kind == PipelineScheduleKind::ShiftedCriticalPath;
      int64_t mostKept = scp ? keptMicrobatches(*kind, stages, m, s) : 0, kept = mostKept;
      int64_t fullHeld = 0;
      auto setKept = [&](int64_t k) {
        kept = k;
        fullHeld = scp ? std::min(held, k + 1) : 0;
      };
      setKept(mostKept);
      int64_t fullBytes = scp ? bytesOf(stashFor(p, RecomputeMode::None, core)) : 0;
      auto estimateOf = [&](ArrayRef<Value> stash) {
        return (held - fullHeld) * bytesOf(stash) + fullHeld * fullBytes + fixed;
      };
      // The most kept micro-batches with which `stash` fits the budget (the
      // fewest, 0, when none does).
      auto fitKept = [&](ArrayRef<Value> stash) {
        for (int64_t k = mostKept; k >= 0; --k) {
          setKept(k);
          if (memoryPerDevice <= 0 || estimateOf(stash) <= memoryPerDevice)
            return true;
        }
        return false;
      };
      RecomputeMode pick = scp && s == stages - 1 ? RecomputeMode::None : *modeOr;
      SmallVector<Value> stash;
      int64_t estimate = 0;
      if (pick == RecomputeMode::StageAware) {
        bool fits = false;
        for (RecomputeMode c : {RecomputeMode::None, RecomputeMode::Selective,
                                RecomputeMode::Full}) {
          stash = stashFor(p, c, core);
          bool ok = fitKept(stash);
          estimate = estimateOf(stash);
          if (ok) {
            pick = c, fits = true;
            break;
          }
        }
        if (!fits) {
          InFlightDiagnostic diag = module.emitError("merak-recompute: stage ");
          diag
              << s << " needs " << estimate << " bytes even with full recomputation ("
              << held << " micro-batches in flight x " << bytesOf(stash)
              << " bytes of stage inputs";
          if (fullHeld)
            diag << ", " << fullHeld << " of them holding all " << fullBytes
                 << " bytes of activations under shifted-critical-path";
          diag << " + " << fixed
              << " bytes of parameters, gradients and optimizer state), more than "
                 "memory-per-device = "
              << (int64_t)memoryPerDevice << " bytes";
          return signalPassFailure();
        }
      } else {
        stash = stashFor(p, pick, core);
        (void)fitKept(stash); // keeps 0 when nothing fits: the mode was asked for
        estimate = estimateOf(stash);
      }
      keptAttr.push_back(kept);
      LLVM_DEBUG(llvm::dbgs() << "merak-recompute: stage " << s << ": "
                              << recomputeModeName(pick) << ", stash " << bytesOf(stash)
                              << " bytes per micro-batch, estimated peak " << estimate << "\n");
      chosen.push_back(b.getStringAttr(recomputeModeName(pick)));
      stashAttr.push_back(bytesOf(stash));
      memAttr.push_back(estimate);
      rewrite(p, stash);
    }
    // The shifted critical path's fwd-keep counts per stage (none otherwise).
    if (*kind != PipelineScheduleKind::ShiftedCriticalPath)
      keptAttr.clear();
    module->setAttr(kPipelineAttr,
                    plan.withRecompute(b.getArrayAttr(chosen), stashAttr, memAttr, keptAttr));
  }
};
} // namespace
