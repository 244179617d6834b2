//===- expert_rows.h - Row plans of Mixture-of-Experts layers ---*- C++ -*-===//
//
// Host code shared by the CPU and the GPU backend (the GPU copies the expert
// ids to the host and plans there): which rows each expert GEMM computes,
// and which rows expert parallelism's all-to-all sends to and receives from
// each rank of the ep group. Defined in merak_runtime_cpu
// (runtime/src/ops_experts.cpp, runtime/src/collectives.cpp); the semantics
// are kernels.def's expertMatmul and expertAllToAll. A bad expert id is fatal
// (naming the op and the row), as in the kernels.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_EXPERT_ROWS_H
#define MERAK_RT_EXPERT_ROWS_H

#include "merak_rt/ops.h"

#include <cstdint>
#include <vector>

namespace merak::rt::cpu::detail {

/// The rows of an expert GEMM grouped by expert: expert e's rows are
/// order[offset[e] .. offset[e + 1]), in increasing row order (a stable
/// counting sort, so the result does not depend on threads or devices).
/// Dropped rows (id -1) are in no group; so are, with a `first` expert
/// (expert parallelism), the rows of other ranks' experts.
struct ExpertGroups {
  std::vector<int64_t> offset, order;
  int64_t rows() const { return offset.back(); }
};

/// Groups the S rows of `experts` (host memory, I64 or I32) over E local
/// experts [first, first + E) (first: a host I64, or null for 0). With
/// shadow copies (M > 0, shadowFirst: a host I64), groups E .. E + M - 1 are
/// the copies' rows. `op` names the op in errors.
ExpertGroups groupExpertRows(DT ti, const void *experts, const int64_t *first, int64_t S,
                             int64_t E, const char *op, const int64_t *shadowFirst = nullptr,
                             int64_t M = 0);

/// merak.all_to_all's flat exchange as this rank (`me` of `size`) sees it:
/// the rows it sends to and receives from each group rank, which of its
/// input rows it packs (in message order: peers in rank order, rows in
/// increasing s) and where each received row goes in its output. ids
/// [size * S] route every group rank's rows (see kernels.def
/// expertAllToAll; a bad id is fatal). With `compact` rows (> 0) this
/// rank's side (a dispatch's output, a combine's input) holds its rows in
/// order instead of at i * S + s; more than `compact` of them is fatal.
struct RowExchange {
  std::vector<int64_t> sendCounts, recvCounts; ///< rows, per group rank
  std::vector<int64_t> sendRows, recvRows;     ///< input / output row indices
};
RowExchange planRowExchange(const int64_t *ids, int size, int me, int64_t S, int64_t perRank,
                            int64_t shadowSlots, bool combine, int64_t compact = 0);
/// The place of group rank i's row s on its expert's rank: i * S + s, or
/// with compact rows its index among that rank's rows (`counted` counts
/// them, in the group's order; fatal beyond `compact`).
int64_t expertRowPlace(int64_t i, int64_t S, int64_t s, int64_t compact, int64_t &counted);
/// The group rank holding group rank i's row s (its expert's, or i itself
/// for a shadow copy).
int64_t rowOwner(const int64_t *ids, int64_t S, int64_t perRank, int size, int64_t shadowSlots,
                 int64_t i, int64_t s);

/// merak.expert_shadow's slot j: the group rank owning expert slots[j] of
/// perRank * parts (group rank i holding [i * perRank, (i + 1) * perRank)),
/// -1 for an unused slot (-1); fatal for another id.
int shadowSlotOwner(const int64_t *slots, int64_t j, int64_t perRank, int64_t parts);

} // namespace merak::rt::cpu::detail

#endif // MERAK_RT_EXPERT_ROWS_H
