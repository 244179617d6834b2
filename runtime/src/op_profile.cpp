//===- op_profile.cpp - the op recorders of ./train: --trace, --profile-ops ===//
#include "op_profile.h"

#include "file_util.h"
#include "json_util.h"
#include "merak_rt/ops.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace merak::rt {

namespace {
int threadCount() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
} // namespace

void OpTraceRecorder::closeCurrent(double nowUs) {
  if (current < 0)
    return;
  std::string name = static_cast<uint64_t>(current) < ops->size()
                         ? (*ops)[static_cast<size_t>(current)]
                         : "op" + std::to_string(current);
  writer->complete(name, "op", startUs, nowUs - startUs, kTraceTid,
                   {{"index", static_cast<double>(current)}});
  current = -1;
}

void OpTraceRecorder::record(void *ctx, int64_t index) noexcept {
  auto *self = static_cast<OpTraceRecorder *>(ctx);
  try {
    double now = self->writer->nowUs();
    self->closeCurrent(now);
    if (index >= 0) {
      self->current = index;
      self->startUs = now;
    }
  } catch (...) {
    self->current = -1; // out of memory: drop the event
  }
}

Result<OpProfiler> OpProfiler::create(const Manifest &m, std::string path,
                                      std::string target) {
  if (m.opKeys.empty())
    return Result<OpProfiler>::error(
        "--profile-ops: this program has no op keys in its manifest (compiled by an older "
        "merak-compile); compile it again");
  return OpProfiler(m, std::move(path), std::move(target));
}

void OpProfiler::record(void *ctx, int64_t index) noexcept {
  auto *self = static_cast<OpProfiler *>(ctx);
  Clock::time_point now = Clock::now();
  try {
    if (self->current_ >= 0 && static_cast<size_t>(self->current_) < self->samples_.size())
      self->samples_[static_cast<size_t>(self->current_)].push_back(
          std::chrono::duration<double>(now - self->started_).count());
  } catch (...) {
    // out of memory: drop the sample
  }
  self->current_ = index;
  self->started_ = Clock::now();
}

void OpProfiler::install() {
  current_ = -1;
  cpu::setOpRecorder(&OpProfiler::record, this);
}

void OpProfiler::uninstall() {
  cpu::setOpRecorder(nullptr, nullptr);
  record(this, -1); // closes the last op if the step did not mark its end
}

Result<std::string> OpProfiler::merge(
    const std::string &existing, const std::string &path, const std::string &target,
    int threads, const std::vector<std::pair<std::string, std::vector<double>>> &samples) {
  using json = nlohmann::ordered_json;
  auto bad = [&](const std::string &why) {
    return Result<std::string>::error("--profile-ops: " + path + ": " + why);
  };
  // key -> (seconds, samples), sorted by key so the file diffs well.
  std::map<std::string, std::pair<double, int64_t>> ops;
  if (!existing.empty()) {
    json old;
    try {
      old = json::parse(existing);
    } catch (const json::exception &e) {
      return bad(std::string("not JSON: ") + jsonErrorText(e));
    }
    if (!old.is_object() || old.value("format", "") != "merak-op-costs" ||
        old.value("version", 0) != 1 || !old.contains("ops") || !old["ops"].is_object())
      return bad("not an op-cost file (format merak-op-costs, version 1); refusing to "
                 "overwrite it");
    if (old.value("target", "") != target || old.value("threads", 0) != threads)
      return bad("holds costs measured for target '" + old.value("target", "") + "' with " +
                 std::to_string(old.value("threads", 0)) + " threads, not '" + target +
                 "' with " + std::to_string(threads) + "; use another file");
    for (const auto &[key, v] : old["ops"].items()) {
      if (!v.is_object() || !v.contains("seconds") || !v["seconds"].is_number())
        return bad("ops[\"" + key + "\"]: expected {\"seconds\": ..., \"samples\": ...}");
      ops[key] = {v["seconds"].get<double>(), std::max<int64_t>(1, v.value("samples", 1))};
    }
  }
  for (const auto &[key, times] : samples) {
    if (times.empty())
      continue;
    double s = median(times);
    int64_t n = static_cast<int64_t>(times.size());
    auto it = ops.find(key);
    if (it == ops.end()) {
      ops[key] = {s, n};
      continue;
    }
    auto &[seconds, count] = it->second;
    seconds = (seconds * count + s * n) / static_cast<double>(count + n);
    count += n;
  }
  json out = json::object();
  out["format"] = "merak-op-costs";
  out["version"] = 1;
  out["target"] = target;
  out["threads"] = threads;
  json entries = json::object();
  for (const auto &[key, v] : ops)
    entries[key] = json{{"seconds", v.first}, {"samples", v.second}};
  out["ops"] = std::move(entries);
  return out.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Status OpProfiler::write(Comm *comm) const {
  // Samples by key: an op that appears several times (every layer's GEMM)
  // pools its samples.
  std::map<std::string, std::vector<double>> byKey;
  for (size_t i = 0; i < samples_.size(); ++i) {
    std::vector<double> &to = byKey[(*keys_)[i]];
    to.insert(to.end(), samples_[i].begin(), samples_[i].end());
  }
  std::vector<std::pair<std::string, std::vector<double>>> samples(byKey.begin(), byKey.end());
  const int ranks = comm ? comm->worldSize() : 1, me = comm ? comm->rank() : 0;
  Status status;
  for (int r = 0; r < ranks; ++r) {
    if (r == me) {
      std::string existing;
      if (std::ifstream in(path_, std::ios::binary); in) {
        std::ostringstream text;
        text << in.rdbuf();
        existing = text.str();
      }
      Result<std::string> merged = merge(existing, path_, target_, threadCount(), samples);
      if (!merged.ok())
        status = Status::error(merged.status().message());
      else
        status = detail::writeFileAtomically(path_, "op-cost file", [&](std::FILE *f) {
          return detail::writeAll(f, merged.value().data(), merged.value().size(), path_);
        });
    }
    if (comm)
      comm->barrier();
  }
  return status;
}

} // namespace merak::rt
