//===- StageBalanceTest.cpp - where merak-pipeline cuts the model ---------===//
//
// chooseStageCuts on small programs whose best cuts are worked out by hand.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/StageBalance.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
SmallVector<int64_t> prefixOf(ArrayRef<int64_t> costs) {
  SmallVector<int64_t> prefix{0};
  for (int64_t c : costs)
    prefix.push_back(prefix.back() + c);
  return prefix;
}

TEST(StageBalance, EvenSplitAtTheCheapCut) {
  // Six ops of cost 10, cut points after ops 1..5; the middle one sends few
  // bytes and is also the balanced cut (30 | 30).
  SmallVector<int64_t> prefix = prefixOf({10, 10, 10, 10, 10, 10});
  EXPECT_EQ(chooseStageCuts({1, 2, 3, 4, 5}, {100, 100, 5, 100, 100}, prefix, 6, 2),
            (SmallVector<int64_t>{2}));
}

TEST(StageBalance, BalanceBeatsFewBytes) {
  // The cheap cut (after op 1) would leave 10 | 50, far more than 5% above
  // the balanced 30 | 30: the balanced cut wins despite its bytes.
  SmallVector<int64_t> prefix = prefixOf({10, 10, 10, 10, 10, 10});
  EXPECT_EQ(chooseStageCuts({1, 2, 3, 4, 5}, {5, 100, 100, 100, 100}, prefix, 6, 2),
            (SmallVector<int64_t>{2}));
}

TEST(StageBalance, ThreeStagesMinimiseTheLargest) {
  // Costs 5 5 30 5 5 30: the best three stages are [0, 2) [2, 4) [4, 6)
  // = 10, 35, 35 (every other split has a stage of 40 or more).
  SmallVector<int64_t> prefix = prefixOf({5, 5, 30, 5, 5, 30});
  EXPECT_EQ(chooseStageCuts({1, 2, 3, 4, 5}, {8, 8, 8, 8, 8}, prefix, 6, 3),
            (SmallVector<int64_t>{1, 3}));
}
} // namespace
