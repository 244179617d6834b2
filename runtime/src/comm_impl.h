//===- comm_impl.h - Comm's state, shared by its source files ---*- C++ -*-===//
//
// Private to the runtime: Comm::Impl (the MPI communicators of the mesh
// axes, the request slots, the heartbeat) and the MPI helpers that
// comm.cpp (set-up, waits) and comm_exchange.cpp (the collectives and
// point-to-point messages) share.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_COMM_IMPL_H
#define MERAK_RT_COMM_IMPL_H

#include "merak_rt/comm.h"

#include "heartbeat.h"

// Only MPI's C API (linked as MPI::MPI_C / libmpi): no C++ bindings, which
// would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <sched.h>
#include <time.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace merak::rt {

/// The MPI datatype of t (bf16 moves as uint16).
MPI_Datatype mpiType(CommType t);
/// The MPI operation of a sum (max) over t: MPI_SUM (MPI_MAX) but for
/// bf16, whose commutative user-defined operations are created on first
/// use (after MPI_Init) and live until MPI_Finalize frees them.
MPI_Op reduceOp(CommType t, bool max);
/// MPI's message for an error code.
std::string mpiErrorString(int code);

struct Comm::Impl {
  MeshShape mesh;
  MeshCoord coord;
  int rank = 0, size = 1;
  int localRank = 0, localSize = 1; // among the ranks sharing this node
  int nodeLeader = 0; // the world rank of this node's local rank 0
  // Two-level exchanges: per axis its node groups and the communicators of
  // this rank's node (within) and of its local index (across).
  struct Levels {
    Comm::NodeGroups groups;
    bool uniform = false;
    MPI_Comm within = MPI_COMM_NULL, across = MPI_COMM_NULL;
  };
  std::map<Axis, Levels> levels;
  MPI_Comm world = MPI_COMM_NULL, pp = MPI_COMM_NULL, dp = MPI_COMM_NULL,
           tp = MPI_COMM_NULL, ep = MPI_COMM_NULL, edp = MPI_COMM_NULL;
  double timeout = 60.0;
  int64_t chunk = INT_MAX;
  // Progress stamps shared by this node's ranks (heartbeat.h).
  MPI_Win heartbeatWin = MPI_WIN_NULL;
  std::unique_ptr<Heartbeat> heartbeat;

  struct Slot {
    std::vector<MPI_Request> reqs;
    Axis axis = Axis::World;
    bool used = false;
    std::string error; // a failed post: reported by the wait
    /// MPI_Ialltoallv's count and displacement arrays, which must live
    /// until the exchange completes.
    std::vector<int> counts;
  };
  std::vector<Slot> slots;
  std::vector<int> freeSlots;

  MPI_Comm comm(Axis a) const {
    switch (a) {
    case Axis::World:
      return world;
    case Axis::PP:
      return pp;
    case Axis::DP:
      return dp;
    case Axis::TP:
      return tp;
    case Axis::EP:
      return ep;
    case Axis::EDP:
      return edp;
    }
    return world;
  }

  int newSlot(Axis a) {
    int id;
    if (!freeSlots.empty()) {
      id = freeSlots.back();
      freeSlots.pop_back();
    } else {
      id = static_cast<int>(slots.size());
      slots.emplace_back();
    }
    Slot &s = slots[id];
    s.reqs.clear();
    s.axis = a;
    s.used = true;
    s.error.clear();
    return id;
  }

  /// Records the request of one MPI call (or its failure) in slot id.
  void add(int id, int rc, MPI_Request q, const char *call) {
    Slot &s = slots[id];
    if (rc != MPI_SUCCESS) {
      if (s.error.empty())
        s.error = std::string(call) + " failed: " + mpiErrorString(rc);
      return;
    }
    s.reqs.push_back(q);
  }

  void release(int id) {
    Slot &s = slots[id];
    s.used = false;
    s.reqs.clear();
    s.error.clear();
    freeSlots.push_back(id);
  }

  [[noreturn]] void abortJob(const std::string &msg, int code) {
    std::fprintf(stderr, "train: error: rank %d: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; just in case
  }

  void checkCount(int64_t count, const char *op) {
    if (count < 0)
      abortJob(std::string("internal error: ") + op + " with negative count " +
                   std::to_string(count),
               1);
  }
  void checkPeer(Axis a, int peer, const char *op) {
    int n = 0;
    MPI_Comm_size(comm(a), &n);
    if (peer < 0 || peer >= n)
      abortJob(std::string("internal error: ") + op + " with group rank " +
                   std::to_string(peer) + " on the " + axisName(a) +
                   " group of " + std::to_string(n) + " ranks",
               1);
  }

  /// Slot ids to wait for, without allocating (a wait is on the hot path
  /// of started collectives and pipeline messages).
  struct SlotIds {
    const int *first;
    size_t count;
    const int *begin() const { return first; }
    const int *end() const { return first + count; }
  };

  /// Polls the requests of slots ids until all complete. On success or
  /// error the slots are released.
  Status waitSlots(SlotIds ids, const char *what) {
    struct Waiting { // the heartbeat shows this rank waiting until it returns
      Heartbeat *h;
      explicit Waiting(Heartbeat *h) : h(h) {
        if (h)
          h->enterWait();
      }
      ~Waiting() {
        if (h)
          h->leaveWait();
      }
    } waiting(heartbeat.get());
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    std::string error;
    Axis errorAxis = Axis::World;
    for (int id : ids)
      if (!slots[id].error.empty() && error.empty()) {
        error = slots[id].error;
        errorAxis = slots[id].axis;
      }
    long polls = 0;
    while (error.empty()) {
      bool done = true;
      Axis pending = Axis::World;
      for (int id : ids) {
        Slot &s = slots[id];
        for (MPI_Request &q : s.reqs) {
          if (q == MPI_REQUEST_NULL)
            continue;
          int flag = 0;
          MPI_Status st;
          int rc = MPI_Test(&q, &flag, &st);
          if (rc != MPI_SUCCESS) {
            error = mpiErrorString(rc);
            errorAxis = s.axis;
            break;
          }
          if (!flag) {
            done = false;
            pending = s.axis;
            break;
          }
        }
        if (!done || !error.empty())
          break;
      }
      if (done || !error.empty())
        break;
      ++polls;
      if (polls < 64)
        continue; // spin: most waits end within microseconds
      double elapsed =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (elapsed > timeout) {
        char t[32];
        std::snprintf(t, sizeof t, "%g", timeout);
        std::string cause =
            heartbeat ? heartbeat->diagnose() : std::string("a peer rank may have died");
        if (heartbeat)
          heartbeat->markAborting();
        abortJob(std::string(what) + " on the " + axisName(pending) +
                     " group did not complete within " + t + " s; " + cause,
                 1);
      }
      if (heartbeat)
        heartbeat->poll();
      if (elapsed < 0.002) {
        sched_yield();
      } else {
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, nullptr);
      }
    }
    if (!error.empty()) {
      // Leave the other requests as they are: the job is ending.
      for (int id : ids)
        release(id);
      return Status::error("rank " + std::to_string(rank) + ": " + what +
                           " on the " + axisName(errorAxis) +
                           " group failed: " + error);
    }
    for (int id : ids)
      release(id);
    return Status::success();
  }
};

} // namespace merak::rt

#endif // MERAK_RT_COMM_IMPL_H
