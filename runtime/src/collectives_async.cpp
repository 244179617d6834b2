//===- collectives_async.cpp - Started collectives and their waits --------===//
//
// merak.*_start / merak.wait (see merak_rt/collectives.h): a table of
// request slots indexed by the compiler's slot numbers, each keeping its
// pack buffers between steps.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/collectives.h"

#include "merak_rt/comm.h"

#include "collective_pack.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace merak::rt::cpu {
using detail::checkCollectiveType;
using detail::commTypeOf;
using detail::unpackReduced;
using detail::packRows;
using detail::planRowExchange;
using detail::RowExchange;
using detail::unpackRows;

namespace {
enum class Kind { AllReduce, ReduceScatter, AllGather, AllToAll };

struct Slot {
  bool active = false;
  Kind kind = Kind::AllReduce;
  CollReduce reduce = CollReduce::Sum;
  DT t = DT::F32;
  int size = 1;
  std::vector<char> send, recv;
  std::vector<int64_t> counts;
  /// AllToAll: where the received rows go, their bytes, the output's rows.
  RowExchange rows;
  int64_t rowBytes = 0, outRows = 0;
  Comm::Request req;
  char what[96] = {0};
};

std::vector<Slot> gSlots;
/// Slots started and not yet waited for (collectiveProgress polls them).
std::vector<int32_t> gInFlight;

const char *kindName(Kind k) {
  switch (k) {
  case Kind::AllReduce:
    return "all-reduce";
  case Kind::ReduceScatter:
    return "reduce-scatter";
  case Kind::AllGather:
    return "all-gather";
  case Kind::AllToAll:
    return "all-to-all";
  }
  return "collective";
}

void grow(std::vector<char> &v, int64_t bytes) {
  if ((int64_t)v.size() < bytes)
    v.resize(bytes);
}

/// The slot for a new collective: checks and records what its wait needs.
Slot &begin(int32_t slot, Kind kind, Group group, CollReduce reduce, DT t, int64_t parts,
            int32_t n, const int64_t *counts, int64_t &total) {
  checkCollectiveType(t, kindName(kind));
  if (slot < 0)
    fatal("internal error: negative request slot");
  if (slot >= (int32_t)gSlots.size())
    gSlots.resize(slot + 1);
  Slot &s = gSlots[slot];
  if (s.active)
    fatal(("internal error: request slot " + std::to_string(slot) +
           " started again before its wait")
              .c_str());
  Comm *comm = communicator();
  s.size = comm ? comm->groupSize(axisOf(group)) : 1;
  if (kind != Kind::AllReduce && parts != s.size)
    fatal((std::string(kindName(kind)) + ": compiled for " + std::to_string(parts) +
           " ranks, but the group has " + std::to_string(s.size))
              .c_str());
  s.kind = kind;
  s.reduce = reduce;
  s.t = t;
  s.counts.assign(counts, counts + n);
  total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  std::snprintf(s.what, sizeof s.what, "started %s of %d tensors (%lld elements)",
                kindName(kind), (int)n, (long long)total);
  s.active = true;
  gInFlight.push_back(slot);
  return s;
}

/// out = src (count elements), divided by the group size for a mean.
void unpackOne(const Slot &s, const char *src, void *out, int64_t count) {
  unpackReduced(s.t, src, out, count, s.reduce == CollReduce::Mean, s.size);
}
} // namespace

void allReduceStartImpl(int32_t slot, Group group, CollReduce reduce, DT t, int32_t n,
                        const void *const *in, const int64_t *counts) {
  int64_t total = 0;
  Slot &s = begin(slot, Kind::AllReduce, group, reduce, t, 1, n, counts, total);
  const int64_t es = elemSize(t);
  grow(s.send, total * es);
  char *p = s.send.data();
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(p, in[i], counts[i] * es);
    p += counts[i] * es;
  }
  s.req = {};
  if (s.size > 1) {
    Comm *comm = communicator();
    s.req = reduce == CollReduce::Max
                ? comm->allReduceMax(axisOf(group), s.send.data(), total, commTypeOf(t))
                : comm->allReduceSum(axisOf(group), s.send.data(), total, commTypeOf(t));
  }
}

void reduceScatterStartImpl(int32_t slot, Group group, CollReduce reduce, DT t, int64_t parts,
                            int32_t n, const void *const *in, const int64_t *counts) {
  int64_t total = 0;
  Slot &s = begin(slot, Kind::ReduceScatter, group, reduce, t, parts, n, counts, total);
  const int64_t es = elemSize(t);
  // Rank-major: every tensor's part g, for g = 0..size-1 (one message).
  grow(s.send, total * s.size * es);
  grow(s.recv, total * es);
  char *p = s.send.data();
  for (int g = 0; g < s.size; ++g)
    for (int32_t i = 0; i < n; ++i) {
      std::memcpy(p, static_cast<const char *>(in[i]) + g * counts[i] * es, counts[i] * es);
      p += counts[i] * es;
    }
  s.req = {};
  if (s.size > 1)
    s.req = communicator()->reduceScatterSum(axisOf(group), s.send.data(), s.recv.data(),
                                             total, commTypeOf(t));
}

