//===- Simulate.cpp - merak-compile --simulate: the cost model ------------===//
//
// Per stage s (p stages, m micro-batches, v chunks per stage, rate =
// flops[dtype] x efficiency), from the report's per-step numbers of the
// program with its transposes folded into the GEMMs and its weight
// gradients accumulated by them (as it is emitted):
//   forward  = sum over the ops of one micro-batch's forward of the measured
//              seconds (--op-costs) or else the roofline max(FLOPs / rate,
//              bytes / memory bandwidth) (CostOpInterface)
//              + the runner's copies, 2 x (argument + result bytes) /
//              memory bandwidth
//              + tp collectives of the forward / m
//   backward = likewise over the backward fragment
//   (ZB-H1: half of it input gradient, half weight gradient; interleaved:
//   each model chunk its own fragments; shifted critical path, stages
//   s < p - 1: less the recomputation)
//   recompute = likewise over the recomputation (@stage<s>_recompute, or
//              the backward's ops no incoming gradient reaches when the
//              backward is not split; shifted critical path only)
//   update   = max(update FLOPs / rate, 2 (params + state) / memory bandwidth)
//              + the update's collectives (the dp gradient all-reduce)
// Messages take latency + bytes / bandwidth on the intra-node link, or the
// inter-node one when the stages sit on different nodes.
//
//===----------------------------------------------------------------------===//
#include "merak/Planner/Simulate.h"

#include "merak/Dialect/Merak/Analysis/OpCosts.h"
#include "merak/Pipelines/Pipelines.h"
#include "mlir/Pass/PassManager.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

DeviceProfile mlir::merak::placeholderDeviceProfile() {
  DeviceProfile p;
  p.name = "placeholder";
  p.flopsF32 = p.flopsBF16 = p.flopsF16 = 1e11;
  p.memoryBandwidth = 1e11;
  p.memoryBytes = 0;
  p.devicesPerNode = std::numeric_limits<int64_t>::max() / 4;
  p.intraNode = p.interNode = LinkProfile{10e9, 10e-6};
  return p;
}

SmallVector<int64_t> mlir::merak::stageNodes(int64_t pp, int64_t dp, int64_t tp,
                                             int64_t devicesPerNode) {
  SmallVector<int64_t> nodes;
  for (int64_t s = 0; s < pp; ++s)
    nodes.push_back(s * dp * tp / devicesPerNode);
  return nodes;
}

namespace {
/// The link of one group of stage `stage`: intra-node when every group of
/// that kind on the stage has its first and last rank on one node.
LinkProfile groupLink(StringRef group, int64_t stage, const SimulateOptions &o, int64_t &n) {
  const DeviceProfile &p = o.profile;
  auto node = [&](int64_t pi, int64_t di, int64_t ti) {
    return ((pi * o.dp + di) * o.tp + ti) / p.devicesPerNode;
  };
  bool cross = false;
  if (group == "tp") {
    n = o.tp;
    for (int64_t d = 0; d < o.dp && !cross; ++d)
      cross = node(stage, d, 0) != node(stage, d, o.tp - 1);
  } else if (group == "dp") {
    n = o.dp;
    for (int64_t t = 0; t < o.tp && !cross; ++t)
      cross = node(stage, 0, t) != node(stage, o.dp - 1, t);
  } else if (group == "ep" || group == "edp") {
    // ep: dp ranks [0, ep) of a group; edp: dp ranks 0, ep, 2 ep, ...
    bool expert = group == "ep";
    n = expert ? o.ep : o.dp / std::max<int64_t>(1, o.ep);
    cross = n > 1 && node(stage, 0, 0) != node(stage, expert ? o.ep - 1 : o.dp - o.ep, 0);
  } else { // "pp": tied parameters across stages
    n = o.pp;
    cross = node(0, 0, 0) != node(o.pp - 1, 0, 0);
  }
  return cross ? p.interNode : p.intraNode;
}

int64_t staticBytes(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return shaped.getNumElements() * ((shaped.getElementTypeBitWidth() + 7) / 8);
}

/// The per-stage costs of the program as it is emitted: its GEMMs read
/// transposed operands in place (merak-fold-transposes, in the lower phase,
/// after --simulate), so no transpose is charged for them, and with
/// `gradAccumulationFusion` a weight gradient's GEMM adds into its
/// accumulator (merak-fuse-grad-accumulation: no separate add); measured
/// op costs are keyed by those GEMMs. They are read from a folded copy.
FailureOr<std::vector<StageCosts>> emittedStageCosts(ModuleOp module, const ReportOptions &ro,
                                                     const MeasuredOpCosts *measured,
                                                     bool gradAccumulationFusion,
                                                     std::string &error) {
  OwningOpRef<ModuleOp> folded = module.clone();
  PassManager pm(module.getContext());
  addEmittedGemmPasses(pm, gradAccumulationFusion);
  if (failed(pm.run(*folded))) {
    error = "cannot fold the transposes of a copy of the program";
    return failure();
  }
  FailureOr<std::vector<StageCosts>> stages = collectStageCosts(*folded, ro, measured);
  if (failed(stages))
    error = "cannot read the per-stage costs of the program";
  return stages;
}

/// Seconds of a fragment's ops: each op's measured seconds (--op-costs),
/// else the roofline max(FLOPs / rate, bytes / memory bandwidth); and of
/// the runner's copies around a call (each byte read and written). Counts
/// the ops it costed and those it had measurements for; ops that cost
/// nothing under the roofline (views, parameter reads) call no kernel, are
/// never timed, and are not counted.
struct OpTimer {
  const DeviceProfile &prof;
  double rate, microbatches;
  /// The routing's scales of the expert GEMMs (SimulateOptions).
  const SimulateOptions &routing;
  int64_t measuredOps = 0, costedOps = 0;

