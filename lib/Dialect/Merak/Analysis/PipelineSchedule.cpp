//===- PipelineSchedule.cpp - Pipeline schedules' instruction lists -------===//
//
// A schedule is first a compute order per stage (which micro-batch's
// forward, backward or weight gradient runs next, of which chunk under
// interleaving); communication is then inserted by one
// rule for every schedule: a fragment's input is received by a non-blocking
// receive posted right after the previous receive of the same kind was
// waited (so one receive per kind is always in flight), its outputs are
// sent right after it ran, and every send is waited before the update.
// A recomputation (`rcp`, shifted critical path) sits in the order right
// before its backward, so it lands before that backward's `wait-grad`: it
// runs while the gradient is in flight.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <string>

using namespace mlir;
using namespace mlir::merak;

FailureOr<PipelineScheduleKind> mlir::merak::parsePipelineSchedule(StringRef name) {
  if (name == "gpipe")
    return PipelineScheduleKind::GPipe;
  if (name == "1f1b")
    return PipelineScheduleKind::OneFOneB;
  if (name == "interleaved")
    return PipelineScheduleKind::Interleaved;
  if (name == "zb-h1")
    return PipelineScheduleKind::ZeroBubbleH1;
  if (name == "zb-h2")
    return PipelineScheduleKind::ZeroBubbleH2;
  if (name == "shifted-critical-path")
    return PipelineScheduleKind::ShiftedCriticalPath;
  return failure();
}

StringRef mlir::merak::pipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe: return "gpipe";
  case PipelineScheduleKind::OneFOneB: return "1f1b";
  case PipelineScheduleKind::Interleaved: return "interleaved";
  case PipelineScheduleKind::ZeroBubbleH1: return "zb-h1";
  case PipelineScheduleKind::ZeroBubbleH2: return "zb-h2";
  case PipelineScheduleKind::ShiftedCriticalPath: return "shifted-critical-path";
  }
  return "?";
}

StringRef mlir::merak::pipelineInstrName(PipelineInstr::Kind kind) {
  switch (kind) {
  case PipelineInstr::RecvAct: return "recv-act";
  case PipelineInstr::WaitAct: return "wait-act";
  case PipelineInstr::Forward: return "fwd";
  case PipelineInstr::SendAct: return "send-act";
  case PipelineInstr::RecvGrad: return "recv-grad";
  case PipelineInstr::WaitGrad: return "wait-grad";
  case PipelineInstr::Backward: return "bwd";
  case PipelineInstr::BackwardWeight: return "bwd-w";
  case PipelineInstr::SendGrad: return "send-grad";
  case PipelineInstr::WaitSends: return "wait-sends";
  case PipelineInstr::Update: return "update";
  case PipelineInstr::Recompute: return "rcp";
  case PipelineInstr::ForwardKeep: return "fwd-keep";
  }
  return "?";
}

int64_t mlir::merak::keptMicrobatches(PipelineScheduleKind kind, int64_t stages, int64_t m,
                                      int64_t stage) {
  if (kind != PipelineScheduleKind::ShiftedCriticalPath)
    return 0;
  return std::max<int64_t>(0, std::min(m, stages - stage - 1));
}

SmallVector<int64_t> mlir::merak::recordedKeptMicrobatches(ModuleOp module) {
  SmallVector<int64_t> out;
  if (PipelinePlanAttr plan = getPipelinePlan(module))
    out.assign(plan.getScpKept().begin(), plan.getScpKept().end());
  return out;
}

namespace {
/// One compute instruction of a stage's order.
struct Step {
  PipelineInstr::Kind kind;
  int64_t mb, chunk = 0;
};
} // namespace

