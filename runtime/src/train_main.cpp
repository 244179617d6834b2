//===- train_main.cpp - The main of generated training programs -----------===//
//
// merak_train_main (program.h) is ./train: it reads the embedded manifest,
// parses the command line (cli.h), sets up the arena A, the parameter
// storage P and the constants C, feeds token batches (data.h) to the
// generated merak_train_step, and writes metrics, checkpoints and a trace.
//
// Exit codes: 0 success (also --help), 1 a run-time error (data file,
// checkpoint, I/O, non-finite loss), 2 a bad command line, 3 an internal
// error (the program's own manifest or data is inconsistent: a compiler bug),
// 128 + a stop signal after the coordinated checkpoint it asked for
// (stop_signals.h). Every error is one "train: error: ..." line on stderr.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/program.h"

#include "merak_rt/array_data.h"
#include "merak_rt/cli.h"
#include "merak_rt/collectives.h"
#include "merak_rt/comm.h"
#include "merak_rt/pipeline.h"
#include "merak_rt/data.h"
#include "merak_rt/metrics.h"
#include "merak_rt/ops.h"
#include "merak_rt/safetensors.h"
#include "merak_rt/step_backend.h"
#include "merak_rt/trace.h"
#include "op_profile.h"

#include "checkpoint_shards.h"
#include "expert_placement.h"
#include "file_util.h"
#include "manifest.h"
#include "sharding.h"
#include "stop_signals.h"
#include "train_checkpoint.h"
#include "train_memory.h"
#include "train_program.h"
#include "train_support.h"
#include "weights_file.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>

