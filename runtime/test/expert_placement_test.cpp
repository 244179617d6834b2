//===- expert_placement_test.cpp - dynamic expert placement's rule ---------===//
#include "expert_placement.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace merak::rt;
using namespace merak::rt::train;

namespace {

TEST(ExpertPlacement, BalancesTheBusiestRank) {
  // 4 experts on 2 ranks in order: rank 0 holds the two hot ones (10 + 9
  // rows), rank 1 has 1. Greedy: 0 -> rank 0 (a tie: its own), 1 -> rank 1,
  // 2 -> rank 1 (9 < 10), 3 -> rank 0 (rank 1 is full). Expert 2 stays on
  // rank 1 in its slot 2, 1 takes rank 1's free slot 3, 3 rank 0's slot 1.
  PlacementChoice c = choosePlacement({10, 9, 1, 0}, {0, 1, 2, 3}, 2);
  EXPECT_EQ(c.placement, (std::vector<int64_t>{0, 3, 2, 1}));
  EXPECT_EQ(c.busiestBefore, 19);
  EXPECT_EQ(c.busiestAfter, 10);
  EXPECT_EQ(c.moved, 2);
}

TEST(ExpertPlacement, FromAMovedPlacement) {
  // Experts 0 and 3 share rank 1's slots (3 and 2), 1 and 2 rank 0's (0, 1):
  // loads 8 + 1 vs 2 + 7. Greedy: 0 (8) -> rank 1 (its own on the tie), 2
  // (7) -> rank 0, 1 (2) -> rank 0, 3 (1) -> rank 1: nobody moves.
  PlacementChoice c = choosePlacement({8, 2, 7, 1}, {3, 0, 1, 2}, 2);
  EXPECT_EQ(c.placement, (std::vector<int64_t>{3, 0, 1, 2}));
  EXPECT_EQ(c.moved, 0);
  EXPECT_EQ(c.busiestBefore, 9);
  EXPECT_EQ(c.busiestAfter, 9);
}

TEST(ExpertPlacement, BalancedRoutingGainsNothing) {
  // Equal rows: the greedy rule may shuffle experts, but the busiest rank
  // keeps its rows, so the trainer keeps the placement.
  PlacementChoice c = choosePlacement({5, 5, 5, 5, 5, 5}, {0, 1, 2, 3, 4, 5}, 3);
  EXPECT_EQ(c.busiestBefore, 10);
  EXPECT_EQ(c.busiestAfter, 10);
  std::vector<int64_t> sorted = c.placement;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

/// A manifest with a [4, 2] expert weight split over ep 2 (its shard naming
/// placement table 0) and the table moe.placement.0; `patch` replaces `from`.
std::string placedManifest(const std::string &from = "", const std::string &to = "") {
  std::string m = R"({
    "format": 1, "arena_bytes": 1024, "params_bytes": 256, "consts_offset": 256,
    "consts_bytes": 0,
    "params": [
      {"name": "w", "dtype": "F32", "shape": [2, 2], "offset": 0, "bytes": 16,
       "kind": "trainable", "global_shape": [4, 2],
       "shard": {"axis": 0, "parts": 2, "blocks": 1, "group": "ep", "placement": 0}},
      {"name": "moe.placement.0", "dtype": "I64", "shape": [4], "offset": 64, "bytes": 32,
       "kind": "frozen"}
    ],
    "inputs": [{"name": "ids", "role": "tokens", "dtype": "I64", "shape": [2, 8],
                "offset": 0}],
    "outputs": [],
    "mesh": {"dp": 2, "ep": 2},
    "moe": {"rebalance_every": 5,
            "tables": [{"table": 0, "param": "moe.placement.0", "weight_rows": 7}]}
  })";
  if (!from.empty())
    EXPECT_TRUE(merak::rt::testing::replaceFirst(m, from, to)) << from;
  return m;
}

TEST(ExpertPlacement, ManifestTables) {
  Result<Manifest> r = parseManifest(placedManifest());
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->params[0].placement, 0);
  ASSERT_TRUE(r->moe.has_value());
  EXPECT_EQ(r->moe->rebalanceEvery, 5);
  EXPECT_EQ(r->moe->tables[0].weightRows, 7);

  r = parseManifest(placedManifest("\"placement\": 0}", "\"placement\": 1}"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "params ('w'): shard.placement 1 names no moe table");
  r = parseManifest(placedManifest("\"shape\": [4], \"offset\": 64, \"bytes\": 32",
                                   "\"shape\": [3], \"offset\": 64, \"bytes\": 24"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "params ('w'): 4 experts, but its placement table has 3");
  r = parseManifest(placedManifest("\"param\": \"moe.placement.0\"", "\"param\": \"w\""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "moe.tables[0]: 'w' is not a frozen unsharded I64 [E] param");
  r = parseManifest(placedManifest("\"group\": \"ep\"", "\"group\": \"tp\""));
  ASSERT_FALSE(r.ok());
}

TEST(ExpertPlacement, Options) {
  Result<Manifest> r = parseManifest(placedManifest());
  ASSERT_TRUE(r.ok()) << r.message();
  TrainOptions o;
  o.moeRebalanceEvery = 3;
  EXPECT_EQ(checkExpertOptions(*r, o), "");
  // A device program's parameters are not the host's P it would move.
  EXPECT_NE(checkExpertOptions(*r, o, "cuda").find("runs on the CPU target only (this "
                                                   "program's parameters live on the cuda"),
            std::string::npos);
  // Without tables (nor a shard naming one).
  std::string plain = placedManifest(", \"placement\": 0}", "}");
  plain.replace(plain.find(",\n    \"moe\""), std::string::npos, "}");
  r = parseManifest(plain);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->moe.has_value());
  EXPECT_NE(checkExpertOptions(*r, o).find("--moe-rebalance-every needs a program compiled "
                                           "with --moe-rebalance-every"),
            std::string::npos);
}

} // namespace
