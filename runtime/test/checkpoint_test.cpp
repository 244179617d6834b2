//===- checkpoint_test.cpp - checkpoint directories -----------------------===//
#include "merak_rt/safetensors.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <random>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace merak::rt;
using merak::rt::testing::fileExists;
using merak::rt::testing::readFile;
using merak::rt::testing::TempDir;
using merak::rt::testing::writeFile;

TEST(Checkpoint, SaveAndLoadLatest) {
  TempDir tmp;
  std::string dir = tmp.file("ckpt");
  EXPECT_FALSE(hasCheckpoint(dir));
  std::vector<float> w(10);
  for (int step : {10, 20, 30}) {
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = float(step) + float(i);
    ASSERT_TRUE(saveCheckpoint(dir, step, {{"w", DType::F32, {10}, w.data()}},
                               {{"model", "gpt"}})
                    .ok());
  }
  EXPECT_TRUE(hasCheckpoint(dir));
  EXPECT_EQ(readFile(dir + "/latest"), "step_30.safetensors\n");
  EXPECT_TRUE(fileExists(dir + "/step_10.safetensors"));
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->step, 30);
  EXPECT_EQ(c->file.metadata.at("model"), "gpt");
  EXPECT_EQ(c->file.metadata.at("step"), "30");
  std::vector<float> out(10);
  ASSERT_TRUE(c->file.copyTensor("w", DType::F32, {10}, out.data()).ok());
  EXPECT_EQ(out, w);

  // keepLast prunes older files but never the newest.
  ASSERT_TRUE(
      saveCheckpoint(dir, 40, {{"w", DType::F32, {10}, w.data()}}, {}, 2).ok());
  EXPECT_FALSE(fileExists(dir + "/step_10.safetensors"));
  EXPECT_FALSE(fileExists(dir + "/step_20.safetensors"));
  EXPECT_TRUE(fileExists(dir + "/step_30.safetensors"));
  EXPECT_TRUE(fileExists(dir + "/step_40.safetensors"));
  EXPECT_EQ(checkpointFileName(7), "step_7.safetensors");
  EXPECT_FALSE(saveCheckpoint(dir, -1, {}).ok());
}

TEST(Checkpoint, LoadErrors) {
  TempDir tmp;
  std::string dir = tmp.path();
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find(dir + "/latest"), std::string::npos)
      << c.message();

  writeFile(dir + "/latest", "garbage\n");
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("corrupt"), std::string::npos) << c.message();

  writeFile(dir + "/latest", "step_5.safetensors\n");
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("step_5.safetensors': cannot open"),
            std::string::npos)
      << c.message();

  float x = 1;
  ASSERT_TRUE(saveCheckpoint(dir, 6, {{"x", DType::F32, {1}, &x}}).ok());
  std::string bytes = readFile(dir + "/step_6.safetensors");
  writeFile(dir + "/step_6.safetensors", bytes.substr(0, bytes.size() - 1));
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("truncated"), std::string::npos) << c.message();

  // A file renamed by hand: its recorded step disagrees with its name.
  ASSERT_TRUE(saveCheckpoint(dir, 8, {{"x", DType::F32, {1}, &x}}).ok());
  std::rename((dir + "/step_8.safetensors").c_str(),
              (dir + "/step_9.safetensors").c_str());
  writeFile(dir + "/latest", "step_9.safetensors\n");
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("records step 8"), std::string::npos)
      << c.message();
}

// A writer killed at a random point while writing a large checkpoint leaves
// the previous checkpoint and `latest` loadable and intact.
namespace {
constexpr int64_t kBigFloats = 4 << 20; // 3 tensors of 16 MiB

std::vector<float> pattern(int64_t step, int which) {
  std::vector<float> v(kBigFloats);
  for (int64_t i = 0; i < kBigFloats; ++i)
    v[i] = float(step * 1000 + which) + float(i % 977);
  return v;
}

Status saveBig(const std::string &dir, int64_t step) {
  std::vector<float> a = pattern(step, 0), b = pattern(step, 1),
                     c = pattern(step, 2);
  return saveCheckpoint(dir, step,
                        {{"model.a", DType::F32, {kBigFloats}, a.data()},
                         {"model.b", DType::F32, {kBigFloats}, b.data()},
                         {"optimizer.adamw.m.a", DType::F32, {kBigFloats},
                          c.data()}},
                        {}, /*keepLast=*/2);
}

void expectIntact(const Checkpoint &c) {
  for (int which = 0; which < 3; ++which) {
    const Tensor &t = c.file.tensors[which];
    std::vector<float> want = pattern(c.step, which);
    ASSERT_EQ(t.data.size(), want.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(t.data.data(), want.data(), t.data.size()), 0)
        << "checkpoint step " << c.step << " tensor " << t.name;
  }
}

pid_t spawnWriter(const std::string &dir, int64_t step) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(saveBig(dir, step).ok() ? 0 : 1);
  return pid;
}
} // namespace

TEST(Checkpoint, SigkillDuringWriteLeavesPreviousCheckpoint) {
  TempDir tmp;
  std::string dir = tmp.file("ckpt");
  ASSERT_TRUE(saveBig(dir, 1).ok());

  // How long does one full save take (in a child, like the real runs)?
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = spawnWriter(dir, 2);
  ASSERT_GT(pid, 0);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  double fullUs = std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - t0)
                      .count();

  int64_t expectedStep = 2, nextStep = 3;
  int interrupted = 0, midWrite = 0;
  std::mt19937 rng(1234);
  // At least 8 kills, and more (up to 40) until two landed mid-write, so
  // that timing noise cannot make the test vacuous.
  int trial = 0;
  for (; trial < 40 && (trial < 8 || midWrite < 2); ++trial) {
    pid = spawnWriter(dir, nextStep);
    ASSERT_GT(pid, 0);
    std::uniform_real_distribution<double> when(0.0, fullUs);
    std::this_thread::sleep_for(
        std::chrono::microseconds(static_cast<int64_t>(when(rng))));
    kill(pid, SIGKILL);
    waitpid(pid, &wstatus, 0);
    bool finished = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    if (finished)
      expectedStep = nextStep;
    else
      ++interrupted;
    // A temporary file left behind means the kill landed mid-write.
    std::string tmpPrefix = ".tmp." + std::to_string(pid);
    DIR *d = opendir(dir.c_str());
    std::vector<std::string> leftovers;
    while (struct dirent *e = readdir(d))
      if (std::string(e->d_name).find(tmpPrefix) != std::string::npos)
        leftovers.push_back(dir + "/" + e->d_name);
    closedir(d);
    midWrite += !leftovers.empty();
    for (const std::string &f : leftovers) // keep the disk footprint small
      std::remove(f.c_str());
    Result<Checkpoint> c = loadLatestCheckpoint(dir);
    ASSERT_TRUE(c.ok()) << "trial " << trial << ": " << c.message();
    // Killed before the tracker was renamed: the previous one is latest.
    // Killed after: the new one. Either way it is complete.
    EXPECT_TRUE(c->step == expectedStep || c->step == nextStep)
        << "trial " << trial << " step " << c->step;
    expectIntact(c.value());
    expectedStep = c->step;
    ++nextStep;
  }
  EXPECT_GT(interrupted, 0) << "no writer was killed before finishing";
  EXPECT_GT(midWrite, 0) << "no writer was killed in the middle of writing";
  std::printf("full save %.0f ms; %d of %d writers killed, %d mid-write\n",
              fullUs / 1000, interrupted, trial, midWrite);
}
