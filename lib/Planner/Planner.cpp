//===- Planner.cpp - merak-compile --devices: the parallelism planner -----===//
//
// 1. Probe: per tensor-parallel degree t (dividing N, within a node, that
//    merak-tensor-parallel accepts) compile the model once into the finest
//    pipeline: one stage per candidate cut of merak-pipeline, one
//    micro-batch holding the whole batch. From it a table per fine stage:
//    every op of the forward and backward fragments with its FLOPs and
//    bytes (CostOpInterface; parameter bytes apart from activation bytes),
//    the collectives, parameter / optimizer-state / accumulator bytes, the
//    arena, the activations at its cut, what it would stash without
//    recomputation and the attention core's share.
// 2. Search: for every dp x t x pp = N, micro-batch count m dividing the
//    per-rank batch, schedule, recomputation and overlap: group the fine
//    stages into pp (or 2 pp, interleaved) contiguous stages balancing
//    forward FLOPs, scale activation terms by the micro-batch's share of
//    the batch, time every op by the roofline max(FLOPs / rate, bytes /
//    bandwidth), and run the schedule on the pipeline simulator. The
//    fastest plan whose peak memory fits wins.
// Recomputation and overlap are modelled here only (RecomputeModel,
// overlapped collectives below); see docs/parallelism.md, "Planner".
//
//===----------------------------------------------------------------------===//
#include "merak/Planner/Planner.h"

#include "PlannerProbe.h"

#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"
#include "merak/Dialect/Merak/Analysis/StageBalance.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Import/OnnxImporter.h"
#include "merak/Pipelines/Registration.h"
#include "merak/Planner/Report.h"
#include "merak/Planner/Simulate.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <thread>
#include <tuple>

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;
using namespace mlir::merak::planner;

/// Zero-bubble schedules run the weight gradient (`bwd-w`) apart.
static bool splitsBackward(PipelineScheduleKind kind) {
  return kind == PipelineScheduleKind::ZeroBubbleH1 || kind == PipelineScheduleKind::ZeroBubbleH2;
}

namespace {
/// A grouped stage (chunk) at one micro-batch size.
struct Group {
  /// `recomputed`: the part of backwardFull that rebuilds the forward's
  /// values (its ops no incoming gradient reaches).
  double forward = 0, backwardFull = 0, recomputed = 0, attention = 0, updateCompute = 0;
  std::map<std::string, CollectiveTraffic> fwdTraffic, bwdTraffic, updTraffic;
  double fixedBytes = 0, arena = 0, stashInputs = 0, stashAll = 0, stashAttention = 0;
  double gradBytes = 0, actOut = 0;
  /// Optimizer state (AdamW's moments): what ZeRO-1 splits over dp.
  double stateBytes = 0;
};

//===----------------------------------------------------------------------===//
// RecomputeModel: what each recomputation policy costs. The probe's
// fragments are merak-pipeline's, whose backward recomputes from the
// stage's inputs the forward values it reads ("full"); the other policies
// are derived from them:
//   full       backward = probe backward (those values recomputed),
//              stash = the stage's inputs per micro-batch
//   none       backward = probe backward - its recomputation (the ops no
//              incoming gradient reaches; not the whole forward: values
//              the gradients do not read, such as a layer's last product,
//              are not rebuilt),
//              stash = every float result of the forward
//   selective  backward = none + the attention core's forward,
//              stash = none's minus the attention core's results
//   stage-aware  per stage the cheapest of none, selective, full whose
//              memory fits (stages with fewer micro-batches in flight keep
//              more).
// When the merak-recompute pass exists, its per-stage numbers replace
// these estimates here.
//===----------------------------------------------------------------------===//
struct RecomputeCost {
  /// Seconds of one micro-batch's backward; bytes stashed per micro-batch
  /// in flight; bytes the backward of one micro-batch rebuilds (held only
  /// while it runs).
  double backward, stashPerMicrobatch, rebuilt;
};
RecomputeCost recomputeCost(StringRef policy, const Group &g) {
  if (policy == "full")
    return {g.backwardFull, g.stashInputs, g.stashAll};
  double none = std::max(0.0, g.backwardFull - g.recomputed);
  if (policy == "selective")
    return {none + g.attention, std::max(g.stashInputs, g.stashAll - g.stashAttention),
            g.stashAttention};
  return {none, g.stashAll, 0.0};
}

/// "81.2 GB" from 1 GB on, bytes below.
std::string bytesStr(double b) {
  return b >= 1e9 ? llvm::formatv("{0:F1} GB", b / 1e9).str()
                  : llvm::formatv("{0} bytes", (int64_t)b).str();
}

struct Planner {
  explicit Planner(const CompileOptions &o) : opts(o) {}
  const CompileOptions &opts;
  DeviceProfile profile;
  double memory = 0;
  bool runtimeOnly = false, batchSplits = true;
  /// --planner-space megatron (the fixed hand policy) or megatron-best
  /// (Megatron-LM's own knobs, searched): layers split uniformly, no
  /// merak-only schedule or recomputation policy.
  bool megatron = false, megatronBest = false;
  int64_t devices = 1, batch = 1;
  /// By (tp, sequence parallelism).
  std::map<std::pair<int64_t, bool>, Probe> probes;
  std::map<std::tuple<int64_t, bool, int64_t, int64_t>, SmallVector<int64_t>> groupings;
  std::map<std::tuple<int64_t, int64_t, int64_t>, PipelineSimulation> shapes;
  int64_t evaluated = 0;