  double op(const OpWork &w) {
    costedOps += w.seconds || roofline(w) > 0;
    measuredOps += w.seconds.has_value();
    return cost(w);
  }
  double roofline(const OpWork &w) const {
    return std::max(w.flops / rate,
                    prof.memoryBandwidth > 0 ? w.bytes / prof.memoryBandwidth : 0.0);
  }
  double cost(const OpWork &w) const {
    if (w.seconds)
      return *w.seconds;
    double t = roofline(w);
    if (!w.routed)
      return t;
    if (w.totalExperts > w.weightExperts * routing.ep) // the shadow copies' gradient
      return t * routing.shadowScale;
    return t * (routing.routedScale + (w.withCopies ? routing.shadowShare : 0.0));
  }
  /// The expert GEMMs among `ops` (not counted).
  double expertGemms(const std::vector<OpWork> &ops) const {
    double t = 0;
    for (const OpWork &w : ops)
      if (w.routed)
        t += cost(w);
    return t;
  }
  /// `ops` one after another; without per-op costs, `flops` (of all
  /// micro-batches) at the rate.
  double ops(const std::vector<OpWork> &ops, int64_t flops) {
    if (ops.empty())
      return flops / microbatches / rate;
    double t = 0;
    for (const OpWork &w : ops)
      t += op(w);
    return t;
  }
  double copy(int64_t bytes) const {
    return prof.memoryBandwidth > 0 ? 2.0 * bytes / prof.memoryBandwidth : 0.0;
  }
};

} // namespace

void mlir::merak::setLinkCosts(PipelineCostModel &costs, const DeviceProfile &profile,
                               int64_t pp, int64_t dp, int64_t tp) {
  costs.bandwidth = profile.intraNode.bandwidth;
  costs.latency = profile.intraNode.latency;
  costs.interBandwidth = profile.interNode.bandwidth;
  costs.interLatency = profile.interNode.latency;
  costs.node = stageNodes(pp, dp, tp, profile.devicesPerNode);
}

StringRef mlir::merak::paramDtype(ModuleOp module) {
  for (ParamOp p : module.getOps<ParamOp>()) {
    Type e = p.getTensorType().getElementType();
    if (e.isBF16())
      return "bf16";
    if (e.isF16())
      return "f16";
    if (e.isF32())
      return "f32";
  }
  return "f32";
}

StringRef mlir::merak::computeDtype(ModuleOp module) {
  bool bf16 = false;
  module.walk([&](Operation *op) {
    if (!isa<MatmulOp, MatmulTOp>(op) ||
        !cast<RankedTensorType>(op->getOperand(0).getType()).getElementType().isBF16())
      return WalkResult::advance();
    bf16 = true;
    return WalkResult::interrupt();
  });
  return bf16 ? StringRef("bf16") : paramDtype(module);
}

