//===- collectives.cpp - Collectives called by generated code -------------===//
#include "merak_rt/collectives.h"

#include "merak_rt/comm.h"

#include "collective_pack.h"
#include "ops_util.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace merak::rt::cpu {
using namespace detail;

Axis axisOf(Group g) {
  switch (g) {
  case Group::DP:
    return Axis::DP;
  case Group::TP:
    return Axis::TP;
  case Group::PP:
    return Axis::PP;
  case Group::EP:
    return Axis::EP;
  case Group::EDP:
    return Axis::EDP;
  }
  return Axis::World;
}

namespace {
Comm *gComm = nullptr;
} // namespace

void setCommunicator(Comm *comm) { gComm = comm; }
Comm *communicator() { return gComm; }

void allReduceBucketImpl(Group group, CollReduce reduce, DT t, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts) {
  checkCollectiveType(t, "all_reduce");
  int64_t es = elemSize(t);
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  if (size == 1) {
    for (int32_t i = 0; i < n; ++i)
      if (in[i] != out[i])
        std::memmove(out[i], in[i], counts[i] * es);
    return;
  }
  // Pack into one buffer, reduce it in place, unpack (with the mean's scale).
  static thread_local std::vector<char> scratch;
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  if ((int64_t)scratch.size() < total * es)
    scratch.resize(total * es);
  char *p = scratch.data();
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(p, in[i], counts[i] * es);
    p += counts[i] * es;
  }
  const CommType ct = commTypeOf(t);
  Comm::Request r = reduce == CollReduce::Max
                        ? gComm->allReduceMax(axisOf(group), scratch.data(), total, ct)
                        : gComm->allReduceSum(axisOf(group), scratch.data(), total, ct);
  Status s = gComm->wait(r, "all-reduce of a gradient bucket");
  if (!s.ok())
    gComm->abort(s.message(), 1);
  p = scratch.data();
  for (int32_t i = 0; i < n; ++i) {
    unpackReduced(t, p, out[i], counts[i], reduce == CollReduce::Mean, size);
    p += counts[i] * es;
  }
}

namespace {
/// The group size, which must be what the program was compiled for.
int zeroGroupSize(Group group, int64_t parts, const char *what) {
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  if (parts != size)
    fatal((std::string(what) + ": compiled for " + std::to_string(parts) +
           " ranks, but the group has " + std::to_string(size))
              .c_str());
  return size;
}

void waitOrAbort(Comm::Request &r, const char *what) {
  Status s = gComm->wait(r, what);
  if (!s.ok())
    gComm->abort(s.message(), 1);
}
} // namespace

void reduceScatterBucketImpl(Group group, CollReduce reduce, DT t, int64_t parts, int32_t n,
                             const void *const *in, void *const *out,
                             const int64_t *counts) {
  checkCollectiveType(t, "reduce_scatter");
  int size = zeroGroupSize(group, parts, "reduce_scatter");
  int64_t es = elemSize(t);
  if (size == 1) {
    for (int32_t i = 0; i < n; ++i)
      if (in[i] != out[i])
        std::memmove(out[i], in[i], counts[i] * es);
    return;
  }
  // Pack rank-major (every tensor's part g, for g = 0..size-1), so that one
  // reduce-scatter of `total` elements per rank serves the bucket.
  static thread_local std::vector<char> send, recv;
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  if ((int64_t)send.size() < total * size * es)
    send.resize(total * size * es);
  if ((int64_t)recv.size() < total * es)
    recv.resize(total * es);
  char *p = send.data();
  for (int g = 0; g < size; ++g)
    for (int32_t i = 0; i < n; ++i) {
      std::memcpy(p, static_cast<const char *>(in[i]) + g * counts[i] * es, counts[i] * es);
      p += counts[i] * es;
    }
  Comm::Request r = gComm->reduceScatterSum(axisOf(group), send.data(), recv.data(), total,
                                            commTypeOf(t));
  waitOrAbort(r, "reduce-scatter of a gradient bucket");
  p = recv.data();
  for (int32_t i = 0; i < n; ++i) {
    unpackReduced(t, p, out[i], counts[i], reduce == CollReduce::Mean, size);
    p += counts[i] * es;
  }
}