  double roofline(const std::vector<OpCost> &ops, double f) const {
    double rate = profile.achievedFlops(probes.begin()->second.dtype), bw = profile.memoryBandwidth;
    double t = 0;
    for (const OpCost &c : ops)
      t += std::max(c.flops * f / rate, bw > 0 ? (c.actBytes * f + c.paramBytes) / bw : 0.0);
    return t;
  }

  std::map<std::tuple<int64_t, bool, int64_t, int64_t>, std::vector<Group>> groupCache;

  /// groups() for a micro-batch of 1 / share of the batch, cached.
  const std::vector<Group> &groupsFor(const Probe &probe, int64_t g, int64_t share) {
    auto key = std::make_tuple(probe.tp, probe.sequenceParallel, g, share);
    auto it = groupCache.find(key);
    if (it == groupCache.end())
      it = groupCache.emplace(key, groups(probe, stageStarts(probe, g, share), 1.0 / share)).first;
    return it->second;
  }

  /// Seconds of a fine stage's optimizer update (once a step).
  double updateTime(const FineStage &s, double rate) const {
    return std::max(s.costs.updateFlops / rate,
                    2.0 * (s.costs.paramBytes + s.costs.stateBytes) / profile.memoryBandwidth);
  }

  /// Where the `g` stages (chunks) start among the fine stages (and their
  /// count at the end) at a micro-batch of 1 / share of the batch. Megatron
  /// spaces: the same number of fine stages (half-layers) per stage, as
  /// Megatron-LM splits layers. merak's: the busy time per micro-batch
  /// balanced, forward and backward by the roofline (an embedding's gather
  /// and its gradient's scatter are memory-bound: few FLOPs, real time)
  /// plus the micro-batch's share of the update, not forward FLOPs alone;
  /// then few activation bytes at the cuts, as merak-pipeline chooses.
  const SmallVector<int64_t> &stageStarts(const Probe &probe, int64_t g, int64_t share) {
    int64_t n = probe.stages.size();
    auto key = std::make_tuple(probe.tp, probe.sequenceParallel, g, share);
    auto it = groupings.find(key);
    if (it != groupings.end())
      return it->second;
    SmallVector<int64_t> starts;
    if (megatron || megatronBest) {
      for (int64_t k = 0; k <= g; ++k)
        starts.push_back((k * n + g / 2) / g);
    } else {
      double f = 1.0 / share, rate = profile.achievedFlops(probe.dtype);
      SmallVector<int64_t> picoseconds, bytes;
      for (const FineStage &s : probe.stages) {
        bytes.push_back(s.actOut);
        double busy = roofline(s.forward, f) +
                      std::max(0.0, roofline(s.backward, f) - roofline(s.recompute, f)) +
                      updateTime(s, rate) * f; // ZeRO's share; a heuristic
        picoseconds.push_back((int64_t)std::llround(busy * 1e12));
      }
      starts = balanceGroups(picoseconds, bytes, g);
    }
    return groupings.emplace(key, std::move(starts)).first->second;
  }

