//===- metrics.h - JSONL metrics and a terminal progress bar ----*- C++ -*-===//
//
// JSONL metrics: one JSON object per line and step, flushed after each line:
//   {"step":0,"loss":10.82,"lr":0.0006,"grad_norm":1.25,
//    "tokens_per_s":10240.5,"time_ms":100.02,"EXTRA":1.5}
// Fields in this order, then the extra fields in the order given. Numbers are
// written in the shortest form that reads back to the same double; a NaN or
// infinite value is written as null and the object then ends with
// "nonfinite":true. `step` counts from 0.
//
// Progress: on a terminal (isatty(fileno(out))) one line redrawn in place
// with '\r':
//   step 120/1000 [==>                 ]  12% | loss 3.2140 | 10.2k tok/s | ETA 1m23s
// otherwise (a pipe or file) a plain line after the first step, every
// `logEvery` steps (when (step+1) % logEvery == 0) and after the last step:
//   step 120/1000 | loss 3.2140 | 10.2k tok/s | ETA 1m23s
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_METRICS_H
#define MERAK_RT_METRICS_H

#include "merak_rt/status.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace merak::rt {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  double tokensPerSecond = 0;
  double timeMs = 0;
  /// Extra numeric fields, written after the standard ones. Names should not
  /// repeat the standard ones.
  std::vector<std::pair<std::string, double>> extra;
};

/// The JSON line for `m`, without the trailing newline.
std::string formatMetricsLine(const StepMetrics &m);

/// Drops the lines of an existing metrics file that a resumed run is about
/// to write again (step >= firstStep) and any unreadable (e.g. half-written)
/// line, so that the appended file has each step once. A missing file is
/// fine. Returns the number of lines dropped.
Result<int64_t> trimMetricsFile(const std::string &path, int64_t firstStep);

/// ./train --moe-histogram: writes {"experts": E, "rows": [E counts]}
/// (the rows routed to each expert) to `path`, atomically.
Status writeExpertHistogram(const std::string &path, const std::vector<int64_t> &rows);

class MetricsWriter {
public:
  /// Opens `path` for writing (truncating) or appending (e.g. on resume).
  static Result<MetricsWriter> open(const std::string &path,
                                    bool append = false);

  MetricsWriter(MetricsWriter &&other) noexcept;
  MetricsWriter &operator=(MetricsWriter &&other) noexcept;
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;
  ~MetricsWriter();

  /// Writes one line and flushes it.
  Status write(const StepMetrics &m);
  /// Closes the file (also done by the destructor).
  Status close();

  const std::string &path() const { return path_; }

private:
  MetricsWriter() = default;
  std::string path_;
  std::FILE *file_ = nullptr;
};

class ProgressBar {
public:
  enum class Mode { Auto, Terminal, Plain };

  /// Reports steps [firstStep, totalSteps) to `out` (not owned). In Auto
  /// mode the style follows isatty(fileno(out)). `logEvery` (>= 1) applies to
  /// plain mode; a terminal redraws at most every 100 ms and on the last step.
  ProgressBar(std::FILE *out, int64_t totalSteps, int64_t logEvery = 1,
              int64_t firstStep = 0, Mode mode = Mode::Auto);

  /// Calls finish(); `out` must still be open.
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar &) = delete;
  ProgressBar &operator=(const ProgressBar &) = delete;

  /// Call after step `step` (from 0) finished. The line shows step + 1,
  /// the number of steps done.
  void update(int64_t step, double loss, double tokensPerSecond);
  /// Ends the in-place line on a terminal with a newline. Idempotent.
  void finish();

  bool isTerminal() const { return terminal_; }

  /// Formatting helpers (exposed for tests): "1h02m", "1m23s", "9s", "?".
  static std::string formatDuration(double seconds);
  /// "950", "10.2k", "3.40M".
  static std::string formatRate(double perSecond);

private:
  std::string describe(int64_t step, double loss, double tokensPerSecond,
                       bool withBar) const;

  std::FILE *out_;
  int64_t total_, logEvery_, first_;
  bool terminal_;
  bool lineOpen_ = false;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  bool drawn_ = false;
};

} // namespace merak::rt

#endif // MERAK_RT_METRICS_H
