//===- PipelineSimulatorTest.cpp - Schedules run on the simulator ---------===//
//
// The closed forms of the pipeline schedules (Narayanan et al. 2021,
// Qi et al. 2023) checked on buildPipelineSchedule's instruction lists.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::merak;

namespace {

PipelineSimulation simulate(PipelineScheduleKind kind, int64_t p, int64_t m,
                            const PipelineCostModel &costs = {}, int64_t v = 1) {
  std::string error;
  auto sim = simulatePipeline(buildPipelineSchedule(kind, p, m, v), costs,
                              /*recordEvents=*/true, &error);
  EXPECT_TRUE(succeeded(sim)) << error;
  return succeeded(sim) ? *sim : PipelineSimulation{};
}

SmallVector<int64_t> peaks(const PipelineSimulation &sim) { return sim.peakInFlight; }

TEST(PipelineSimulator, GPipeP4M8) {
  PipelineSimulation sim = simulate(PipelineScheduleKind::GPipe, 4, 8);
  // (m + p - 1) * (F + B).
  EXPECT_DOUBLE_EQ(sim.stepTime, 22.0);
  EXPECT_DOUBLE_EQ(sim.bubbleRatio, 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(sim.bubbleFraction, 3.0 / 11.0);
  EXPECT_EQ(peaks(sim), (SmallVector<int64_t>{8, 8, 8, 8}));
  for (double b : sim.busy)
    EXPECT_DOUBLE_EQ(b, 16.0);
}

TEST(PipelineSimulator, OneFOneBP4M8) {
  PipelineSimulation sim = simulate(PipelineScheduleKind::OneFOneB, 4, 8);
  EXPECT_DOUBLE_EQ(sim.stepTime, 22.0);
  EXPECT_DOUBLE_EQ(sim.bubbleRatio, 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(sim.bubbleFraction, 3.0 / 11.0);
  // 1F1B stashes p - s micro-batches on stage s.
  EXPECT_EQ(peaks(sim), (SmallVector<int64_t>{4, 3, 2, 1}));
}

TEST(PipelineSimulator, ClosedFormSweep) {
  for (auto kind : {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB})
    for (int64_t p = 2; p <= 4; ++p)
      for (int64_t m = 4; m <= 8; ++m) {
        SCOPED_TRACE(pipelineScheduleName(kind).str() + " p=" + std::to_string(p) +
                     " m=" + std::to_string(m));
        PipelineSimulation sim = simulate(kind, p, m);
        EXPECT_DOUBLE_EQ(sim.stepTime, double(m + p - 1) * 2.0);
        EXPECT_NEAR(sim.bubbleRatio, double(p - 1) / m, 1e-12);
        for (int64_t s = 0; s < p; ++s)
          EXPECT_EQ(sim.peakInFlight[s],
                    kind == PipelineScheduleKind::GPipe ? m : std::min(p - s, m));
      }
}

/// Interleaved 1F1B with v chunks per stage, each 1/v of the stage's work.
PipelineSimulation interleaved(int64_t p, int64_t m, int64_t v) {
  PipelineCostModel costs;
  costs.forward = {1.0 / v};
  costs.backward = {1.0 / v};
  return simulate(PipelineScheduleKind::Interleaved, p, m, costs, v);
}

TEST(PipelineSimulator, InterleavedP4M8V2) {
  PipelineSimulation sim = interleaved(4, 8, 2);
  // The bubble shrinks by v: (p - 1) / (m v).
  EXPECT_DOUBLE_EQ(sim.stepTime, 16.0 + 3.0);
  EXPECT_DOUBLE_EQ(sim.bubbleRatio, 3.0 / 16.0);
  // (micro-batch, chunk) pairs stashed: 2 (p - s - 1) + (v - 1) p + 1.
  EXPECT_EQ(peaks(sim), (SmallVector<int64_t>{11, 9, 7, 5}));
}

TEST(PipelineSimulator, InterleavedSweep) {
  for (int64_t p = 2; p <= 4; ++p)
    for (int64_t v = 1; v <= 3; ++v)
      for (int64_t m = p; m <= 12; m += p) {
        SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(m));
        PipelineSimulation sim = interleaved(p, m, v);
        EXPECT_NEAR(sim.stepTime, 2.0 * m + 2.0 * (p - 1) / v, 1e-9);
        EXPECT_NEAR(sim.bubbleRatio, double(p - 1) / (m * v), 1e-9);
      }
}

TEST(PipelineSimulator, InterleavedV1Is1F1B) {
  auto a = buildPipelineSchedule(PipelineScheduleKind::Interleaved, 4, 8, 1);
  auto b = buildPipelineSchedule(PipelineScheduleKind::OneFOneB, 4, 8);
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    ASSERT_EQ(a[s].size(), b[s].size());
    for (size_t i = 0; i < a[s].size(); ++i) {
      EXPECT_EQ(a[s][i].kind, b[s][i].kind);
      EXPECT_EQ(a[s][i].mb, b[s][i].mb);
    }
  }
}

PipelineCostModel splitBackward() {
  PipelineCostModel costs;
  costs.forward = {1.0};
  costs.backward = {1.0};
  costs.weight = {1.0};
  return costs;
}

TEST(PipelineSimulator, ZeroBubbleH1P4M8) {
  PipelineSimulation sim = simulate(PipelineScheduleKind::ZeroBubbleH1, 4, 8, splitBackward());
  // m (F + B + W) + (p - 1) (F + B - W).
  EXPECT_DOUBLE_EQ(sim.stepTime, 24.0 + 3.0);
  EXPECT_DOUBLE_EQ(sim.bubbleRatio, 1.0 / 8.0);
  EXPECT_EQ(peaks(sim), (SmallVector<int64_t>{4, 3, 2, 1}));
  for (double b : sim.busy)
    EXPECT_DOUBLE_EQ(b, 24.0);
}

TEST(PipelineSimulator, ZeroBubbleH1Sweep) {
  for (int64_t p = 2; p <= 4; ++p)
    for (int64_t m = p; m <= 8; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      PipelineSimulation sim = simulate(PipelineScheduleKind::ZeroBubbleH1, p, m, splitBackward());
      EXPECT_DOUBLE_EQ(sim.stepTime, 3.0 * m + (p - 1));
      // Every weight gradient runs once, after its backward.
      for (const auto &list : buildPipelineSchedule(PipelineScheduleKind::ZeroBubbleH1, p, m)) {
        SmallVector<int64_t> seen(m, 0);
        for (const PipelineInstr &i : list) {
          if (i.kind == PipelineInstr::Backward)
            seen[i.mb] = 1;
          if (i.kind == PipelineInstr::BackwardWeight) {
            EXPECT_EQ(seen[i.mb], 1);
            seen[i.mb] = 2;
          }
        }
        EXPECT_EQ(llvm::count(seen, 2), m);
      }
    }
}

TEST(PipelineSimulator, ZeroBubbleH2P2M4Order) {
  // The unit-time list schedule drawn by hand (limits 3 and 1):
  //   t       0  1  2  3  4  5  6  7  8  9  10 11 12
  //   stage 0 F0 F1 F2 B0 F3 B1 W0 B2 W1 B3 W2 W3
  //   stage 1    F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3
  auto orders = buildPipelineSchedule(PipelineScheduleKind::ZeroBubbleH2, 2, 4);
  auto letters = [](const SmallVector<PipelineInstr> &list) {
    std::string out;
    for (const PipelineInstr &i : list) {
      if (i.kind == PipelineInstr::Forward)
        out += " F" + std::to_string(i.mb);
      else if (i.kind == PipelineInstr::Backward)
        out += " B" + std::to_string(i.mb);
      else if (i.kind == PipelineInstr::BackwardWeight)
        out += " W" + std::to_string(i.mb);
    }
    return out;
  };
  EXPECT_EQ(letters(orders[0]), " F0 F1 F2 B0 F3 B1 W0 B2 W1 B3 W2 W3");
  EXPECT_EQ(letters(orders[1]), " F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3");
  PipelineSimulation sim = simulate(PipelineScheduleKind::ZeroBubbleH2, 2, 4, splitBackward());
  EXPECT_DOUBLE_EQ(sim.stepTime, 13.0);
  EXPECT_EQ(peaks(sim), (SmallVector<int64_t>{3, 1}));
}

TEST(PipelineSimulator, ZeroBubbleH2P4M8) {
  // Equal times, no latency: ZB-H1's makespan, up to 2 (p - s) - 1
  // micro-batches in flight.
  PipelineSimulation sim = simulate(PipelineScheduleKind::ZeroBubbleH2, 4, 8, splitBackward());
  EXPECT_DOUBLE_EQ(sim.stepTime, 24.0 + 3.0);
  EXPECT_EQ(peaks(sim), (SmallVector<int64_t>{7, 5, 3, 1}));
  for (double b : sim.busy)
    EXPECT_DOUBLE_EQ(b, 24.0);
}

TEST(PipelineSimulator, ZeroBubbleH2HidesLatency) {
  // With message latency the extra warm-up forwards keep the first stages
  // busy while gradients travel: ZB-H2 beats ZB-H1 and 1F1B.
  PipelineCostModel costs = splitBackward();
  costs.latency = 0.5;
  double h2 = simulate(PipelineScheduleKind::ZeroBubbleH2, 4, 8, costs).stepTime;
  double h1 = simulate(PipelineScheduleKind::ZeroBubbleH1, 4, 8, costs).stepTime;
  EXPECT_LT(h2, h1);
  for (int64_t p = 2; p <= 4; ++p)
    for (int64_t m = p; m <= 8; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      EXPECT_LE(simulate(PipelineScheduleKind::ZeroBubbleH2, p, m, costs).stepTime,
                simulate(PipelineScheduleKind::ZeroBubbleH1, p, m, costs).stepTime);
      EXPECT_DOUBLE_EQ(simulate(PipelineScheduleKind::ZeroBubbleH2, p, m, splitBackward()).stepTime,
                       3.0 * m + (p - 1));
    }
}

TEST(PipelineSimulator, BackwardTwiceForward) {
  PipelineCostModel costs;
  costs.forward = {1.0};
  costs.backward = {2.0};
  costs.update = 0.5;
  PipelineSimulation sim = simulate(PipelineScheduleKind::OneFOneB, 3, 6, costs);
  EXPECT_DOUBLE_EQ(sim.stepTime, (6 + 3 - 1) * 3.0 + 0.5);
}

TEST(PipelineSimulator, SlowestStageDominates) {
  // Stage 1 takes twice as long: the steady state runs at its pace.
  PipelineCostModel costs;
  costs.forward = {1.0, 2.0};
  costs.backward = {1.0, 2.0};
  PipelineSimulation sim = simulate(PipelineScheduleKind::OneFOneB, 2, 4, costs);
  // F0 on stage 0, then stage 1 is busy 4 * (2 + 2), then B3 on stage 0.
  EXPECT_DOUBLE_EQ(sim.stepTime, 1.0 + 16.0 + 1.0);
  EXPECT_DOUBLE_EQ(sim.busy[0], 8.0);
  EXPECT_DOUBLE_EQ(sim.busy[1], 16.0);
}

TEST(PipelineSimulator, CommunicationCost) {
  // One micro-batch over two stages: each message costs latency + bytes / bw.
  PipelineCostModel costs;
  costs.latency = 0.5;
  costs.bandwidth = 100.0;
  costs.actBytes = {100.0};
  costs.gradBytes = {50.0};
  PipelineSimulation sim = simulate(PipelineScheduleKind::OneFOneB, 2, 1, costs);
  // F (1) + act (1.5) + F (1) + B (1) + grad (1) + B (1).
  EXPECT_DOUBLE_EQ(sim.stepTime, 6.5);
  // Stage 1 waits until its gradient has arrived before its update.
  EXPECT_DOUBLE_EQ(sim.finish[1], 5.5);
}

TEST(PipelineSimulator, LinkCarriesOneMessageAtATime) {
  // Forwards of 0 time: stage 0 sends m activations back to back; the
  // link serializes them, so the last arrives after m * bytes / bw.
  PipelineCostModel costs;
  costs.forward = {0.0};
  costs.backward = {0.0};
  costs.bandwidth = 1.0;
  costs.actBytes = {1.0};
  PipelineSimulation sim = simulate(PipelineScheduleKind::GPipe, 2, 4, costs);
  EXPECT_DOUBLE_EQ(sim.stepTime, 4.0);
}

TEST(PipelineSimulator, TraceHasOneEventPerCompute) {
  PipelineSimulation sim = simulate(PipelineScheduleKind::OneFOneB, 2, 2);
  // 2 stages x (2 F + 2 B + update).
  EXPECT_EQ(sim.events.size(), 10u);
  // By stage, then time; a stage computes one thing at a time.
  for (size_t i = 1; i < sim.events.size(); ++i) {
    const PipelineEvent &a = sim.events[i - 1], &b = sim.events[i];
    EXPECT_LE(a.stage, b.stage);
    if (a.stage == b.stage)
      EXPECT_LE(a.end, b.start);
  }
  std::string json;
  llvm::raw_string_ostream os(json);
  writePipelineTrace(sim, os);
  EXPECT_NE(json.find("\"name\": \"B1\", \"ph\": \"X\", \"pid\": 0, \"tid\": 1"),
            std::string::npos);
}

TEST(PipelineSimulator, Deadlock) {
  // Stage 1 waits for a gradient from a stage 2 that does not exist, and
  // stage 0 for an activation nobody sends.
  SmallVector<SmallVector<PipelineInstr>> program(2);
  program[0] = {{PipelineInstr::WaitAct, 0}, {PipelineInstr::Forward, 0}};
  program[1] = {{PipelineInstr::WaitGrad, 3}};
  std::string error;
  auto sim = simulatePipeline(program, PipelineCostModel{}, false, &error);
  EXPECT_TRUE(failed(sim));
  EXPECT_EQ(error, "the schedule deadlocks: stage 0 at wait-act(0), stage 1 at wait-grad(3)");
}

TEST(PipelineSimulator, CostModelSize) {
  PipelineCostModel costs;
  costs.forward = {1.0, 1.0, 1.0};
  std::string error;
  auto sim = simulatePipeline(buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 2), costs,
                              false, &error);
  EXPECT_TRUE(failed(sim));
  EXPECT_EQ(error, "the cost model has 3 forward entries for 2 model stages");
}

} // namespace

