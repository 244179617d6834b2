//===- PipelineSimulator.cpp - Event-driven pipeline schedule model -------===//
//
// Every stage keeps its own clock and program counter. A stage runs until
// it reaches a wait whose message has not been sent yet; it is then parked
// on that message and resumed by the send. Since each clock only depends
// on the stage's own list and on the arrival times of the messages it
// waits for, the order in which the worklist resumes stages does not change
// the result, and each instruction is executed exactly once (linear time).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::merak;

namespace {
/// No message yet: an arrival time no send writes.
constexpr double kNotSent = -1.0;

struct Simulator {
  ArrayRef<SmallVector<PipelineInstr>> program;
  const PipelineCostModel &costs;
  int64_t stages = 0, modelStages = 0;
  PipelineSimulation result;
  bool record = false;

  SmallVector<size_t> pc;
  SmallVector<double> clock, lastArrival;
  SmallVector<int64_t> inFlight, keptInFlight;
  SmallVector<double> heldBytes;
  /// Per stage: the (micro-batch, chunk) pairs holding full activations.
  SmallVector<llvm::DenseSet<uint64_t>> keptSet;
  /// Per message (messageIndex): its arrival time (kNotSent before its
  /// send) and the stage parked on it (-1: none). Dense arrays, not maps:
  /// the planner simulates thousands of schedules.
  std::vector<double> arrival;
  std::vector<int64_t> waiter;
  int64_t microbatches = 1;
  /// When each (sender, receiver) link is free again, by sender * stages +
  /// receiver.
  std::vector<double> linkFree;
  SmallVector<int64_t> worklist;

  /// A message: its direction, the model stage that receives it (0 to
  /// modelStages: the last stage's forward sends past itself), its
  /// micro-batch.
  size_t messageIndex(bool grad, int64_t modelStage, int64_t mb) const {
    return ((size_t)grad * (modelStages + 1) + modelStage) * microbatches + mb;
  }

  Simulator(ArrayRef<SmallVector<PipelineInstr>> program, const PipelineCostModel &costs)
      : program(program), costs(costs) {}

  static double at(ArrayRef<double> v, int64_t k) { return v.size() == 1 ? v[0] : v[k]; }

  void send(int64_t s, bool grad, int64_t from, int64_t mb) {
    int64_t to = grad ? from - 1 : from + 1;
    int64_t dst = to % stages;
    double t = clock[s];
    if (dst != s) {
      double bytes = at(grad ? costs.gradBytes : costs.actBytes, grad ? to : from);
      bool cross = !costs.node.empty() && costs.node[s] != costs.node[dst];
      double bw = cross ? costs.interBandwidth : costs.bandwidth;
      double wire = bw > 0 ? bytes / bw : 0.0;
      double &free = linkFree[s * stages + dst];
      double start = std::max(t, free);
      free = start + wire;
      t = start + wire + (cross ? costs.interLatency : costs.latency);
    }
    lastArrival[s] = std::max(lastArrival[s], t);
    if (to < 0 || to > modelStages || mb < 0 || mb >= microbatches)
      return; // received by no model stage
    size_t key = messageIndex(grad, to, mb);
    arrival[key] = t;
    if (waiter[key] >= 0) {
      worklist.push_back(waiter[key]);
      waiter[key] = -1;
    }
  }

  void compute(int64_t s, const PipelineInstr &i, double seconds) {
    double start = clock[s];
    clock[s] += seconds;
    result.busy[s] += seconds;
    if (record)
      result.events.push_back({s, i, start, clock[s]});
  }

  static uint64_t pairKey(const PipelineInstr &i) {
    return (uint64_t(i.chunk) << 32) | uint64_t(uint32_t(i.mb));
  }

  void hold(int64_t s, double bytes, int64_t kept) {
    heldBytes[s] += bytes;
    keptInFlight[s] += kept;
    result.peakActivationBytes[s] = std::max(result.peakActivationBytes[s], heldBytes[s]);
    result.peakKeptInFlight[s] = std::max(result.peakKeptInFlight[s], keptInFlight[s]);
  }