  std::vector<Group> groups(const Probe &probe, ArrayRef<int64_t> starts, double f) {
    int64_t g = starts.size() - 1;
    double rate = profile.achievedFlops(probe.dtype);
    std::vector<Group> out(g);
    for (int64_t k = 0; k < g; ++k) {
      Group &gr = out[k];
      for (int64_t i = starts[k]; i < starts[k + 1]; ++i) {
        const FineStage &s = probe.stages[i];
        gr.forward += roofline(s.forward, f);
        gr.backwardFull += roofline(s.backward, f);
        gr.recomputed += roofline(s.recompute, f);
        gr.attention += roofline(s.attention, f);
        gr.updateCompute += updateTime(s, rate);
        auto add = [&](std::map<std::string, CollectiveTraffic> &to,
                       const std::map<std::string, CollectiveTraffic> &from, double scale) {
          for (auto &[kind, t] : from) {
            to[kind].count += t.count;
            to[kind].bytes += (int64_t)(t.bytes * scale);
          }
        };
        add(gr.fwdTraffic, s.costs.forward, f);
        add(gr.bwdTraffic, s.costs.backward, f);
        add(gr.updTraffic, s.costs.update, 1.0);
        gr.fixedBytes += s.costs.paramBytes + s.costs.stateBytes + s.costs.accumulatorBytes;
        gr.gradBytes += s.costs.accumulatorBytes;
        gr.stateBytes += s.costs.stateBytes;
        // Fragments run one at a time: the largest working set.
        gr.arena = std::max(gr.arena, s.costs.arenaPeakBytes * f);
        gr.stashAll += s.stashAll * f;
        gr.stashAttention += s.stashAttention * f;
        if (i == starts[k])
          gr.stashInputs = s.stashInputs * f;
        if (i + 1 == starts[k + 1])
          gr.actOut = s.actOut * f;
      }
    }
    return out;
  }

  /// The instruction lists' peak in-flight micro-batches (independent of
  /// the costs: the order of a stage's instructions is fixed).
  const PipelineSimulation &shape(PipelineScheduleKind kind, int64_t p, int64_t m, int64_t v,
                                  const SmallVector<SmallVector<PipelineInstr>> &program) {
    auto key = std::make_tuple((int64_t)kind * 1000 + v, p, m);
    auto it = shapes.find(key);
    if (it == shapes.end()) {
      PipelineCostModel unit;
      unit.forward.assign(p * v, 1.0);
      unit.backward.assign(p * v, 1.0);
      unit.weight.assign(p * v, splitsBackward(kind) ? 1.0 : 0.0);
      unit.actBytes.assign(std::max<int64_t>(1, p * v - 1), 0.0);
      unit.gradBytes = unit.actBytes;
      it = shapes.emplace(key, *simulatePipeline(program, unit)).first;
    }
    return it->second;
  }

