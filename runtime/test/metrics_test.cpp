//===- metrics_test.cpp - JSONL metrics and progress bar ------------------===//
#include "merak_rt/metrics.h"

#include <nlohmann/json.hpp>
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fcntl.h>
#include <unistd.h>
#include <limits>
#include <sstream>

using namespace merak::rt;
using merak::rt::testing::readFile;
using merak::rt::testing::TempDir;

namespace {
std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

/// Reads back everything written to a tmpfile().
std::string contents(std::FILE *f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  int c;
  while ((c = std::fgetc(f)) != EOF)
    s += static_cast<char>(c);
  return s;
}
} // namespace

TEST(Metrics, LineFormat) {
  StepMetrics m;
  m.step = 0;
  m.loss = 2.5;
  m.lr = 0.001;
  m.gradNorm = 1;
  m.tokensPerSecond = 1000;
  m.timeMs = 12.5;
  EXPECT_EQ(formatMetricsLine(m),
            "{\"step\":0,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1,"
            "\"tokens_per_s\":1000,\"time_ms\":12.5}");
  m.step = 7;
  m.extra = {{"val_loss", 3.25}, {"odd\"name", -1e-20}};
  EXPECT_EQ(formatMetricsLine(m),
            "{\"step\":7,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1,"
            "\"tokens_per_s\":1000,\"time_ms\":12.5,\"val_loss\":3.25,"
            "\"odd\\\"name\":-1e-20}");
}

TEST(Metrics, NonFiniteBecomesNull) {
  StepMetrics m;
  m.step = 3;
  m.loss = std::numeric_limits<double>::quiet_NaN();
  m.gradNorm = std::numeric_limits<double>::infinity();
  m.extra = {{"x", -std::numeric_limits<double>::infinity()}};
  std::string line = formatMetricsLine(m);
  EXPECT_EQ(line, "{\"step\":3,\"loss\":null,\"lr\":0,\"grad_norm\":null,"
                  "\"tokens_per_s\":0,\"time_ms\":0,\"x\":null,"
                  "\"nonfinite\":true}");
  ASSERT_NO_THROW((void)nlohmann::json::parse(line)) << line;
}

TEST(Metrics, WriterFlushesEachLineAndRoundTrips) {
  TempDir dir;
  std::string path = dir.file("metrics.jsonl");
  Result<MetricsWriter> w = MetricsWriter::open(path);
  ASSERT_TRUE(w.ok()) << w.message();
  const double losses[] = {10.8251953125, 0.1 + 0.2, 1.0 / 3.0};
  for (int step = 0; step < 3; ++step) {
    StepMetrics m;
    m.step = step;
    m.loss = losses[step];
    m.lr = 6e-4 * (step + 1);
    m.gradNorm = 0.5;
    m.tokensPerSecond = 12345.678;
    m.timeMs = 99.5;
    ASSERT_TRUE(w->write(m).ok());
    // Readable before close: each line is flushed.
    EXPECT_EQ(lines(readFile(path)).size(), size_t(step + 1));
  }
  std::vector<std::string> ls = lines(readFile(path));
  for (int step = 0; step < 3; ++step) {
    nlohmann::ordered_json v; // (keeps the members in file order)
    ASSERT_NO_THROW(v = nlohmann::ordered_json::parse(ls[step])) << ls[step];
    ASSERT_TRUE(v.is_object());
    EXPECT_EQ(v.begin().key(), "step");
    EXPECT_EQ(v["step"].get<int64_t>(), step);
    EXPECT_EQ(v["loss"].get<double>(), losses[step]); // bitwise round trip
    EXPECT_EQ(v["lr"].get<double>(), 6e-4 * (step + 1));
    EXPECT_EQ(v["tokens_per_s"].get<double>(), 12345.678);
    EXPECT_FALSE(v.contains("nonfinite"));
  }
  ASSERT_TRUE(w->close().ok());
  EXPECT_FALSE(w->write(StepMetrics()).ok());

  // Append mode keeps earlier lines (resume).
  Result<MetricsWriter> a = MetricsWriter::open(path, /*append=*/true);
  ASSERT_TRUE(a.ok());
  StepMetrics m;
  m.step = 3;
  ASSERT_TRUE(a->write(m).ok());
  EXPECT_EQ(lines(readFile(path)).size(), 4u);
  Result<MetricsWriter> t = MetricsWriter::open(path);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(readFile(path), "");
}

