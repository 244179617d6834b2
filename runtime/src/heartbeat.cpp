//===- heartbeat.cpp - Which rank stopped: progress stamps on a node ------===//
#include "heartbeat.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace merak::rt {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A live rank polls every ~50 us while it waits: a second without is a stall.
constexpr int64_t kStallNs = 1000000000;

std::string seconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ns) * 1e-9);
  return text;
}

} // namespace

char processState(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')'); // the command name may hold spaces
  if (paren == std::string::npos || paren + 2 >= stat.size())
    return '?';
  return stat[paren + 2];
}

Heartbeat::Heartbeat(Slot *slots, int localSize, int localRank, int worldRank)
    : slots_(slots), localSize_(localSize), localRank_(localRank) {
  Slot &mine = slots_[localRank_];
  mine.pid.store(::getpid());
  mine.worldRank.store(worldRank);
  mine.waitingSinceNs.store(0);
  mine.lastLeftNs.store(nowNs());
}

void Heartbeat::enterWait() {
  int64_t now = nowNs();
  ownGapNs_ = 0;
  slots_[localRank_].polledNs.store(now, std::memory_order_relaxed);
  slots_[localRank_].waitingSinceNs.store(now, std::memory_order_relaxed);
}

void Heartbeat::poll() {
  int64_t now = nowNs();
  Slot &mine = slots_[localRank_];
  ownGapNs_ = std::max(ownGapNs_, now - mine.polledNs.load(std::memory_order_relaxed));
  mine.polledNs.store(now, std::memory_order_relaxed);
}

void Heartbeat::leaveWait() {
  Slot &mine = slots_[localRank_];
  mine.lastLeftNs.store(nowNs(), std::memory_order_relaxed);
  mine.waitingSinceNs.store(0, std::memory_order_relaxed);
}

void Heartbeat::markAborting() { slots_[localRank_].aborting.store(1); }

std::string Heartbeat::diagnose() const {
  std::ostringstream out;
  int culprits = 0, timedOut = -1;
  const int64_t now = nowNs();
  if (ownGapNs_ > kStallNs) // this rank was stopped and has been continued
    return "this rank itself did not run for " + seconds(ownGapNs_) +
           " (stopped by a signal such as SIGSTOP, or a debugger)";
  for (int i = 0; i < localSize_; ++i) {
    if (i == localRank_)
      continue;
    const Slot &s = slots_[i];
    int64_t pid = s.pid.load(), rank = s.worldRank.load();
    if (s.aborting.load() != 0) {
      timedOut = static_cast<int>(s.worldRank.load()); // a waiter that gave up first
      continue;
    }
    if (pid == 0)
      continue; // not set up yet
    char state = processState(pid);
    bool stopped = state == 'T' || state == 't', exited = state == 'Z' || state == '?';
    bool waiting = s.waitingSinceNs.load() != 0;
    // A live waiting rank polls every ~50 us; a second without is a hang.
    bool stalled = waiting && now - s.polledNs.load() > kStallNs;
    if (!stopped && !exited && waiting && !stalled)
      continue; // waiting like this rank
    out << (culprits++ ? "; " : "") << "rank " << rank << " (pid " << pid << ", this host) ";
    if (stopped)
      out << "is stopped (a signal such as SIGSTOP, or a debugger)";
    else if (exited)
      out << "has exited";
    else if (!waiting)
      out << "is not waiting on any communication: busy or hung in its own code";
    else
      out << "hangs inside a communication";
    out << " (its last communication ended " << seconds(now - s.lastLeftNs.load()) << " ago)";
  }
  if (culprits == 0 && timedOut >= 0)
    return "rank " + std::to_string(timedOut) + " timed out first; its message names the rank "
                                                 "it waited for";
  if (culprits == 0)
    return localSize_ > 1 ? "every rank on this host is waiting: the rank that stopped runs "
                            "on another host"
                          : "no other rank runs on this host: the rank that stopped runs on "
                            "another host";
  return culprits == 1 ? "the rank it waits for: " + out.str()
                       : "ranks not waiting: " + out.str();
}

} // namespace merak::rt