void allGatherBucketImpl(Group group, DT t, int64_t parts, int32_t n, const void *const *in,
                         void *const *out, const int64_t *counts) {
  if (t != DT::I64) // a concatenation: the expert ids of expert parallelism too
    checkCollectiveType(t, "all_gather");
  int size = zeroGroupSize(group, parts, "all_gather");
  int64_t es = elemSize(t);
  if (size == 1) {
    for (int32_t i = 0; i < n; ++i)
      if (in[i] != out[i])
        std::memmove(out[i], in[i], counts[i] * es);
    return;
  }
  static thread_local std::vector<char> send, recv;
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  if ((int64_t)send.size() < total * es)
    send.resize(total * es);
  if ((int64_t)recv.size() < total * size * es)
    recv.resize(total * size * es);
  char *p = send.data();
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(p, in[i], counts[i] * es);
    p += counts[i] * es;
  }
  Comm::Request r = gComm->allGather(axisOf(group), send.data(), recv.data(), total,
                                     commTypeOf(t));
  waitOrAbort(r, group == Group::EP ? "all-gather of the expert group's tokens"
                                     : "all-gather of updated parameter parts");
  p = recv.data();
  for (int g = 0; g < size; ++g)
    for (int32_t i = 0; i < n; ++i) {
      std::memcpy(static_cast<char *>(out[i]) + g * counts[i] * es, p, counts[i] * es);
      p += counts[i] * es;
    }
}

void localShard(Group group, DT t, int64_t parts, const void *in, void *out, int64_t count) {
  int size = zeroGroupSize(group, parts, "local_shard");
  int rank = size == 1 ? 0 : gComm->groupRank(axisOf(group));
  int64_t es = elemSize(t);
  std::memmove(out, static_cast<const char *>(in) + rank * count * es, count * es);
}

