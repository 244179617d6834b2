//===- trace_test.cpp - Chrome trace writer -------------------------------===//
#include "merak_rt/trace.h"

#include "json.h"
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

  json::Value root;
  std::string error;
  ASSERT_TRUE(json::parse(trace.toJson(), root, error)) << error;
  const json::Value *events = root.get("traceEvents");
  ASSERT_TRUE(events && events->isArray());
  ASSERT_EQ(events->array.size(), 6u);
  const auto &e = events->array;
  EXPECT_EQ(e[0].get("ph")->string, "M");
  EXPECT_EQ(e[0].get("name")->string, "process_name");
  EXPECT_EQ(e[0].get("args")->get("name")->string, "rank 3");
  EXPECT_EQ(e[0].get("pid")->integer, 3);
  EXPECT_EQ(e[1].get("name")->string, "thread_name");
  EXPECT_EQ(e[1].get("tid")->integer, 1);
  EXPECT_EQ(e[2].get("args")->get("name")->string, "comm \"ring\"");

  EXPECT_EQ(e[3].get("ph")->string, "X");
  EXPECT_EQ(e[3].get("name")->string, "matmul");
  EXPECT_EQ(e[3].get("cat")->string, "kernel");
  EXPECT_EQ(e[3].get("ts")->number, 12.5);
  EXPECT_EQ(e[3].get("dur")->number, 3.25);
  EXPECT_EQ(e[3].get("pid")->integer, 3);
  EXPECT_EQ(e[3].get("tid")->integer, 1);
  EXPECT_EQ(e[3].get("args")->get("flops")->number, 1.6e7);

  EXPECT_EQ(e[4].get("name")->string, "allreduce");
  EXPECT_EQ(e[4].get("tid")->integer, 2);
  EXPECT_GE(e[4].get("dur")->number, 1500.0); // slept 2 ms
  EXPECT_GE(e[4].get("ts")->number, 0.0);
  EXPECT_EQ(e[5].get("name")->string, "optimizer");
  EXPECT_GE(e[5].get("ts")->number,
            e[4].get("ts")->number + e[4].get("dur")->number);

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
