//===- PlanCompile.cpp - merak-compile --devices: plan, refine, compile ---===//
//
// What merak-compile --devices does with the planner's result: prints it,
// puts it in --report=json's "planner", and gives runCompile the options of
// the chosen plan (planCompile). With --op-costs the planner's few best
// candidates are first compiled for real (to the schedule phase, in this
// process) and simulated with the measured op costs, and the fastest of
// them becomes the plan (refinePlanWithOpCosts): the planner estimates
// every candidate from probes compiled at the whole batch, scaling their op
// costs by the micro-batch's share, while measured op costs
// (./train --profile-ops) are keyed by exact shapes, which those scaled
// costs do not have.
//
//===----------------------------------------------------------------------===//
#include "merak/Planner/Planner.h"

#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"
#include "merak/Planner/Report.h"
#include "merak/Tools/Compile.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

namespace {
/// What --simulate says of `c`'s program compiled to the schedule phase (in
/// this process): the step, the peak memory of its busiest stage, and the
/// op costs it used; nullopt (with a note) when it does not compile.
struct CompiledSimulation {
  double step = 0;
  int64_t peakMemory = 0, measuredOps = 0, costedOps = 0;
  bool opCosts = false;
};

std::optional<CompiledSimulation> simulateCompiled(const CompileOptions &opts,
                                                   const PlanCandidate &c,
                                                   double memoryPerDevice,
                                                   llvm::raw_ostream &log) {
  CompileOptions o = candidateOptions(opts, c, memoryPerDevice);
  o.compileTo = CompilePhase::Schedule;
  o.compileToGiven = true;
  o.output = "/dev/null";
  o.simulate = true;
  o.moeSkew = opts.moeSkew;
  o.moeHistogram = opts.moeHistogram;
  o.simulateTrace.clear();
  o.report = "json";
  o.reportFile = "";
  o.plannerJson.clear();
  CompileResult r = compileModel(o);
  llvm::Expected<llvm::json::Value> report = llvm::json::parse(r.report);
  const llvm::json::Object *root = report ? report->getAsObject() : nullptr;
  const llvm::json::Object *sim = root ? root->getObject("simulated") : nullptr;
  std::optional<double> step = sim ? sim->getNumber("step_time_s") : std::nullopt;
  if (!report)
    llvm::consumeError(report.takeError());
  if (!r.ok || !step) {
    log << "merak-compile: planner: note: dp " << c.dp << " tp " << c.tp << " pp " << c.pp
        << " mb " << c.microbatches << " ep " << c.ep << " could not be compiled and "
        << "simulated; it keeps its estimate\n";
    return std::nullopt;
  }
  CompiledSimulation out;
  out.step = *step;
  if (const llvm::json::Array *peak = sim->getArray("peak_memory_bytes"))
    for (const llvm::json::Value &b : *peak)
      out.peakMemory = std::max(out.peakMemory, b.getAsInteger().value_or(0));
  if (const llvm::json::Object *costs = sim->getObject("op_costs")) {
    out.opCosts = true;
    out.measuredOps = costs->getInteger("measured_ops").value_or(0);
    out.costedOps = costs->getInteger("costed_ops").value_or(0);
  }
  return out;
}

/// The simulated step of `c`'s program with the measured op costs.
bool simulateMeasured(const CompileOptions &opts, PlanCandidate &c, double memoryPerDevice,
                      llvm::raw_ostream &log) {
  if (c.pp == 1 && c.microbatches == 1)
    return false; // --simulate needs a pipeline plan
  std::optional<CompiledSimulation> sim = simulateCompiled(opts, c, memoryPerDevice, log);
  if (!sim || !sim->opCosts)
    return false;
  c.measuredStepTime = sim->step;
  c.measuredOps = sim->measuredOps;
  c.costedOps = sim->costedOps;
  return true;
}
/// The expert-parallel variants of `base`: every ep dividing its dp with
/// 0, 1 or 2 shadow slots; with several experts per rank also rebalancing;
/// with an ep group across nodes (dp ranks tp apart) also the two-level
/// all-to-all; without shadowing, with the flat all-to-all, also its
/// chunks (--moe-chunks auto: their number from the device profile).
std::vector<PlanCandidate> expertVariants(const PlanCandidate &base,
                                          const PlannerResult &plan) {
  std::vector<PlanCandidate> out;
  for (int64_t ep : divisors(base.dp)) {
    const bool placeable = ep > 1 && plan.experts % ep == 0 && plan.experts / ep >= 2;
    const bool acrossNodes = ep > 1 && ep * base.tp > plan.devicesPerNode;
    for (int64_t shadow : {0, 1, 2})
      for (int64_t rebalance : {int64_t(0), kPlannedRebalanceEvery})
        for (bool twoLevel : {false, true})
          for (int64_t chunks : {int64_t(1), int64_t(0)}) {
            if ((ep == 1 && shadow > 0) || (rebalance > 0 && !placeable) ||
                (twoLevel && !acrossNodes) ||
                (chunks != 1 && (ep == 1 || shadow > 0 || twoLevel)))
              continue;
            PlanCandidate c = base;
            c.ep = ep;
            c.moeShadow = shadow;
            c.moeRebalanceEvery = rebalance;
            c.moeAllToAll = twoLevel ? "hierarchical" : "flat";
            c.moeChunks = chunks;
            out.push_back(std::move(c));
          }
  }
  return out;
}
} // namespace