namespace {
/// expertAllToAll's two-level form: every row goes from its source rank
/// to the rank of its source's node with its destination's local index
/// (within the node), then to its destination (across nodes, among the
/// ranks of one local index). All rows are listed in one order (group rank
/// i, then row s), which fixes the order of every message, so no counts are
/// exchanged. `src`/`dst` give each row's ranks, `from`/`to` its place in
/// `in` at the source and in `out` at the destination (rows of rowBytes).
void twoLevelExchange(Axis axis, const Comm::NodeGroups &g, int me, DT t, int64_t rows,
                      int64_t rowBytes, const std::vector<int> &src,
                      const std::vector<int> &dst, const std::vector<int64_t> &from,
                      const std::vector<int64_t> &to, const char *in, char *out) {
  auto gateway = [&](int64_t r) { return g.members[g.nodeOf[src[r]]][g.localOf[dst[r]]]; };
  const int64_t elems = rowBytes / elemSize(t);
  // Within the node: send my rows by gateway (local index), receive the
  // rows I forward by source (local index); both in the global order.
  std::vector<int64_t> sc1(g.perNode, 0), rc1(g.perNode, 0), sc2(g.nodes, 0), rc2(g.nodes, 0);
  std::vector<int64_t> forward; // rows I forward, in receive order
  for (int64_t r = 0; r < rows; ++r) {
    const int gw = gateway(r);
    if (src[r] == me)
      ++sc1[g.localOf[gw]];
    if (gw == me)
      ++rc1[g.localOf[src[r]]];
  }
  std::vector<std::vector<int64_t>> bySource(g.perNode);
  for (int64_t r = 0; r < rows; ++r)
    if (gateway(r) == me)
      bySource[g.localOf[src[r]]].push_back(r);
  for (const std::vector<int64_t> &b : bySource)
    forward.insert(forward.end(), b.begin(), b.end());
  static thread_local std::vector<char> send1, recv1, send2, recv2;
  send1.resize(static_cast<size_t>(std::max<int64_t>(1, rows) * rowBytes));
  std::vector<int64_t> at(g.perNode, 0);
  for (int l = 1; l < g.perNode; ++l)
    at[l] = at[l - 1] + sc1[l - 1];
  for (int64_t r = 0; r < rows; ++r)
    if (src[r] == me)
      std::memcpy(send1.data() + at[g.localOf[gateway(r)]]++ * rowBytes, in + from[r] * rowBytes,
                  rowBytes);
  recv1.resize(static_cast<size_t>(std::max<size_t>(1, forward.size()) * rowBytes));
  auto exchange = [&](bool across, std::vector<char> &s, std::vector<int64_t> &sc,
                      std::vector<char> &r, std::vector<int64_t> &rc, const char *what) {
    for (int64_t &c : sc)
      c *= elems;
    for (int64_t &c : rc)
      c *= elems;
    Comm::Request q =
        gComm->allToAllVLevel(axis, across, s.data(), sc.data(), r.data(), rc.data(),
                              commTypeOf(t));
    waitOrAbort(q, what);
  };
  exchange(false, send1, sc1, recv1, rc1, "all-to-all within the node (two-level)");
  // Across nodes: forward by destination node, receive by source node.
  std::vector<int64_t> place(static_cast<size_t>(rows), -1); // row -> index in recv1
  for (size_t k = 0; k < forward.size(); ++k)
    place[forward[k]] = static_cast<int64_t>(k);
  std::vector<std::vector<int64_t>> byNode(g.nodes), arriving(g.nodes);
  for (int64_t r = 0; r < rows; ++r) {
    if (gateway(r) == me)
      byNode[g.nodeOf[dst[r]]].push_back(r);
    if (dst[r] == me)
      arriving[g.nodeOf[src[r]]].push_back(r);
  }
  send2.resize(static_cast<size_t>(std::max<size_t>(1, forward.size()) * rowBytes));
  char *p = send2.data();
  for (int b = 0; b < g.nodes; ++b) {
    sc2[b] = static_cast<int64_t>(byNode[b].size());
    for (int64_t r : byNode[b]) {
      std::memcpy(p, recv1.data() + place[r] * rowBytes, rowBytes);
      p += rowBytes;
    }
  }
  int64_t incoming = 0;
  for (int a = 0; a < g.nodes; ++a)
    incoming += rc2[a] = static_cast<int64_t>(arriving[a].size());
  recv2.resize(static_cast<size_t>(std::max<int64_t>(1, incoming) * rowBytes));
  exchange(true, send2, sc2, recv2, rc2, "all-to-all across nodes (two-level)");
  p = recv2.data();
  for (int a = 0; a < g.nodes; ++a)
    for (int64_t r : arriving[a]) {
      std::memcpy(out + to[r] * rowBytes, p, rowBytes);
      p += rowBytes;
    }
}
} // namespace

void expertAllToAll(Group group, DT t, bool combine, int64_t parts, const void *idsData,
                    int64_t S, int64_t row, int64_t perRank, int64_t shadowSlots,
                    const void *in, void *out, bool hierarchical, int64_t compact) {
  const int64_t *ids = static_cast<const int64_t *>(idsData); // i64
  checkCollectiveType(t, "all_to_all");
  const int size = zeroGroupSize(group, parts, "all_to_all");
  const int me = size == 1 ? 0 : gComm->groupRank(axisOf(group));
  const int64_t rowBytes = row * elemSize(t), experts = perRank * parts;
  if (!combine && shadowSlots == 0) // (with shadowing the plan saw the ids)
    recordExpertRows(ids, size * S, experts);
  auto owner = [&](int64_t i, int64_t s) {
    return rowOwner(ids, S, perRank, size, shadowSlots, i, s);
  };
  const Comm::NodeGroups *nodes =
      hierarchical && size > 1 ? gComm->nodeGroups(axisOf(group)) : nullptr;
  if (nodes && nodes->nodes > 1) {
    // Every row of the group that an expert computes (not dropped):
    // dispatch from rank i (its row s) to the expert's rank (slot i*S + s);
    // combine the reverse.
    std::vector<int> src, dst;
    std::vector<int64_t> from, to;
    int64_t counted = 0; // this rank's rows so far (compact places)
    for (int i = 0; i < size; ++i)
      for (int64_t s = 0; s < S; ++s) {
        const int o = static_cast<int>(owner(i, s));
        if (o < 0)
          continue;
        // The row's place on its expert's rank (counted there only).
        const int64_t r = o == me ? expertRowPlace(i, S, s, compact, counted) : i * S + s;
        src.push_back(combine ? o : i);
        dst.push_back(combine ? i : o);
        from.push_back(combine ? r : s);
        to.push_back(combine ? s : r);
      }
    std::memset(out, 0,
                static_cast<size_t>((combine ? S : compact > 0 ? compact : size * S) * rowBytes));
    twoLevelExchange(axisOf(group), *nodes, me, t, static_cast<int64_t>(src.size()), rowBytes,
                     src, dst, from, to, static_cast<const char *>(in),
                     static_cast<char *>(out));
    return;
  }
  RowExchange x = planRowExchange(ids, size, me, S, perRank, shadowSlots, combine, compact);
  static thread_local std::vector<char> send, recv;
  send.resize(x.sendRows.size() * rowBytes);
  recv.resize(x.recvRows.size() * rowBytes);
  packRows(x, in, send.data(), rowBytes);
  if (size == 1) {
    recv = send;
  } else {
    for (int i = 0; i < size; ++i) {
      x.sendCounts[i] *= row;
      x.recvCounts[i] *= row;
    }
    Comm::Request r = gComm->allToAllV(axisOf(group), send.data(), x.sendCounts.data(),
                                       recv.data(), x.recvCounts.data(), commTypeOf(t));
    waitOrAbort(r, combine ? "all-to-all combining the experts' rows"
                           : "all-to-all dispatching tokens to their experts");
  }
  unpackRows(x, recv.data(), out, rowBytes, combine ? S : compact > 0 ? compact : size * S);
}

