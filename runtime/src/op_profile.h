//===- op_profile.h - the op recorders of ./train (internal) ----*- C++ -*-===//
//
// The generated step calls opMark(i) before op i and opMark(-1) at its end;
// a recorder installed with cpu::setOpRecorder sees those marks. Two use
// them: --trace (OpTraceRecorder: one Chrome-trace event per op of one
// step) and --profile-ops (OpProfiler, below).
//
// OpProfiler times every op (kernel call) of the training steps after the first (the
// warm-up) and merges the median seconds per shape key into an op-cost
// file, the cache merak-compile --op-costs reads (format in
// merak/Dialect/Merak/Analysis/OpCosts.h). The keys come from the
// manifest's "op_keys"; an op's time runs from its opMark to the next one,
// so it includes the MPI progress polls the generated code makes after it.
//
// Merging: a key the file already holds keeps the mean of the old and the
// new medians, weighted by their sample counts; the other keys are added.
// The ranks of a parallel program merge one after another (barriers
// between), each writing the file atomically.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_OP_PROFILE_H
#define MERAK_RT_SRC_OP_PROFILE_H

#include "manifest.h"
#include "merak_rt/comm.h"
#include "merak_rt/ops.h"
#include "merak_rt/status.h"
#include "merak_rt/trace.h"

#include <chrono>
#include <string>
#include <vector>

namespace merak::rt {

/// The trace's thread of the training loop (steps, data, ops).
constexpr int kTraceTid = 0;

/// Turns the generated step's opMark(i) calls into complete events: op i
/// lasts from its mark to the next one (or to opMark(-1)).
struct OpTraceRecorder {
  TraceWriter *writer = nullptr;
  const std::vector<std::string> *ops = nullptr;
  int64_t current = -1;
  double startUs = 0;

  void closeCurrent(double nowUs);
  /// The OpRecorder; never lets an exception into generated code.
  static void record(void *ctx, int64_t index) noexcept;
};

/// Disables the op recorder when it goes out of scope (also on errors), so
/// generated code never calls into a dead recorder.
struct RecorderGuard {
  RecorderGuard() = default;
  RecorderGuard(const RecorderGuard &) = delete;
  RecorderGuard &operator=(const RecorderGuard &) = delete;
  ~RecorderGuard() { cpu::setOpRecorder(nullptr, nullptr); }
};

class OpProfiler {
public:
  /// Fails when the program has no op keys (compiled by an older merak).
  static Result<OpProfiler> create(const Manifest &m, std::string path,
                                   std::string target);

  /// Records the ops of one step: install() before it, uninstall() after.
  void install();
  void uninstall();

  /// Merges this rank's medians into the file (every rank calls it).
  Status write(Comm *comm) const;

  /// The op-cost file's text with `samples` merged into `existing` (empty:
  /// a new file); fails when `existing` is not an op-cost file of the same
  /// target and thread count. Exposed for the runtime tests.
  static Result<std::string> merge(const std::string &existing, const std::string &path,
                                   const std::string &target, int threads,
                                   const std::vector<std::pair<std::string, std::vector<double>>> &samples);

private:
  using Clock = std::chrono::steady_clock;
  OpProfiler(const Manifest &m, std::string path, std::string target)
      : keys_(&m.opKeys), path_(std::move(path)), target_(std::move(target)),
        samples_(m.opKeys.size()) {}
  static void record(void *ctx, int64_t index) noexcept;

  const std::vector<std::string> *keys_;
  std::string path_, target_;
  std::vector<std::vector<double>> samples_; ///< op index -> seconds
  int64_t current_ = -1;
  Clock::time_point started_;
};

} // namespace merak::rt

#endif // MERAK_RT_SRC_OP_PROFILE_H