/// 1F1B order over F and B; `deferW` >= 0 splits the backward and keeps up
/// to `deferW` weight gradients pending (ZB-H1: stage s defers s of them,
/// filling the cool-down bubbles).
static SmallVector<Step> oneFOneBOrder(int64_t s, int64_t stages, int64_t m, int64_t deferW) {
  SmallVector<Step> order;
  int64_t warmup = std::min(stages - s - 1, m);
  int64_t nf = 0, nb = 0, nw = 0;
  auto backward = [&] {
    order.push_back({PipelineInstr::Backward, nb++});
    if (deferW >= 0 && nb - nw > deferW)
      order.push_back({PipelineInstr::BackwardWeight, nw++});
  };
  for (; nf < warmup;)
    order.push_back({PipelineInstr::Forward, nf++});
  while (nb < m) {
    if (nf < m)
      order.push_back({PipelineInstr::Forward, nf++});
    backward();
  }
  while (deferW >= 0 && nw < m)
    order.push_back({PipelineInstr::BackwardWeight, nw++});
  return order;
}

/// Interleaved 1F1B (Narayanan et al. 2021): stage s holds chunks s,
/// s + p, ...; micro-batches go through in groups of p, each group through
/// every chunk before the next; 2 (p - s - 1) + (v - 1) p warm-up forwards.
static SmallVector<Step> interleavedOrder(int64_t s, int64_t p, int64_t m, int64_t v) {
  int64_t total = m * v;
  auto at = [&](int64_t i, bool fwd) -> Step {
    int64_t chunk = (i % (p * v)) / p;
    return {fwd ? PipelineInstr::Forward : PipelineInstr::Backward, (i / (p * v)) * p + i % p,
            fwd ? chunk : v - 1 - chunk};
  };
  int64_t warmup = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  SmallVector<Step> order;
  for (int64_t i = 0; i < warmup; ++i)
    order.push_back(at(i, true));
  for (int64_t i = 0; i < total - warmup; ++i) {
    order.push_back(at(warmup + i, true));
    order.push_back(at(i, false));
  }
  for (int64_t i = std::max<int64_t>(total - warmup, 0); i < total; ++i)
    order.push_back(at(i, false));
  return order;
}

/// ZB-H2 (Qi et al. 2023): every stage's order from a unit-time list
/// schedule (F = B = W = 1, no communication cost) in which stage s keeps
/// up to min(m, 2 (p - s) - 1) micro-batches between their forward and
/// backward and, when idle, runs the ready instruction first in the order
/// B (frees activations, unblocks the stage before), F, then W (fills what
/// would be a bubble). The extra warm-up forwards let a stage keep working
/// while gradients are in flight, so communication latency that ZB-H1
/// (1F1B's p - s) exposes is hidden, at up to twice 1F1B's activation
/// memory on the first stage. With equal times and no latency it matches
/// ZB-H1's m (F + B + W) + (p - 1) F: removing that ramp needs the next
/// step's forwards to start before the optimizer step (the paper's
/// post-validation), which merak does not do.
static SmallVector<SmallVector<Step>> zeroBubbleH2Orders(int64_t p, int64_t m) {
  SmallVector<SmallVector<Step>> orders(p);
  // Completion times; -1: not yet run.
  std::vector<std::vector<int64_t>> fDone(p, std::vector<int64_t>(m, -1)),
      bDone(p, std::vector<int64_t>(m, -1));
  SmallVector<int64_t> nf(p, 0), nb(p, 0), nw(p, 0);
  auto ready = [](int64_t done, int64_t t) { return done >= 0 && done <= t; };
  int64_t remaining = 3 * p * m;
  for (int64_t t = 0; remaining > 0; ++t) {
    for (int64_t s = 0; s < p; ++s) {
      int64_t limit = std::min(m, 2 * (p - s) - 1);
      if (nb[s] < nf[s] &&
          ready(s == p - 1 ? fDone[s][nb[s]] : bDone[s + 1][nb[s]], t)) {
        orders[s].push_back({PipelineInstr::Backward, nb[s]});
        bDone[s][nb[s]++] = t + 1;
      } else if (nf[s] < m && nf[s] - nb[s] < limit && (s == 0 || ready(fDone[s - 1][nf[s]], t))) {
        orders[s].push_back({PipelineInstr::Forward, nf[s]});
        fDone[s][nf[s]++] = t + 1;
      } else if (nw[s] < nb[s]) {
        orders[s].push_back({PipelineInstr::BackwardWeight, nw[s]++});
      } else {
        continue;
      }
      --remaining;
    }
  }
  return orders;
}