/// The ranks of stage `stage`'s first ep group that share its first rank's
/// node (dp ranks [0, ep) of tp rank 0: world ranks tp apart).
static int64_t expertRanksPerNode(int64_t stage, const SimulateOptions &o) {
  auto node = [&](int64_t d) { return ((stage * o.dp + d) * o.tp) / o.profile.devicesPerNode; };
  int64_t same = 0;
  for (int64_t d = 0; d < o.ep; ++d)
    same += node(d) == node(0);
  return std::max<int64_t>(1, same);
}

double mlir::merak::collectiveSeconds(const std::map<std::string, CollectiveTraffic> &traffic,
                                      int64_t stage, const SimulateOptions &options) {
  double seconds = 0;
  for (auto &[key, t] : traffic) {
    auto [kind, group] = StringRef(key).split(' ');
    int64_t n = 1;
    LinkProfile link = groupLink(group, stage, options, n);
    if (n <= 1 || t.count == 0)
      continue;
    double each = (double)t.bytes / t.count;
    if (options.gradReduceBf16 && group == "dp" && kind != "all_gather")
      each /= 2;
    const bool twoLevel = kind == kHierarchicalAllToAll;
    // The busiest rank receives its share of the rows.
    if (kind == "all_to_all" || kind == kOverlappedAllToAll || twoLevel) {
      each *= options.routedScale;
      seconds += t.count * allToAllSeconds(each, n, expertRanksPerNode(stage, options),
                                           options.profile, twoLevel);
      continue;
    }
    if (kind == "expert_shadow") // the slots the skew fills
      each *= options.shadowTraffic;
    double one = kind == "all_reduce" ? ringAllReduceSeconds(each, n, link)
                                      : ringGatherSeconds(each, n, link);
    seconds += t.count * one;
  }
  return seconds;
}

double mlir::merak::hiddenAllToAllSeconds(const std::map<std::string, CollectiveTraffic> &traffic,
                                          int64_t stage, const SimulateOptions &options,
                                          double expertGemms, int64_t chunks) {
  if (chunks < 2)
    return 0;
  double transfer = 0;
  for (auto &[key, t] : traffic) {
    auto [kind, group] = StringRef(key).split(' ');
    int64_t n = 1;
    groupLink(group, stage, options, n);
    // The flat all-to-alls merak-overlap's ep-overlap will start (the
    // simulator runs before it), or has started.
    if ((kind != "all_to_all" && kind != kOverlappedAllToAll) || n <= 1 || t.count == 0)
      continue;
    const double each = (double)t.bytes / t.count * options.routedScale;
    const int64_t perNode = expertRanksPerNode(stage, options);
    transfer += t.count * (allToAllSeconds(each, n, perNode, options.profile, false) -
                           allToAllSeconds(0, n, perNode, options.profile, false));
  }
  return std::min(transfer, expertGemms) * (chunks - 1) / chunks;
}

double mlir::merak::expertImbalance(int64_t experts, int64_t ep, double skew) {
  return expertLoad(experts, ep, skew, 0, 0.0).local;
}

ExpertLoad mlir::merak::expertLoad(int64_t experts, int64_t ep, double skew, int64_t slots,
                                   double minShare, bool placed, double capacity) {
  std::vector<double> share(std::max<int64_t>(0, experts));
  for (int64_t e = 0; e < experts; ++e)
    share[e] = std::pow((double)(e + 1), -skew);
  return expertLoad(share, ep, slots, minShare, placed, capacity);
}

