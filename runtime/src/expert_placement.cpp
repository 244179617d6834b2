//===- expert_placement.cpp - Dynamic expert placement (FlexMoE) ----------===//
//
// See expert_placement.h.
//
//===----------------------------------------------------------------------===//
#include "expert_placement.h"

#include "merak_rt/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

namespace merak::rt::train {

std::string checkExpertOptions(const Manifest &m, const TrainOptions &o,
                               const std::string &device) {
  if (!o.moeHistogramPath.empty() && m.meshEp < 2)
    return "--moe-histogram needs a program compiled with --ep 2 or more (its token "
           "dispatches count the rows per expert); this one has ep " +
           std::to_string(m.meshEp);
  if (o.moeRebalanceEvery > 0 && !m.moe)
    return "--moe-rebalance-every needs a program compiled with --moe-rebalance-every (its "
           "layers' placement tables); this one has none";
  if (o.moeRebalanceEvery > 0 && !device.empty())
    return "--moe-rebalance-every: dynamic expert placement runs on the CPU target only (this "
           "program's parameters live on the " + device + " device)";
  return "";
}

PlacementChoice choosePlacement(const std::vector<int64_t> &rows,
                                const std::vector<int64_t> &placement, int64_t parts) {
  const int64_t E = static_cast<int64_t>(placement.size()), perRank = E / parts;
  PlacementChoice c;
  std::vector<int64_t> before(parts, 0), after(parts, 0), free(parts, perRank), rankOf(E);
  for (int64_t l = 0; l < E; ++l)
    before[placement[l] / perRank] += rows[l];
  c.busiestBefore = *std::max_element(before.begin(), before.end());
  // The busiest expert first (then the lower id), onto the least loaded
  // rank with a free slot (then its own rank, then the lowest).
  std::vector<int64_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return rows[a] > rows[b]; });
  for (int64_t l : order) {
    const int64_t own = placement[l] / perRank;
    int64_t best = -1;
    for (int64_t r = 0; r < parts; ++r) {
      if (free[r] == 0)
        continue;
      if (best < 0 || after[r] < after[best] || (after[r] == after[best] && r == own))
        best = r;
    }
    rankOf[l] = best;
    after[best] += rows[l];
    --free[best];
  }
  c.busiestAfter = *std::max_element(after.begin(), after.end());
  // An expert that stays on its rank keeps its slot; the others fill the
  // free slots in id order.
  c.placement.assign(E, -1);
  std::vector<char> taken(E, 0);
  for (int64_t l = 0; l < E; ++l)
    if (rankOf[l] == placement[l] / perRank) {
      c.placement[l] = placement[l];
      taken[placement[l]] = 1;
    }
  for (int64_t l = 0; l < E; ++l) {
    if (c.placement[l] >= 0)
      continue;
    ++c.moved;
    int64_t slot = rankOf[l] * perRank;
    while (taken[slot])
      ++slot;
    c.placement[l] = slot;
    taken[slot] = 1;
  }
  return c;
}

ExpertPlacement::ExpertPlacement(const Manifest &m, Comm *comm, int64_t every, int64_t minRows,
                                 std::function<bool(const ManifestTensor &)> holds)
    : manifest_(m), comm_(comm), every_(every), minRows_(minRows), holds_(std::move(holds)) {
  if (!m.moe)
    return;
  for (const schema::MoeTable &mt : m.moe->tables) {
    if (static_cast<int64_t>(tables_.size()) <= mt.table)
      tables_.resize(static_cast<size_t>(mt.table) + 1);
    Table &t = tables_[mt.table];
    t.param = m.param(mt.param); // checked by parseManifest
    t.experts = t.param->shape[0];
    t.weightRows = mt.weightRows;
  }
  for (Table &t : tables_) {
    if (!t.param)
      continue;
    double all = 0, trained = 0;
    const int64_t n = &t - tables_.data();
    for (const ManifestTensor &p : m.params)
      if (p.placement == n && p.kind != "scratch") {
        t.shards.push_back(&p);
        all += static_cast<double>(p.bytes);
        trained += p.kind == "trainable" ? static_cast<double>(p.bytes) : 0;
      }
    t.stateFactor = trained > 0 ? all / trained : 1;
  }
}

