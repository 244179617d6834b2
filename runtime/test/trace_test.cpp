//===- trace_test.cpp - Chrome trace writer -------------------------------===//
#include "merak_rt/trace.h"

#include <nlohmann/json.hpp>
#include "test_util.h"

#include <gtest/gtest.h>

#include <thread>

using namespace merak::rt;
using merak::rt::testing::fileExists;
using merak::rt::testing::readFile;
using merak::rt::testing::TempDir;

TEST(Trace, EventsAndMetadata) {
  TraceWriter trace(3);
  trace.setProcessName("rank 3");
  trace.setThreadName(1, "compute");
  trace.setThreadName(2, "comm \"ring\"");
  trace.complete("matmul", "kernel", 12.5, 3.25, 1, {{"flops", 1.6e7}});
  TraceWriter::Span span = trace.begin("allreduce", "comm", 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  trace.end(span);
  trace.end(span); // second end is a no-op
  {
    TraceWriter::Scope scope(&trace, "optimizer", "kernel", 1);
  }
  { TraceWriter::Scope nothing(nullptr, "ignored", "x"); }
  EXPECT_EQ(trace.numEvents(), 3u);

  nlohmann::json root;
  ASSERT_NO_THROW(root = nlohmann::json::parse(trace.toJson()));
  ASSERT_TRUE(root.contains("traceEvents") && root["traceEvents"].is_array());
  const nlohmann::json &e = root["traceEvents"];
  ASSERT_EQ(e.size(), 6u);
  EXPECT_EQ(e[0]["ph"], "M");
  EXPECT_EQ(e[0]["name"], "process_name");
  EXPECT_EQ(e[0]["args"]["name"], "rank 3");
  EXPECT_EQ(e[0]["pid"].get<int64_t>(), 3);
  EXPECT_EQ(e[1]["name"], "thread_name");
  EXPECT_EQ(e[1]["tid"].get<int64_t>(), 1);
  EXPECT_EQ(e[2]["args"]["name"], "comm \"ring\"");

  EXPECT_EQ(e[3]["ph"], "X");
  EXPECT_EQ(e[3]["name"], "matmul");
  EXPECT_EQ(e[3]["cat"], "kernel");
  EXPECT_EQ(e[3]["ts"].get<double>(), 12.5);
  EXPECT_EQ(e[3]["dur"].get<double>(), 3.25);
  EXPECT_EQ(e[3]["pid"].get<int64_t>(), 3);
  EXPECT_EQ(e[3]["tid"].get<int64_t>(), 1);
  EXPECT_EQ(e[3]["args"]["flops"].get<double>(), 1.6e7);

  EXPECT_EQ(e[4]["name"], "allreduce");
  EXPECT_EQ(e[4]["tid"].get<int64_t>(), 2);
  EXPECT_GE(e[4]["dur"].get<double>(), 1500.0); // slept 2 ms
  EXPECT_GE(e[4]["ts"].get<double>(), 0.0);
  EXPECT_EQ(e[5]["name"], "optimizer");
  EXPECT_GE(e[5]["ts"].get<double>(),
            e[4]["ts"].get<double>() + e[4]["dur"].get<double>());

  trace.clear();
  EXPECT_EQ(trace.numEvents(), 0u);
}

TEST(Trace, MonotonicClock) {
  TraceWriter trace;
  double last = trace.nowUs();
  EXPECT_GE(last, 0.0);
  for (int i = 0; i < 1000; ++i) {
    double now = trace.nowUs();
    EXPECT_GE(now, last);
    last = now;
  }
}

TEST(Trace, WriteAtomically) {
  TempDir dir;
  TraceWriter trace;
  trace.complete("a", "b", 0, 1);
  std::string path = dir.file("trace.json");
  ASSERT_TRUE(trace.write(path).ok());
  EXPECT_EQ(readFile(path), trace.toJson());
  EXPECT_FALSE(fileExists(path + ".tmp." + std::to_string(getpid())));
  Status s = trace.write(dir.file("missing/trace.json"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing/trace.json"), std::string::npos);
}
