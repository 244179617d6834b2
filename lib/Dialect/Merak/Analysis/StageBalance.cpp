//===- StageBalance.cpp - where merak-pipeline cuts the model -------------===//
#include "merak/Dialect/Merak/Analysis/StageBalance.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <climits>
#include <vector>

using namespace mlir;
using namespace mlir::merak;

/// (the largest stage cost, pp-1 indices into `candidates` taken from
/// `allowed`) minimising the largest stage cost (dynamic programming;
/// ties go to the earliest cuts).
static std::pair<int64_t, SmallVector<int64_t>> balance(ArrayRef<int64_t> allowed,
                                                        ArrayRef<int64_t> candidates,
                                                        ArrayRef<int64_t> prefix, int64_t n,
                                                        int64_t pp) {
  // Positions: 0, the allowed candidates, n. best[p][i]: the smallest
  // maximum cost of p stages covering [0, pos[i]).
  SmallVector<int64_t> pos{0};
  for (int64_t a : allowed)
    pos.push_back(candidates[a]);
  pos.push_back(n);
  int64_t k = pos.size();
  const int64_t inf = INT64_MAX;
  std::vector<std::vector<int64_t>> best(pp + 1, std::vector<int64_t>(k, inf)),
      from(pp + 1, std::vector<int64_t>(k, -1));
  best[0][0] = 0;
  for (int64_t p = 1; p <= pp; ++p)
    for (int64_t i = 1; i < k; ++i)
      for (int64_t j = 0; j < i; ++j) {
        if (best[p - 1][j] == inf)
          continue;
        int64_t c = std::max(best[p - 1][j], prefix[pos[i]] - prefix[pos[j]]);
        if (c < best[p][i]) {
          best[p][i] = c;
          from[p][i] = j;
        }
      }
  SmallVector<int64_t> cuts;
  for (int64_t p = pp, i = k - 1; p > 1; --p) {
    i = from[p][i];
    cuts.push_back(allowed[i - 1]); // candidate index of position i
  }
  std::reverse(cuts.begin(), cuts.end());
  return {best[pp][k - 1], cuts};
}

// (Documented in StageBalance.h.)
SmallVector<int64_t> mlir::merak::chooseStageCuts(ArrayRef<int64_t> candidates,
                                                  ArrayRef<int64_t> bytes,
                                                  ArrayRef<int64_t> prefix, int64_t n,
                                                  int64_t pp) {
  SmallVector<int64_t> levels(bytes.begin(), bytes.end());
  llvm::sort(levels);
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  auto within = [&](int64_t limit) {
    SmallVector<int64_t> idx;
    for (auto [i, b] : llvm::enumerate(bytes))
      if (b <= limit)
        idx.push_back(i);
    return idx;
  };
  std::pair<int64_t, SmallVector<int64_t>> all =
      balance(within(levels.back()), candidates, prefix, n, pp);
  for (int64_t limit : levels) {
    SmallVector<int64_t> allowed = within(limit);
    if ((int64_t)allowed.size() < pp - 1)
      continue;
    std::pair<int64_t, SmallVector<int64_t>> r = balance(allowed, candidates, prefix, n, pp);
    if (r.first <= all.first + all.first / 20)
      return r.second;
  }
  return all.second;
}

// (Documented in StageBalance.h.)
SmallVector<int64_t> mlir::merak::balanceGroups(ArrayRef<int64_t> costs, ArrayRef<int64_t> bytes,
                                                int64_t groups) {
  int64_t n = costs.size();
  if (groups <= 1 || n <= 1)
    return {0, n};
  SmallVector<int64_t> prefix(n + 1, 0), candidates;
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  for (int64_t i = 1; i < n; ++i) // every boundary between two pieces
    candidates.push_back(i);
  SmallVector<int64_t> starts{0};
  for (int64_t c : chooseStageCuts(candidates, bytes.take_front(n - 1), prefix, n, groups))
    starts.push_back(candidates[c]);
  starts.push_back(n);
  return starts;
}
