//===- PlanOutput.cpp - the chosen plan: printed, as JSON, and compiled ---===//
//
// What merak-compile --devices does with the planner's result: the lines it
// prints, the JSON of --report=json's "planner", and the options of the plan
// runCompile then compiles (planCompile).
//
//===----------------------------------------------------------------------===//
#include "merak/Planner/Planner.h"

#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"
#include "merak/Planner/Report.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

namespace {
std::string planName(const PlanCandidate &c) {
  std::string s = llvm::formatv("dp {0} tp {1} pp {2} mb {3} {4}", c.dp, c.tp, c.pp,
                                c.microbatches, c.schedule)
                      .str();
  if (c.virtualStages > 1)
    s += " v" + std::to_string(c.virtualStages);
  s += " recompute " + c.recompute;
  if (c.overlap)
    s += " +overlap";
  if (c.zero)
    s += " +zero";
  return s;
}

json::Object candidateJson(const PlanCandidate &c) {
  json::Object o{{"dp", c.dp},
                 {"tp", c.tp},
                 {"pp", c.pp},
                 {"microbatches", c.microbatches},
                 {"schedule", c.schedule},
                 {"virtual_stages", c.virtualStages},
                 {"recompute", c.recompute},
                 {"overlap", c.overlap},
                 {"zero", c.zero},
                 {"step_time_s", c.stepTime},
                 {"bubble_fraction", c.bubble},
                 {"peak_memory_bytes", c.peakMemory}};
  if (!c.rejected.empty())
    o["rejected"] = c.rejected;
  return o;
}
} // namespace

void mlir::merak::printPlannerResult(const PlannerResult &r, llvm::raw_ostream &os) {
  os << llvm::formatv("merak-compile: planner: profile '{0}', {1} devices x {2} bytes; {3} plans "
                      "simulated in {4:F3} s ({5:F3} s compiling the cost tables, {6} fine "
                      "stages)\n",
                      r.profile, r.chosen.dp * r.chosen.tp * r.chosen.pp,
                      (int64_t)r.memoryPerDevice, r.evaluated, r.searchSeconds, r.probeSeconds,
                      r.fineStages);
  os << "merak-compile: planner: chosen " << planName(r.chosen)
     << llvm::formatv(": step {0:e3} s, bubble {1:F3}, peak memory {2} bytes\n",
                      r.chosen.stepTime, r.chosen.bubble, r.chosen.peakMemory);
  os << "merak-compile: planner: runners-up:\n";
  for (const PlanCandidate &c : r.runnersUp)
    os << llvm::formatv("merak-compile: planner:   {0,-60} step {1:e3} s  bubble {2:F3}  "
                        "memory {3}{4}\n",
                        planName(c), c.stepTime, c.bubble, c.peakMemory,
                        c.rejected.empty() ? "" : "  rejected: " + c.rejected);
  for (const std::string &n : r.notes)
    os << "merak-compile: planner: note: " << n << "\n";
}

json::Value mlir::merak::plannerJson(const PlannerResult &r) {
  json::Array runners, notes;
  for (const PlanCandidate &c : r.runnersUp)
    runners.push_back(candidateJson(c));
  for (const std::string &n : r.notes)
    notes.push_back(n);
  return json::Object{{"chosen", candidateJson(r.chosen)},
                      {"space", r.space},
                      {"runners_up", std::move(runners)},
                      {"search_time_s", r.searchSeconds},
                      {"probe_time_s", r.probeSeconds},
                      {"plans_evaluated", r.evaluated},
                      {"fine_stages", r.fineStages},
                      {"profile", r.profile},
                      {"memory_per_device_bytes", r.memoryPerDevice},
                      {"notes", std::move(notes)}};
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
  planned = opts;
  planned.devices = 0;
  planned.meshGiven = false;
  const PlanCandidate &c = plan->chosen;
  planned.dp = c.dp;
  planned.tp = c.tp;
  planned.pp = c.pp;
  planned.microbatches = c.microbatches;
  planned.schedule = c.schedule;
  planned.virtualStages = c.virtualStages;
  planned.recompute = c.recompute;
  planned.zero = c.zero ? 1 : 0;
  if (c.overlap && c.tp > 1)
    planned.tpOverlap = "sub-pipeline";
  if (c.recompute == "stage-aware" && opts.memoryPerDevice.empty())
    planned.memoryPerDevice = std::to_string((int64_t)plan->memoryPerDevice);
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
  } else if (!opts.deviceProfile.empty()) {
    planned.simulate = true;
  }
  log << "merak-compile: planner: compiling --dp " << c.dp << " --tp " << c.tp << " --pp "
      << c.pp << " --microbatches " << c.microbatches << " --schedule " << c.schedule
      << " --recompute " << c.recompute << " --tp-overlap " << planned.tpOverlap
      << " --zero " << planned.zero << "\n";
  return std::nullopt;
}