  void evaluate(PlanCandidate c, const SmallVector<SmallVector<PipelineInstr>> &program,
                PipelineScheduleKind kind, std::vector<PlanCandidate> &out) {
    const Probe &probe = probes.at({c.tp, c.sequenceParallel});
    int64_t p = c.pp, v = c.virtualStages, m = c.microbatches;
    const std::vector<Group> &gs = groupsFor(probe, p * v, c.dp * m);
    // The compiled program is cut where this plan's stages are.
    const SmallVector<int64_t> &starts = stageStarts(probe, p * v, c.dp * m);
    c.stageBoundaries.clear();
    for (int64_t k = 1; k + 1 < (int64_t)starts.size(); ++k)
      c.stageBoundaries.push_back(probe.cuts[starts[k] - 1]);
    SimulateOptions so;
    so.profile = profile;
    so.dp = c.dp;
    so.tp = c.tp;
    so.pp = p;
    so.gradReduceBf16 = opts.gradReduce == "bf16";
    so.gradAccumulationFusion = opts.gradAccumulationFusion;
    const PipelineSimulation &sh = shape(kind, p, m, v, program);
    const double tpShare = c.overlap ? 0.5 : 1.0;
    // Per device stage: the recomputation policy, memory. Shifted critical
    // path: the last stage recomputes nothing; elsewhere `rcp` runs the
    // recomputation apart and the micro-batches it rebuilt or `fwd-keep`
    // kept (peakKeptInFlight of the peakInFlight, at the same moment: the
    // last forward) hold none's stash.
    const bool scp = kind == PipelineScheduleKind::ShiftedCriticalPath;
    std::vector<std::string> policy(p, c.recompute);
    if (scp)
      policy[p - 1] = "none";
    std::vector<int64_t> mem(p, 0);
    for (int64_t s = 0; s < p; ++s) {
      auto memoryWith = [&](StringRef pol) {
        double fixed = 0, stash = 0, full = 0, working = 0;
        for (int64_t ch = 0; ch < v; ++ch) {
          const Group &g = gs[ch * p + s];
          RecomputeCost rc = recomputeCost(pol, g);
          fixed += g.fixedBytes - (c.zero ? g.stateBytes * (1.0 - 1.0 / c.dp) : 0.0);
          stash += rc.stashPerMicrobatch / v;
          full += recomputeCost("none", g).stashPerMicrobatch / v;
          working = std::max(working, g.arena + (scp ? 0.0 : rc.rebuilt));
        }
        int64_t kept = sh.peakKeptInFlight[s];
        return (int64_t)(fixed + working + stash * (sh.peakInFlight[s] - kept) + full * kept);
      };
      if (c.recompute == "stage-aware" && !(scp && s == p - 1)) {
        policy[s] = "full";
        for (StringRef pol : {"none", "selective"})
          if (memory <= 0 || memoryWith(pol) <= memory) {
            policy[s] = pol.str();
            break;
          }
      }
      mem[s] = memoryWith(policy[s]);
    }
    PipelineCostModel costs;
    costs.forward.clear();
    costs.backward.clear();
    costs.weight.clear();
    costs.recompute.clear();
    const bool split = splitsBackward(kind);
    for (int64_t k = 0; k < p * v; ++k) {
      const Group &g = gs[k];
      int64_t s = k % p;
      double fwd = g.forward + tpShare * collectiveSeconds(g.fwdTraffic, s, so);
      double withRecompute = recomputeCost(policy[s], g).backward;
      // Shifted critical path: `rcp` is the part of the policy's backward
      // beyond none's (the forward the backward recomputes).
      double none = scp ? std::min(withRecompute, recomputeCost("none", g).backward) : 0.0;
      double rcp = scp ? withRecompute - none : 0.0;
      double bwd = withRecompute - rcp + tpShare * collectiveSeconds(g.bwdTraffic, s, so);
      costs.forward.push_back(fwd);
      costs.backward.push_back(split ? bwd / 2 : bwd);
      costs.weight.push_back(split ? bwd / 2 : 0.0);
      costs.recompute.push_back(rcp);
    }
    for (int64_t s = 0; s < p; ++s) {
      double update = 0, grads = 0, lastBackward = 0;
      for (int64_t ch = 0; ch < v; ++ch) {
        const Group &g = gs[ch * p + s];
        // ZeRO-1: each dp rank updates its part (the reduce-scatter and
        // all-gather move what the all-reduce moved).
        update += g.updateCompute / (c.zero ? c.dp : 1) + collectiveSeconds(g.updTraffic, s, so);
        grads += g.gradBytes;
      }
      lastBackward = costs.backward[s] + costs.weight[s];
      std::map<std::string, CollectiveTraffic> dp{{"all_reduce dp", {1, (int64_t)grads}}};
      double allReduce = collectiveSeconds(dp, s, so);
      update += c.overlap ? std::max(0.0, allReduce - lastBackward) : allReduce;
      costs.stageUpdate.push_back(update);
    }
    costs.actBytes.clear();
    for (int64_t k = 0; k + 1 < p * v; ++k)
      costs.actBytes.push_back(gs[k].actOut);
    if (costs.actBytes.empty())
      costs.actBytes.push_back(0.0);
    costs.gradBytes = costs.actBytes;
    setLinkCosts(costs, profile, p, c.dp, c.tp);
    // Interleaved: model stage k runs on device stage k % p.
    if (v > 1) {
      SmallVector<int64_t> nodes;
      for (int64_t k = 0; k < p * v; ++k)
        nodes.push_back(costs.node[k % p]);
      costs.node = nodes;
    }
    c.order = evaluated++;
    FailureOr<PipelineSimulation> sim = simulatePipeline(program, costs);
    if (failed(sim))
      return;
    c.stepTime = sim->stepTime;
    c.bubble = sim->bubbleFraction;
    c.peakMemory = *std::max_element(mem.begin(), mem.end());
    if (memory > 0 && c.peakMemory > memory) {
      int64_t worst = std::max_element(mem.begin(), mem.end()) - mem.begin();
      c.rejected = llvm::formatv("stage {0} needs {1} > {2}", worst, bytesStr(c.peakMemory),
                                 bytesStr(memory))
                       .str();
    }
    out.push_back(std::move(c));
  }
};

} // namespace