int64_t mlir::merak::chooseExpertChunks(ModuleOp module, const SimulateOptions &options,
                                        std::string &why) {
  const DeviceProfile &profile = options.profile;
  const int64_t dp = options.dp, microbatches = options.microbatches, ep = options.ep,
                perNode = expertRanksPerNode(0, options);
  // The layer's GEMMs (the largest layer: every GEMM of one routing): its
  // transfer, latency, GEMM and weight-gradient accumulation seconds.
  double comm = 0, latency = 0, gemm = 0, accumulate = 0;
  int64_t rowsGcd = 0;
  DenseMap<Value, std::tuple<double, double, double, double>> layers;
  module.walk([&](ExpertMatmulOp mm) {
    auto x = cast<RankedTensorType>(mm.getInput().getType());
    auto y = cast<RankedTensorType>(mm.getResult().getType());
    const int64_t rows = x.getDimSize(0) / std::max<int64_t>(1, dp * microbatches);
    rowsGcd = std::gcd(rowsGcd, rows);
    const double bytes = (x.getElementTypeBitWidth() + 7) / 8;
    auto [c, l, g, a] = layers.lookup(mm.getExperts());
    for (double part : {rows * x.getDimSize(1) * bytes, rows * y.getDimSize(1) * bytes}) {
      const double whole = allToAllSeconds(part, ep, perNode, profile, false);
      const double lat = allToAllSeconds(0, ep, perNode, profile, false);
      c += whole - lat;
      l += lat;
    }
    StringRef dtype = x.getElementType().isBF16() ? "bf16" : "f32";
    g += 2.0 * rows * x.getDimSize(1) * y.getDimSize(1) / profile.achievedFlops(dtype);
    // A chunk's float32 weight gradient of this rank's experts added to the
    // others' (two reads, one write).
    auto w = cast<RankedTensorType>(mm.getWeight().getType());
    if (profile.memoryBandwidth > 0)
      a += 3.0 * 4 * w.getNumElements() / std::max<int64_t>(1, ep) / profile.memoryBandwidth;
    layers[mm.getExperts()] = {c, l, g, a};
  });
  for (auto &[ids, t] : layers)
    if (std::get<0>(t) + std::get<2>(t) > comm + gemm)
      std::tie(comm, latency, gemm, accumulate) = t;
  int64_t best = 1;
  // The forward; the backward overlaps the gradients' exchanges with the
  // input-gradient GEMMs alike, then runs the weight-gradient GEMMs and
  // adds the chunks' weight gradients.
  auto forward = [&](int64_t k) {
    return k * latency + std::max(comm, gemm) + std::min(comm, gemm) / k;
  };
  auto time = [&](int64_t k) { return 2 * forward(k) + gemm + (k - 1) * accumulate; };
  for (int64_t k : {2, 4, 8})
    if (rowsGcd % k == 0 && time(k) < time(best))
      best = k;
  why = llvm::formatv("a layer's all-to-alls {0:e2} s of transfer + {1:e2} s of latency, its "
                      "expert GEMMs {2:e2} s, a chunk's weight-gradient sum {6:e2} s; {3} "
                      "chunk(s): {4:e2} s forward and backward (whole: {5:e2} s)",
                      comm, latency, gemm, best, time(best), time(1), accumulate)
            .str();
  return best;
}

/// Each expert's rank: in ep blocks, or (placed) greedily by share.
static std::vector<int64_t> expertOwners(const std::vector<double> &share, int64_t ep,
                                         bool placed) {
  const int64_t experts = static_cast<int64_t>(share.size());
  std::vector<int64_t> owner(experts);
  for (int64_t e = 0; e < experts; ++e)
    owner[e] = std::min<int64_t>(e * ep / experts, ep - 1);
  if (!placed || experts % ep != 0)
    return owner;
  std::vector<int64_t> order(experts), free(ep, experts / ep);
  std::vector<double> load(ep, 0.0);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return share[a] > share[b]; });
  for (int64_t e : order) {
    int64_t best = -1;
    for (int64_t r = 0; r < ep; ++r)
      if (free[r] > 0 && (best < 0 || load[r] < load[best]))
        best = r;
    owner[e] = best;
    load[best] += share[e];
    --free[best];
  }
  return owner;
}