TEST(Metrics, OpenError) {
  Result<MetricsWriter> w = MetricsWriter::open("/nonexistent/dir/m.jsonl");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("/nonexistent/dir/m.jsonl"), std::string::npos);
}

TEST(ProgressBar, PlainLinesEveryK) {
  std::FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, 12, 5);
    EXPECT_FALSE(bar.isTerminal()); // a regular file is not a tty
    for (int step = 0; step < 12; ++step)
      bar.update(step, 3.0 - 0.1 * step, 20000);
    bar.finish();
  }
  std::vector<std::string> ls = lines(contents(f));
  std::fclose(f);
  ASSERT_EQ(ls.size(), 4u);
  EXPECT_EQ(ls[0].rfind("step 1/12 | loss 3.0000 | 20.0k tok/s | ETA ", 0),
            0u)
      << ls[0];
  EXPECT_EQ(ls[1].rfind("step 5/12 | loss 2.6000", 0), 0u) << ls[1];
  EXPECT_EQ(ls[2].rfind("step 10/12 | loss 2.1000", 0), 0u) << ls[2];
  EXPECT_EQ(ls[3].rfind("step 12/12 | loss 1.9000", 0), 0u) << ls[3];
  EXPECT_EQ(ls[3].find('\r'), std::string::npos);
}

TEST(ProgressBar, TerminalRedrawsInPlace) {
  std::FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, 4, 100, 0, ProgressBar::Mode::Terminal);
    EXPECT_TRUE(bar.isTerminal());
    for (int step = 0; step < 4; ++step)
      bar.update(step, std::nan(""), 950);
    bar.finish(); // idempotent after the last step (and in the destructor)
  }
  std::string text = contents(f);
  std::fclose(f);
  EXPECT_EQ(text.front(), '\r');
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  // The first and the last step are always drawn.
  EXPECT_NE(text.find("step 1/4 [=====>              ]  25% | loss nan"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step 4/4 [====================] 100% | loss nan | "
                      "950 tok/s | ETA 0s"),
            std::string::npos)
      << text;
}

TEST(ProgressBar, ResumedRunCountsFromFirstStep) {
  std::FILE *f = std::tmpfile();
  {
    ProgressBar bar(f, 20, 10, 10);
    bar.update(10, 1.0, 1.0);
    bar.update(19, 1.0, 1.0);
  }
  std::vector<std::string> ls = lines(contents(f));
  std::fclose(f);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(ls[0].rfind("step 11/20", 0), 0u);
  EXPECT_EQ(ls[1].rfind("step 20/20", 0), 0u);
}

TEST(ProgressBar, Formatting) {
  EXPECT_EQ(ProgressBar::formatDuration(9.4), "9s");
  EXPECT_EQ(ProgressBar::formatDuration(83), "1m23s");
  EXPECT_EQ(ProgressBar::formatDuration(3720), "1h02m");
  EXPECT_EQ(ProgressBar::formatDuration(-1), "?");
  EXPECT_EQ(ProgressBar::formatDuration(std::nan("")), "?");
  EXPECT_EQ(ProgressBar::formatRate(950), "950");
  EXPECT_EQ(ProgressBar::formatRate(10240), "10.2k");
  EXPECT_EQ(ProgressBar::formatRate(3.4e6), "3.40M");
}

TEST(ProgressBar, AutoModeDetectsATerminal) {
  // A pseudo-terminal is a tty: Auto mode redraws in place there.
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
    GTEST_SKIP() << "no pseudo-terminals here";
  int slave = ::open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  std::FILE *tty = fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  {
    ProgressBar bar(tty, 2, 1);
    EXPECT_TRUE(bar.isTerminal());
    bar.update(0, 1.0, 10);
    bar.update(1, 0.5, 10);
  }
  std::fclose(tty);
  char buffer[512];
  ssize_t n = ::read(master, buffer, sizeof(buffer) - 1);
  ::close(master);
  ASSERT_GT(n, 0);
  std::string text(buffer, static_cast<size_t>(n));
  EXPECT_NE(text.find("\rstep 1/2 ["), std::string::npos) << text;
}
