//===- Simulate.h - merak-compile --simulate: the cost model ----*- C++ -*-===//
//
// Turns a pipelined training program and a device profile into the pipeline
// simulator's costs: per-stage compute from the report's FLOPs, tensor- and
// data-parallel collectives as ring all-reduces on the intra- or inter-node
// link, pipeline messages on the link between the stages' nodes, and the
// per-stage peak memory. See docs/parallelism.md, "Cost model".
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_PLANNER_SIMULATE_H
#define MERAK_PLANNER_SIMULATE_H

#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"
#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"
#include "merak/Planner/Report.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

#include <memory>

namespace mlir::merak {

/// The costs --simulate uses without --device-profile: every dtype at
/// 1e11 FLOP/s, every message and collective step 10 GB/s + 10 us, one node,
/// unknown memory size (memory_bytes 0).
DeviceProfile placeholderDeviceProfile();

/// The dtype of the first floating-point model parameter: "f32", "bf16",
/// "f16" (f32 when there is none): the rate a profile's compute uses.
StringRef paramDtype(ModuleOp module);
/// The element type the program's GEMMs run in, which sets the FLOP rate
/// the simulator and planner use: "bf16" when a matmul takes bf16 operands
/// (--precision bf16), else paramDtype.
StringRef computeDtype(ModuleOp module);

struct SimulateOptions {
  DeviceProfile profile = placeholderDeviceProfile();
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  /// --ep: expert parallelism within dp (the "ep" and "edp" groups).
  int64_t ep = 1;
  /// --moe-skew: a Zipf exponent for the experts' share of the routed rows
  /// (expert e gets a share proportional to (e + 1)^-skew; 0: uniform).
  /// The busiest ep rank's expert GEMMs and all-to-all take its share.
  double moeSkew = 0.0;
  /// --moe-histogram: the experts' recorded shares of the routed rows (in
  /// expert order; ./train --moe-histogram), used instead of moeSkew.
  std::vector<double> moeShares;
  /// Set by simulatePipelineOf from moeSkew (or moeShares): what an
  /// all_to_all's bytes and a routed expert GEMM's time are multiplied by
  /// on the busiest rank; with dynamic shadowing, what the shadow copies'
  /// weight gradient's time and an expert_shadow's bytes are multiplied by
  /// (their costs assume all slots), and the copies' share of the rows a
  /// GEMM over experts and copies adds (shadowShare).
  double routedScale = 1.0, shadowScale = 1.0, shadowTraffic = 1.0, shadowShare = 0.0;
  /// --grad-reduce bf16: the dp reductions (all-reduce, reduce-scatter) of
  /// the float32 program being simulated will move bf16, half the bytes.
  bool gradReduceBf16 = false;
  /// --grad-accumulation-fusion: the program's weight-gradient GEMMs add
  /// into their accumulators (no separate add is costed).
  bool gradAccumulationFusion = true;
  /// --op-costs: measured op seconds, used instead of the roofline where an
  /// op's shape key was timed.
  std::shared_ptr<const MeasuredOpCosts> measured;
};

/// The busiest ep rank's share of the routed rows over the mean (>= 1):
/// `experts` experts in ep contiguous blocks, expert e's share of the rows
/// proportional to (e + 1)^-skew (the hottest experts on one rank: static
/// placement's worst case).
double expertImbalance(int64_t experts, int64_t ep, double skew);

/// The same with FasterMoE's dynamic shadowing (merak.expert_shadow_plan's
/// greedy rule on the shares): up to `slots` times, the busiest rank's
/// hottest expert, if its share of all rows is at least `minShare` and
/// spreading it lowers the busiest rank's rows, is computed by every rank
/// on its own rows. `local` is the
/// busiest rank's rows of the experts it holds (not shadowed) over the
/// mean; `shadowShare` the shadowed experts' share of all rows (every rank
/// computes that share of its own rows); `shadowed` how many are shadowed.
/// With `placed` (dynamic placement, merak.expert_place), the experts are
/// first placed as the trainer's rebalancing does (the hottest first, onto
/// the least loaded rank with a free slot) instead of in blocks; the cost
/// of moving them, paid once when the routing settles, is left out.
/// With a `capacity` (merak.expert_capacity's rows over the rows of a part,
/// > 0), an expert takes at most that share of every rank's rows; the rest
/// (`dropped`, a share of all rows) is computed and sent by no rank.
struct ExpertLoad {
  double local = 1.0, shadowShare = 0.0, dropped = 0.0;
  int64_t shadowed = 0;
};
ExpertLoad expertLoad(int64_t experts, int64_t ep, double skew, int64_t slots, double minShare,
                      bool placed = false, double capacity = 0.0);
/// The same for given shares of the rows, one per expert (any scale).
ExpertLoad expertLoad(const std::vector<double> &shares, int64_t ep, int64_t slots,
                      double minShare, bool placed = false, double capacity = 0.0);

/// MPMoE's adaptive granularity for --moe-chunks auto: the number of chunks
/// (1, 2, 4 or 8, dividing every expert GEMM's local rows) that minimises
/// one MoE layer's forward and backward time under `options.profile`, for
/// the imported model's expert GEMMs (`module`, before expert parallelism)
/// with 1 / (dp x microbatches) of their rows per rank and the mesh's ep
/// group (its ranks per node as the simulator places them):
///   F(k) = k * L + max(C, G) + min(C, G) / k
///   T(k) = 2 F(k) + G + (k - 1) * A
/// with C the bandwidth part of the layer's dispatches and combines
/// (allToAllSeconds without latency), L their latency part (paid per
/// chunk), G its expert GEMMs (2 S K O flops at the profile's achieved
/// rate, this rank's S rows; the backward's input gradients overlap like
/// the forward, its weight gradients do not) and A the addition of one
/// chunk's float32 weight gradient of this rank's experts to the others'.
/// `why` explains the choice.
int64_t chooseExpertChunks(ModuleOp module, const SimulateOptions &options, std::string &why);

/// The node (rank / devices_per_node) of each pipeline stage's first rank,
/// rank = (pp_i * dp + dp_i) * tp + tp_i.
SmallVector<int64_t> stageNodes(int64_t pp, int64_t dp, int64_t tp, int64_t devicesPerNode);

/// The pipeline messages' links of `costs`: the profile's intra- and
/// inter-node bandwidth and latency, and each stage's node (stageNodes).
void setLinkCosts(PipelineCostModel &costs, const DeviceProfile &profile, int64_t pp, int64_t dp,
                  int64_t tp);

/// Seconds of the collectives in `traffic` ("<kind> <group>" -> count and
/// bytes) of pipeline stage `stage`: ring all-reduce, reduce-scatter and
/// all-gather over the tp, dp or pp group, on the intra-node link when the
/// group's ranks share a node, the inter-node one otherwise.
double collectiveSeconds(const std::map<std::string, CollectiveTraffic> &traffic, int64_t stage,
                         const SimulateOptions &options);

/// The part of `traffic`'s flat all-to-alls that `chunks` K > 1 (--moe-chunks,
/// whose all-to-alls merak-overlap starts early: kOverlappedAllToAll once it
/// has) hide under `expertGemms` seconds of expert GEMMs: min(transfer,
/// GEMMs) (K - 1) / K, the transfer without the per-message latency
/// (chooseExpertChunks' model, so `--simulate` sees what `--moe-chunks
/// auto` chose for).
double hiddenAllToAllSeconds(const std::map<std::string, CollectiveTraffic> &traffic,
                             int64_t stage, const SimulateOptions &options, double expertGemms,
                             int64_t chunks);

/// --simulate: runs the module's schedule (recorded by merak-record-schedule)
/// on the pipeline simulator under `options.profile`; writes its Chrome
/// trace to `trace` when given. Fails with `error` set.
FailureOr<SimulatedStep> simulatePipelineOf(ModuleOp module, const SimulateOptions &options,
                                            std::string &error,
                                            llvm::raw_ostream *trace = nullptr);

/// "simulated step: ..." lines (profile, step time, bubble, per-stage peak
/// in-flight micro-batches and memory, a warning per stage over the
/// profile's memory), each after `prefix`.
void printSimulatedStep(const SimulatedStep &step, llvm::raw_ostream &os,
                        StringRef prefix = "");

/// --report=json's "simulated" object.
llvm::json::Value simulatedStepJson(const SimulatedStep &step);

} // namespace mlir::merak

#endif
