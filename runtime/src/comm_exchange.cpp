//===- comm_exchange.cpp - Comm's collectives and messages ---------------===//
//
// The non-blocking collectives and point-to-point messages of Comm (see
// merak_rt/comm.h), including expert parallelism's all-to-all in one or two
// levels; set-up, waits and aborts are in comm.cpp.
//
//===----------------------------------------------------------------------===//
#include "comm_impl.h"

#include <algorithm>
#include <cstdlib>

namespace merak::rt {

/// In-place all-reduce with `op`, in chunks of at most impl.chunk elements
/// under one request.
static Comm::Request allReduceWith(Comm::Impl &impl, Axis a, void *buf, int64_t count,
                                   CommType t, MPI_Op op) {
  impl.checkCount(count, "all-reduce");
  if (count == 0)
    return Comm::Request{};
  const int64_t es = commTypeSize(t);
  int id = impl.newSlot(a);
  for (int64_t o = 0; o < count; o += impl.chunk) {
    int k = static_cast<int>(std::min(impl.chunk, count - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, static_cast<char *>(buf) + o * es, k,
                            mpiType(t), op, impl.comm(a), &q);
    impl.add(id, rc, q, "MPI_Iallreduce");
  }
  return Comm::Request{id};
}

Comm::Request Comm::allReduceSum(Axis a, void *buf, int64_t count,
                                 CommType t) {
  return allReduceWith(*impl_, a, buf, count, t, reduceOp(t, false));
}

Comm::Request Comm::allReduceMax(Axis a, void *buf, int64_t count,
                                 CommType t) {
  return allReduceWith(*impl_, a, buf, count, t, reduceOp(t, true));
}

Comm::Request Comm::allGather(Axis a, const void *send, void *recv,
                              int64_t countPerRank, CommType t) {
  impl_->checkCount(countPerRank, "all-gather");
  if (countPerRank == 0)
    return Request{};
  const int64_t es = commTypeSize(t);
  const MPI_Datatype dt = mpiType(t);
  char *r = static_cast<char *>(recv);
  const char *s = static_cast<const char *>(send);
  const bool inPlace = s == r + groupRank(a) * countPerRank * es;
  int id = impl_->newSlot(a);
  if (countPerRank <= impl_->chunk) {
    int k = static_cast<int>(countPerRank);
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(inPlace ? MPI_IN_PLACE : s, k, dt, r, k, dt,
                            impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Iallgather");
    return Request{id};
  }
  // Chunk [o, o+k) of every rank's block: received through a datatype of k
  // elements whose extent is a whole block, so the group ranks' pieces land
  // countPerRank elements apart. (In place, MPI takes this rank's piece from
  // recv + o + groupRank * countPerRank: exactly its slot.)
  for (int64_t o = 0; o < countPerRank; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, countPerRank - o));
    MPI_Datatype block = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
    MPI_Type_contiguous(k, dt, &block);
    MPI_Type_create_resized(block, 0, static_cast<MPI_Aint>(countPerRank * es),
                            &strided);
    MPI_Type_commit(&strided);
    MPI_Type_free(&block);
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(inPlace ? MPI_IN_PLACE : s + o * es, k, dt,
                            r + o * es, 1, strided, impl_->comm(a), &q);
    // Freeing a datatype does not affect operations already using it.
    MPI_Type_free(&strided);
    impl_->add(id, rc, q, "MPI_Iallgather");
  }
  return Request{id};
}

Comm::Request Comm::reduceScatterSum(Axis a, const void *send, void *recv,
                                     int64_t countPerRank, CommType t) {
  impl_->checkCount(countPerRank, "reduce-scatter");
  if (countPerRank == 0)
    return Request{};
  const int64_t es = commTypeSize(t);
  const MPI_Datatype dt = mpiType(t);
  const int n = groupSize(a), me = groupRank(a);
  const char *s = static_cast<const char *>(send);
  char *r = static_cast<char *>(recv);
  int id = impl_->newSlot(a);
  if (countPerRank * n <= impl_->chunk) {
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter_block(s, r, static_cast<int>(countPerRank),
                                       dt, reduceOp(t, false), impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Ireduce_scatter_block");
    return Request{id};
  }
  // Huge buffers: one reduction per (chunk, destination), each to the group
  // rank that owns the block (no extra memory; still a fixed schedule).
  for (int64_t o = 0; o < countPerRank; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, countPerRank - o));
    for (int root = 0; root < n; ++root) {
      MPI_Request q = MPI_REQUEST_NULL;
      int rc = MPI_Ireduce(s + (root * countPerRank + o) * es,
                           root == me ? r + o * es : nullptr, k, dt, reduceOp(t, false),
                           root, impl_->comm(a), &q);
      impl_->add(id, rc, q, "MPI_Ireduce");
    }
  }
  return Request{id};
}

