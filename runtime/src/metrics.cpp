//===- metrics.cpp - JSONL metrics and a terminal progress bar ------------===//
#include "merak_rt/metrics.h"

#include "file_util.h"
#include "json_util.h"

#include <cerrno>
#include <cmath>
#include <sstream>
#include <fstream>
#include <unistd.h>

namespace merak::rt {

std::string formatMetricsLine(const StepMetrics &m) {
  std::string line = "{\"step\":" + std::to_string(m.step);
  bool nonfinite = false;
  auto field = [&](const std::string &name, double value) {
    line += ',';
    appendString(line, name);
    line += ':';
    appendNumber(line, value);
    if (!std::isfinite(value))
      nonfinite = true;
  };
  field("loss", m.loss);
  field("lr", m.lr);
  field("grad_norm", m.gradNorm);
  field("tokens_per_s", m.tokensPerSecond);
  field("time_ms", m.timeMs);
  for (const auto &[name, value] : m.extra)
    field(name, value);
  if (nonfinite)
    line += ",\"nonfinite\":true";
  line += '}';
  return line;
}

Result<MetricsWriter> MetricsWriter::open(const std::string &path,
                                          bool append) {
  std::FILE *file = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!file)
    return Result<MetricsWriter>::error("cannot open metrics file '" + path +
                                        "': " + detail::errnoMessage(errno));
  MetricsWriter writer;
  writer.path_ = path;
  writer.file_ = file;
  return Result<MetricsWriter>(std::move(writer));
}

MetricsWriter::MetricsWriter(MetricsWriter &&other) noexcept {
  *this = std::move(other);
}

MetricsWriter &MetricsWriter::operator=(MetricsWriter &&other) noexcept {
  if (this != &other) {
    (void)close();
    path_ = std::move(other.path_);
    file_ = other.file_;
    other.file_ = nullptr;
  }
  return *this;
}

MetricsWriter::~MetricsWriter() { (void)close(); }

Status MetricsWriter::write(const StepMetrics &m) {
  if (!file_)
    return Status::error("metrics file '" + path_ + "' is not open");
  std::string line;
  try {
    line = formatMetricsLine(m);
  } catch (const std::exception &e) {
    return Status::error("cannot format metrics: " + std::string(e.what()));
  }
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    return Status::error("cannot write metrics file '" + path_ +
                         "': " + detail::errnoMessage(errno));
  return Status::success();
}

Status MetricsWriter::close() {
  if (!file_)
    return Status::success();
  int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0)
    return Status::error("cannot close metrics file '" + path_ +
                         "': " + detail::errnoMessage(errno));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// ProgressBar
//===----------------------------------------------------------------------===//

ProgressBar::ProgressBar(std::FILE *out, int64_t totalSteps, int64_t logEvery,
                         int64_t firstStep, Mode mode)
    : out_(out), total_(totalSteps), logEvery_(logEvery < 1 ? 1 : logEvery),
      first_(firstStep), start_(std::chrono::steady_clock::now()),
      lastDraw_(start_) {
  if (mode == Mode::Auto)
    terminal_ = out_ && ::isatty(::fileno(out_));
  else
    terminal_ = mode == Mode::Terminal;
}