void mlir::merak::refinePlanForExperts(const CompileOptions &opts, PlannerResult &plan,
                                       llvm::raw_ostream &log) {
  if (!plan.experts)
    return;
  // The plans to vary (each compile takes seconds at foundation-model
  // sizes): the chosen one and the best runner-up that fits on another
  // mesh; --simulate needs a pipeline schedule.
  std::vector<PlanCandidate> bases{plan.chosen}, variants;
  for (const PlanCandidate &c : plan.runnersUp)
    if (c.rejected.empty() && (c.dp != plan.chosen.dp || c.tp != plan.chosen.tp ||
                               c.pp != plan.chosen.pp)) {
      bases.push_back(c);
      break;
    }
  int64_t varied = 0;
  for (const PlanCandidate &base : bases) {
    if (base.pp == 1 && base.microbatches == 1)
      continue;
    ++varied;
    for (PlanCandidate &c : expertVariants(base, plan)) {
      std::optional<CompiledSimulation> sim =
          simulateCompiled(opts, c, plan.memoryPerDevice, log);
      if (!sim)
        continue;
      c.simulatedStepTime = sim->step;
      c.peakMemory = sim->peakMemory;
      c.rejected.clear();
      if (plan.memoryPerDevice > 0 && sim->peakMemory > plan.memoryPerDevice)
        c.rejected = llvm::formatv("its compiled program needs {0} > {1} bytes",
                                   sim->peakMemory, (int64_t)plan.memoryPerDevice)
                         .str();
      variants.push_back(std::move(c));
    }
  }
  auto fits = [](const PlanCandidate &c) { return c.rejected.empty(); };
  if (llvm::none_of(variants, fits)) {
    plan.notes.push_back("a Mixture-of-Experts model, but no plan with a pipeline schedule "
                         "compiled and fit to search expert parallelism: ep stays 1");
    return;
  }
  std::stable_sort(variants.begin(), variants.end(),
                   [&](const PlanCandidate &a, const PlanCandidate &b) {
                     if (fits(a) != fits(b))
                       return fits(a);
                     return *a.simulatedStepTime < *b.simulatedStepTime;
                   });
  plan.chosen = variants.front();
  plan.runnersUp.assign(variants.begin() + 1,
                        variants.begin() + std::min<size_t>(variants.size(), 8));
  plan.notes.push_back(
      llvm::formatv("a Mixture-of-Experts model: {0} plans ({1} of the best meshes, each with "
                    "every ep dividing dp, --moe-shadow 0, 1, 2, with several experts per "
                    "rank --moe-rebalance-every 0 and {3}, with an ep group across nodes "
                    "--moe-all-to-all flat and hierarchical, and without shadowing "
                    "--moe-chunks 1 and auto) compiled and simulated with {2}; "
                    "ranked by those simulations",
                    variants.size(), varied,
                    opts.moeHistogram.empty()
                        ? llvm::formatv("--moe-skew {0:F2}", opts.moeSkew).str()
                        : "--moe-histogram " + opts.moeHistogram,
                    kPlannedRebalanceEvery)
          .str());
}