int64_t detail::rowOwner(const int64_t *ids, int64_t S, int64_t perRank, int size,
                         int64_t shadowSlots, int64_t i, int64_t s) {
  const int64_t experts = perRank * size, e = ids[i * S + s];
  if (e == -1)
    return -1; // dropped (merak.expert_capacity): no rank computes it
  // A shadow copy's id (expert_shadow_plan) names a slot of the row's own rank.
  if (e < 0 || e >= experts + size * shadowSlots ||
      (e >= experts && (e - experts) / shadowSlots != i))
    fatal(("all_to_all: expert id " + std::to_string(e) + " of row " + std::to_string(s) +
           " of group rank " + std::to_string(i) + " out of range [0, " +
           std::to_string(experts) + ")" +
           (shadowSlots ? " or rank " + std::to_string(i) + "'s shadow slots" : ""))
              .c_str());
  return e < experts ? e / perRank : i;
}

int64_t detail::expertRowPlace(int64_t i, int64_t S, int64_t s, int64_t compact,
                               int64_t &counted) {
  if (compact <= 0)
    return i * S + s;
  if (counted == compact)
    fatal(("all_to_all: more than the " + std::to_string(compact) +
           " compact rows of an expert capacity reach one rank")
              .c_str());
  return counted++;
}

RowExchange detail::planRowExchange(const int64_t *ids, int size, int me, int64_t S,
                                    int64_t perRank, int64_t shadowSlots, bool combine,
                                    int64_t compact) {
  auto owner = [&](int64_t i, int64_t s) {
    return rowOwner(ids, S, perRank, size, shadowSlots, i, s);
  };
  // Dispatch sends this rank's rows to their experts' ranks and receives
  // from every rank i its rows of this rank's experts; combine reverses it.
  // Either way a message holds rows in increasing s, blocks in rank order.
  RowExchange x;
  x.sendCounts.assign(size, 0);
  x.recvCounts.assign(size, 0);
  int64_t counted = 0; // this rank's rows so far (compact places)
  for (int i = 0; i < size; ++i)
    for (int64_t s = 0; s < S; ++s) {
      const bool mineThere = owner(me, s) == i, theirsHere = owner(i, s) == me;
      const int64_t here = theirsHere ? expertRowPlace(i, S, s, compact, counted) : -1;
      if (combine ? theirsHere : mineThere) {
        ++x.sendCounts[i];
        x.sendRows.push_back(combine ? here : s);
      }
      if (combine ? mineThere : theirsHere) {
        ++x.recvCounts[i];
        x.recvRows.push_back(combine ? s : here);
      }
    }
  return x;
}