/// MPI_Ialltoallv on `comm` (n ranks), reported as an exchange over `a`.
static Comm::Request allToAllVOn(Comm::Impl &impl, Axis a, MPI_Comm comm, int n,
                                 const void *send, const int64_t *sendCounts, void *recv,
                                 const int64_t *recvCounts, CommType t) {
  int id = impl.newSlot(a);
  std::vector<int> &arrays = impl.slots[id].counts;
  arrays.assign(4 * static_cast<size_t>(n), 0);
  int *sc = arrays.data(), *sd = sc + n, *rc = sd + n, *rd = rc + n;
  int64_t sendAt = 0, recvAt = 0;
  for (int g = 0; g < n; ++g) {
    impl.checkCount(sendCounts[g], "all-to-all");
    impl.checkCount(recvCounts[g], "all-to-all");
    if (sendAt + sendCounts[g] > INT_MAX || recvAt + recvCounts[g] > INT_MAX)
      impl.abortJob(std::string("all-to-all over ") + axisName(a) +
                          ": more than 2^31 - 1 elements in one exchange (use more ranks "
                          "or smaller micro-batches)",
                      1);
    sc[g] = static_cast<int>(sendCounts[g]);
    sd[g] = static_cast<int>(sendAt);
    rc[g] = static_cast<int>(recvCounts[g]);
    rd[g] = static_cast<int>(recvAt);
    sendAt += sendCounts[g];
    recvAt += recvCounts[g];
  }
  MPI_Request q = MPI_REQUEST_NULL;
  const MPI_Datatype dt = mpiType(t);
  int code = MPI_Ialltoallv(send, sc, sd, dt, recv, rc, rd, dt, comm, &q);
  impl.add(id, code, q, "MPI_Ialltoallv");
  return Comm::Request{id};
}

Comm::Request Comm::allToAllV(Axis a, const void *send, const int64_t *sendCounts, void *recv,
                              const int64_t *recvCounts, CommType t) {
  return allToAllVOn(*impl_, a, impl_->comm(a), groupSize(a), send, sendCounts, recv,
                     recvCounts, t);
}


const Comm::NodeGroups *Comm::nodeGroups(Axis a) {
  auto found = impl_->levels.find(a);
  if (found != impl_->levels.end())
    return found->second.uniform ? &found->second.groups : nullptr;
  Impl::Levels &l = impl_->levels[a];
  int node = impl_->nodeLeader;
  if (const char *s = std::getenv("MERAK_RANKS_PER_NODE"); s && std::atoi(s) > 0)
    node = impl_->rank / std::atoi(s);
  const int n = groupSize(a), me = groupRank(a);
  std::vector<int> ids(n);
  MPI_Allgather(&node, 1, MPI_INT, ids.data(), 1, MPI_INT, impl_->comm(a));
  NodeGroups &g = l.groups;
  std::map<int, int> index; // node id -> node number, by first group rank
  g.nodeOf.resize(n);
  g.localOf.resize(n);
  for (int r = 0; r < n; ++r) {
    auto [it, added] = index.try_emplace(ids[r], static_cast<int>(index.size()));
    if (added)
      g.members.emplace_back();
    g.nodeOf[r] = it->second;
    g.localOf[r] = static_cast<int>(g.members[it->second].size());
    g.members[it->second].push_back(r);
  }
  g.nodes = static_cast<int>(g.members.size());
  g.perNode = static_cast<int>(g.members[0].size());
  l.uniform = std::all_of(g.members.begin(), g.members.end(),
                          [&](const std::vector<int> &m) { return (int)m.size() == g.perNode; });
  // Every rank knows every node's size, so all agree on `uniform`.
  if (l.uniform) {
    MPI_Comm_split(impl_->comm(a), g.nodeOf[me], me, &l.within);
    MPI_Comm_split(impl_->comm(a), g.localOf[me], g.nodeOf[me], &l.across);
  }
  return l.uniform ? &g : nullptr;
}

