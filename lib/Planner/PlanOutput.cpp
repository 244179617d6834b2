//===- PlanOutput.cpp - the chosen plan: printed, as JSON, and compiled ---===//
//
// The planner's result as merak-compile --devices prints it and as
// --report=json's "planner" object (what it then compiles: lib/Tools/
// PlanCompile.cpp).
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
  if (c.sequenceParallel)
    s += " +sp";
  if (c.ep > 1)
    s += " ep " + std::to_string(c.ep);
  if (c.moeShadow > 0)
    s += " shadow " + std::to_string(c.moeShadow);
  if (c.moeRebalanceEvery > 0)
    s += " rebalance " + std::to_string(c.moeRebalanceEvery);
  if (c.moeAllToAll != "flat")
    s += " a2a " + c.moeAllToAll;
  if (c.moeChunks != 1)
    s += " chunks " + (c.moeChunks ? std::to_string(c.moeChunks) : std::string("auto"));
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
                 {"sequence_parallel", c.sequenceParallel},
                 {"ep", c.ep},
                 {"moe_shadow", c.moeShadow},
                 {"moe_rebalance_every", c.moeRebalanceEvery},
                 {"moe_all_to_all", c.moeAllToAll},
                 {"moe_chunks", c.moeChunks ? json::Value(c.moeChunks) : json::Value("auto")},
                 {"step_time_s", c.stepTime},
                 {"bubble_fraction", c.bubble},
                 {"peak_memory_bytes", c.peakMemory}};
  if (!c.stageBoundaries.empty())
    o["stage_boundaries"] = json::Array(c.stageBoundaries);
  if (!c.rejected.empty())
    o["rejected"] = c.rejected;
  if (c.simulatedStepTime)
    o["simulated_step_time_s"] = *c.simulatedStepTime;
  if (c.measuredStepTime)
    o["measured_op_costs"] = json::Object{{"step_time_s", *c.measuredStepTime},
                                          {"measured_ops", c.measuredOps},
                                          {"costed_ops", c.costedOps}};
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
  auto measured = [](const PlanCandidate &c) {
    std::string s = c.simulatedStepTime
                        ? llvm::formatv(", compiled and simulated {0:e3} s",
                                        *c.simulatedStepTime)
                              .str()
                        : std::string();
    if (c.measuredStepTime)
      s += llvm::formatv(", measured op costs {0:e3} s ({1} of {2} ops)", *c.measuredStepTime,
                         c.measuredOps, c.costedOps)
               .str();
    return s;
  };
  os << "merak-compile: planner: chosen " << planName(r.chosen)
     << llvm::formatv(": step {0:e3} s, bubble {1:F3}, peak memory {2} bytes{3}\n",
                      r.chosen.stepTime, r.chosen.bubble, r.chosen.peakMemory,
                      measured(r.chosen));
  os << "merak-compile: planner: runners-up:\n";
  for (const PlanCandidate &c : r.runnersUp)
    os << llvm::formatv("merak-compile: planner:   {0,-60} step {1:e3} s  bubble {2:F3}  "
                        "memory {3}{4}{5}\n",
                        planName(c), c.stepTime, c.bubble, c.peakMemory, measured(c),
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