int detail::shadowSlotOwner(const int64_t *slots, int64_t j, int64_t perRank, int64_t parts) {
  const int64_t e = slots[j];
  if (e < -1 || e >= perRank * parts)
    fatal(("expert_shadow: slot " + std::to_string(j) + " names expert " + std::to_string(e) +
           ", out of range [0, " + std::to_string(perRank * parts) + ")")
              .c_str());
  return e < 0 ? -1 : static_cast<int>(e / perRank);
}

void expertShadow(Group group, DT t, bool reduce, int64_t parts, const void *slotsData,
                  int64_t M, int64_t perRank, int64_t matrix, const void *in, void *out) {
  const int64_t *slots = static_cast<const int64_t *>(slotsData);
  checkCollectiveType(t, "expert_shadow");
  const int size = zeroGroupSize(group, parts, "expert_shadow");
  const int me = size == 1 ? 0 : gComm->groupRank(axisOf(group));
  const size_t bytes = static_cast<size_t>(matrix * elemSize(t));
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  auto owner = [&](int64_t j) { return shadowSlotOwner(slots, j, perRank, parts); };
  if (!reduce) { // each used slot from its owner's rows
    std::vector<Comm::Request> requests;
    for (int64_t j = 0; j < M; ++j) {
      const int from = owner(j);
      char *slot = dst + j * bytes;
      if (from < 0) {
        std::memset(slot, 0, bytes);
        continue;
      }
      if (from == me)
        std::memcpy(slot, src + (slots[j] - me * perRank) * bytes, bytes);
      if (size > 1)
        requests.push_back(gComm->broadcast(axisOf(group), slot, matrix, commTypeOf(t), from));
    }
    for (Comm::Request &r : requests)
      waitOrAbort(r, "broadcasting a shadowed expert's weights");
    return;
  }
  std::memset(dst, 0, static_cast<size_t>(perRank) * bytes);
  if (std::all_of(slots, slots + M, [](int64_t e) { return e < 0; }))
    return; // nothing shadowed (the same plan on every rank): no message
  static thread_local std::vector<char> sum;
  sum.assign(src, src + M * bytes);
  if (size > 1) {
    Comm::Request r = gComm->allReduceSum(axisOf(group), sum.data(), M * matrix, commTypeOf(t));
    waitOrAbort(r, "reducing shadowed experts' gradients to their owners");
  }
  for (int64_t j = 0; j < M; ++j)
    if (owner(j) == me)
      std::memcpy(dst + (slots[j] - me * perRank) * bytes, sum.data() + j * bytes, bytes);
}

void groupRank(Group group, void *out) {
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  *static_cast<int64_t *>(out) = size == 1 ? 0 : gComm->groupRank(axisOf(group));
}

namespace {
/// Per row (double): the global max m, the global sum of exp(x - m) s and
/// the label's logit z (0 on ranks without it; summed). Labels are checked
/// against the global class count.
/// The columns of this rank's shard [lo, lo + n) that are real classes
/// (`classes` < 0: all).
int64_t validColumns(int64_t lo, int64_t n, int64_t classes) {
  return classes < 0 ? n : std::max<int64_t>(0, std::min(n, classes - lo));
}

template <typename T, typename I>
void vocabStats(Group group, const T *x, int64_t rows, int64_t n, const I *lab, bool hasIgnore,
                int64_t ignoreIndex, int64_t classes, std::vector<double> &m,
                std::vector<double> &sz, int64_t &counted) {
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  int rank = size == 1 ? 0 : gComm->groupRank(axisOf(group));
  const int64_t lo = rank * n, global = classes < 0 ? size * n : classes;
  const int64_t nv = validColumns(lo, n, classes);
  m.assign(rows, -INFINITY);
  sz.assign(2 * rows, 0.0);
  counted = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t l = lab[i];
    if (!(hasIgnore && l == ignoreIndex)) {
      if (l < 0 || l >= global) {
        std::string msg = "cross_entropy: label " + std::to_string(l) + " out of range [0, " +
                          std::to_string(global) + ")";
        fatal(msg.c_str());
      }
      ++counted;
    }
    for (int64_t j = 0; j < nv; ++j)
      m[i] = std::max(m[i], static_cast<double>(x[i * n + j]));
  }
  const void *in[1] = {m.data()};
  void *out[1] = {m.data()};
  int64_t cnt[1] = {rows};
  if (rows)
    allReduceBucketImpl(group, CollReduce::Max, DT::F64, 1, in, out, cnt);
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < nv; ++j)
      s += std::exp(static_cast<double>(x[i * n + j]) - m[i]);
    sz[2 * i] = s;
    const int64_t l = lab[i] - lo;
    if (!(hasIgnore && lab[i] == ignoreIndex) && l >= 0 && l < nv)
      sz[2 * i + 1] = static_cast<double>(x[i * n + l]);
  }
  in[0] = sz.data();
  out[0] = sz.data();
  cnt[0] = 2 * rows;
  if (rows)
    allReduceBucketImpl(group, CollReduce::Sum, DT::F64, 1, in, out, cnt);
}
} // namespace

