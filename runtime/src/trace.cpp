//===- trace.cpp - Chrome trace (Trace Event Format) writer ---------------===//
#include "merak_rt/trace.h"

#include "file_util.h"
#include "json_util.h"

#include <cmath>
#include <cstdio>
#include <exception>

namespace merak::rt {

namespace {
void appendMicros(std::string &out, double us) {
  if (!std::isfinite(us))
    us = 0;
  char buffer[64];
  int n = std::snprintf(buffer, sizeof(buffer), "%.3f", us);
  // Trim trailing zeros ("12.500" -> "12.5", "3.000" -> "3").
  while (n > 0 && buffer[n - 1] == '0')
    --n;
  if (n > 0 && buffer[n - 1] == '.')
    --n;
  out.append(buffer, static_cast<size_t>(n));
}

void appendMetadataEvent(std::string &out, const char *kind, int pid, int tid,
                         const std::string &name) {
  out += "{\"name\":\"";
  out += kind;
  out += "\",\"ph\":\"M\",\"pid\":";
  out += std::to_string(pid);
  out += ",\"tid\":";
  out += std::to_string(tid);
  out += ",\"args\":{\"name\":";
  appendString(out, name);
  out += "}}";
}
} // namespace

TraceWriter::TraceWriter(int rank)
    : rank_(rank), origin_(std::chrono::steady_clock::now()) {}

double TraceWriter::nowUs() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - origin_)
      .count();
}

void TraceWriter::setProcessName(const std::string &name) {
  std::lock_guard<std::mutex> lock(mutex_);
  processName_ = name;
}

void TraceWriter::setThreadName(int tid, const std::string &name) {
  std::lock_guard<std::mutex> lock(mutex_);
  threadNames_[tid] = name;
}

void TraceWriter::complete(const std::string &name,
                           const std::string &category, double tsUs,
                           double durUs, int tid, const TraceArgs &args) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({name, category, tsUs, durUs < 0 ? 0 : durUs, tid, args});
}

TraceWriter::Span TraceWriter::begin(const std::string &name,
                                     const std::string &category,
                                     int tid) const {
  Span span;
  span.name = name;
  span.category = category;
  span.tid = tid;
  span.startUs = nowUs();
  span.open = true;
  return span;
}

void TraceWriter::end(Span &span, const TraceArgs &args) {
  if (!span.open)
    return;
  span.open = false;
  complete(span.name, span.category, span.startUs, nowUs() - span.startUs,
           span.tid, args);
}

size_t TraceWriter::numEvents() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

void TraceWriter::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
}

std::string TraceWriter::toJson() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&]() {
    if (!first)
      out += ",\n";
    first = false;
  };
  if (!processName_.empty()) {
    separator();
    appendMetadataEvent(out, "process_name", rank_, 0, processName_);
  }
  for (const auto &[tid, name] : threadNames_) {
    separator();
    appendMetadataEvent(out, "thread_name", rank_, tid, name);
  }
  for (const Event &e : events_) {
    separator();
    out += "{\"name\":";
    appendString(out, e.name);
    out += ",\"cat\":";
    appendString(out, e.category);
    out += ",\"ph\":\"X\",\"ts\":";
    appendMicros(out, e.tsUs);
    out += ",\"dur\":";
    appendMicros(out, e.durUs);
    out += ",\"pid\":";
    out += std::to_string(rank_);
    out += ",\"tid\":";
    out += std::to_string(e.tid);
    if (!e.args.empty()) {
      out += ",\"args\":{";
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i)
          out += ',';
        appendString(out, e.args[i].first);
        out += ':';
        appendNumber(out, e.args[i].second);
      }
      out += '}';
    }
    out += '}';
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

Status TraceWriter::write(const std::string &path) const {
  std::string text;
  try {
    text = toJson();
  } catch (const std::exception &e) {
    return Status::error("cannot write trace '" + path + "': " + e.what());
  }
  return detail::writeFileAtomically(
      path, "trace file", [&](std::FILE *file) {
        return detail::writeAll(file, text.data(), text.size(), path);
      });
}

} // namespace merak::rt