namespace merak::rt {

namespace {

/// Set when every rank ends together with a non-zero code (a stop signal,
/// after a coordinated checkpoint): no rank aborts the job.
bool gCoordinatedExit = false;

using namespace train;

double readScalar(const char *base, const ManifestTensor &t) {
  if (t.dtype == DType::F64) {
    double v;
    std::memcpy(&v, base + t.offset, sizeof(v));
    return v;
  }
  float v;
  std::memcpy(&v, base + t.offset, sizeof(v));
  return v;
}

void writeScalar(char *base, const ManifestTensor &t, double value) {
  if (t.dtype == DType::F64) {
    std::memcpy(base + t.offset, &value, sizeof(value));
  } else {
    float v = static_cast<float>(value);
    std::memcpy(base + t.offset, &v, sizeof(v));
  }
}

std::string formatNumber(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

std::string formatLoss(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.4f", v);
  return buffer;
}

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

/// The job's communicator (a parallel program), alive until
/// merak_train_main returns: a rank that fails aborts the whole job rather
/// than finalize while its peers wait in a collective.
std::unique_ptr<Comm> gComm;

/// The processes of a parallel program: one per device of its mesh
/// (mpirun -np dp*tp*pp), with the runtime's communicator set; null for
/// one process.
Comm *openMesh(const Manifest &m, int *argc, char ***argv) {
  MeshShape mesh;
  mesh.pp = static_cast<int>(m.meshPp);
  mesh.dp = static_cast<int>(m.meshDp);
  mesh.tp = static_cast<int>(m.meshTp);
  mesh.ep = static_cast<int>(m.meshEp);
  if (mesh.size() > 1) {
    Result<std::unique_ptr<Comm>> opened = Comm::init(argc, argv, mesh);
    if (!opened.ok())
      die(kExitError, opened.message());
    gComm = std::move(opened).value();
  }
  Comm *comm = gComm.get();
  cpu::setCommunicator(comm);
  return comm;
}

/// A device program: the device opened (and, pipelined, the runner's
/// buffers on it).
void openBackend(StepBackend &backend, Comm *comm, PipelineRunner *pipeline,
                 const Manifest &m, bool leader) {
  if (Status st = backend.open(comm); !st.ok())
    die(kExitError, st.message());
  if (comm && comm->worldSize() > 1) // every rank says which device it took
    std::printf("train: rank %d: %s\n", comm->rank(), backend.describe().c_str());
  else
    std::printf("train: %s\n", backend.describe().c_str());
  // A pipelined program: the runner's buffers on the device.
  if (pipeline) {
    PipelineMemory *memory = backend.pipelineMemory();
    if (!memory)
      die(kExitError, "a pipelined program is not supported on " + backend.name());
    pipeline->setMemory(memory);
    if (leader && comm && m.meshPp > 1)
      std::printf("train: pipeline messages: host-staged over MPI (stashes in %s memory, "
                  "messages in host memory)\n",
                  memory->name());
  }
}

/// Run-time hyper-parameters win over the compiled and checkpointed ones.
void setRunHyperparameters(const Manifest &m, const TrainOptions &o, char *P, int argc,
                           char **argv) {
  bool lrSettable = false;
  for (const auto &[key, paramName] : m.hparams)
    if (key == "lr") {
      writeScalar(P, *m.param(paramName), o.lr);
      lrSettable = true;
    }
  if (!lrSettable)
    for (int i = 1; i < argc; ++i)
      if (argv[i] && (std::strcmp(argv[i], "--lr") == 0 ||
                      std::strncmp(argv[i], "--lr=", 5) == 0))
        printWarning("--lr has no effect: this program has no run-time "
                     "learning rate (no \"lr\" in the manifest's hparams)");
}

/// --metrics (on a resume, the lines past the checkpoint dropped first).
MetricsWriter openMetrics(const TrainOptions &o, int64_t start) {
  if (o.resume) {
    Result<int64_t> trimmed = trimMetricsFile(o.metricsPath, start);
    if (!trimmed.ok())
      die(kExitError, trimmed.message());
  }
  Result<MetricsWriter> opened = MetricsWriter::open(o.metricsPath, o.resume);
  if (!opened.ok())
    die(kExitError, opened.message());
  return std::move(opened).value();
}

/// The last line: steps, final loss, mean rate, peak memory, checkpoint.
void printSummary(const TrainOptions &o, int64_t start, bool hasLoss, double lastLoss,
                  double totalSeconds, uint64_t globalTokens, double peakMiB, bool parallel) {
  int64_t ran = o.steps - start;
  double meanRate = totalSeconds > 0 ? static_cast<double>(globalTokens) *
                                           static_cast<double>(ran) /
                                           totalSeconds
                                     : 0;
  std::string summary =
      "train: done: " + std::to_string(ran) + " steps (" +
      std::to_string(start) + ".." + std::to_string(o.steps - 1) +
      ") | final loss " + (hasLoss ? formatLoss(lastLoss) : "n/a") +
      " | mean " + ProgressBar::formatRate(meanRate) + " tok/s";
  char peak[64];
  std::snprintf(peak, sizeof(peak), " | peak memory %.0f MiB%s", peakMiB,
                parallel ? " (largest rank)" : "");
  summary += peak;
  if (!o.checkpointDir.empty())
    summary += " | checkpoint " + o.checkpointDir + "/" +
               checkpointName(o.steps);
  std::printf("%s\n", summary.c_str());
  std::fflush(stdout);
}

/// One run of ./train: the processes, the command line, data and memory,
/// the steps, the end. Each phase is a method; errors end the run through
/// die() (train_support.h).
class Trainer {
public:
  explicit Trainer(StepBackend *backend) : backend_(backend) {}
  int run(int argc, char **argv);

private:
  void openProcesses(int *argc, char ***argv);
  /// The options, or the exit code of --help or a bad command line.
  std::optional<int> parseCommandLine(int argc, char **argv);
  void prepare(int argc, char **argv);
  void openOutputs();
  /// Runs steps from start_ until --steps or an agreed stop signal.
  void runSteps();
  void step(int64_t s, bool tracing);
  /// The metrics of step s (read from A), written and shown.
  StepMetrics report(int64_t s, double seconds);
  int finish();

  [[noreturn]] void stop(const std::string &message) {
    if (progress_)
      progress_->finish(); // ends the progress line (a terminal shares it)
    die(kExitError, message);
  }
  void writeTrace() {
    if (trace_)
      if (Status s = trace_->write(options_.tracePath); !s.ok())
        die(kExitError, s.message());
  }
  bool leader() const { return !comm_ || comm_->rank() == 0; }

  StepBackend *backend_;
  Program program_;
  Comm *comm_ = nullptr;
  std::unique_ptr<PipelineRunner> pipeline_;
  RankPlace place_;
  TrainOptions options_;
  std::optional<Datasets> data_;
  std::optional<Mapping> arena_, params_;
  char *A_ = nullptr, *P_ = nullptr;
  const char *C_ = nullptr;
  Buffer constsCopy_;
  /// The initial data's file when the manifest names one (mapped while the
  /// constants are read from it).
  std::unique_ptr<WeightsFile> weights_;
  std::optional<CheckpointSite> site_;
  /// --moe-rebalance-every, and the experts it moved after the last step
  /// when it decided there.
  std::optional<train::ExpertPlacement> placement_;
  std::optional<int64_t> moved_;
  std::vector<ByteRange> inputRanges_, outputRanges_;
  int64_t start_ = 0;
  // Outputs and the loop's state.
  std::optional<MetricsWriter> metrics_;
  std::unique_ptr<TraceWriter> trace_;
  OpTraceRecorder recorder_;
  std::optional<OpProfiler> profiler_;
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> devNull_{nullptr, &std::fclose};
  std::optional<ProgressBar> progress_;
  std::vector<int64_t> inputs_, labels_;
  uint64_t globalTokens_ = 0;
  double totalSeconds_ = 0, lastLoss_ = std::nan("");
  int stopSignal_ = 0;       ///< the agreed stop signal, once received
  int64_t stoppedAfter_ = 0; ///< the steps completed when it stopped the loop
  bool checkpointed_ = false; ///< a checkpoint of stoppedAfter_ exists
};

/// A parallel program is one process per device of its mesh (mpirun -np
/// dp*tp*pp); world rank 0 prints, writes metrics, traces and checkpoints.
/// A pipelined program (--pp/--microbatches) runs its fragments through the
/// pipeline interpreter instead of one merak_train_step.
void Trainer::openProcesses(int *argc, char ***argv) {
  const Manifest &m = program_.manifest;
  comm_ = openMesh(m, argc, argv);
  Result<std::unique_ptr<PipelineRunner>> r = PipelineRunner::create(m, comm_);
  if (!r.ok())
    internalError(r.message());
  pipeline_ = std::move(r).value();
  // Each rank writes into checkpoints what it alone holds (checkpoint_shards.h).
  place_.tp = comm_ ? comm_->coord().tp : 0;
  place_.dp = comm_ ? comm_->coord().dp : 0;
  place_.ep = static_cast<int>(m.meshEp);
  const int ppStage = comm_ ? comm_->coord().pp : 0;
  const PipelineRunner *runner = pipeline_.get();
  place_.writesStage = [runner, ppStage](const ManifestTensor &t) {
    return (runner ? runner->ownerStage(t.name) : 0) == ppStage;
  };
  place_.needs = [runner](const ManifestTensor &t) { return !runner || runner->touches(t.name); };
  // merak.dropout's masks at this rank's rows (step() sets the step, the
  // pipeline runner the micro-batch).
  cpu::trainingPosition() = {0, place_.dp, m.pipeline ? m.pipeline->microbatches : 1, 0,
                             place_.tp};
}

std::optional<int> Trainer::parseCommandLine(int argc, char **argv) {
  const Manifest &m = program_.manifest;
  TrainOptions defaults;
  if (m.defaultLr)
    defaults.lr = *m.defaultLr;
  if (m.defaultSeed)
    defaults.seed = *m.defaultSeed;
  if (m.defaultSampler)
    defaults.sampler = *m.defaultSampler;
  if (m.moe)
    defaults.moeRebalanceEvery = m.moe->rebalanceEvery;
  std::string name = argc > 0 && argv[0] && *argv[0] ? argv[0] : "train";
  Result<TrainOptions> parsed = parseTrainArgs(argc, argv, defaults);
  if (!parsed.ok()) {
    printError(parsed.message());
    std::fputs(("\n" + trainUsage(name, defaults)).c_str(), stderr);
    return kExitUsage;
  }
  options_ = std::move(parsed).value();
  if (options_.help) {
    std::fputs(trainUsage(name, defaults).c_str(), stdout);
    return 0;
  }
  if (std::string bad =
          train::checkExpertOptions(m, options_, backend_ ? backend_->name() : "");
      !bad.empty()) {
    printError(bad);
    return kExitUsage;
  }
  return std::nullopt;
}

/// Everything before step start_: the checkpoint directory, the device, the
/// data, A, P (initial or resumed, with the run's hyper-parameters) and C.
void Trainer::prepare(int argc, char **argv) {
  const Manifest &m = program_.manifest;
  const TrainOptions &o = options_;
  installStopHandlers(o.stopSignals);
  // An unusable --checkpoint-dir fails now, not at the first checkpoint
  // after the training it would keep. Every rank writes its shard there, so
  // every rank checks, before any collective: each fails on its own, none waits.
  if (!o.checkpointDir.empty())
    if (Status st = prepareCheckpointDir(o.checkpointDir, comm_ ? comm_->rank() : 0); !st.ok())
      die(kExitError, st.message());
  if (backend_)
    openBackend(*backend_, comm_, pipeline_.get(), m, leader());

  data_.emplace(openData(program_, o));
  arena_.emplace(m.arenaBytes, "arena");
  params_.emplace(m.paramsBytes, "parameter storage");
  A_ = arena_->get();
  P_ = params_->get();
  if (m.weights) {
    Result<std::unique_ptr<WeightsFile>> w =
        WeightsFile::open(executableDirectory() + "/" + m.weights->file, m.weights->id);
    if (!w.ok())
      die(kExitError, w.message());
    weights_ = std::move(w).value();
  }
  loadInitialParams(m, place_, P_, weights_.get());
  C_ = constants(m, weights_.get(), constsCopy_);

  site_.emplace(CheckpointSite{m, options_, place_, comm_, backend_, {}});
  if (o.resume)
    start_ = resumeFromCheckpoint(*site_, P_);
  if (start_ > o.steps)
    die(kExitError, "--resume: the checkpoint in '" + o.checkpointDir + "' has completed " +
                        std::to_string(start_) + " steps, more than --steps " +
                        std::to_string(o.steps));
  setRunHyperparameters(m, o, P_, argc, argv);
  if (m.moe)
    placement_.emplace(m, comm_, o.moeRebalanceEvery, o.moeRebalanceMinRows,
                       [this](const ManifestTensor &t) { return !place_.needs || place_.needs(t); });

  // A device program: P (initialised, restored, hyper-parameters set) and C
  // go to the device once; each step moves only its inputs and outputs.
  if (backend_) {
    for (const ManifestTensor &t : m.inputs)
      inputRanges_.push_back({t.offset, t.bytes});
    for (const ManifestTensor &t : m.outputs)
      outputRanges_.push_back({t.offset, t.bytes});
    if (Status st = backend_->setup(m.arenaBytes, P_, m.paramsBytes, C_, m.constsBytes);
        !st.ok())
      die(kExitError, st.message());
    site_->paramRanges = checkpointRanges(m, place_, pipeline_ != nullptr);
  }
}

/// --metrics and --trace (rank 0), the progress line and the step buffers.
void Trainer::openOutputs() {
  const Manifest &m = program_.manifest;
  const TrainOptions &o = options_;
  if (!o.metricsPath.empty() && leader())
    metrics_.emplace(openMetrics(o, start_));
  if (!o.tracePath.empty() && leader()) {
    trace_ = std::make_unique<TraceWriter>(0);
    trace_->setProcessName(m.model.empty() ? "train" : "train " + m.model);
    trace_->setThreadName(kTraceTid, "main");
    recorder_.writer = trace_.get();
    recorder_.ops = &m.ops;
  }
  if (!o.profileOpsPath.empty()) {
    Result<OpProfiler> p =
        OpProfiler::create(m, o.profileOpsPath, backend_ ? backend_->name() : "cpu");
    if (!p.ok())
      die(kExitError, p.status().message());
    profiler_.emplace(std::move(p).value());
  }
  // This rank's rows of the global batch; tokens/s counts the global batch.
  const uint64_t rowTokens = static_cast<uint64_t>(program_.batch) *
                             static_cast<uint64_t>(program_.seqLen);
  globalTokens_ = rowTokens * static_cast<uint64_t>(m.meshDp);
  inputs_.assign(rowTokens, 0);
  labels_.assign(rowTokens, 0);
  std::FILE *progressOut = stdout;
  if (!leader()) {
    devNull_.reset(std::fopen("/dev/null", "w"));
    progressOut = devNull_.get();
  }
  progress_.emplace(progressOut, o.steps, o.logEvery, start_);
}

/// Step s's computation: its inputs, then the step on the device, through
/// the pipeline runner, or merak_train_step.
void Trainer::step(int64_t s, bool tracing) {
  double stepUs = tracing ? trace_->nowUs() : 0;
  if (Status st = fillStepInputs(program_, *data_, s, place_.dp, A_, inputs_, labels_); !st.ok())
    stop("step " + std::to_string(s) + ": " + st.message());
  cpu::trainingPosition().step = s; // merak.dropout's masks of this step
  // --profile-ops: every step but the first (the warm-up).
  const bool profiling = profiler_ && s > start_;
  if (profiling)
    profiler_->install();
  if (tracing) {
    double now = trace_->nowUs();
    trace_->complete("data", "data", stepUs, now - stepUs, kTraceTid);
    recorder_.current = -1;
    cpu::setOpRecorder(&OpTraceRecorder::record, &recorder_);
  }
  if (backend_) {
    DeviceStep runPipeline;
    if (pipeline_)
      runPipeline = [&](char *dA, char *dP, const char *dC) {
        return pipeline_->step(dA, dP, dC, s);
      };
    if (Status st = backend_->step(A_, inputRanges_, outputRanges_, runPipeline); !st.ok())
      stop("step " + std::to_string(s) + ": " + st.message());
  } else if (pipeline_) {
    if (Status st = pipeline_->step(A_, P_, C_, s); !st.ok())
      stop("step " + std::to_string(s) + ": " + st.message());
  } else {
    merak_train_step(A_, P_, C_);
  }
  if (profiling)
    profiler_->uninstall();
  if (tracing) {
    cpu::setOpRecorder(nullptr, nullptr);
    double now = trace_->nowUs();
    recorder_.closeCurrent(now); // in case the step did not mark its end
    trace_->complete("step", "step", stepUs, now - stepUs, kTraceTid,
                     {{"step", static_cast<double>(s)}});
  }
}

StepMetrics Trainer::report(int64_t s, double seconds) {
  StepMetrics sm;
  sm.step = s;
  sm.loss = program_.loss ? readScalar(A_, *program_.loss) : std::nan("");
  sm.lr = program_.lr ? readScalar(A_, *program_.lr) : options_.lr;
  sm.gradNorm = program_.gradNorm ? readScalar(A_, *program_.gradNorm) : std::nan("");
  sm.timeMs = seconds * 1e3;
  sm.tokensPerSecond = seconds > 0 ? static_cast<double>(globalTokens_) / seconds : 0;
  for (const ManifestTensor *out : program_.extraOutputs)
    sm.extra.emplace_back(out->name, readScalar(A_, *out));
  // Dynamic shadowing (--moe-shadow): the experts shadowed in the step, over
  // every layer and micro-batch (the same on every ep rank).
  if (cpu::ExpertShadowCounts c = cpu::takeExpertShadowCounts(); c.plans > 0)
    sm.extra.emplace_back("moe_shadowed", static_cast<double>(c.shadowed));
  // Token dropping (--moe-capacity-factor): this rank's rows dropped in the
  // step (every layer, micro-batch and recomputation), and their share.
  if (cpu::ExpertDropCounts c = cpu::takeExpertDropCounts(); c.rows > 0) {
    sm.extra.emplace_back("moe_dropped", static_cast<double>(c.dropped));
    sm.extra.emplace_back("moe_drop_fraction",
                          static_cast<double>(c.dropped) / static_cast<double>(c.rows));
  }
  // Dynamic placement (--moe-rebalance-every): the experts moved after it.
  if (moved_)
    sm.extra.emplace_back("moe_moved", static_cast<double>(*moved_));
  lastLoss_ = sm.loss;
  if (metrics_)
    if (Status st = metrics_->write(sm); !st.ok())
      stop(st.message());
  progress_->update(s, sm.loss, sm.tokensPerSecond);
  return sm;
}

void Trainer::runSteps() {
  const TrainOptions &o = options_;
  const int64_t traceStep = start_ + (o.steps - start_ >= 2 ? 1 : 0);
  using Clock = std::chrono::steady_clock;
  for (int64_t s = start_; s < o.steps; ++s) {
    Clock::time_point t0 = Clock::now();
    step(s, trace_ && s == traceStep);
    moved_.reset();
    if (placement_ && placement_->due(s)) {
      Result<int64_t> moved = placement_->rebalance(P_);
      if (!moved.ok())
        stop("step " + std::to_string(s) + ": " + moved.message());
      moved_ = *moved;
    }
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    totalSeconds_ += seconds;
    StepMetrics sm = report(s, seconds);
    if (program_.loss && !std::isfinite(sm.loss)) {
      progress_->finish();
      writeTrace();
      stop("the loss is " + std::string(std::isnan(sm.loss) ? "NaN" : "infinite") +
           " at step " + std::to_string(s) + " (lr " + formatNumber(sm.lr) +
           "); stopping. Try a lower --lr.");
    }
    bool last = s + 1 == o.steps;
    bool save = !o.checkpointDir.empty() &&
                (last || (o.checkpointEvery > 0 && (s + 1) % o.checkpointEvery == 0));
    if (save) {
      double ckptUs = trace_ ? trace_->nowUs() : 0;
      if (Status st = saveCheckpoint(*site_, s + 1, P_); !st.ok())
        stop(st.message());
      if (trace_)
        trace_->complete("checkpoint", "checkpoint", ckptUs, trace_->nowUs() - ckptUs,
                         kTraceTid, {{"step", static_cast<double>(s + 1)}});
    }
    // Preemption: every rank stops after the same step (stop_signals.h).
    if (!last && !o.stopSignals.empty()) {
      Result<int> agreed = agreedStopSignal(comm_);
      if (!agreed.ok())
        stop(agreed.message());
      if (*agreed != 0) {
        stopSignal_ = *agreed;
        stoppedAfter_ = s + 1;
        checkpointed_ = save;
        return;
      }
    }
  }
}

/// After the loop: metrics and trace closed; a stopped run's coordinated
/// checkpoint, or the peak memory over the ranks and the summary line.
int Trainer::finish() {
  progress_->finish();
  if (metrics_)
    if (Status st = metrics_->close(); !st.ok())
      die(kExitError, st.message());
  writeTrace();
  if (profiler_)
    if (Status st = profiler_->write(comm_); !st.ok())
      die(kExitError, st.message());
  if (stopSignal_ != 0) {
    int code = stopOnSignal(*site_, stopSignal_, stoppedAfter_, checkpointed_, P_);
    gCoordinatedExit = true;
    return code;
  }
  // Peak resident memory, the largest over the ranks (getrusage: KiB).
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  double peakMiB = static_cast<double>(usage.ru_maxrss) / 1024.0;
  if (comm_) {
    Comm::Request r = comm_->allReduceMax(Axis::World, &peakMiB, 1, CommType::F64);
    if (Status st = comm_->wait(r, "peak memory over the ranks"); !st.ok())
      die(kExitError, st.message());
  }
  if (leader())
    printSummary(options_, start_, program_.loss != nullptr, lastLoss_, totalSeconds_,
                 globalTokens_, peakMiB, comm_ != nullptr);
  // --moe-histogram (parseCommandLine refused programs without ep, whose
  // dispatches would have counted nothing).
  if (leader() && !options_.moeHistogramPath.empty())
    if (Status st = writeExpertHistogram(options_.moeHistogramPath, cpu::expertRowHistogram());
        !st.ok())
      die(kExitError, st.message());
  return 0;
}

int Trainer::run(int argc, char **argv) {
  cpu::setOpRecorder(nullptr, nullptr);
  RecorderGuard recorderGuard;
  program_ = loadProgram();
  openProcesses(&argc, &argv);
  if (std::optional<int> code = parseCommandLine(argc, argv))
    return *code;
  prepare(argc, argv);
  if (start_ == options_.steps) {
    std::printf("train: nothing to do: %s\n",
                options_.resume ? ("the checkpoint has already completed " +
                                   std::to_string(start_) + " steps")
                                      .c_str()
                                : "--steps is 0");
    return 0;
  }
  openOutputs();
  runSteps();
  return finish();
}

} // namespace

} // namespace merak::rt

static int runCatching(int argc, char **argv, merak::rt::StepBackend *backend) {
  using namespace merak::rt;
  try {
    Trainer trainer(backend);
    return trainer.run(argc, argv);
  } catch (const ExitRun &e) {
    return e.code;
  } catch (const std::bad_alloc &) {
    printError("out of memory");
  } catch (const std::exception &e) {
    printError(std::string("unexpected failure: ") + e.what());
  } catch (...) {
    printError("unexpected failure");
  }
  return kExitError;
}

int merak::rt::trainMain(int argc, char **argv, StepBackend *backend) {
  int code = runCatching(argc, argv, backend);
  cpu::setCommunicator(nullptr);
  if (gComm && code != 0 && !gCoordinatedExit)
    gComm->abort("stopping every rank of the job", code);
  gComm.reset(); // MPI_Finalize
  return code;
}

extern "C" int merak_train_main(int argc, char **argv) {
  return merak::rt::trainMain(argc, argv, nullptr);
}