void vocabCrossEntropy(Group group, DT t, const void *logits, int64_t rows, int64_t n,
                       DT labT, const void *labels, int32_t reduction, bool hasIgnore,
                       int64_t ignoreIndex, int64_t classes, void *y) {
  dispatchFloat(t, "cross_entropy: float logits only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(labT, "cross_entropy: labels must be i64 or i32", [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *lab = static_cast<const I *>(labels);
      T *py = static_cast<T *>(y);
      std::vector<double> m, sz;
      int64_t counted = 0;
      vocabStats(group, static_cast<const T *>(logits), rows, n, lab, hasIgnore, ignoreIndex,
                 classes, m, sz, counted);
      double total = 0.0;
      for (int64_t i = 0; i < rows; ++i) {
        double v = 0.0;
        if (!(hasIgnore && lab[i] == ignoreIndex))
          v = m[i] + std::log(sz[2 * i]) - sz[2 * i + 1];
        if (reduction == 0)
          py[i] = static_cast<T>(v);
        total += v;
      }
      if (reduction != 0)
        py[0] = static_cast<T>(reduction == 1 ? total / counted : total);
    });
  });
}

void vocabCrossEntropyGrad(Group group, DT t, const void *logits, int64_t rows, int64_t n,
                           DT labT, const void *labels, const void *g, int32_t reduction,
                           bool hasIgnore, int64_t ignoreIndex, int64_t classes,
                           void *dlogits) {
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  int rank = size == 1 ? 0 : gComm->groupRank(axisOf(group));
  dispatchFloat(t, "cross_entropy_grad: float logits only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(labT, "cross_entropy_grad: labels must be i64 or i32", [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *lab = static_cast<const I *>(labels);
      const T *px = static_cast<const T *>(logits);
      const T *pg = static_cast<const T *>(g);
      T *pd = static_cast<T *>(dlogits);
      std::vector<double> m, sz;
      int64_t counted = 0;
      vocabStats(group, px, rows, n, lab, hasIgnore, ignoreIndex, classes, m, sz, counted);
      const int64_t nv = validColumns(rank * n, n, classes);
      const double scale = reduction == 0   ? 0.0
                           : reduction == 1 ? static_cast<double>(pg[0]) / counted
                                            : static_cast<double>(pg[0]);
      for (int64_t i = 0; i < rows; ++i) {
        if (hasIgnore && lab[i] == ignoreIndex) {
          for (int64_t j = 0; j < n; ++j)
            pd[i * n + j] = T(0);
          continue;
        }
        const double w = reduction == 0 ? static_cast<double>(pg[i]) : scale;
        const double inv = 1.0 / sz[2 * i];
        const int64_t l = lab[i] - rank * n;
        for (int64_t j = 0; j < nv; ++j) {
          const double p = std::exp(static_cast<double>(px[i * n + j]) - m[i]) * inv;
          pd[i * n + j] = static_cast<T>((p - (j == l ? 1.0 : 0.0)) * w);
        }
        for (int64_t j = nv; j < n; ++j) // padding classes
          pd[i * n + j] = T(0);
      }
    });
  });
}

} // namespace merak::rt::cpu