void mlir::merak::refinePlanWithOpCosts(const CompileOptions &opts, PlannerResult &plan,
                                        llvm::raw_ostream &log) {
  // Measured and estimated steps do not compare: without a schedule to
  // simulate, the chosen plan keeps its estimate and nothing is re-ranked.
  if (plan.chosen.pp == 1 && plan.chosen.microbatches == 1) {
    plan.notes.push_back("the chosen plan has no pipeline schedule to simulate: the measured "
                         "op costs were not applied");
    return;
  }
  // The chosen plan and the runners-up that fit.
  std::vector<PlanCandidate> fitting{plan.chosen}, rest;
  for (PlanCandidate &c : plan.runnersUp)
    (c.rejected.empty() ? fitting : rest).push_back(c);
  std::vector<PlanCandidate> measured, estimated;
  for (PlanCandidate &c : fitting)
    (simulateMeasured(opts, c, plan.memoryPerDevice, log) ? measured : estimated).push_back(c);
  if (measured.empty())
    return;
  std::stable_sort(measured.begin(), measured.end(),
                   [](const PlanCandidate &a, const PlanCandidate &b) {
                     return *a.measuredStepTime < *b.measuredStepTime;
                   });
  plan.chosen = measured.front();
  plan.runnersUp.clear();
  plan.runnersUp.insert(plan.runnersUp.end(), measured.begin() + 1, measured.end());
  plan.runnersUp.insert(plan.runnersUp.end(), estimated.begin(), estimated.end());
  plan.runnersUp.insert(plan.runnersUp.end(), rest.begin(), rest.end());
  plan.notes.push_back(llvm::formatv("re-ranked the {0} best plans that fit by their compiled "
                                     "programs simulated with the measured op costs of {1}",
                                     measured.size(), opts.opCosts)
                           .str());
}

CompileOptions mlir::merak::candidateOptions(const CompileOptions &opts, const PlanCandidate &c,
                                             double memoryPerDevice) {
  CompileOptions o = opts;
  o.devices = 0;
  o.plannerSpace = "auto"; // searched already: the plan is a mesh now
  o.meshGiven = false;
  o.dp = c.dp;
  o.tp = c.tp;
  o.pp = c.pp;
  o.microbatches = c.microbatches;
  o.schedule = c.schedule;
  o.virtualStages = c.virtualStages;
  o.recompute = c.recompute;
  o.zero = c.zero ? 1 : 0;
  o.sequenceParallel = c.sequenceParallel ? 1 : 0;
  o.ep = c.ep;
  o.moeShadow = c.moeShadow;
  o.moeRebalanceEvery = c.moeRebalanceEvery;
  o.moeAllToAll = c.moeAllToAll;
  o.moeChunks = c.moeChunks;
  o.stageBoundaries = c.stageBoundaries;
  o.moeSkew = 0; // a simulation's assumptions, not the program's
  o.moeHistogram.clear();
  if (c.overlap && c.tp > 1)
    o.tpOverlap = "sub-pipeline";
  if (c.recompute == "stage-aware" && opts.memoryPerDevice.empty())
    o.memoryPerDevice = std::to_string((int64_t)memoryPerDevice);
  return o;
}

