//===- expert_placement.h - Dynamic expert placement (FlexMoE) -*- C++ -*-===//
//
// ./train's side of merak.expert_place (a program compiled with
// --moe-rebalance-every): every K steps, per Mixture-of-Experts layer
// (placement table), from the rows each logical expert got in those K steps
// (counted by the expertPlace kernel, summed over every rank):
//
//   1. the load of each ep rank under the current placement: the rows of
//      the experts in its slots;
//   2. a new placement, greedily (the busiest expert first, onto the least
//      loaded rank with a free slot; an expert keeps its rank, then its
//      slot, on ties);
//   3. it is taken only when it lowers the busiest rank's rows by at least
//      min_rows per moved expert over the next K steps (min_rows: the
//      table's weight_rows times its parameters' bytes over the trainable
//      ones', i.e. what moving an expert's weights and optimizer state
//      costs on the all-to-all; --moe-rebalance-min-rows overrides it);
//   4. then every parameter whose shard names the table (the experts'
//      weights and their optimizer state) has its experts moved to their
//      new slots with one all-to-all over the ep group each, and the table
//      parameter is rewritten.
//
// Every rank holding the table computes the same placement from the same
// counts, so no decision is sent. The math does not change: each row still
// meets its expert's weights; only the order in which a shard's elements
// are summed (the gradient norm) differs. Checkpoints hold the experts in
// slot order with the table, so a resume (under any ep) keeps them right.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_EXPERT_PLACEMENT_H
#define MERAK_RT_SRC_EXPERT_PLACEMENT_H

#include "merak_rt/cli.h"
#include "merak_rt/comm.h"
#include "merak_rt/status.h"

#include "checkpoint_shards.h"
#include "manifest.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace merak::rt::train {

/// The placement a rebalance would choose for one table: the new
/// placement (logical expert -> slot), the busiest rank's rows before and
/// after, and the experts that change rank.
struct PlacementChoice {
  std::vector<int64_t> placement;
  int64_t busiestBefore = 0, busiestAfter = 0, moved = 0;
};

/// The greedy rule above on `rows` (per logical expert) for `parts` ranks
/// holding placement.size() / parts slots each.
PlacementChoice choosePlacement(const std::vector<int64_t> &rows,
                                const std::vector<int64_t> &placement, int64_t parts);

/// What is wrong with the Mixture-of-Experts flags for this program
/// (--moe-histogram, --moe-rebalance-every), or "". `device`: the step
/// backend's name for a device program ("" on the CPU), whose parameters
/// rebalancing cannot move (it moves the experts in the host's P).
std::string checkExpertOptions(const Manifest &m, const TrainOptions &o,
                               const std::string &device = "");

class ExpertPlacement {
public:
  /// `every` = K (0: never rebalance); `minRows` < 0: from the tables'
  /// costs. `holds(t)`: whether this rank's P holds param t (a pipeline
  /// stage holds its own layers).
  ExpertPlacement(const Manifest &m, Comm *comm, int64_t every, int64_t minRows,
                  std::function<bool(const ManifestTensor &)> holds);

  /// Whether the run rebalances after step `step` (0-based): every K steps.
  bool due(int64_t step) const { return every_ > 0 && (step + 1) % every_ == 0; }
  /// The counts since the last call decide, and the experts move in P.
  /// Collective over the world (every rank calls it after the same steps).
  /// The experts moved in all tables, or an error (a failed message).
  Result<int64_t> rebalance(char *P);

private:
  struct Table {
    const ManifestTensor *param = nullptr; ///< the I64 [E] placement
    int64_t experts = 0, weightRows = 1;
    std::vector<const ManifestTensor *> shards; ///< the parameters it orders
    double stateFactor = 1; ///< their bytes over the trainable ones'
  };
  Status move(const Table &t, const std::vector<int64_t> &before,
              const std::vector<int64_t> &after, char *P);

  const Manifest &manifest_;
  Comm *comm_;
  int64_t every_, minRows_;
  std::function<bool(const ManifestTensor &)> holds_;
  std::vector<Table> tables_; ///< by table index (param null: none)
};

} // namespace merak::rt::train

#endif // MERAK_RT_SRC_EXPERT_PLACEMENT_H