SmallVector<int64_t> mlir::merak::divisors(int64_t n) {
  SmallVector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(i);
  return d;
}

namespace {
/// The number of candidate cuts: from a two-stage probe without tensor
/// parallelism (the cut points do not depend on tp); 0 when the model
/// cannot be pipelined. Also reads the batch and the compute dtype.
LogicalResult probeCutPoints(Planner &pl, const CompileOptions &opts, DialectRegistry &registry,
                             PlannerResult &result, int64_t &cutPoints, std::string &dtype,
                             std::string &error) {
  cutPoints = 0;
  {
    MLIRContext ctx(registry);
    ctx.printOpOnDiagnostic(false);
    std::string diag;
    llvm::raw_string_ostream ds(diag);
    bool imported = false;
    OwningOpRef<ModuleOp> m = compileProbe(opts, 1, 2, ctx, ds, &pl.batch, &dtype,
                                           &pl.batchSplits, &imported);
    if (!imported) {
      error = "cannot read the model:\n" + diag;
      if (!error.empty() && error.back() == '\n')
        error.pop_back();
      return failure();
    }
    if (m)
      if (PipelinePlanAttr plan = getPipelinePlan(*m))
        cutPoints = plan.getCutPoints();
    if (!m || cutPoints < 1) {
      // One stage only: the model cannot be pipelined (or does not compile).
      MLIRContext ctx1(registry);
      ctx1.printOpOnDiagnostic(false);
      std::string d1;
      llvm::raw_string_ostream ds1(d1);
      OwningOpRef<ModuleOp> one = compileProbe(opts, 1, 1, ctx1, ds1, &pl.batch, &dtype,
                                               &pl.batchSplits);
      if (!one) {
        error = "the model does not compile for planning:\n" + diag + d1;
        return failure();
      }
      cutPoints = 0;
      result.notes.push_back("the model has no pipeline cut: pp = 1 only");
    }
  }
  return success();
}

/// The stage costs at one tensor-parallel degree, or the reason the model
/// does not accept it. Touches nothing shared: each probe has its own
/// context, so the degrees are probed concurrently.
struct TensorParallelProbe {
  int64_t tp = 1;
  bool sequenceParallel = false;
  FailureOr<Probe> probe = failure();
  std::string note;
};

void probeOneDegree(const CompileOptions &opts, const DialectRegistry &registry, int64_t fine,
                    bool concurrent, TensorParallelProbe &out) {
  MLIRContext ctx(registry,
                  concurrent ? MLIRContext::Threading::DISABLED : MLIRContext::Threading::ENABLED);
  ctx.printOpOnDiagnostic(false);
  std::string diag;
  llvm::raw_string_ostream ds(diag);
  CompileOptions o = opts;
  o.sequenceParallel = out.sequenceParallel ? 1 : 0;
  OwningOpRef<ModuleOp> m = compileProbe(o, out.tp, fine, ctx, ds, nullptr, nullptr);
  if (m) {
    // Errors of reading the costs (the memory plan) become the note.
    ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        ds << "error: " << d.str() << "\n";
      return success();
    });
    out.probe = readProbe(*m, out.tp, fine, opts.gradAccumulationFusion);
  }
  if (succeeded(out.probe)) {
    out.probe->sequenceParallel = out.sequenceParallel;
    return;
  }
  // The first error (remarks may come before it).
  StringRef first = StringRef(diag).split('\n').first;
  for (StringRef rest = diag; !rest.empty();) {
    auto [line, tail] = rest.split('\n');
    if (line.contains("error:")) {
      first = line;
      break;
    }
    rest = tail;
  }
  out.note = ("tp " + Twine(out.tp) + (out.sequenceParallel ? " with sequence parallelism" : "") +
              ": not accepted by the model (" +
              (first.empty() ? StringRef("cannot read its costs") : first) + ")")
                 .str();
}