Result<int64_t> ExpertPlacement::rebalance(char *P) {
  // The rows of the last K steps, summed over every rank (a table's stage
  // counts them; the others add zeros).
  std::vector<std::vector<int64_t>> counted = cpu::takeExpertPlaceRows();
  std::vector<int64_t> flat;
  for (size_t n = 0; n < tables_.size(); ++n)
    for (int64_t e = 0; e < tables_[n].experts; ++e)
      flat.push_back(n < counted.size() && e < static_cast<int64_t>(counted[n].size())
                         ? counted[n][e]
                         : 0);
  if (comm_ && !flat.empty()) {
    Comm::Request r =
        comm_->allReduceSum(Axis::World, flat.data(), static_cast<int64_t>(flat.size()),
                            CommType::I64);
    if (Status st = comm_->wait(r, "all-reduce of the experts' rows (--moe-rebalance-every)");
        !st.ok())
      return st;
  }
  // Every rank of a stage counted each of its ep group's rows once per ep
  // rank and per tp rank: dp * tp copies over the stage's ep groups.
  const double copies = static_cast<double>(manifest_.meshDp * manifest_.meshTp);
  int64_t moved = 0;
  size_t at = 0;
  for (const Table &t : tables_) {
    std::vector<int64_t> rows(flat.begin() + at, flat.begin() + at + t.experts);
    at += t.experts;
    if (!t.param || !holds_(*t.param))
      continue;
    std::vector<int64_t> placement(t.experts);
    std::memcpy(placement.data(), P + t.param->offset, sizeof(int64_t) * t.experts);
    PlacementChoice c = choosePlacement(rows, placement, manifest_.meshEp);
    const double cost =
        minRows_ >= 0 ? static_cast<double>(minRows_) : std::ceil(t.weightRows * t.stateFactor);
    const double saved = static_cast<double>(c.busiestBefore - c.busiestAfter) / copies;
    if (c.moved == 0 || c.busiestAfter >= c.busiestBefore || saved < cost * c.moved)
      continue;
    if (Status st = move(t, placement, c.placement, P); !st.ok())
      return st;
    moved += c.moved;
  }
  return moved;
}

namespace {
/// The widest communication type whose size divides `bytes` (the moves
/// are bytes of any parameter dtype).
CommType unitOf(uint64_t bytes) {
  return bytes % 8 == 0 ? CommType::I64 : bytes % 4 == 0 ? CommType::F32 : CommType::BF16;
}
} // namespace

Status ExpertPlacement::move(const Table &t, const std::vector<int64_t> &before,
                             const std::vector<int64_t> &after, char *P) {
  if (!comm_)
    return Status::error("--moe-rebalance-every: moving experts needs the ep group's "
                         "processes (mpirun)");
  const int64_t parts = manifest_.meshEp, perRank = t.experts / parts;
  const int me = comm_->groupRank(Axis::EP);
  std::vector<int64_t> expertIn(t.experts); // slot -> logical expert, after the move
  for (int64_t l = 0; l < t.experts; ++l)
    expertIn[after[l]] = l;
  std::vector<char> send, recv, whole;
  for (const ManifestTensor *shard : t.shards) {
    // ZeRO-1 state: this edp rank holds a part of the flattened ep shard;
    // the shard is gathered over edp, moved, and the part taken back.
    const uint64_t es = dtypeSize(shard->dtype);
    const uint64_t shardBytes =
        shard->zeroSharded() ? shard->zeroSourceElements() * es : shard->bytes;
    char *base = P + shard->offset;
    if (shard->zeroSharded()) {
      whole.resize(shard->bytes * static_cast<uint64_t>(shard->zeroParts));
      const CommType part = unitOf(shard->bytes);
      Comm::Request g = comm_->allGather(Axis::EDP, base, whole.data(),
                                         static_cast<int64_t>(shard->bytes) / commTypeSize(part),
                                         part);
      if (Status st = comm_->wait(g, ("gathering the ZeRO parts of '" + shard->name + "'").c_str());
          !st.ok())
        return st;
      base = whole.data();
    }
    const uint64_t block = shardBytes / static_cast<uint64_t>(perRank);
    const CommType type = unitOf(block);
    const int64_t units = static_cast<int64_t>(block) / commTypeSize(type);
    std::vector<int64_t> sendCounts(parts, 0), recvCounts(parts, 0), arriving;
    send.resize(shardBytes);
    recv.resize(shardBytes);
    // Each rank's new slots in order: what this rank sends to them...
    char *out = send.data();
    for (int64_t d = 0; d < parts; ++d)
      for (int64_t q = 0; q < perRank; ++q)
        if (int64_t from = before[expertIn[d * perRank + q]]; from / perRank == me) {
          std::memcpy(out, base + (from % perRank) * block, block);
          out += block;
          sendCounts[d] += units;
        }
    // ...and, by sender, which of its own new slots each arriving block fills.
    for (int64_t src = 0; src < parts; ++src)
      for (int64_t q = 0; q < perRank; ++q)
        if (before[expertIn[me * perRank + q]] / perRank == src) {
          arriving.push_back(q);
          recvCounts[src] += units;
        }
    Comm::Request r = comm_->allToAllV(Axis::EP, send.data(), sendCounts.data(), recv.data(),
                                       recvCounts.data(), type);
    if (Status st = comm_->wait(r, ("moving the experts of '" + shard->name + "'").c_str());
        !st.ok())
      return st;
    for (size_t i = 0; i < arriving.size(); ++i)
      std::memcpy(base + arriving[i] * block, recv.data() + i * block, block);
    if (shard->zeroSharded()) // this edp rank's part (zero padding past the shard)
      std::memcpy(P + shard->offset,
                  whole.data() + static_cast<uint64_t>(comm_->groupRank(Axis::EDP)) * shard->bytes,
                  shard->bytes);
  }
  std::memcpy(P + t.param->offset, after.data(), sizeof(int64_t) * t.experts);
  return Status::success();
}

} // namespace merak::rt::train