  /// Runs stage `s` until it blocks or ends.
  void run(int64_t s) {
    ArrayRef<PipelineInstr> list = program[s];
    while (pc[s] < list.size()) {
      const PipelineInstr &i = list[pc[s]];
      int64_t k = i.chunk * stages + s;
      switch (i.kind) {
      case PipelineInstr::RecvAct:
      case PipelineInstr::RecvGrad: break;
      case PipelineInstr::WaitAct:
      case PipelineInstr::WaitGrad: {
        size_t key = messageIndex(i.kind == PipelineInstr::WaitGrad, k, i.mb);
        if (arrival[key] == kNotSent) {
          waiter[key] = s;
          return;
        }
        clock[s] = std::max(clock[s], arrival[key]);
        break;
      }
      case PipelineInstr::Forward:
      case PipelineInstr::ForwardKeep: {
        bool keep = i.kind == PipelineInstr::ForwardKeep;
        compute(s, i, at(costs.forward, k));
        result.peakInFlight[s] = std::max(result.peakInFlight[s], ++inFlight[s]);
        if (keep)
          keptSet[s].insert(pairKey(i));
        hold(s, at(keep ? costs.kept : costs.stashed, k), keep);
        break;
      }
      case PipelineInstr::Recompute:
        compute(s, i, at(costs.recompute, k));
        if (keptSet[s].insert(pairKey(i)).second)
          hold(s, at(costs.kept, k) - at(costs.stashed, k), 1);
        break;
      case PipelineInstr::Backward: {
        compute(s, i, at(costs.backward, k));
        --inFlight[s];
        bool kept = keptSet[s].erase(pairKey(i));
        hold(s, -at(kept ? costs.kept : costs.stashed, k), kept ? -1 : 0);
        break;
      }
      case PipelineInstr::BackwardWeight: compute(s, i, at(costs.weight, k)); break;
      case PipelineInstr::SendAct: send(s, /*grad=*/false, k, i.mb); break;
      case PipelineInstr::SendGrad: send(s, /*grad=*/true, k, i.mb); break;
      case PipelineInstr::WaitSends: clock[s] = std::max(clock[s], lastArrival[s]); break;
      case PipelineInstr::Update:
        compute(s, i, costs.stageUpdate.empty() ? costs.update : costs.stageUpdate[s]);
        break;
      }
      ++pc[s];
    }
  }