/// The stage costs at every tensor-parallel degree the devices allow and
/// the model accepts (the others become notes), probed concurrently on the
/// machine's cores (each compiles the whole model into the finest
/// pipeline); notes and probes in the order of the degrees.
void probeTensorParallelDegrees(Planner &pl, const CompileOptions &opts,
                                DialectRegistry &registry, int64_t fine,
                                const std::string &dtype, PlannerResult &result) {
  std::vector<TensorParallelProbe> degrees;
  for (int64_t tp : divisors(pl.devices)) {
    if (tp > pl.profile.devicesPerNode) {
      result.notes.push_back(("tp " + Twine(tp) + ": more than the " +
                              Twine(pl.profile.devicesPerNode) + " devices of a node")
                                 .str());
      continue;
    }
    degrees.push_back({tp});
    // Sequence parallelism: as --sequence-parallel says when given, off in
    // the fixed Megatron-LM policy (its default), searched otherwise.
    if (tp > 1 && opts.sequenceParallel == 1)
      degrees.back().sequenceParallel = true;
    else if (tp > 1 && opts.sequenceParallel < 0 && !pl.megatron)
      degrees.push_back({tp, true});
  }
  const unsigned workers =
      std::min<unsigned>(degrees.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < degrees.size();)
      probeOneDegree(opts, registry, fine, workers > 1, degrees[k]);
  };
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < workers; ++w)
    threads.emplace_back(work);
  work();
  for (std::thread &t : threads)
    t.join();
  for (TensorParallelProbe &d : degrees) {
    if (failed(d.probe)) {
      result.notes.push_back(std::move(d.note));
      continue;
    }
    d.probe->dtype = dtype;
    pl.probes.emplace(std::make_pair(d.tp, d.sequenceParallel), std::move(*d.probe));
  }
}

