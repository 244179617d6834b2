//===- comm.h - MPI communication for data/tensor/pipeline parallelism -*- C++ -*-===//
//
// The ranks of a job form a 3-D mesh pp x dp x tp. Rank layout (as
// Megatron-LM, tensor parallelism varies fastest, so a tensor-parallel group
// is consecutive ranks and usually shares a node):
//
//   rank = (pp_i * dp + dp_i) * tp + tp_i
//
// `Comm` owns MPI (MPI_Init_thread .. MPI_Finalize) and one communicator per
// axis: the PP group of a rank is the ranks with its (dp_i, tp_i), the DP
// group those with its (pp_i, tp_i), the TP group those with its
// (pp_i, dp_i); the group rank is the coordinate along that axis. World is
// a duplicate of MPI_COMM_WORLD, so the runtime's traffic never mixes with
// anything else.
//
// This header does not include <mpi.h> (generated programs include only
// runtime headers and are compiled without MPI's include path); MPI lives
// behind an opaque implementation in src/comm.cpp. Programs link MPI's C
// library (MERAK_RUNTIME_LINK_FLAGS in runtime/CMakeLists.txt).
//
// Threads: MPI is initialised with MPI_THREAD_FUNNELED; every Comm call
// must come from the thread that called init (OpenMP workers never call it).
//
// Operations are non-blocking: each returns a Request, which must be waited
// (wait/waitAll) before its buffers are read or reused. Every rank of a
// group must post the same collectives in the same order with the same
// counts and types (MPI's rule). Collectives on the same group are matched
// in posting order; point-to-point messages between the same pair with the
// same tag arrive in posting order.
//
// Determinism: sums are bitwise reproducible run to run for the same mesh,
// counts and Open MPI build and options. Non-blocking collectives go to
// Open MPI's coll/libnbc component, whose schedule (binomial tree,
// ring, or reduce-scatter + all-gather) is a fixed function of the group
// size, the count and the datatype -- never of timing -- and whose every
// algorithm reduces each element once and distributes that result, so all
// ranks of a group also receive bitwise-identical sums. (To pin the
// algorithm regardless, pass e.g. `--mca coll_libnbc_iallreduce_algorithm 1`
// to mpirun.) A different mesh or chunking may round differently.
//
// Large counts: MPI counts are `int`; buffers of more than INT_MAX elements
// (bytes, for send/recv) are split into chunks, each its own MPI operation
// under the same Request.
//
// Failure handling (Open MPI 4.1.4, measured with runtime/test/comm_test.py):
//  * A rank killed by a signal (SIGKILL, OOM killer): mpirun itself notices
//    the death, kills every other rank and exits non-zero (137) printing
//    "mpirun noticed that process rank R with PID ... exited on signal 9
//    (Killed)" -- about 1-3 s after the kill, long before our timeout.
//  * A rank that exits non-zero without MPI_Finalize (e.g. after printing a
//    Status error): mpirun aborts the job ("... 1 process returned a
//    non-zero exit code. Per user-direction, the job has been aborted.").
//  * A rank that is alive but never joins (hang, deadlock, SIGSTOP, a lost
//    node that mpirun cannot see): wait/waitAll poll with MPI_Test and, past
//    timeoutSeconds(), print "train: error: rank R: <what> on the <axis>
//    group did not complete within T s; the rank it waits for: rank S (pid
//    P, this host) is stopped | is not waiting on any communication | hangs
//    inside a communication (its last communication ended X s ago)" -- the
//    ranks of a node share progress stamps (src/heartbeat.h), so the rank
//    that stopped is named, not the ones that wait; a rank on another node
//    is named by its own node's ranks -- and MPI_Abort(MPI_COMM_WORLD, 1),
//    which makes mpirun end every rank.
//    (When several ranks time out at once, mpirun 4.1.4 may also print
//    "ORTE_ERROR_LOG: Data unpack would read past end of buffer ...
//    show_help.c": harmless noise from its help-message aggregation.)
//  Together, every rank of a job exits non-zero within timeoutSeconds()
//  (+ a few seconds) of any rank dying or hanging. Measured on one node with
//  3 ranks: SIGKILL -> job over in 1.5-1.8 s (exit 137); a rank that never
//  joins with MERAK_COMM_TIMEOUT=3 -> job over in 3.5 s (exit 1).
//  A rank must destroy its Comm (MPI_Finalize) before exiting 0, or mpirun
//  reports it as "exiting improperly".
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_COMM_H
#define MERAK_RT_COMM_H

