//===- trace.h - Chrome trace (Trace Event Format) writer -------*- C++ -*-===//
//
// Records the timeline of one training step and writes it as a Chrome trace
// (viewable in Perfetto, https://ui.perfetto.dev, or chrome://tracing):
//
//   {"traceEvents":[
//     {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},
//     {"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"compute"}},
//     {"name":"matmul","cat":"kernel","ph":"X","ts":12.5,"dur":3.25,
//      "pid":0,"tid":1,"args":{"flops":1.6e7}},
//     ...],
//    "displayTimeUnit":"ms"}
//
// Metadata events ("ph":"M") come first, then complete events ("ph":"X") in
// the order recorded. ts and dur are microseconds (up to 3 decimals); ts
// counts from the writer's construction on a monotonic clock. pid is the
// rank, tid a stream/lane chosen by the caller. The file is written
// atomically (temporary file, fsync, rename).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_TRACE_H
#define MERAK_RT_TRACE_H

#include "merak_rt/status.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace merak::rt {

using TraceArgs = std::vector<std::pair<std::string, double>>;

class TraceWriter {
public:
  explicit TraceWriter(int rank = 0);

  int rank() const { return rank_; }
  /// Microseconds since construction (steady clock).
  double nowUs() const;

  /// Names this process (pid = rank) / a lane (tid) in the viewer.
  void setProcessName(const std::string &name);
  void setThreadName(int tid, const std::string &name);

  /// Records a complete event with explicit times (microseconds).
  void complete(const std::string &name, const std::string &category,
                double tsUs, double durUs, int tid = 0,
                const TraceArgs &args = {});

  /// An event started by begin() and recorded by end().
  struct Span {
    std::string name, category;
    int tid = 0;
    double startUs = 0;
    bool open = false;
  };
  Span begin(const std::string &name, const std::string &category,
             int tid = 0) const;
  /// Records `span` as a complete event ending now; no-op if already ended.
  void end(Span &span, const TraceArgs &args = {});

  /// Records the enclosing scope as a complete event.
  class Scope {
  public:
    Scope(TraceWriter *writer, const std::string &name,
          const std::string &category, int tid = 0)
        : writer_(writer) {
      if (writer_)
        span_ = writer_->begin(name, category, tid);
    }
    ~Scope() {
      if (writer_)
        writer_->end(span_);
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    TraceWriter *writer_;
    Span span_;
  };

  size_t numEvents() const;
  void clear(); // drops complete events, keeps names
  std::string toJson() const;
  /// Writes toJson() to `path` atomically.
  Status write(const std::string &path) const;

private:
  struct Event {
    std::string name, category;
    double tsUs, durUs;
    int tid;
    TraceArgs args;
  };
  int rank_;
  std::chrono::steady_clock::time_point origin_;
  std::string processName_;
  std::map<int, std::string> threadNames_;
  std::vector<Event> events_;
  mutable std::mutex mutex_;
};

} // namespace merak::rt

#endif // MERAK_RT_TRACE_H