/// Every plan of the search space, simulated (pl.evaluate).
std::vector<PlanCandidate> enumeratePlans(Planner &pl, int64_t fine) {
  std::vector<PlanCandidate> all;
  for (auto &[key, probe] : pl.probes) {
    const auto [tp, sequenceParallel] = key;
    for (int64_t pp : divisors(pl.devices / tp)) {
      if (pp > fine)
        continue;
      int64_t dp = pl.devices / tp / pp;
      if (pl.batch % dp != 0)
        continue;
      // Micro-batches: up to 8 per stage (the bubble (p - 1) / m is then
      // below 1/8), at least 64 choices of size without a pipeline (they
      // only trade memory for parameter traffic).
      const int64_t maxMicrobatches = std::max<int64_t>(8 * pp, 64);
      for (int64_t m : divisors(pl.batch / dp)) {
        if (m > maxMicrobatches)
          break;
        if (pl.runtimeOnly && !pl.batchSplits && (dp > 1 || m > 1))
          continue;
        struct Sched {
          const char *name;
          PipelineScheduleKind kind;
          int64_t v;
        };
        SmallVector<Sched> schedules;
        if (pp == 1) {
          schedules.push_back({"1f1b", PipelineScheduleKind::OneFOneB, 1});
        } else if (pl.megatron) {
          schedules.push_back({"1f1b", PipelineScheduleKind::OneFOneB, 1});
        } else if (pl.megatronBest) {
          // Megatron-LM's 1F1B and its interleaved schedule.
          schedules.push_back({"1f1b", PipelineScheduleKind::OneFOneB, 1});
          if (2 * pp <= fine && m % pp == 0)
            schedules.push_back({"interleaved", PipelineScheduleKind::Interleaved, 2});
        } else {
          // Every schedule runs in the generated program.
          schedules.push_back({"gpipe", PipelineScheduleKind::GPipe, 1});
          schedules.push_back({"1f1b", PipelineScheduleKind::OneFOneB, 1});
          if (2 * pp <= fine && m % pp == 0)
            schedules.push_back({"interleaved", PipelineScheduleKind::Interleaved, 2});
          schedules.push_back({"zb-h1", PipelineScheduleKind::ZeroBubbleH1, 1});
          schedules.push_back({"zb-h2", PipelineScheduleKind::ZeroBubbleH2, 1});
          schedules.push_back(
              {"shifted-critical-path", PipelineScheduleKind::ShiftedCriticalPath, 1});
        }
        // Every policy is compiled by merak-recompute (--recompute), which
        // the chosen plan is compiled with.
        SmallVector<StringRef> recomputes;
        if (pl.megatron)
          recomputes.push_back("full");
        else if (pl.megatronBest)
          recomputes = {"none", "selective", "full"};
        else
          recomputes = {"none", "selective", "full", "stage-aware"};
        // Overlap as modelled (the dp all-reduce under the backward, half
        // the tp communication hidden) is what merak-overlap compiles for
        // a program without micro-batches (--dp-overlap, --tp-overlap
        // sub-pipeline). A pipeline's gradients are all-reduced under its
        // last micro-batch's backward only (merak-overlap's
        // @stage<s>_backward_last), not under the whole backward the model
        // assumes, so a written pipelined program is planned without it
        // (conservatively: the program still overlaps).
        const bool overlapCompiles = !pl.runtimeOnly || (pp == 1 && m == 1);
        SmallVector<bool> overlaps = pl.megatron || !overlapCompiles
                                         ? SmallVector<bool>{false}
                                         : SmallVector<bool>{false, true};
        // ZeRO-1 (Megatron's distributed optimizer): the optimizer state
        // and its update split over dp.
        SmallVector<bool> zeros = pl.megatron || dp == 1 ? SmallVector<bool>{false}
                                                         : SmallVector<bool>{false, true};
        for (const Sched &sc : schedules) {
          auto program = buildPipelineSchedule(sc.kind, pp, m, sc.v);
          for (StringRef rc : recomputes)
            for (bool ov : overlaps)
              for (bool zero : zeros) {
              // Without recomputation the shifted critical path is 1F1B.
              if (sc.kind == PipelineScheduleKind::ShiftedCriticalPath && rc == "none")
                continue;
              PlanCandidate c;
              c.dp = dp;
              c.tp = tp;
              c.pp = pp;
              c.microbatches = m;
              c.virtualStages = sc.v;
              c.schedule = sc.name;
              c.recompute = rc.str();
              c.overlap = ov;
              c.zero = zero;
              c.sequenceParallel = sequenceParallel;
              pl.evaluate(std::move(c), program, sc.kind, all);
              }
        }
      }
    }
  }
  return all;
}