Comm::Request Comm::allToAllVLevel(Axis a, bool acrossNodes, const void *send,
                                   const int64_t *sendCounts, void *recv,
                                   const int64_t *recvCounts, CommType t) {
  const NodeGroups *g = nodeGroups(a);
  if (!g)
    impl_->abortJob(std::string("internal error: a two-level all-to-all over ") + axisName(a) +
                        " whose nodes hold different numbers of its ranks",
                    1);
  Impl::Levels &l = impl_->levels[a];
  return allToAllVOn(*impl_, a, acrossNodes ? l.across : l.within,
                     acrossNodes ? g->nodes : g->perNode, send, sendCounts, recv, recvCounts, t);
}

Comm::Request Comm::broadcast(Axis a, void *buf, int64_t count, CommType t,
                              int rootGroupRank) {
  impl_->checkCount(count, "broadcast");
  impl_->checkPeer(a, rootGroupRank, "broadcast");
  if (count == 0)
    return Request{};
  const int64_t es = commTypeSize(t);
  int id = impl_->newSlot(a);
  for (int64_t o = 0; o < count; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, count - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(static_cast<char *>(buf) + o * es, k, mpiType(t),
                        rootGroupRank, impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Ibcast");
  }
  return Request{id};
}

namespace {
/// A point-to-point message as `chunk`-sized MPI messages: chunks of one
/// message pair up in order, since MPI does not overtake messages between
/// the same ranks with the same tag and communicator.
Comm::Request pointToPoint(Comm::Impl &impl, Axis a, int peer, char *buf, int64_t bytes,
                           int tag, bool sending) {
  const char *op = sending ? "send" : "recv";
  impl.checkCount(bytes, op);
  impl.checkPeer(a, peer, op);
  if (tag < 0 || tag > 32767)
    impl.abortJob("internal error: " + std::string(op) + " with tag " + std::to_string(tag) +
                      " outside [0, 32767]",
                  1);
  if (bytes == 0)
    return Comm::Request{};
  int id = impl.newSlot(a);
  for (int64_t o = 0; o < bytes; o += impl.chunk) {
    int k = static_cast<int>(std::min(impl.chunk, bytes - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = sending ? MPI_Isend(buf + o, k, MPI_BYTE, peer, tag, impl.comm(a), &q)
                     : MPI_Irecv(buf + o, k, MPI_BYTE, peer, tag, impl.comm(a), &q);
    impl.add(id, rc, q, sending ? "MPI_Isend" : "MPI_Irecv");
  }
  return Comm::Request{id};
}
} // namespace

Comm::Request Comm::send(Axis a, int peerGroupRank, const void *buf, int64_t bytes, int tag) {
  // MPI_Isend only reads the buffer.
  return pointToPoint(*impl_, a, peerGroupRank,
                      const_cast<char *>(static_cast<const char *>(buf)), bytes, tag, true);
}

Comm::Request Comm::recv(Axis a, int peerGroupRank, void *buf, int64_t bytes, int tag) {
  return pointToPoint(*impl_, a, peerGroupRank, static_cast<char *>(buf), bytes, tag, false);
}

} // namespace merak::rt