#include "merak_rt/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace merak::rt {

/// ep (expert parallelism) folds into dp, as in Megatron-LM: it divides dp
/// and does not add ranks. The dp group splits into dp / ep "ep" groups of
/// ep consecutive dp ranks, which hold the experts between them; the ranks
/// at one position of every ep group form an "edp" (expert-data-parallel)
/// group, which holds the same experts and reduces their gradients.
struct MeshShape {
  int pp = 1, dp = 1, tp = 1, ep = 1;
  int size() const { return pp * dp * tp; }
};
struct MeshCoord {
  int pp = 0, dp = 0, tp = 0;
  /// Position within the ep group (dp % ep) and the ep group's index
  /// (dp / ep): the rank within the "ep" and within the "edp" group.
  int ep(const MeshShape &m) const { return dp % m.ep; }
  int edp(const MeshShape &m) const { return dp / m.ep; }
};
enum class Axis { World, PP, DP, TP, EP, EDP };

/// "world", "pp", "dp", "tp", "ep", "edp".
const char *axisName(Axis a);

/// rank = (pp_i * dp + dp_i) * tp + tp_i (tp varies fastest).
MeshCoord meshCoordOf(const MeshShape &m, int rank);
int meshRankOf(const MeshShape &m, const MeshCoord &c);

/// BF16 is bfloat16 (the upper 16 bits of a float32, as merak_rt/ops.h's
/// DT::BF16): its sums and maxima are computed in float and rounded to
/// nearest even once per combining step (a user-defined MPI operation).
enum class CommType { F32, F64, I64, BF16 };
/// Bytes of one element.
int commTypeSize(CommType t);

class Comm {
public:
  /// Initialises MPI (MPI_Init_thread, MPI_THREAD_FUNNELED) and builds the
  /// per-axis communicators (MPI_Comm_split). Works without mpirun (an MPI
  /// singleton: world size 1).
  ///
  /// When the world size differs from mesh.size() (or MERAK_COMM_TIMEOUT is
  /// not a positive number), MPI is finalised and world rank 0 returns the
  /// failed Result, e.g. "launched with 2 processes, but this program was
  /// compiled for dp=2 x tp=2 x pp=1 = 4 processes: run `mpirun -np 4 ...`";
  /// the caller prints it and exits 1, and mpirun then ends the other ranks,
  /// which never return from init (they exit 1 by themselves after 60 s if
  /// no launcher ends them). So only one copy of the message is printed.
  ///
  /// MPI can be initialised once per process: a second init after a Comm
  /// was destroyed fails.
  static Result<std::unique_ptr<Comm>> init(int *argc, char ***argv,
                                            MeshShape mesh);
  /// Waits for nothing: frees the communicators and calls MPI_Finalize
  /// (once; only if init initialised MPI). Requests must all be waited.
  ~Comm();
  Comm(const Comm &) = delete;
  Comm &operator=(const Comm &) = delete;

  int rank() const;
  int worldSize() const;
  /// This rank among the ranks on its node (MPI_COMM_TYPE_SHARED) and
  /// their number: a GPU program uses device localRank % device count.
  int localRank() const;
  int localSize() const;
  const MeshShape &mesh() const;
  MeshCoord coord() const;
  /// World: worldSize(); PP/DP/TP: the mesh extent along that axis.
  int groupSize(Axis a) const;
  /// World: rank(); PP/DP/TP: coord() along that axis.
  int groupRank(Axis a) const;

  /// A pending operation; id -1 is "nothing pending" (waits succeed at once).
  struct Request {
    int id = -1;
  };