/// The fastest plan that fits, and the runners-up; `error` says why none
/// fits.
LogicalResult choosePlan(const Planner &pl, std::vector<PlanCandidate> &all,
                         std::chrono::steady_clock::time_point start, PlannerResult &result,
                         std::string &error) {
  if (all.empty()) {
    error = "no plan to evaluate for " + std::to_string(pl.devices) +
            " devices (no factorisation dp x tp x pp the model and the batch allow)";
    for (const std::string &n : result.notes)
      error += "\n  " + n;
    return failure();
  }
  // Fastest first; equal times keep the enumeration order (fewer tp, pp;
  // less recomputation). Times are compared to 30 significant bits, so
  // that plans whose costs differ only in the summation's rounding tie.
  auto key = [](double t) {
    if (!(t > 0) || !std::isfinite(t))
      return t;
    const double quantum = std::ldexp(1.0, std::ilogb(t) - 30);
    return std::round(t / quantum) * quantum;
  };
  std::sort(all.begin(), all.end(), [&](const PlanCandidate &a, const PlanCandidate &b) {
    const double ka = key(a.stepTime), kb = key(b.stepTime);
    return ka != kb ? ka < kb : a.order < b.order;
  });
  const PlanCandidate *chosen = nullptr, *smallest = nullptr;
  for (const PlanCandidate &c : all) {
    if (c.rejected.empty() && !chosen)
      chosen = &c;
    if (!smallest || c.peakMemory < smallest->peakMemory)
      smallest = &c;
  }
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!chosen) {
    error = llvm::formatv("no plan for {0} devices fits in {1} bytes per device; the smallest "
                          "needs {2} bytes (dp {3} tp {4} pp {5}, {6} micro-batches, {7}, "
                          "recompute {8})",
                          pl.devices, (int64_t)pl.memory, smallest ? smallest->peakMemory : 0,
                          smallest ? smallest->dp : 0, smallest ? smallest->tp : 0,
                          smallest ? smallest->pp : 0, smallest ? smallest->microbatches : 0,
                          smallest ? smallest->schedule : "", smallest ? smallest->recompute : "")
                .str();
    return failure();
  }
  result.chosen = *chosen;
  int fitting = 0, rejected = 0;
  for (const PlanCandidate &c : all) {
    if (&c == chosen)
      continue;
    if (c.rejected.empty() && fitting < 5) {
      result.runnersUp.push_back(c);
      ++fitting;
    } else if (!c.rejected.empty() && c.stepTime < chosen->stepTime && rejected < 3) {
      result.runnersUp.push_back(c);
      ++rejected;
    }
  }
  return success();
}

} // namespace

FailureOr<PlannerResult> mlir::merak::planParallelism(const CompileOptions &opts, bool runtimeOnly,
                                                      llvm::raw_ostream &log, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  Planner pl(opts);
  pl.devices = opts.devices;
  pl.runtimeOnly = runtimeOnly;
  if (opts.plannerSpace != "auto" && opts.plannerSpace != "megatron" &&
      opts.plannerSpace != "megatron-best") {
    error = "--planner-space " + opts.plannerSpace + ": expected auto, megatron or megatron-best";
    return failure();
  }
  pl.megatron = opts.plannerSpace == "megatron";
  pl.megatronBest = opts.plannerSpace == "megatron-best";
  pl.profile = placeholderDeviceProfile();
  if (!opts.deviceProfile.empty()) {
    llvm::Expected<DeviceProfile> profile = readDeviceProfile(opts.deviceProfile);
    if (!profile) {
      error = "--device-profile: " + llvm::toString(profile.takeError());
      return failure();
    }
    pl.profile = std::move(*profile);
  }
  std::optional<int64_t> budget = parseByteSize(opts.memoryPerDevice);
  pl.memory = budget && *budget > 0 ? (double)*budget : pl.profile.memoryBytes;
  PlannerResult result;
  result.profile = pl.profile.name;
  result.devicesPerNode = pl.profile.devicesPerNode;
  result.space = opts.plannerSpace;
  result.memoryPerDevice = pl.memory;

  DialectRegistry registry;
  registerMerakDialects(registry);
  int64_t cutPoints = 0;
  std::string dtype;
  if (failed(probeCutPoints(pl, opts, registry, result, cutPoints, dtype, error)))
    return failure();
  const int64_t fine = cutPoints + 1;
  result.fineStages = fine;
  probeTensorParallelDegrees(pl, opts, registry, fine, dtype, result);
  if (pl.probes.empty()) {
    error = "no tensor-parallel degree of the model compiles for planning";
    for (const std::string &n : result.notes)
      error += "\n  " + n;
    return failure();
  }
  if (!pl.batchSplits && runtimeOnly)
    result.notes.push_back("merak-split-batch cannot split the model's batch: dp and "
                           "micro-batches stay 1");
  result.probeSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (auto &[key, probe] : pl.probes)
    result.experts = std::max(result.experts, probe.experts);
  std::vector<PlanCandidate> all = enumeratePlans(pl, fine);
  result.evaluated = pl.evaluated;
  if (failed(choosePlan(pl, all, start, result, error)))
    return failure();
  (void)log;
  return result;
}