/// Merak's shifted critical path (Lai et al., TPDS 2023) on 1F1B: on a
/// stage s < p - 1 every backward of a checkpointed micro-batch is preceded
/// by its recomputation, which the communication rule places before the
/// gradient's wait, so it overlaps the gradient's flight instead of
/// delaying the backward the stage before waits for; the last
/// min(m, p - s - 1) forwards keep their activations (`fwd-keep`, no
/// recomputation). The last stage, whose backward follows its forward
/// directly, is plain 1F1B.
static SmallVector<Step> shiftedCriticalPathOrder(int64_t s, int64_t stages, int64_t m,
                                                  ArrayRef<int64_t> kept) {
  int64_t most = keptMicrobatches(PipelineScheduleKind::ShiftedCriticalPath, stages, m, s);
  int64_t firstKept =
      m - (s < (int64_t)kept.size() ? std::clamp<int64_t>(kept[s], 0, most) : most);
  SmallVector<Step> order;
  for (Step c : oneFOneBOrder(s, stages, m, /*deferW=*/-1)) {
    if (s == stages - 1) {
      order.push_back(c);
    } else if (c.kind == PipelineInstr::Forward) {
      order.push_back({c.mb >= firstKept ? PipelineInstr::ForwardKeep : PipelineInstr::Forward,
                       c.mb});
    } else {
      if (c.mb < firstKept)
        order.push_back({PipelineInstr::Recompute, c.mb});
      order.push_back(c);
    }
  }
  return order;
}

/// The compute instructions of stage `s` in the order it runs them.
static SmallVector<Step> computeOrder(PipelineScheduleKind kind, int64_t s, int64_t stages,
                                      int64_t m, int64_t v, ArrayRef<int64_t> kept) {
  switch (kind) {
  case PipelineScheduleKind::GPipe: {
    SmallVector<Step> order;
    for (int64_t i = 0; i < m; ++i)
      order.push_back({PipelineInstr::Forward, i});
    for (int64_t i = 0; i < m; ++i)
      order.push_back({PipelineInstr::Backward, i});
    return order;
  }
  case PipelineScheduleKind::OneFOneB: return oneFOneBOrder(s, stages, m, /*deferW=*/-1);
  case PipelineScheduleKind::ZeroBubbleH1: return oneFOneBOrder(s, stages, m, /*deferW=*/s);
  case PipelineScheduleKind::ZeroBubbleH2: return zeroBubbleH2Orders(stages, m)[s];
  case PipelineScheduleKind::ShiftedCriticalPath:
    return shiftedCriticalPathOrder(s, stages, m, kept);
  case PipelineScheduleKind::Interleaved:
    if (v == 1)
      return oneFOneBOrder(s, stages, m, /*deferW=*/-1);
    return interleavedOrder(s, stages, m, v);
  }
  return {};
}