ExpertLoad mlir::merak::expertLoad(const std::vector<double> &given, int64_t ep, int64_t slots,
                                   double minShare, bool placed, double capacity) {
  ExpertLoad result;
  const int64_t experts = static_cast<int64_t>(given.size());
  double total = 0;
  for (double s : given)
    total += s;
  if (experts < 1 || ep < 1 || !(total > 0))
    return result;
  // Shares of all rows; with a capacity, what each expert keeps.
  std::vector<double> share(given);
  if (capacity > 0)
    for (double &s : share) {
      result.dropped += std::max(0.0, s / total - capacity);
      s = std::min(s, capacity * total);
    }
  const std::vector<int64_t> owner = expertOwners(share, ep, placed);
  auto ownerOf = [&](int64_t e) { return owner[e]; };
  // Each rank's rows to compute (shares of all rows); every rank routes
  // alike, so it has 1 / ep of each expert's rows.
  std::vector<double> load(ep, 0.0), local(ep, 0.0);
  for (int64_t e = 0; e < experts; ++e)
    load[ownerOf(e)] += share[e] / total;
  local = load;
  std::vector<char> shadowed(experts, 0);
  // merak.expert_shadow_plan's greedy rule on these shares.
  while (result.shadowed < slots) {
    const int64_t busy = std::max_element(load.begin(), load.end()) - load.begin();
    int64_t pick = -1;
    for (int64_t e = 0; e < experts; ++e)
      if (ownerOf(e) == busy && !shadowed[e] && (pick < 0 || share[e] > share[pick]))
        pick = e;
    if (pick < 0 || share[pick] / total < minShare)
      break;
    const double s = share[pick] / total;
    std::vector<double> after(load);
    for (int64_t r = 0; r < ep; ++r)
      after[r] += r == busy ? -(s - s / ep) : s / ep;
    if (*std::max_element(after.begin(), after.end()) >= load[busy])
      break;
    load.swap(after);
    local[busy] -= s;
    shadowed[pick] = 1;
    ++result.shadowed;
    result.shadowShare += s;
  }
  result.local = *std::max_element(local.begin(), local.end()) * ep;
  return result;
}

/// The number of experts of the module's expert-parallel GEMMs (their
/// total_experts: the parameters' leading dimension is no measure, since
/// ZeRO flattens the experts' optimizer state); 0 without expert
/// parallelism.
static int64_t expertCount(ModuleOp module) {
  int64_t experts = 0;
  module.walk([&](ExpertMatmulOp mm) {
    if (mm.getFirst())
      experts = std::max<int64_t>(experts, mm.getTotalExperts().value_or(0));
  });
  return experts;
}

/// merak-expert-parallel's chunks (--moe-chunks): the most expert GEMMs one
/// function runs with one weight in one layout (1 without chunks).
static int64_t expertChunks(ModuleOp module) {
  int64_t chunks = 1;
  module.walk([&](func::FuncOp fn) {
    DenseMap<std::pair<Value, unsigned>, int64_t> gemms;
    fn.walk([&](ExpertMatmulOp mm) {
      if (mm.getFirst() && !mm.getShadow())
        chunks = std::max(chunks, ++gemms[{mm.getWeight(), unsigned(mm.getTransposeWeight())}]);
    });
  });
  return chunks;
}

/// The module's expert routing under options.moeSkew (or moeShares) and its
/// shadowing plan, if any; sets options' scales. Fails (with `error`) when
/// a recorded histogram does not match the program's experts.
struct ExpertRouting {
  int64_t experts = 0, slots = 0;
  double capacity = 0; ///< an expert's most rows over a part's (0: dropless)
  ExpertLoad load;
};

static FailureOr<ExpertRouting> expertRouting(ModuleOp module, SimulateOptions &options,
                                              std::string &error) {
  ExpertRouting r;
  r.experts = expertCount(module);
  if (!r.experts)
    return r;
  // Shadowing's plan (every layer's alike): its slots, and min_rows of the
  // group's rows, of which (ep - 1) / ep are remote.
  double minShare = 0;
  module.walk([&](ExpertShadowPlanOp plan) {
    r.slots = cast<RankedTensorType>(plan.getSlots().getType()).getDimSize(0);
    int64_t rows = cast<RankedTensorType>(plan.getExperts().getType()).getDimSize(0);
    minShare = (double)plan.getMinRows() * options.ep / (rows * (options.ep - 1.0));
    return WalkResult::interrupt();
  });
  // Dynamic placement (merak.expert_place): the experts rebalanced.
  bool placed = false;
  module.walk([&](ExpertPlaceOp) {
    placed = true;
    return WalkResult::interrupt();
  });
  if (!options.moeShares.empty() && (int64_t)options.moeShares.size() != r.experts) {
    error = "--moe-histogram has " + std::to_string(options.moeShares.size()) +
            " experts, the program " + std::to_string(r.experts);
    return failure();
  }
  // Token dropping (merak.expert_capacity): an expert's rows of a part at
  // most `capacity` of its rows.
  double capacity = 0;
  module.walk([&](ExpertCapacityOp op) {
    const int64_t rows = cast<RankedTensorType>(op.getExperts().getType()).getDimSize(0);
    capacity = (double)op.getCapacity() / std::max<int64_t>(1, rows);
    return WalkResult::interrupt();
  });
  r.load = options.moeShares.empty() ? expertLoad(r.experts, options.ep, options.moeSkew,
                                                  r.slots, minShare, placed, capacity)
                                     : expertLoad(options.moeShares, options.ep, r.slots,
                                                  minShare, placed, capacity);
  r.capacity = capacity;
  options.routedScale = r.load.local;
  options.shadowShare = r.load.shadowShare;
  if (r.slots) {
    // The copies' gradient costs the rows of M slots out of E + ep M ids of
    // the group (total_experts); each rank has shadowShare of its own rows,
    // 1 / ep of the group's.
    options.shadowScale =
        r.load.shadowShare * (r.experts + options.ep * r.slots) / ((double)options.ep * r.slots);
    options.shadowTraffic = (double)r.load.shadowed / r.slots;
  }
  return r;
}

