//===- PipelineSchedule.cpp - GPipe and 1F1B instruction lists ------------===//
//
// A schedule is first a compute order per stage (which micro-batch's
// forward or backward runs next); communication is then inserted by one
// rule for every schedule: a fragment's input is received by a non-blocking
// receive posted right after the previous receive of the same kind was
// waited (so one receive per kind is always in flight), its outputs are
// sent right after it ran, and every send is waited before the update.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Pipeline.h"

using namespace mlir;
using namespace mlir::merak;

FailureOr<PipelineScheduleKind> mlir::merak::parsePipelineSchedule(StringRef name) {
  if (name == "gpipe")
    return PipelineScheduleKind::GPipe;
  if (name == "1f1b")
    return PipelineScheduleKind::OneFOneB;
  return failure();
}

StringRef mlir::merak::pipelineScheduleName(PipelineScheduleKind kind) {
  return kind == PipelineScheduleKind::GPipe ? "gpipe" : "1f1b";
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
  case PipelineInstr::SendGrad: return "send-grad";
  case PipelineInstr::WaitSends: return "wait-sends";
  case PipelineInstr::Update: return "update";
  }
  return "?";
}

/// (is-backward, micro-batch) in the order stage `s` computes them.
static SmallVector<std::pair<bool, int64_t>> computeOrder(PipelineScheduleKind kind, int64_t s,
                                                          int64_t stages, int64_t m) {
  SmallVector<std::pair<bool, int64_t>> order;
  if (kind == PipelineScheduleKind::GPipe) {
    for (int64_t i = 0; i < m; ++i)
      order.push_back({false, i});
    for (int64_t i = 0; i < m; ++i)
      order.push_back({true, i});
    return order;
  }
  // 1F1B: stage s runs stages-s-1 forwards ahead, then alternates, then
  // drains the backwards.
  int64_t warmup = std::min(stages - s - 1, m);
  for (int64_t i = 0; i < warmup; ++i)
    order.push_back({false, i});
  for (int64_t i = 0; i < m - warmup; ++i) {
    order.push_back({false, warmup + i});
    order.push_back({true, i});
  }
  for (int64_t i = m - warmup; i < m; ++i)
    order.push_back({true, i});
  return order;
}

SmallVector<SmallVector<PipelineInstr>>
mlir::merak::buildPipelineSchedule(PipelineScheduleKind kind, int64_t stages, int64_t m) {
  SmallVector<SmallVector<PipelineInstr>> program(stages);
  for (int64_t s = 0; s < stages; ++s) {
    auto order = computeOrder(kind, s, stages, m);
    bool recvAct = s > 0, recvGrad = s + 1 < stages;
    // The micro-batches in the order their inputs are needed, per kind.
    SmallVector<int64_t> actOrder, gradOrder;
    for (auto [bwd, mb] : order)
      (bwd ? gradOrder : actOrder).push_back(mb);
    size_t nextAct = 0, nextGrad = 0;
    auto &out = program[s];
    auto postAct = [&] {
      if (recvAct && nextAct < actOrder.size())
        out.push_back({PipelineInstr::RecvAct, actOrder[nextAct++]});
    };
    auto postGrad = [&] {
      if (recvGrad && nextGrad < gradOrder.size())
        out.push_back({PipelineInstr::RecvGrad, gradOrder[nextGrad++]});
    };
    postAct();
    postGrad();
    for (auto [bwd, mb] : order) {
      if (!bwd) {
        if (recvAct) {
          out.push_back({PipelineInstr::WaitAct, mb});
          postAct();
        }
        out.push_back({PipelineInstr::Forward, mb});
        if (s + 1 < stages)
          out.push_back({PipelineInstr::SendAct, mb});
      } else {
        if (recvGrad) {
          out.push_back({PipelineInstr::WaitGrad, mb});
          postGrad();
        }
        out.push_back({PipelineInstr::Backward, mb});
        if (s > 0)
          out.push_back({PipelineInstr::SendGrad, mb});
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
  os << "schedule " << pipelineScheduleName(kind) << ": " << program.size() << " stages, " << m
     << " micro-batches\n";
  for (auto [s, instrs] : llvm::enumerate(program)) {
    os << "stage " << s << " order:";
    for (const PipelineInstr &i : instrs)
      if (i.kind == PipelineInstr::Forward || i.kind == PipelineInstr::Backward)
        os << " " << (i.kind == PipelineInstr::Forward ? "F" : "B") << i.mb;
    os << "\n";
  }
  for (auto [s, instrs] : llvm::enumerate(program)) {
    os << "stage " << s << ":";
    for (const PipelineInstr &i : instrs) {
      os << " " << pipelineInstrName(i.kind);
      if (i.mb >= 0)
        os << "(" << i.mb << ")";
    }
    os << "\n";
  }
}
