//===- ViewedDimensionTest.cpp - a parameter's split seen through a view --===//
//
// tensor_parallel::viewedDimension (merak-tensor-parallel): where a split of
// one shape's dimension lands in a reshape of it, against groups worked out
// by hand.
//
//===----------------------------------------------------------------------===//
#include "../../lib/Dialect/Merak/Transforms/TensorParallelWalk.h"

#include "gtest/gtest.h"

using mlir::merak::tensor_parallel::viewedDimension;

namespace {

TEST(ViewedDimension, UnitDimensionsAddedOrDropped) {
  // [C] as [C, 1]; [C, 1, k] as [C, 1, 1, k] (Mamba's conv1d weight).
  EXPECT_EQ(viewedDimension({6}, {6, 1}, 0), 0);
  EXPECT_EQ(viewedDimension({6, 1, 4}, {6, 1, 1, 4}, 2), 3);
  EXPECT_EQ(viewedDimension({6, 1, 1, 4}, {6, 1, 4}, 3), 2);
  // A dimension of size 1 is never split.
  EXPECT_EQ(viewedDimension({6, 1, 4}, {6, 1, 1, 4}, 1), std::nullopt);
}

TEST(ViewedDimension, LeaderOfAMergedGroup) {
  // XLNet's [H, N, D] = [64, 4, 16] read as [1, H, N * D]: the heads lead
  // {N, D}, so they split with dimension 2 of the view, and back.
  EXPECT_EQ(viewedDimension({64, 4, 16}, {1, 64, 64}, 1), 2);
  EXPECT_EQ(viewedDimension({1, 64, 64}, {64, 4, 16}, 2), 1);
  EXPECT_EQ(viewedDimension({64, 4, 16}, {1, 64, 64}, 0), 1);
  // D inside the group {N, D}: a split of it is no run of the view's.
  EXPECT_EQ(viewedDimension({64, 4, 16}, {1, 64, 64}, 2), std::nullopt);
  // [N, D, H] (o transposed) as [N * D, H].
  EXPECT_EQ(viewedDimension({4, 16, 64}, {64, 64}, 0), 0);
  EXPECT_EQ(viewedDimension({4, 16, 64}, {64, 64}, 2), 1);
}

TEST(ViewedDimension, GroupsThatCrossDimensions) {
  // [4, 6] as [6, 4]: one group {4, 6} = {6, 4}, led by dimension 0 on both
  // sides (half of either is the first 12 elements).
  EXPECT_EQ(viewedDimension({4, 6}, {6, 4}, 0), 0);
  EXPECT_EQ(viewedDimension({4, 6}, {6, 4}, 1), std::nullopt);
  // [2, 3, 4] as [6, 4]: {2, 3} = {6}, {4} = {4}.
  EXPECT_EQ(viewedDimension({2, 3, 4}, {6, 4}, 2), 1);
  EXPECT_EQ(viewedDimension({2, 3, 4}, {6, 4}, 1), std::nullopt);
}

TEST(ViewedDimension, DynamicSizesAreNotFollowed) {
  EXPECT_EQ(viewedDimension({mlir::ShapedType::kDynamic, 4}, {1, 8}, 1), std::nullopt);
}

} // namespace