/// The bytes model stage c's forward sends to stage c + 1 (its "act:N"
/// results), for the first `stages` - 1 stages.
static SmallVector<double> cutActivationBytes(ModuleOp module, int64_t stages) {
  SmallVector<double> cut;
  SymbolTable symbols(module);
  for (int64_t c = 0; c + 1 < stages; ++c) {
    double bytes = 0;
    if (auto f = symbols.lookup<func::FuncOp>(("stage" + Twine(c) + "_forward").str()))
      for (unsigned i = 0; i < f.getNumResults(); ++i)
        if (auto n = f.getResultAttrOfType<StringAttr>(i, "merak.name");
            n && n.getValue().starts_with("act:"))
          bytes += staticBytes(f.getResultTypes()[i]);
    cut.push_back(bytes);
  }
  return cut;
}

FailureOr<SimulatedStep> mlir::merak::simulatePipelineOf(ModuleOp module,
                                                         const SimulateOptions &given,
                                                         std::string &error,
                                                         llvm::raw_ostream *trace) {
  SimulateOptions options = given;
  FailureOr<ExpertRouting> routing = expertRouting(module, options, error);
  if (failed(routing))
    return failure();
  std::optional<RecordedSchedule> r = recordedSchedule(module);
  if (!r) {
    error = "no pipeline plan to simulate";
    return failure();
  }
  ReportOptions ro;
  ro.dp = options.dp;
  ro.tp = options.tp;
  ro.pp = r->stages;
  ro.microbatches = r->microbatches;
  FailureOr<std::vector<StageCosts>> stages =
      emittedStageCosts(module, ro, options.measured.get(), options.gradAccumulationFusion, error);
  if (failed(stages))
    return failure();
  // One StageCosts per model stage: stages x virtual stages (interleaved).
  if ((int64_t)stages->size() != r->stages * r->virtualStages) {
    error = "cannot read the per-stage costs of the program";
    return failure();
  }
  const DeviceProfile &prof = options.profile;
  const double m = r->microbatches;
  int64_t p = r->stages, v = r->virtualStages;
  const bool split = r->kind == PipelineScheduleKind::ZeroBubbleH1 ||
                     r->kind == PipelineScheduleKind::ZeroBubbleH2;
  const bool scp = r->kind == PipelineScheduleKind::ShiftedCriticalPath;
  PipelineCostModel costs;
  costs.forward.clear();
  costs.backward.clear();
  costs.weight.clear();
  costs.recompute.clear();
  costs.stashed.clear();
  costs.kept.clear();
  SmallVector<double> fwd, bwd, rcp;
  OpTimer timer{prof, prof.achievedFlops(computeDtype(module)), m, options};
  const double rate = timer.rate;
  // Model stage k (chunk k / p of rank k mod p under interleaving) has its
  // own fragments; a rank's update (and the parameters and optimizer state
  // it streams) is on model stage s < p and covers all its chunks.
  // --moe-chunks K: the started all-to-alls run under the chunks' GEMMs.
  const int64_t chunks = expertChunks(module);
  auto hidden = [&](const std::map<std::string, CollectiveTraffic> &traffic, int64_t k,
                    const std::vector<OpWork> &ops) {
    return hiddenAllToAllSeconds(traffic, k % p, options, timer.expertGemms(ops) * m, chunks) / m;
  };
  for (int64_t k = 0; k < p * v; ++k) {
    const StageCosts &c = (*stages)[k];
    fwd.push_back(timer.ops(c.forwardOps, c.forwardFlops) + timer.copy(c.forwardCopyBytes) +
                  collectiveSeconds(c.forward, k % p, options) / m -
                  hidden(c.forward, k, c.forwardOps));
    bwd.push_back(timer.ops(c.backwardOps, c.backwardFlops) + timer.copy(c.backwardCopyBytes) +
                  collectiveSeconds(c.backward, k % p, options) / m -
                  hidden(c.backward, k, c.backwardOps));
    // The recomputation `rcp` runs apart (the backward's collectives stay
    // with `bwd`); the last stage has none.
    rcp.push_back(scp && k + 1 < p * v && !c.recomputeOps.empty() ? timer.ops(c.recomputeOps, 0)
                                                                 : 0.0);
    bwd.back() -= rcp.back();
  }
  // Activation bytes a (micro-batch, chunk) pair holds on rank s: on average
  // its chunks' stash per micro-batch; after `rcp` or `fwd-keep` also what
  // the recomputation rebuilds.
  for (int64_t k = 0; k < p * v; ++k) {
    int64_t stash = 0;
    for (int64_t j = k % p; j < p * v; j += p)
      stash += (*stages)[j].stashBytes / r->microbatches;
    costs.stashed.push_back((double)(stash / v));
    costs.kept.push_back(costs.stashed.back() + (double)(*stages)[k].recomputeHeldBytes);
  }
  for (int64_t s = 0; s < p; ++s) {
    const StageCosts &c = (*stages)[s];
    double bytes = 0;
    for (int64_t k = s; k < p * v; k += p)
      bytes += (*stages)[k].paramBytes + (*stages)[k].stateBytes;
    double memory = 2.0 * bytes / prof.memoryBandwidth;
    // Measured update ops replace the stage's roofline (which streams the
    // parameters and state once) when any was timed.
    double update = std::max(c.updateFlops / rate, memory);
    if (llvm::any_of(c.updateOps, [](const OpWork &w) { return w.seconds.has_value(); })) {
      update = 0;
      for (int64_t k = s; k < p * v; k += p)
        update += timer.ops((*stages)[k].updateOps, 0);
    }
    for (int64_t k = s; k < p * v; k += p)
      update += timer.copy((*stages)[k].updateCopyBytes);
    costs.stageUpdate.push_back(update + collectiveSeconds(c.update, s, options));
  }
  for (int64_t k = 0; k < p * v; ++k) {
    costs.forward.push_back(fwd[k]);
    costs.backward.push_back(split ? bwd[k] / 2 : bwd[k]);
    costs.weight.push_back(split ? bwd[k] / 2 : 0.0);
    costs.recompute.push_back(rcp[k]);
  }
  // Messages: the activations each model stage's forward sends, the same
  // bytes back as gradients.
  costs.actBytes = cutActivationBytes(module, p * v);
  if (costs.actBytes.empty())
    costs.actBytes.push_back(0.0);
  costs.gradBytes = costs.actBytes;
  setLinkCosts(costs, prof, p, options.dp, options.tp);

  auto program =
      buildPipelineSchedule(r->kind, p, r->microbatches, v, recordedKeptMicrobatches(module));
  FailureOr<PipelineSimulation> sim = simulatePipeline(program, costs, trace, &error);
  if (failed(sim))
    return failure();
  if (trace)
    writePipelineTrace(*sim, *trace);
  SimulatedStep step;
  step.stepTime = sim->stepTime;
  step.bubbleFraction = sim->bubbleFraction;
  step.bubbleRatio = sim->bubbleRatio;
  step.peakInFlight.assign(sim->peakInFlight.begin(), sim->peakInFlight.end());
  step.profile = prof.name;
  step.memoryBytes = prof.memoryBytes;
  if (routing->experts) {
    step.moeImbalance = options.routedScale;
    step.moeSkew = options.moeSkew;
    step.moeHistogram = !options.moeShares.empty();
    step.moeShadowSlots = routing->slots;
    step.moeShadowed = routing->load.shadowed;
    step.moeDropped = routing->capacity > 0 ? routing->load.dropped : -1.0;
  }
  if (options.measured) {
    step.opCostsFile = options.measured->path;
    step.measuredOps = timer.measuredOps;
    step.costedOps = timer.costedOps;
  }
  for (int64_t s = 0; s < p; ++s) {
    int64_t bytes = 0, arena = 0;
    for (int64_t k = s; k < p * v; k += p) {
      const StageCosts &ck = (*stages)[k];
      bytes += ck.paramBytes + ck.stateBytes + ck.accumulatorBytes;
      arena = std::max(arena, ck.arenaPeakBytes);
    }
    step.peakMemoryBytes.push_back(bytes + arena + (int64_t)sim->peakActivationBytes[s]);
  }
  return step;
}