std::optional<int> mlir::merak::planCompile(const CompileOptions &opts, llvm::raw_ostream &log,
                                            std::string *reportOut, CompileOptions &planned) {
  auto fail = [&](const Twine &msg) -> std::optional<int> {
    log << "merak-compile: error: " << msg << "\n";
    return 1;
  };
  if (opts.devices < 1)
    return fail("--devices must be at least 1");
  if (opts.meshGiven || opts.dp != 1 || opts.tp != 1 || opts.pp != 1 || opts.microbatches != 1)
    return fail("--devices chooses --dp, --tp, --pp, --microbatches and --schedule itself: give "
                "either --devices or the mesh, not both");
  if (opts.ep != 1 || opts.moeShadow != 0 || opts.moeRebalanceEvery != 0 ||
      opts.moeAllToAll != "flat" || opts.moeChunks != 1)
    return fail("--devices chooses --ep, --moe-shadow, --moe-rebalance-every, "
                "--moe-all-to-all and --moe-chunks itself for a Mixture-of-Experts model (give "
                "--moe-skew to plan for uneven routing)");
  if (!opts.stageBoundaries.empty())
    return fail("--devices chooses the stages: --stage-boundaries cannot be given with it");
  std::optional<int64_t> memoryBudget = parseByteSize(opts.memoryPerDevice);
  if (!memoryBudget || *memoryBudget < 0)
    return fail("--memory-per-device '" + opts.memoryPerDevice +
                "': expected a positive byte count, optionally with a suffix KB, MB, GB, KiB, "
                "MiB or GiB");
  const bool mlirInput = StringRef(opts.input).ends_with(".mlir");
  // Without --compile-to (and without --report, which implies training),
  // --devices builds the executable. Only what the generated program runs
  // is eligible when a program is written.
  const bool defaultBinary = !opts.compileToGiven && opts.report.empty();
  const bool runtimeOnly =
      !mlirInput && (defaultBinary || opts.compileTo >= CompilePhase::Emit);
  std::string error;
  FailureOr<PlannerResult> plan = planParallelism(opts, runtimeOnly, log, error);
  if (failed(plan))
    return fail("--devices " + Twine(opts.devices) + ": " + error);
  if (!opts.opCosts.empty())
    refinePlanWithOpCosts(opts, *plan, log);
  refinePlanForExperts(opts, *plan, log);
  printPlannerResult(*plan, log);
  std::string json;
  llvm::raw_string_ostream js(json);
  js << plannerJson(*plan);
  if (mlirInput) {
    // A model in merak IR (bench/paper's generated GPTs, up to 20B
    // parameters of splat weights): the plan is the result.
    if (opts.report == "json") {
      std::string err;
      if (failed(deliverReport("{\"planner\":" + json + "}\n", opts.reportFile, reportOut, err)))
        return fail(err);
    }
    log << "merak-compile: planner: " << opts.input
        << " is merak IR: planned only, not compiled (give the plan's --dp/--tp/--pp "
           "to compile it)\n";
    return 0;
  }
  const PlanCandidate &c = plan->chosen;
  planned = candidateOptions(opts, c, plan->memoryPerDevice);
  planned.plannerJson = json;
  if (defaultBinary) {
    planned.compileTo = CompilePhase::Binary;
    planned.compileToGiven = true;
  }
  const bool pipelined = c.pp > 1 || c.microbatches > 1;
  if (!pipelined) {
    planned.simulate = false;
    planned.simulateTrace.clear();
    planned.deviceProfile.clear();
    planned.opCosts.clear();
  } else if (!opts.deviceProfile.empty() || !opts.opCosts.empty()) {
    planned.simulate = true;
  }
  log << "merak-compile: planner: compiling --dp " << c.dp << " --tp " << c.tp << " --pp "
      << c.pp << " --microbatches " << c.microbatches << " --schedule " << c.schedule
      << " --recompute " << c.recompute << " --tp-overlap " << planned.tpOverlap
      << " --zero " << planned.zero;
  if (c.virtualStages > 1)
    log << " --virtual-stages " << c.virtualStages;
  if (c.sequenceParallel)
    log << " --sequence-parallel on";
  if (!c.stageBoundaries.empty()) { // the planned stages' cuts
    log << " --stage-boundaries ";
    llvm::interleave(c.stageBoundaries, log, ",");
  }
  if (c.ep > 1)
    log << " --ep " << c.ep << " --moe-shadow " << c.moeShadow << " --moe-rebalance-every "
        << c.moeRebalanceEvery << " --moe-all-to-all " << c.moeAllToAll << " --moe-chunks "
        << (c.moeChunks ? std::to_string(c.moeChunks) : std::string("auto"));
  log << "\n";
  return std::nullopt;
}
