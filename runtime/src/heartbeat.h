//===- heartbeat.h - Which rank stopped: progress stamps on a node -*- C++ -*-===//
//
// A rank that waits on a collective cannot tell a slow peer from one that
// stopped (SIGSTOP, a debugger, a hang in a kernel): after the timeout every
// waiting rank used to name itself. The ranks of a node therefore share one
// Slot each (memory from MPI_Win_allocate_shared, set up by comm.cpp): the
// rank's pid, and since when it has been waiting in Comm::wait (0: not
// waiting) or when it last left a wait, and when it last polled inside a
// wait (a live waiting rank polls every ~50 us). On a timeout, diagnose()
// reads the slots of the node: the rank the others wait for is the one
// that is stopped (/proc/<pid>/stat), not waiting (busy or hung in its own
// code), or waiting without polling. Ranks on other nodes are not visible;
// their own node's ranks name them.
//
// Plain loads and stores of lock-free 64-bit atomics on shared memory: no
// MPI progress is needed to read a peer's slot, so a stopped peer is seen.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_HEARTBEAT_H
#define MERAK_RT_HEARTBEAT_H

#include <atomic>
#include <cstdint>
#include <string>

namespace merak::rt {

class Heartbeat {
public:
  /// One rank's stamps (steady-clock nanoseconds, system-wide on Linux).
  struct Slot {
    std::atomic<int64_t> pid{0}, worldRank{-1};
    std::atomic<int64_t> waitingSinceNs{0}, lastLeftNs{0}, polledNs{0};
    std::atomic<int64_t> aborting{0}; ///< timed out itself: ending the job
  };
  static_assert(std::atomic<int64_t>::is_always_lock_free,
                "the slots are shared between processes");

  /// `slots` holds localSize slots shared by this node's ranks; this rank
  /// owns slots[localRank] and initialises it here.
  Heartbeat(Slot *slots, int localSize, int localRank, int worldRank);

  void enterWait();
  /// From the slow path of a wait's polling loop: this rank is alive. A
  /// gap of over a second since the last poll means this rank itself did
  /// not run (stopped, then continued): diagnose() says so.
  void poll();
  void leaveWait();
  /// Before this rank aborts the job after its own timeout: the others
  /// then see it as a waiter that gave up, not as the rank that stopped.
  void markAborting();

  /// After a wait of this rank timed out: one sentence naming the ranks of
  /// this node that are not waiting (stopped, or busy for how long), or
  /// saying that every rank here waits (the stopped one is elsewhere).
  std::string diagnose() const;

private:
  Slot *slots_;
  int localSize_, localRank_;
  int64_t ownGapNs_ = 0; ///< the longest gap between this wait's polls
};

/// The state letter of /proc/<pid>/stat ('R', 'S', 'T', ...), or '?'.
char processState(int64_t pid);

} // namespace merak::rt

#endif // MERAK_RT_HEARTBEAT_H