  /// Sum over the group, in place (count elements of buf).
  Request allReduceSum(Axis a, void *buf, int64_t count, CommType t);
  /// Elementwise maximum over the group, in place (vocabulary parallelism).
  Request allReduceMax(Axis a, void *buf, int64_t count, CommType t);
  /// recv[g*countPerRank ..] = send of group rank g. send may be recv's own
  /// slot (recv + groupRank*countPerRank elements): in place.
  Request allGather(Axis a, const void *send, void *recv, int64_t countPerRank,
                    CommType t);
  /// Personalised exchange (MPI_Alltoallv): send holds, for each group rank
  /// g in order, sendCounts[g] elements for g; recv gets, for each g in
  /// order, recvCounts[g] elements from g. Both count arrays have groupSize
  /// entries and must agree across the group (g's sendCounts[me] ==
  /// my recvCounts[g]). Expert parallelism's token dispatch and combine.
  Request allToAllV(Axis a, const void *send, const int64_t *sendCounts, void *recv,
                    const int64_t *recvCounts, CommType t);
  /// recv (countPerRank) = sum over the group of send[groupRank*countPerRank
  /// ..] (send holds groupSize*countPerRank). send and recv must not overlap.
  Request reduceScatterSum(Axis a, const void *send, void *recv,
                           int64_t countPerRank, CommType t);
  /// A group's ranks by node, for two-level exchanges (MoNTA / Tutel's
  /// 2DH all-to-all). A rank's node is its world rank / MERAK_RANKS_PER_NODE
  /// when that variable is set (tests fake nodes so), else its MPI
  /// shared-memory node. nodeOf / localOf are indexed by group rank; nodes
  /// are numbered by their first group rank, a node's ranks by group rank.
  struct NodeGroups {
    int nodes = 1, perNode = 1;
    std::vector<int> nodeOf, localOf;
    std::vector<std::vector<int>> members; ///< [node][local] -> group rank
  };
  /// `a`'s node groups, built (collectively over `a`) on the first call;
  /// null when the nodes hold different numbers of `a`'s ranks.
  const NodeGroups *nodeGroups(Axis a);
  /// allToAllV among `a`'s ranks on this node (acrossNodes false; counts
  /// indexed by local index) or among `a`'s ranks with this local index on
  /// every node (acrossNodes true; counts indexed by node). Needs
  /// nodeGroups(a).
  Request allToAllVLevel(Axis a, bool acrossNodes, const void *send, const int64_t *sendCounts,
                         void *recv, const int64_t *recvCounts, CommType t);
  /// buf of every group rank = buf of group rank rootGroupRank.
  Request broadcast(Axis a, void *buf, int64_t count, CommType t,
                    int rootGroupRank);
  /// Point to point within a group (peer = group rank; may be this rank).
  /// tag in [0, 32767].
  Request send(Axis a, int peerGroupRank, const void *buf, int64_t bytes,
               int tag);
  Request recv(Axis a, int peerGroupRank, void *buf, int64_t bytes, int tag);

  /// Blocks until r completes (then r.id = -1). `what` names the operation
  /// for messages, e.g. "all-reduce of gradient bucket 3". Past
  /// timeoutSeconds() it prints the timeout message and aborts the job; an
  /// MPI error is returned as a failed Status naming the rank and `what`.
  Status wait(Request &r, const char *what);
  /// Polls r once (MPI_Test on its requests, which also drives the progress
  /// of non-blocking collectives): true when it has completed. r stays
  /// pending either way; wait() still completes it (at once, if done).
  bool test(Request &r);
  /// Waits for all of rs (each id set to -1 as it completes).
  Status waitAll(std::vector<Request> &rs, const char *what);
  /// All ranks of the world (with the same timeout as wait).
  void barrier();

  /// Prints "train: error: rank R: <msg>" to stderr and MPI_Abort(code):
  /// every rank of the job exits.
  [[noreturn]] void abort(const std::string &msg, int code);

  /// Seconds a wait may block before it is treated as a dead peer: 60, or
  /// the environment variable MERAK_COMM_TIMEOUT (seconds, may be
  /// fractional; with several nodes pass it on with `mpirun -x`).
  double timeoutSeconds() const;

  struct Impl;

private:
  explicit Comm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace merak::rt

#endif // MERAK_RT_COMM_H
