//===- ShiftedCriticalPathTest.cpp - Merak's SCP on the simulator ---------===//
//
// The shifted-critical-path schedule (Lai et al., "Merak", TPDS 2023)
// against 1F1B with the recomputation inside the backward, on timelines
// computed by hand.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::merak;

namespace {

constexpr auto kSCP = PipelineScheduleKind::ShiftedCriticalPath;

PipelineSimulation run(PipelineScheduleKind kind, int64_t p, int64_t m,
                       const PipelineCostModel &costs) {
  std::string error;
  auto sim = simulatePipeline(buildPipelineSchedule(kind, p, m), costs,
                              /*recordEvents=*/true, &error);
  EXPECT_TRUE(succeeded(sim)) << error;
  return succeeded(sim) ? *sim : PipelineSimulation{};
}

/// Where `kind` first occurs for micro-batch `mb` in stage `s`'s list.
int64_t position(ArrayRef<PipelineInstr> list, PipelineInstr::Kind kind, int64_t mb) {
  for (auto [i, instr] : llvm::enumerate(list))
    if (instr.kind == kind && instr.mb == mb)
      return i;
  return -1;
}

TEST(ShiftedCriticalPath, InstructionLists) {
  // p = 4, m = 8: stage s keeps the last min(m, p - s - 1) forwards; every
  // other micro-batch's rcp comes right before its wait-grad.
  int64_t p = 4, m = 8;
  auto program = buildPipelineSchedule(kSCP, p, m);
  for (int64_t s = 0; s < p; ++s) {
    int64_t kept = s == p - 1 ? 0 : p - s - 1;
    EXPECT_EQ(keptMicrobatches(kSCP, p, m, s), kept);
    for (int64_t mb = 0; mb < m; ++mb) {
      SCOPED_TRACE("stage " + std::to_string(s) + " mb " + std::to_string(mb));
      bool keep = mb >= m - kept;
      EXPECT_EQ(position(program[s], PipelineInstr::ForwardKeep, mb) >= 0, keep);
      EXPECT_EQ(position(program[s], PipelineInstr::Forward, mb) >= 0, !keep);
      int64_t rcp = position(program[s], PipelineInstr::Recompute, mb);
      if (s == p - 1 || keep) {
        EXPECT_EQ(rcp, -1);
        continue;
      }
      int64_t wait = position(program[s], PipelineInstr::WaitGrad, mb);
      EXPECT_EQ(rcp + 1, wait);
      EXPECT_EQ(wait + 2, position(program[s], PipelineInstr::Backward, mb)); // recv-grad between
    }
  }
  // Fewer micro-batches than stages: stage 0 keeps all of them.
  EXPECT_EQ(keptMicrobatches(kSCP, 4, 2, 0), 2);
  EXPECT_EQ(keptMicrobatches(PipelineScheduleKind::OneFOneB, 4, 8, 0), 0);
}

TEST(ShiftedCriticalPath, P4M8AgainstOneFOneBRecompute) {
  // F = 1, B = 1, recomputation R = 1, free messages.
  //
  // 1F1B with full recomputation inside the backward (B + R = 2 on every
  // stage): (m + p - 1)(F + B + R) = 11 x 3 = 33.
  PipelineCostModel inside;
  inside.forward = {1.0};
  inside.backward = {2.0};
  PipelineSimulation base = run(PipelineScheduleKind::OneFOneB, 4, 8, inside);
  EXPECT_DOUBLE_EQ(base.stepTime, 33.0);
  //
  // Shifted critical path: R is its own instruction before wait-grad (K:
  // fwd-keep, no R), the last stage is plain 1F1B with B = 1:
  //   t        0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26
  //   stage 0  F0 F1 F2 F3 R0 .  .  B0 F4 R1 B1 K5 R2 B2 K6 R3 B3 K7 R4 B4 .  .  B5 .  .  B6 B7
  //   stage 1  .  F0 F1 F2 R0 .  B0 F3 R1 B1 F4 R2 B2 F5 R3 B3 K6 R4 B4 K7 R5 B5 .  .  B6 B7 .
  //   stage 2  .  .  F0 F1 R0 B0 F2 R1 B1 F3 R2 B2 F4 R3 B3 F5 R4 B4 F6 R5 B5 K7 R6 B6 B7 .  .
  //   stage 3  .  .  .  F0 B0 F1 B1 F2 B2 .  F3 B3 .  F4 B4 .  F5 B5 .  F6 B6 .  F7 B7 .  .  .
  // B0's gradient reaches stage 0 after 4 F + 3 B = 7 (1F1B: 4 F + 3 (B +
  // R) = 10, and B0 there runs 10..12); R0 runs at 4, in the wait. In steady
  // state stages 0-2 take F + R + B = 3 per micro-batch, so stage 3 idles
  // one slot in three. Stage 0 ends at 27: busy 8 F + 8 B + 5 R = 21, idle
  // 6 (t = 5, 6, 20, 21, 23, 24). 27 < 33: the recomputation of 5 (stage
  // 0), 6 (stage 1) and 7 (stage 2) micro-batches is off the gradient's
  // critical path; what remains is the longer upstream steady state.
  PipelineCostModel scp;
  scp.forward = {1.0};
  scp.backward = {1.0};
  scp.recompute = {1.0, 1.0, 1.0, 0.0};
  PipelineSimulation sim = run(kSCP, 4, 8, scp);
  EXPECT_DOUBLE_EQ(sim.stepTime, 27.0);
  EXPECT_EQ(sim.finish, (SmallVector<double>{27.0, 26.0, 25.0, 24.0}));
  EXPECT_EQ(sim.busy, (SmallVector<double>{21.0, 22.0, 23.0, 16.0}));
  // Stage 0's events at the hand timeline's times.
  auto startOf = [&](int64_t s, PipelineInstr::Kind kind, int64_t mb) {
    for (const PipelineEvent &e : sim.events)
      if (e.stage == s && e.instr.kind == kind && e.instr.mb == mb)
        return e.start;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(startOf(0, PipelineInstr::Recompute, 0), 4.0);
  EXPECT_DOUBLE_EQ(startOf(0, PipelineInstr::Backward, 0), 7.0);
  EXPECT_DOUBLE_EQ(startOf(0, PipelineInstr::ForwardKeep, 7), 17.0);
  EXPECT_DOUBLE_EQ(startOf(1, PipelineInstr::Recompute, 5), 20.0);
  EXPECT_DOUBLE_EQ(startOf(3, PipelineInstr::Forward, 7), 22.0);
  // 1F1B's stage 0 recomputes all 8 micro-batches: 8 F + 8 (B + R) = 24.
  EXPECT_DOUBLE_EQ(base.busy[0], 24.0);
}

TEST(ShiftedCriticalPath, InFlightMemory) {
  // Same run, activation bytes: 1 per checkpointed micro-batch (its stage
  // input), 10 per micro-batch holding every activation (fwd-keep, or rcp
  // until its bwd); the last stage does not recompute (10 after fwd).
  PipelineCostModel costs;
  costs.forward = {1.0};
  costs.backward = {1.0};
  costs.recompute = {1.0, 1.0, 1.0, 0.0};
  costs.stashed = {1.0, 1.0, 1.0, 10.0};
  costs.kept = {10.0, 10.0, 10.0, 10.0};
  PipelineSimulation sim = run(kSCP, 4, 8, costs);
  // Micro-batches between forward and backward: 1F1B's p - s.
  EXPECT_EQ(sim.peakInFlight, (SmallVector<int64_t>{4, 3, 2, 1}));
  // Stage 0 at t = 18 (R4): micro-batch 4 recomputed, 5, 6, 7 kept: all 4
  // hold everything (4 x 10 = 40); stage 1 at R5: 5 recomputed, 6, 7 kept
  // (30); stage 2 at R6: 6 and 7 (20); stage 3: one micro-batch of 10.
  EXPECT_EQ(sim.peakKeptInFlight, (SmallVector<int64_t>{4, 3, 2, 0}));
  EXPECT_EQ(sim.peakActivationBytes, (SmallVector<double>{40.0, 30.0, 20.0, 10.0}));
  // 1F1B with the recomputation inside the backward holds checkpoints
  // only: 4, 3, 2 x 1 and 1 x 10 (what the backward rebuilds is a working
  // set of the fragment, not counted here).
  PipelineSimulation base = run(PipelineScheduleKind::OneFOneB, 4, 8, costs);
  EXPECT_EQ(base.peakKeptInFlight, (SmallVector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(base.peakActivationBytes, (SmallVector<double>{4.0, 3.0, 2.0, 10.0}));
  // m = 2: stages 0 and 1 keep both forwards (K0 K1 B0 B1: 20); stage 2
  // keeps one (F0 K1 R0 B0 B1: at R0 both hold everything, 20).
  PipelineSimulation small = run(kSCP, 4, 2, costs);
  EXPECT_EQ(small.peakKeptInFlight, (SmallVector<int64_t>{2, 2, 2, 0}));
  EXPECT_EQ(small.peakActivationBytes, (SmallVector<double>{20.0, 20.0, 20.0, 10.0}));
}

TEST(ShiftedCriticalPath, CostModelSize) {
  PipelineCostModel costs;
  costs.recompute = {1.0, 1.0};
  std::string error;
  EXPECT_TRUE(failed(simulatePipeline(buildPipelineSchedule(kSCP, 3, 4), costs, false, &error)));
  EXPECT_NE(error.find("recompute"), std::string::npos) << error;
}

} // namespace