TEST(PipelineSimulator, InterNodeLinkAndStageUpdate) {
  // Two stages on different nodes: the message between them takes the
  // inter-node link; each stage its own update.
  PipelineCostModel costs;
  costs.forward = {1.0};
  costs.backward = {1.0};
  costs.actBytes = {100.0};
  costs.gradBytes = {100.0};
  costs.bandwidth = 1000.0; // 0.1 s + 0.01 s within a node
  costs.latency = 0.01;
  costs.interBandwidth = 100.0; // 1 s + 0.5 s across
  costs.interLatency = 0.5;
  costs.node = {0, 1};
  costs.stageUpdate = {0.25, 0.5};
  PipelineSimulation sim = simulate(PipelineScheduleKind::GPipe, 2, 1, costs);
  // F0 1, act 1.5, F1 1, B1 1, grad 1.5, B0 1, update 0.25.
  EXPECT_NEAR(sim.stepTime, 1 + 1.5 + 1 + 1 + 1.5 + 1 + 0.25, 1e-12);
  costs.node = {0, 0};
  sim = simulate(PipelineScheduleKind::GPipe, 2, 1, costs);
  EXPECT_NEAR(sim.stepTime, 1 + 0.11 + 1 + 1 + 0.11 + 1 + 0.25, 1e-12);
}