std::string ProgressBar::formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  long long s = std::llround(seconds);
  char buffer[48];
  if (s >= 3600)
    std::snprintf(buffer, sizeof(buffer), "%lldh%02lldm", s / 3600,
                  (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buffer, sizeof(buffer), "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buffer, sizeof(buffer), "%llds", s);
  return buffer;
}

std::string ProgressBar::formatRate(double perSecond) {
  if (!std::isfinite(perSecond) || perSecond < 0)
    return "?";
  char buffer[48];
  if (perSecond >= 1e6)
    std::snprintf(buffer, sizeof(buffer), "%.2fM", perSecond / 1e6);
  else if (perSecond >= 1e4)
    std::snprintf(buffer, sizeof(buffer), "%.1fk", perSecond / 1e3);
  else
    std::snprintf(buffer, sizeof(buffer), "%.0f", perSecond);
  return buffer;
}

std::string ProgressBar::describe(int64_t step, double loss,
                                  double tokensPerSecond, bool withBar) const {
  int64_t done = step + 1; // steps finished, counting from 0
  std::string text = "step " + std::to_string(done) + "/" +
                     std::to_string(total_);
  if (withBar && total_ > 0) {
    constexpr int kWidth = 20;
    double fraction = static_cast<double>(done) / static_cast<double>(total_);
    fraction = fraction < 0 ? 0 : (fraction > 1 ? 1 : fraction);
    int filled = static_cast<int>(fraction * kWidth);
    text += " [";
    for (int i = 0; i < kWidth; ++i)
      text += i < filled ? '=' : (i == filled ? '>' : ' ');
    char percent[16];
    std::snprintf(percent, sizeof(percent), "] %3d%%",
                  static_cast<int>(fraction * 100));
    text += percent;
  }
  char lossText[48];
  if (std::isfinite(loss))
    std::snprintf(lossText, sizeof(lossText), "%.4f", loss);
  else
    std::snprintf(lossText, sizeof(lossText), "%s",
                  std::isnan(loss) ? "nan" : "inf");
  text += std::string(" | loss ") + lossText;
  text += " | " + formatRate(tokensPerSecond) + " tok/s";
  double elapsed = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start_)
                       .count();
  int64_t finished = done - first_;
  double eta = -1;
  if (finished > 0)
    eta = elapsed / static_cast<double>(finished) *
          static_cast<double>(total_ - done);
  text += " | ETA " + formatDuration(eta);
  return text;
}

void ProgressBar::update(int64_t step, double loss, double tokensPerSecond) {
  if (!out_)
    return;
  bool last = step + 1 >= total_;
  if (terminal_) {
    auto now = std::chrono::steady_clock::now();
    if (drawn_ && !last &&
        now - lastDraw_ < std::chrono::milliseconds(100))
      return;
    lastDraw_ = now;
    drawn_ = true;
    // "\033[K" clears the rest of a previously longer line.
    std::string text = "\r" + describe(step, loss, tokensPerSecond, true) +
                       "\033[K";
    std::fputs(text.c_str(), out_);
    lineOpen_ = true;
    if (last)
      finish();
    std::fflush(out_);
    return;
  }
  if ((step + 1) % logEvery_ != 0 && !last && step != first_)
    return;
  std::string text = describe(step, loss, tokensPerSecond, false) + "\n";
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (out_ && lineOpen_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  lineOpen_ = false;
}

Status writeExpertHistogram(const std::string &path, const std::vector<int64_t> &rows) {
  std::string json = "{\"experts\": " + std::to_string(rows.size()) + ", \"rows\": [";
  for (size_t e = 0; e < rows.size(); ++e)
    json += (e ? ", " : "") + std::to_string(rows[e]);
  json += "]}\n";
  return detail::writeFileAtomically(path, "expert histogram", [&](std::FILE *f) {
    return detail::writeAll(f, json.data(), json.size(), path);
  });
}

Result<int64_t> trimMetricsFile(const std::string &path, int64_t firstStep) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return int64_t(0);
    return Result<int64_t>::error("cannot open metrics file '" + path +
                                  "': " + detail::errnoMessage(errno));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    return Result<int64_t>::error("cannot read metrics file '" + path + "'");
  std::string content = buffer.str(), kept;
  int64_t dropped = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    bool complete = end != std::string::npos;
    std::string line =
        content.substr(pos, complete ? end - pos : std::string::npos);
    pos = complete ? end + 1 : content.size();
    if (line.empty())
      continue;
    std::optional<int64_t> step;
    if (complete) {
      nlohmann::json v = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (v.is_object() && v.contains("step"))
        step = nonNegativeInteger(v["step"]);
    }
    if (step && *step < firstStep) {
      kept += line;
      kept += '\n';
    } else {
      ++dropped;
    }
  }
  if (kept.size() == content.size())
    return dropped;
  Status s = detail::writeFileAtomically(
      path, "metrics file", [&](std::FILE *file) {
        return detail::writeAll(file, kept.data(), kept.size(), path);
      });
  if (!s.ok())
    return s;
  return dropped;
}


} // namespace merak::rt
