//===- ResolvedOptions.cpp - merak-compile's options, checked -------------===//
#include "merak/Tools/ResolvedOptions.h"

#include "merak/Dialect/Merak/Analysis/OpCosts.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "llvm/ADT/Twine.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;

/// ./train --moe-histogram's {"experts": E, "rows": [E counts]}: the rows'
/// shares (any scale); nullopt with `err` set when it is not such a file.
static std::optional<std::vector<double>> readExpertHistogram(const std::string &path,
                                                              std::string &err) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    err = "cannot read it: " + file.getError().message();
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*file)->getBuffer());
  if (!json) {
    err = "not JSON: " + llvm::toString(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *o = json->getAsObject();
  const llvm::json::Array *rows = o ? o->getArray("rows") : nullptr;
  std::optional<int64_t> experts = o ? o->getInteger("experts") : std::nullopt;
  if (!rows || !experts || (int64_t)rows->size() != *experts || rows->empty()) {
    err = "expected {\"experts\": E, \"rows\": [E row counts]} (./train --moe-histogram)";
    return std::nullopt;
  }
  std::vector<double> shares;
  double total = 0;
  for (const llvm::json::Value &v : *rows) {
    std::optional<double> n = v.getAsNumber();
    if (!n || *n < 0) {
      err = "a row count is not a number >= 0";
      return std::nullopt;
    }
    shares.push_back(*n);
    total += *n;
  }
  if (!(total > 0)) {
    err = "no rows were routed";
    return std::nullopt;
  }
  return shares;
}

namespace {
/// The checks of the mesh, the schedule and the overlap flags (the first
/// failing one is reported).
LogicalResult checkMesh(const CompileOptions &opts, ResolvedOptions &r,
                        PipelineScheduleKind schedule, bool pipelined, std::string &error) {
  auto fail = [&](const Twine &msg) {
    error = msg.str();
    return failure();
  };
  const CompilePhase compileTo = r.compileTo;
  if (opts.virtualStages < 1)
    return fail("--virtual-stages must be at least 1");
  if (opts.virtualStages > 1 && schedule != PipelineScheduleKind::Interleaved)
    return fail("--virtual-stages needs --schedule interleaved");
  if (schedule == PipelineScheduleKind::Interleaved && opts.virtualStages > 1 && opts.pp < 2)
    return fail("--schedule interleaved with --virtual-stages needs --pp of at least 2");
  if (schedule == PipelineScheduleKind::Interleaved && opts.microbatches % opts.pp != 0)
    return fail("--schedule interleaved needs --microbatches (" + Twine(opts.microbatches) +
                ") to be a multiple of --pp (" + Twine(opts.pp) + ")");
  if (opts.simulate && !pipelined)
    return fail("--simulate needs --pp or --microbatches");
  if (!opts.simulateTrace.empty() && !opts.simulate)
    return fail("--simulate-trace needs --simulate");
  if (!opts.deviceProfile.empty() && !opts.simulate && opts.moeChunks != 0)
    return fail("--device-profile needs --simulate (or --moe-chunks auto)");
  if (!opts.opCosts.empty() && !opts.simulate)
    return fail("--op-costs needs --simulate (or --devices)");
  if (opts.gradReduce != "fp32" && opts.gradReduce != "bf16")
    return fail("--grad-reduce must be fp32 or bf16, got '" + opts.gradReduce + "'");
  r.simulation.dp = opts.dp;
  r.simulation.tp = opts.tp;
  r.simulation.ep = opts.ep;
  if (!(opts.moeSkew >= 0) || !std::isfinite(opts.moeSkew))
    return fail("--moe-skew must be a finite number >= 0");
  if (opts.moeSkew > 0 && !opts.simulate && opts.devices < 1)
    return fail("--moe-skew needs --simulate (or --devices, which plans for it)");
  r.simulation.moeSkew = opts.moeSkew;
  if (!opts.moeHistogram.empty()) {
    if (!opts.simulate && opts.devices < 1)
      return fail("--moe-histogram needs --simulate (or --devices, which plans for it)");
    if (opts.moeSkew > 0)
      return fail("give --moe-histogram or --moe-skew, not both");
    std::string err;
    std::optional<std::vector<double>> shares = readExpertHistogram(opts.moeHistogram, err);
    if (!shares)
      return fail("--moe-histogram " + opts.moeHistogram + ": " + err);
    r.simulation.moeShares = std::move(*shares);
  }
  r.simulation.pp = opts.pp;
  r.simulation.microbatches = opts.microbatches;
  r.simulation.gradReduceBf16 = opts.gradReduce == "bf16";
  r.simulation.gradAccumulationFusion = opts.gradAccumulationFusion;
  if (!opts.deviceProfile.empty()) {
    llvm::Expected<DeviceProfile> profile = readDeviceProfile(opts.deviceProfile);
    if (!profile)
      return fail("--device-profile: " + llvm::toString(profile.takeError()));
    r.simulation.profile = std::move(*profile);
  }
  if (!opts.opCosts.empty()) {
    llvm::Expected<MeasuredOpCosts> costs = readMeasuredOpCosts(opts.opCosts);
    if (!costs)
      return fail("--op-costs: " + llvm::toString(costs.takeError()));
    if (!costs->target.empty() && costs->target != opts.target)
      return fail("--op-costs: " + opts.opCosts + " was measured on target '" +
                  costs->target + "', not '" + opts.target + "'");
    r.simulation.measured = std::make_shared<const MeasuredOpCosts>(std::move(*costs));
  }
  // One boundary between consecutive stages (chunks, with --virtual-stages).
  const int64_t chunks = opts.pp * std::max<int64_t>(1, opts.virtualStages);
  if (!opts.stageBoundaries.empty() && (int64_t)opts.stageBoundaries.size() != chunks - 1)
    return fail("--stage-boundaries needs pp x virtual-stages - 1 = " + Twine(chunks - 1) +
                " cut points, got " + Twine(opts.stageBoundaries.size()));
  if (opts.dp > 1 && compileTo < CompilePhase::Training)
    return fail("--dp needs --compile-to=training or a later phase");
  if (opts.tp > 1 && compileTo < CompilePhase::Training)
    return fail("--tp needs --compile-to=training or a later phase");
  if (!(opts.bucketMb > 0))
    return fail("--bucket-mb must be positive");
  if (opts.zero != 0 && opts.zero != 1)
    return fail("--zero " + Twine(opts.zero) + ": only stages 0 and 1 exist");
  if (opts.zero && compileTo < CompilePhase::Training)
    return fail("--zero needs --compile-to=training or a later phase");
  if (opts.tpOverlap != "none" && opts.tpOverlap != "sub-pipeline")
    return fail("--tp-overlap must be none or sub-pipeline, got '" + opts.tpOverlap + "'");
  return success();
}

/// `--opt KEY=VALUE`: a key of merak-optimizer with a value of its type
/// (the pass's own parser would reject a bad one without naming it).
LogicalResult checkOptimizerOption(StringRef key, StringRef value, std::string &error) {
  enum Kind { Number, Integer, Boolean, Word };
  static const std::pair<StringRef, Kind> kKeys[] = {
      {"optimizer", Word},     {"lr", Number},          {"beta1", Number},
      {"beta2", Number},       {"beta3", Number},       {"eps", Number},
      {"weight-decay", Number}, {"momentum", Number},   {"nesterov", Boolean},
      {"clip-norm", Number},   {"schedule", Word},      {"warmup-steps", Integer},
      {"total-steps", Integer}, {"min-lr", Number}};
  const auto *it = llvm::find_if(kKeys, [&](const auto &k) { return k.first == key; });
  if (it == std::end(kKeys)) {
    error = ("--opt " + key + "=" + value + ": unknown key '" + key + "' (expected").str();
    for (const auto &k : kKeys)
      error += " " + k.first.str();
    error += ")";
    return failure();
  }
  double d;
  int64_t i;
  bool ok = it->second == Word      ? !value.empty()
            : it->second == Integer ? !value.getAsInteger(10, i)
            : it->second == Boolean
                ? llvm::is_contained({"true", "false", "1", "0"}, value)
                : !value.getAsDouble(d);
  if (ok)
    return success();
  const char *what = it->second == Integer   ? "an integer"
                     : it->second == Boolean ? "true or false"
                     : it->second == Word    ? "a name"
                                             : "a number";
  error = ("--opt " + key + "=" + value + ": '" + value + "' is not " + what).str();
  return failure();
}

/// The training step's quantities (checked only when training is built).
LogicalResult resolveTraining(const CompileOptions &opts, PipelineOptions &p,
                              std::string &error) {
  p.loss = opts.loss;
  p.logits = opts.logits;
  p.labels = opts.labels;
  p.frozen.assign(opts.frozen.begin(), opts.frozen.end());
  p.fusedAttention = opts.fusedAttention;
  p.weightCastCache = opts.weightCastCache;
  p.gradAccumulationFusion = opts.gradAccumulationFusion;
  p.sequenceParallel = opts.sequenceParallel == 1;
  p.syncBatchNorm = opts.syncBatchNorm;
  if (!(opts.moeAuxLoss >= 0) || !std::isfinite(opts.moeAuxLoss)) {
    error = "--moe-aux-loss must be a finite number >= 0, got " + std::to_string(opts.moeAuxLoss);
    return failure();
  }
  p.moeAuxLoss = opts.moeAuxLoss;
  if (!(opts.moeCapacityFactor >= 0) || !std::isfinite(opts.moeCapacityFactor)) {
    error = "--moe-capacity-factor must be a finite number >= 0 (0: dropless), got " +
            std::to_string(opts.moeCapacityFactor);
    return failure();
  }
  if (opts.moeDropPolicy != "probs" && opts.moeDropPolicy != "position") {
    error = "--moe-drop-policy must be probs or position, got '" + opts.moeDropPolicy + "'";
    return failure();
  }
  p.moeCapacityFactor = opts.moeCapacityFactor;
  p.moeDropPolicy = opts.moeDropPolicy;
  p.attentionCpuForms = opts.target != "cuda";
  p.precision = opts.precision;
  // Vocabulary parallelism: by default whenever the model qualifies (a
  // remark says why not otherwise); asked for explicitly, it must apply.
  const bool vocabExplicit = opts.vocabParallel >= 0;
  p.vocabParallel =
      opts.tp > 1 && (vocabExplicit ? opts.vocabParallel == 1 : opts.loss == "cross-entropy");
  p.vocabParallelFallback = !vocabExplicit;
  p.optimizer = "optimizer=" + opts.optimizer;
  for (const std::string &kv : opts.optimizerOptions) {
    if (kv.find('=') == std::string::npos || kv.find_first_of(" {}") != std::string::npos) {
      error = "--opt expects KEY=VALUE, got '" + kv + "'";
      return failure();
    }
    auto [key, value] = StringRef(kv).split('=');
    if (failed(checkOptimizerOption(key, value, error)))
      return failure();
    p.optimizer += " " + kv;
  }
  return success();
}
} // namespace

FailureOr<ResolvedOptions> mlir::merak::resolveCompileOptions(const CompileOptions &opts,
                                                              std::string &error) {
  auto fail = [&](const Twine &msg) -> FailureOr<ResolvedOptions> {
    error = msg.str();
    return failure();
  };
  if (opts.plannerSpace != "auto")
    return fail("--planner-space needs --devices (it restricts the planner's search)");
  ResolvedOptions r;
  for (const std::string &spec : opts.inputShapes)
    if (failed(parseInputShape(spec, r.import, error)))
      return failure();
  if (opts.batchSize < 0)
    return fail("--batch-size must be positive");
  r.import.batchSize = opts.batchSize;
  r.compileTo = opts.compileTo;
  if (opts.dp < 1 || opts.tp < 1 || opts.pp < 1)
    return fail("--dp, --tp and --pp must be at least 1");
  if (opts.ep < 1 || opts.dp % opts.ep != 0)
    return fail("--ep " + std::to_string(opts.ep) + " must divide --dp " +
                std::to_string(opts.dp) +
                " (expert parallelism splits the experts over groups of ep data-parallel ranks)");
  if (opts.moeDispatcher != "alltoall" && opts.moeDispatcher != "allgather")
    return fail("--moe-dispatcher must be alltoall or allgather, got '" + opts.moeDispatcher +
                "'");
  if (opts.moeShadow < 0 || opts.moeShadowMinRows < 0)
    return fail("--moe-shadow and --moe-shadow-min-rows must not be negative");
  if (opts.moeShadow > 0 && opts.ep < 2)
    return fail("--moe-shadow needs expert parallelism (--ep 2 or more): it copies hot experts "
                "to the other ranks of their ep group");
  if (opts.moeChunks < 0)
    return fail("--moe-chunks must be auto or a positive number of chunks");
  if (opts.moeChunks != 1 && (opts.ep < 2 || opts.moeShadow > 0 ||
                             opts.moeDispatcher != "alltoall"))
    return fail("--moe-chunks needs expert parallelism (--ep 2 or more) with the alltoall "
                "dispatcher and without --moe-shadow (whose plan covers the whole batch)");
  if (opts.moeRebalanceEvery < 0)
    return fail("--moe-rebalance-every must not be negative");
  if (opts.moeRebalanceEvery > 0 && opts.ep < 2)
    return fail("--moe-rebalance-every needs expert parallelism (--ep 2 or more): it moves "
                "experts between the ranks of their ep group");
  if (opts.moeAllToAll != "flat" && opts.moeAllToAll != "hierarchical")
    return fail("--moe-all-to-all must be flat or hierarchical, got '" + opts.moeAllToAll + "'");
  if (opts.moeAllToAll == "hierarchical" && opts.moeDispatcher != "alltoall")
    return fail("--moe-all-to-all hierarchical needs --moe-dispatcher alltoall");
  if (opts.moeShadow > 0 && opts.moeDispatcher != "alltoall")
    return fail("--moe-shadow needs --moe-dispatcher alltoall (the allgather dispatcher "
                "already sends every row to every rank)");
  if (opts.moeRebalanceEvery > 0 && opts.target != "cpu")
    return fail("--moe-rebalance-every is supported on --target cpu only (dynamic expert "
                "placement moves the experts in the host's parameters)");
  // Recomputation: stage-aware with a memory budget, none without; any
  // mode but none takes the pipelined path (one stage for a serial program).
  std::optional<int64_t> memoryBudget = parseByteSize(opts.memoryPerDevice);
  if (!memoryBudget || (!opts.memoryPerDevice.empty() && *memoryBudget <= 0))
    return fail("--memory-per-device '" + opts.memoryPerDevice +
                "': expected a positive byte count, optionally with a suffix KB, MB, GB, KiB, "
                "MiB or GiB");
  // The shifted critical path moves recomputation off the critical path:
  // without --recompute it recomputes fully, as in the Merak paper.
  bool scpDefault =
      opts.schedule == "shifted-critical-path" && (opts.pp > 1 || opts.microbatches > 1);
  std::string recompute = !opts.recompute.empty() ? opts.recompute
                          : *memoryBudget         ? "stage-aware"
                          : scpDefault            ? "full"
                                                  : "none";
  FailureOr<RecomputeMode> recomputeMode = parseRecomputeMode(recompute);
  if (failed(recomputeMode))
    return fail("unknown --recompute '" + recompute +
                "' (expected none, full, selective or stage-aware)");
  if (*recomputeMode == RecomputeMode::StageAware && !*memoryBudget)
    return fail("--recompute stage-aware needs --memory-per-device");
  const bool pipelined =
      opts.pp > 1 || opts.microbatches > 1 || *recomputeMode != RecomputeMode::None;
  if (opts.target != "cpu" && opts.target != "cuda")
    return fail("unknown --target '" + opts.target + "' (expected cpu or cuda)");
  r.report = !opts.report.empty();
  // Without --compile-to: the training executable. --report alone describes
  // the training step; with --grad-reduce bf16 the overlap phase, after which
  // the dp buckets are bf16.
  if (!opts.compileToGiven)
    r.compileTo = !r.report ? CompilePhase::Binary
                  : opts.gradReduce == "bf16" ? CompilePhase::Overlap
                                              : CompilePhase::Training;
  const CompilePhase compileTo = r.compileTo;
  if (r.report && compileTo < CompilePhase::Training)
    return fail("--report needs --compile-to=training or a later phase");
  if (r.report && opts.report != "text" && opts.report != "json")
    return fail("--report=" + opts.report + ": expected text or json");
  if (opts.microbatches < 1)
    return fail("--microbatches must be at least 1");
  if (pipelined && compileTo < CompilePhase::Training)
    return fail("--pp and --microbatches need --compile-to=training or a later phase");
  if (!pipelined && (compileTo == CompilePhase::Pipeline || compileTo == CompilePhase::Recompute ||
                     compileTo == CompilePhase::Schedule))
    return fail("--compile-to=pipeline, recompute and schedule need --pp, --microbatches or "
                "--recompute");
  FailureOr<PipelineScheduleKind> scheduleKind = parsePipelineSchedule(opts.schedule);
  if (failed(scheduleKind))
    return fail("unknown --schedule '" + opts.schedule +
                "' (expected gpipe, 1f1b, interleaved, zb-h1, zb-h2 or "
                "shifted-critical-path)");
  if (failed(checkMesh(opts, r, *scheduleKind, pipelined, error)))
    return failure();
  r.mlirInput = StringRef(opts.input).ends_with(".mlir");
  if (r.mlirInput && !opts.inputShapes.empty())
    return fail("--input-shape needs an ONNX input; " + opts.input + " has fixed shapes");
  if (r.mlirInput && opts.batchSize)
    return fail("--batch-size needs an ONNX input; " + opts.input + " has fixed shapes");

  PipelineOptions &p = r.pipeline;
  p.dp = opts.dp;
  p.tp = opts.tp;
  p.ep = opts.ep;
  p.moeDispatcher = opts.moeDispatcher;
  p.moeShadow = opts.moeShadow;
  p.moeShadowMinRows = opts.moeShadowMinRows;
  p.moeRebalanceEvery = opts.moeRebalanceEvery;
  p.moeChunks = opts.moeChunks;
  p.moeHierarchical = opts.moeAllToAll == "hierarchical";
  p.pp = opts.pp;
  p.microbatches = opts.microbatches;
  p.virtualStages =
      *scheduleKind == PipelineScheduleKind::Interleaved ? opts.virtualStages : 1;
  p.zero = opts.zero;
  p.bucketBytes = std::max<int64_t>(1, (int64_t)(opts.bucketMb * 1024 * 1024));
  p.stageBoundaries.assign(opts.stageBoundaries.begin(), opts.stageBoundaries.end());
  p.schedule = opts.schedule;
  p.recompute = recompute;
  p.memoryPerDevice = *memoryBudget;
  p.tpOverlap = opts.tpOverlap;
  p.dpOverlap = opts.dpOverlap;
  p.gradReduce = opts.gradReduce;
  if (r.compileTo < CompilePhase::Training && !opts.optimizerOptions.empty())
    return fail("--opt needs --compile-to=training or a later phase (the optimizer is part "
                "of the training step)");
  if (r.compileTo >= CompilePhase::Training && failed(resolveTraining(opts, p, error)))
    return failure();
  return r;
}