void mlir::merak::printSimulatedStep(const SimulatedStep &step, llvm::raw_ostream &os,
                                     StringRef prefix) {
  if (step.profile == "placeholder")
    os << prefix
       << "simulated with placeholder costs (1e11 FLOP/s, 10 GB/s + 10 us per message; "
          "pass --device-profile FILE)\n";
  else
    os << prefix << "simulated with device profile '" << step.profile << "'\n";
  if (!step.opCostsFile.empty())
    os << prefix
       << llvm::formatv("measured op costs for {0} of {1} ops ({2}); the roofline for the "
                        "rest\n",
                        step.measuredOps, step.costedOps, step.opCostsFile);
  os << prefix
     << llvm::formatv("simulated step: {0:e3} s; bubble {1:F4} (idle / (stages x step)), "
                      "idle / compute {2:F4}\n",
                      step.stepTime, step.bubbleFraction, step.bubbleRatio);
  if (step.moeImbalance > 0)
    os << prefix
       << llvm::formatv("simulated expert load: the busiest ep rank gets {0:F3}x the mean "
                        "routed rows{2} ({1}); its expert GEMMs and all-to-alls take "
                        "that much longer\n",
                        step.moeImbalance,
                        step.moeHistogram ? std::string("--moe-histogram")
                                          : llvm::formatv("--moe-skew {0:F2}", step.moeSkew).str(),
                        step.moeShadowSlots > 0 ? " of the experts it holds, shadowed ones aside"
                                                : "");
  if (step.moeDropped >= 0)
    os << prefix
       << llvm::formatv("simulated token dropping: {0:F2}% of the routed rows are beyond their "
                        "experts' capacity, neither sent nor computed\n",
                        100 * step.moeDropped);
  if (step.moeShadowSlots > 0)
    os << prefix
       << llvm::formatv("simulated shadowing: {0} of {1} slots per layer filled (the hottest "
                        "experts, computed by every rank on its own rows)\n",
                        step.moeShadowed, step.moeShadowSlots);
  os << prefix << "simulated peak in-flight micro-batches per stage:";
  for (int64_t n : step.peakInFlight)
    os << " " << n;
  os << "\n" << prefix << "simulated peak memory per stage (bytes):";
  for (int64_t b : step.peakMemoryBytes)
    os << " " << b;
  os << "\n";
  for (auto [s, b] : llvm::enumerate(step.peakMemoryBytes))
    if (step.memoryBytes > 0 && b > step.memoryBytes)
      os << prefix
         << llvm::formatv("warning: stage {0} needs {1} bytes, more than the {2:e3} bytes of "
                          "'{3}'\n",
                          s, b, step.memoryBytes, step.profile);
}

json::Value mlir::merak::simulatedStepJson(const SimulatedStep &step) {
  json::Array peak, memory;
  for (int64_t n : step.peakInFlight)
    peak.push_back(n);
  for (int64_t b : step.peakMemoryBytes)
    memory.push_back(b);
  return json::Object{{"step_time_s", step.stepTime},
                      {"bubble_fraction", step.bubbleFraction},
                      {"peak_inflight", std::move(peak)},
                      {"peak_memory_bytes", std::move(memory)},
                      {"profile", step.profile},
                      {"moe_imbalance", step.moeImbalance > 0 ? json::Value(step.moeImbalance)
                                                              : json::Value(nullptr)},
                      {"moe_shadowed", step.moeShadowSlots > 0 ? json::Value(step.moeShadowed)
                                                               : json::Value(nullptr)},
                      {"moe_dropped", step.moeDropped >= 0 ? json::Value(step.moeDropped)
                                                           : json::Value(nullptr)},
                     {"op_costs", step.opCostsFile.empty()
                                      ? json::Value(nullptr)
                                      : json::Value(json::Object{
                                            {"file", step.opCostsFile},
                                            {"measured_ops", step.measuredOps},
                                            {"costed_ops", step.costedOps}})}};
}