SmallVector<SmallVector<PipelineInstr>>
mlir::merak::buildPipelineSchedule(PipelineScheduleKind kind, int64_t stages, int64_t m,
                                   int64_t virtualStages, ArrayRef<int64_t> kept) {
  int64_t v = kind == PipelineScheduleKind::Interleaved ? virtualStages : 1;
  int64_t last = stages * v - 1; // the last model stage
  SmallVector<SmallVector<PipelineInstr>> program(stages);
  for (int64_t s = 0; s < stages; ++s) {
    auto order = computeOrder(kind, s, stages, m, v, kept);
    // Model stage k receives activations unless k = 0 and gradients unless
    // k is the last.
    auto receivesAct = [&](const Step &c) { return c.chunk * stages + s > 0; };
    auto receivesGrad = [&](const Step &c) { return c.chunk * stages + s < last; };
    // The computations in the order their inputs are needed, per kind.
    auto isForward = [](const Step &c) {
      return c.kind == PipelineInstr::Forward || c.kind == PipelineInstr::ForwardKeep;
    };
    SmallVector<Step> actOrder, gradOrder;
    for (const Step &c : order) {
      if (isForward(c) && receivesAct(c))
        actOrder.push_back(c);
      if (c.kind == PipelineInstr::Backward && receivesGrad(c))
        gradOrder.push_back(c);
    }
    size_t nextAct = 0, nextGrad = 0;
    auto &out = program[s];
    auto postAct = [&] {
      if (nextAct < actOrder.size()) {
        out.push_back({PipelineInstr::RecvAct, actOrder[nextAct].mb, actOrder[nextAct].chunk});
        ++nextAct;
      }
    };
    auto postGrad = [&] {
      if (nextGrad < gradOrder.size()) {
        out.push_back({PipelineInstr::RecvGrad, gradOrder[nextGrad].mb, gradOrder[nextGrad].chunk});
        ++nextGrad;
      }
    };
    postAct();
    postGrad();
    for (const Step &c : order) {
      int64_t k = c.chunk * stages + s;
      if (isForward(c)) {
        if (receivesAct(c)) {
          out.push_back({PipelineInstr::WaitAct, c.mb, c.chunk});
          postAct();
        }
        out.push_back({c.kind, c.mb, c.chunk});
        if (k < last)
          out.push_back({PipelineInstr::SendAct, c.mb, c.chunk});
      } else if (c.kind == PipelineInstr::Backward) {
        if (receivesGrad(c)) {
          out.push_back({PipelineInstr::WaitGrad, c.mb, c.chunk});
          postGrad();
        }
        out.push_back({PipelineInstr::Backward, c.mb, c.chunk});
        if (k > 0)
          out.push_back({PipelineInstr::SendGrad, c.mb, c.chunk});
      } else {
        out.push_back({c.kind, c.mb, c.chunk});
      }
    }
    out.push_back({PipelineInstr::WaitSends, -1});
    out.push_back({PipelineInstr::Update, -1});
  }
  return program;
}

void mlir::merak::printPipelineSchedule(PipelineScheduleKind kind, int64_t m,
                                        ArrayRef<SmallVector<PipelineInstr>> program,
                                        llvm::raw_ostream &os) {
  int64_t chunks = 1;
  for (const auto &instrs : program)
    for (const PipelineInstr &i : instrs)
      chunks = std::max(chunks, i.chunk + 1);
  os << "schedule " << pipelineScheduleName(kind) << ": " << program.size() << " stages, " << m
     << " micro-batches";
  if (kind == PipelineScheduleKind::Interleaved)
    os << ", " << chunks << " virtual stages";
  os << "\n";
  // Under interleaving every micro-batch carries its chunk: F3c1. In the
  // order, R3 is `rcp(3)` and K3 `fwd-keep(3)`.
  auto chunk = [&](const PipelineInstr &i) -> std::string {
    return chunks > 1 && i.mb >= 0 ? ("c" + Twine(i.chunk)).str() : "";
  };
  for (auto [s, instrs] : llvm::enumerate(program)) {
    os << "stage " << s << " order:";
    for (const PipelineInstr &i : instrs) {
      StringRef letter = i.kind == PipelineInstr::Forward          ? "F"
                         : i.kind == PipelineInstr::Backward       ? "B"
                         : i.kind == PipelineInstr::BackwardWeight ? "W"
                         : i.kind == PipelineInstr::Recompute      ? "R"
                         : i.kind == PipelineInstr::ForwardKeep    ? "K"
                                                                   : "";
      if (!letter.empty())
        os << " " << letter << i.mb << chunk(i);
    }
    os << "\n";
  }
  for (auto [s, instrs] : llvm::enumerate(program)) {
    os << "stage " << s << ":";
    for (const PipelineInstr &i : instrs) {
      os << " " << pipelineInstrName(i.kind);
      if (i.mb >= 0)
        os << "(" << i.mb << chunk(i) << ")";
    }
    os << "\n";
  }
}