void allGatherStartImpl(int32_t slot, Group group, DT t, int64_t parts, int32_t n,
                        const void *const *in, const int64_t *counts) {
  int64_t total = 0;
  Slot &s = begin(slot, Kind::AllGather, group, CollReduce::Sum, t, parts, n, counts, total);
  const int64_t es = elemSize(t);
  grow(s.send, total * es);
  grow(s.recv, total * s.size * es);
  char *p = s.send.data();
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(p, in[i], counts[i] * es);
    p += counts[i] * es;
  }
  s.req = {};
  if (s.size > 1)
    s.req = communicator()->allGather(axisOf(group), s.send.data(), s.recv.data(), total,
                                      commTypeOf(t));
}

void expertAllToAllStart(int32_t slot, Group group, DT t, bool combine, int64_t parts,
                         const void *idsData, int64_t S, int64_t row, int64_t perRank,
                         int64_t shadowSlots, const void *in, int64_t compact) {
  const int64_t *ids = static_cast<const int64_t *>(idsData);
  const int64_t outRows = combine ? S : compact > 0 ? compact : parts * S;
  int64_t count = outRows * row, total = 0;
  Slot &s = begin(slot, Kind::AllToAll, group, CollReduce::Sum, t, parts, 1, &count, total);
  const int me = s.size == 1 ? 0 : communicator()->groupRank(axisOf(group));
  if (!combine && shadowSlots == 0) // (with shadowing the plan saw the ids)
    recordExpertRows(ids, s.size * S, perRank * parts);
  s.rows = planRowExchange(ids, s.size, me, S, perRank, shadowSlots, combine, compact);
  s.rowBytes = row * elemSize(t);
  s.outRows = outRows;
  grow(s.send, static_cast<int64_t>(s.rows.sendRows.size()) * s.rowBytes);
  grow(s.recv, static_cast<int64_t>(s.rows.recvRows.size()) * s.rowBytes);
  packRows(s.rows, in, s.send.data(), s.rowBytes);
  std::snprintf(s.what, sizeof s.what, "started all-to-all %s",
                combine ? "combining the experts' rows" : "dispatching tokens to their experts");
  s.req = {};
  if (s.size == 1) {
    s.recv = s.send;
    return;
  }
  std::vector<int64_t> sendCounts(s.rows.sendCounts), recvCounts(s.rows.recvCounts);
  for (int i = 0; i < s.size; ++i) {
    sendCounts[i] *= row;
    recvCounts[i] *= row;
  }
  s.req = communicator()->allToAllV(axisOf(group), s.send.data(), sendCounts.data(),
                                    s.recv.data(), recvCounts.data(), commTypeOf(t));
}

void collectiveWaitImpl(int32_t slot, int32_t n, void *const *out) {
  if (slot < 0 || slot >= (int32_t)gSlots.size() || !gSlots[slot].active)
    fatal(("internal error: wait for request slot " + std::to_string(slot) +
           ", which was not started")
              .c_str());
  Slot &s = gSlots[slot];
  if (n != (int32_t)s.counts.size())
    fatal(("internal error: " + std::string(s.what) + " waited with " + std::to_string(n) +
           " results")
              .c_str());
  if (s.req.id >= 0) {
    Comm *comm = communicator();
    Status st = comm->wait(s.req, s.what);
    if (!st.ok())
      comm->abort(st.message(), 1);
  }
  const int64_t es = elemSize(s.t);
  const bool one = s.size == 1;
  const char *p = s.kind == Kind::AllReduce || one ? s.send.data() : s.recv.data();
  if (s.kind == Kind::AllToAll) {
    unpackRows(s.rows, s.recv.data(), out[0], s.rowBytes, s.outRows);
  } else if (s.kind == Kind::AllGather && !one) {
    for (int g = 0; g < s.size; ++g)
      for (int32_t i = 0; i < n; ++i) {
        std::memcpy(static_cast<char *>(out[i]) + g * s.counts[i] * es, p, s.counts[i] * es);
        p += s.counts[i] * es;
      }
  } else {
    for (int32_t i = 0; i < n; ++i) {
      unpackOne(s, p, out[i], s.counts[i]);
      p += s.counts[i] * es;
    }
  }
  s.active = false;
  for (size_t i = 0; i < gInFlight.size(); ++i)
    if (gInFlight[i] == slot) {
      gInFlight[i] = gInFlight.back();
      gInFlight.pop_back();
      break;
    }
}

void collectiveProgress() {
  Comm *comm = communicator();
  if (!comm)
    return;
  for (int32_t slot : gInFlight) {
    Slot &s = gSlots[slot];
    if (s.req.id >= 0)
      comm->test(s.req);
  }
}

} // namespace merak::rt::cpu