  LogicalResult simulate(std::string &error) {
    stages = program.size();
    int64_t chunks = 1;
    for (const auto &list : program)
      for (const PipelineInstr &i : list) {
        if (i.chunk < 0) {
          error = "negative chunk in the schedule";
          return failure();
        }
        chunks = std::max(chunks, i.chunk + 1);
        microbatches = std::max(microbatches, i.mb + 1);
      }
    modelStages = stages * chunks;
    auto checkSize = [&](ArrayRef<double> v, int64_t need, StringRef what, bool atLeast = false) {
      if (v.size() == 1 || (int64_t)v.size() == need || (atLeast && (int64_t)v.size() > need))
        return true;
      error = ("the cost model has " + Twine(v.size()) + " " + what + " entries for " +
               Twine(need) + " model stages")
                  .str();
      return false;
    };
    if (!checkSize(costs.forward, modelStages, "forward") ||
        !checkSize(costs.backward, modelStages, "backward") ||
        !checkSize(costs.weight, modelStages, "weight") ||
        !checkSize(costs.recompute, modelStages, "recompute") ||
        !checkSize(costs.stashed, modelStages, "stashed-bytes") ||
        !checkSize(costs.kept, modelStages, "kept-bytes") ||
        !checkSize(costs.actBytes, modelStages - 1, "activation-bytes", true) ||
        !checkSize(costs.gradBytes, modelStages - 1, "gradient-bytes", true))
      return failure();
    if ((!costs.stageUpdate.empty() && (int64_t)costs.stageUpdate.size() != stages) ||
        (!costs.node.empty() && (int64_t)costs.node.size() != stages)) {
      error = "the cost model's per-stage update or node entries do not match the " +
              std::to_string(stages) + " stages";
      return failure();
    }

    // Messages to model stages 0..modelStages (a forward send past the
    // last one is never waited for), both directions.
    arrival.assign(2 * (modelStages + 1) * microbatches, kNotSent);
    waiter.assign(arrival.size(), -1);
    linkFree.assign(stages * stages, 0.0);
    pc.assign(stages, 0);
    clock.assign(stages, 0.0);
    lastArrival.assign(stages, 0.0);
    inFlight.assign(stages, 0);
    keptInFlight.assign(stages, 0);
    heldBytes.assign(stages, 0.0);
    keptSet.assign(stages, {});
    result.peakKeptInFlight.assign(stages, 0);
    result.peakActivationBytes.assign(stages, 0.0);
    result.busy.assign(stages, 0.0);
    result.peakInFlight.assign(stages, 0);
    for (int64_t s = stages - 1; s >= 0; --s)
      worklist.push_back(s);
    while (!worklist.empty()) {
      int64_t s = worklist.pop_back_val();
      run(s);
    }

    std::string blocked;
    llvm::raw_string_ostream os(blocked);
    for (int64_t s = 0; s < stages; ++s)
      if (pc[s] < program[s].size()) {
        const PipelineInstr &i = program[s][pc[s]];
        os << (blocked.empty() ? "" : ", ") << "stage " << s << " at " << pipelineInstrName(i.kind)
           << "(" << i.mb << ")";
        if (i.chunk)
          os << " chunk " << i.chunk;
      }
    if (!blocked.empty()) {
      error = "the schedule deadlocks: " + blocked;
      return failure();
    }

    // Grouped by stage (they were recorded as stages were resumed; within a
    // stage they are in time order already).
    if (record) {
      std::vector<std::vector<PipelineEvent>> byStage(stages);
      for (const PipelineEvent &e : result.events)
        byStage[e.stage].push_back(e);
      result.events.clear();
      for (auto &events : byStage)
        result.events.insert(result.events.end(), events.begin(), events.end());
    }
    result.finish.assign(clock.begin(), clock.end());
    result.stepTime = stages ? *std::max_element(clock.begin(), clock.end()) : 0.0;
    double busy = 0.0;
    for (double b : result.busy)
      busy += b;
    double idle = stages * result.stepTime - busy;
    result.bubbleFraction = result.stepTime > 0 ? idle / (stages * result.stepTime) : 0.0;
    result.bubbleRatio = busy > 0 ? idle / busy : 0.0;
    return success();
  }
};
} // namespace

FailureOr<PipelineSimulation>
mlir::merak::simulatePipeline(ArrayRef<SmallVector<PipelineInstr>> program,
                              const PipelineCostModel &costs, bool recordEvents,
                              std::string *error) {
  Simulator sim(program, costs);
  sim.record = recordEvents;
  std::string msg;
  if (failed(sim.simulate(msg))) {
    if (error)
      *error = msg;
    return failure();
  }
  return std::move(sim.result);
}

void mlir::merak::writePipelineTrace(const PipelineSimulation &sim, llvm::raw_ostream &os) {
  os << "{\"traceEvents\": [";
  bool first = true;
  for (int64_t s = 0; s < (int64_t)sim.busy.size(); ++s) {
    os << (first ? "" : ",") << "\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
       << "\"tid\": " << s << ", \"args\": {\"name\": \"stage " << s << "\"}}";
    first = false;
  }
  for (const PipelineEvent &e : sim.events) {
    StringRef name;
    switch (e.instr.kind) {
    case PipelineInstr::Forward: name = "F"; break;
    case PipelineInstr::Backward: name = "B"; break;
    case PipelineInstr::BackwardWeight: name = "W"; break;
    case PipelineInstr::Recompute: name = "R"; break;
    case PipelineInstr::ForwardKeep: name = "K"; break;
    default: name = "update"; break;
    }
    os << ",\n  {\"name\": \"" << name;
    if (e.instr.mb >= 0)
      os << e.instr.mb;
    os << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << e.stage
       << ", \"ts\": " << llvm::format("%.3f", e.start * 1e6)
       << ", \"dur\": " << llvm::format("%.3f", (e.end - e.start) * 1e6)
       << ", \"args\": {\"chunk\": " << e.instr.chunk << "}}";
  }
  os << "\n]}\n";
}
