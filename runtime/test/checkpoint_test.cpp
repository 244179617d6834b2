//===- checkpoint_test.cpp - checkpoint directories -----------------------===//
#include "merak_rt/safetensors.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
  EXPECT_EQ(readFile(dir + "/latest"), "step_30\n");
  EXPECT_TRUE(fileExists(dir + "/step_10/shard-0-of-1.safetensors"));
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->step, 30);
  ASSERT_EQ(c->shards.size(), 1u);
  EXPECT_EQ(c->shards[0].metadata.at("model"), "gpt");
  EXPECT_EQ(c->shards[0].metadata.at("step"), "30");
  EXPECT_EQ(c->shards[0].metadata.at("merak.world"), "1");
  EXPECT_TRUE(c->shards[0].tensors[0].data.empty()); // headers only
  std::vector<float> out(10);
  ASSERT_TRUE(c->shards[0].copyTensor("w", DType::F32, {10}, out.data()).ok());
  EXPECT_EQ(out, w);

  // keepLast prunes older checkpoints but never the newest.
  ASSERT_TRUE(
      saveCheckpoint(dir, 40, {{"w", DType::F32, {10}, w.data()}}, {}, 2).ok());
  EXPECT_FALSE(fileExists(dir + "/step_10/shard-0-of-1.safetensors"));
  EXPECT_FALSE(fileExists(dir + "/step_20"));
  EXPECT_TRUE(fileExists(dir + "/step_30/shard-0-of-1.safetensors"));
  EXPECT_TRUE(fileExists(dir + "/step_40/shard-0-of-1.safetensors"));

  // A killed run's leftovers (an unfinished step, a half-written tracker)
  // go with the next commit; other files in the directory stay.
  ASSERT_TRUE(beginCheckpoint(dir, 41).ok());
  writeFile(dir + "/latest.tmp.999999", "step_4");
  writeFile(dir + "/notes.txt", "mine");
  ASSERT_TRUE(saveCheckpoint(dir, 50, {{"w", DType::F32, {10}, w.data()}}).ok());
  EXPECT_FALSE(fileExists(dir + "/step_41.partial"));
  EXPECT_FALSE(fileExists(dir + "/latest.tmp.999999"));
  EXPECT_TRUE(fileExists(dir + "/notes.txt"));
  EXPECT_TRUE(fileExists(dir + "/step_30/shard-0-of-1.safetensors"));
  EXPECT_EQ(checkpointName(7), "step_7");
  EXPECT_EQ(checkpointShardName(3, 8), "shard-3-of-8.safetensors");
  EXPECT_FALSE(saveCheckpoint(dir, -1, {}).ok());
}

TEST(Checkpoint, ShardsOfSeveralProcesses) {
  TempDir tmp;
  std::string dir = tmp.file("ckpt");
  float a = 1, b = 2;
  ASSERT_TRUE(beginCheckpoint(dir, 5).ok());
  ASSERT_TRUE(writeCheckpointShard(dir, 5, 1, 2, {{"b", DType::F32, {1}, &b}}).ok());
  // Not all shards written: no commit, `latest` untouched.
  Status s = commitCheckpoint(dir, 5, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("shard-0-of-2.safetensors was not written"), std::string::npos)
      << s.message();
  EXPECT_FALSE(hasCheckpoint(dir));
  ASSERT_TRUE(writeCheckpointShard(dir, 5, 0, 2, {{"a", DType::F32, {1}, &a}}).ok());
  ASSERT_TRUE(commitCheckpoint(dir, 5, 2).ok());
  EXPECT_FALSE(fileExists(dir + "/step_5.partial"));
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_EQ(c->shards.size(), 2u);
  EXPECT_EQ(c->shards[0].metadata.at("merak.rank"), "0");
  EXPECT_EQ(c->shards[1].tensors[0].name, "b");

  // A shard lost after the commit, or one of another save mixed in.
  ASSERT_EQ(std::remove((dir + "/step_5/shard-1-of-2.safetensors").c_str()), 0);
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("incomplete: shard-1-of-2.safetensors is missing"),
            std::string::npos)
      << c.message();
  writeFile(dir + "/step_5/shard-1-of-3.safetensors", readFile(dir + "/step_5/shard-0-of-2.safetensors"));
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("mixes shards of 2 and 3 processes"), std::string::npos)
      << c.message();
}

TEST(Checkpoint, LoadsTheFirstFormat) {
  // `latest` naming a single step_<N>.safetensors file (before sharding).
  TempDir tmp;
  std::string dir = tmp.path();
  float x = 4;
  ASSERT_TRUE(writeSafetensors(dir + "/step_3.safetensors", {{"x", DType::F32, {1}, &x}},
                               {{"step", "3"}})
                  .ok());
  writeFile(dir + "/latest", "step_3.safetensors\n");
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->step, 3);
  ASSERT_EQ(c->shards.size(), 1u);
  float y = 0;
  ASSERT_TRUE(c->shards[0].copyTensor("x", DType::F32, {1}, &y).ok());
  EXPECT_EQ(y, 4);
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

  writeFile(dir + "/latest", "step_5\n");
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("step_5': No such file"), std::string::npos)
      << c.message();

  float x = 1;
  ASSERT_TRUE(saveCheckpoint(dir, 6, {{"x", DType::F32, {1}, &x}}).ok());
  std::string shard = dir + "/step_6/shard-0-of-1.safetensors";
  std::string bytes = readFile(shard);
  writeFile(shard, bytes.substr(0, bytes.size() - 1));
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("truncated"), std::string::npos) << c.message();

  // A directory renamed by hand: its recorded step disagrees with its name.
  ASSERT_TRUE(saveCheckpoint(dir, 8, {{"x", DType::F32, {1}, &x}}).ok());
  std::rename((dir + "/step_8").c_str(), (dir + "/step_9").c_str());
  writeFile(dir + "/latest", "step_9\n");
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
    const Tensor &t = c.shards.at(0).tensors[which];
    std::vector<float> want = pattern(c.step, which), got(want.size());
    ASSERT_EQ(t.byteSize, want.size() * sizeof(float));
    ASSERT_TRUE(c.shards[0].readData(t, got.data()).ok());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), t.byteSize), 0)
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
    // A .partial directory left behind means the kill landed mid-save
    // (the next save of that step replaces it).
    std::string partial = dir + "/step_" + std::to_string(nextStep) + ".partial";
    midWrite += fileExists(partial);
    std::filesystem::remove_all(partial); // keep the disk footprint small
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

//===----------------------------------------------------------------------===//
// Sharded checkpoints of a program (checkpoint_shards.h)
//===----------------------------------------------------------------------===//

#include "checkpoint_shards.h"

namespace {
// w: [4, 12] split over tp along dim 1 in 3 blocks (Megatron's fused QKV);
// m: w's ZeRO-1 optimizer state; b: [5], ZeRO-1 over dp (padded).
struct Layout {
  int tp, dp;
  Manifest m;
  /// w's blocks along dim 1 (equal, or ragged as a GQA projection's q, k, v).
  std::vector<int64_t> blocks = {4, 4, 4};
};

Layout layout(int tp, int dp, std::vector<int64_t> ragged = {}) {
  Layout l{tp, dp, {}};
  if (!ragged.empty())
    l.blocks = ragged;
  auto add = [&](const std::string &name, std::vector<int64_t> global, bool shard, bool zero) {
    ManifestTensor t;
    t.name = name;
    t.kind = zero ? "state" : "trainable";
    t.globalShape = global;
    std::vector<int64_t> local = global;
    if (shard && tp > 1) {
      t.shardAxis = 1, t.shardParts = tp, t.shardBlocks = 3;
      if (!ragged.empty())
        t.shardBlockSizes = ragged;
      local[1] /= tp;
    }
    int64_t n = 1;
    for (int64_t d : local)
      n *= d;
    if (zero && dp > 1) {
      t.zeroParts = dp;
      local = {(n + dp - 1) / dp};
    }
    t.shape = local;
    t.elements = 1;
    for (int64_t d : local)
      t.elements *= static_cast<uint64_t>(d);
    t.bytes = t.elements * 4;
    t.offset = l.m.params.empty() ? 0 : l.m.params.back().offset + l.m.params.back().bytes;
    l.m.params.push_back(t);
  };
  add("w", {4, 12}, true, false);
  add("m", {4, 12}, true, true);
  add("b", {5}, false, true);
  return l;
}

float value(const std::string &name, int64_t i) { return float(name[0]) * 100 + float(i); }

/// The tp rank holding column c of w (and m): part (c - start) / (len / tp)
/// of its block [start, start + len).
int ownerOf(const Layout &l, int64_t c) {
  int64_t start = 0;
  for (int64_t len : l.blocks) {
    if (c < start + len)
      return static_cast<int>((c - start) / (len / l.tp));
    start += len;
  }
  return -1;
}

/// Rank (tp, dp)'s parameter storage, written by hand: column c of w and m
/// is in its block's part ownerOf(c) (blocks of 4: (c % 4) / 2 at tp 2) --
/// then flattened and split for m; b flattened and split over dp.
std::vector<float> rankStorage(const Layout &l, int tp, int dp) {
  std::vector<float> P;
  for (const ManifestTensor &t : l.m.params) {
    std::vector<float> local;
    if (t.name == "b") {
      for (int64_t i = 0; i < 5; ++i)
        local.push_back(value("b", i));
    } else {
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 12; ++c)
          if (l.tp == 1 || ownerOf(l, c) == tp)
            local.push_back(value(t.name, r * 12 + c));
    }
    if (t.zeroSharded()) {
      std::vector<float> part(t.elements, 0.0f);
      for (uint64_t k = 0; k < t.elements; ++k)
        if (dp * t.elements + k < local.size())
          part[k] = local[dp * t.elements + k];
      local = part;
    }
    P.insert(P.end(), local.begin(), local.end());
  }
  return P;
}

/// Saves `from`'s every rank and resumes every rank of `to`.
void roundTrip(const Layout &from, const Layout &to) {
  TempDir tmp;
  std::string dir = tmp.file("ckpt");
  ASSERT_TRUE(beginCheckpoint(dir, 1).ok());
  std::vector<std::vector<float>> storage;
  int world = from.tp * from.dp;
  for (int d = 0; d < from.dp; ++d)
    for (int t = 0; t < from.tp; ++t) {
      storage.push_back(rankStorage(from, t, d));
      RankPlace place{t, d, [](const ManifestTensor &) { return true; }, nullptr};
      CheckpointShard shard = checkpointShard(
          from.m, reinterpret_cast<const char *>(storage.back().data()), place);
      ASSERT_TRUE(writeCheckpointShard(dir, 1, d * from.tp + t, world, shard.tensors,
                                       {{"merak.pieces", shard.piecesJson}})
                      .ok());
    }
  ASSERT_TRUE(commitCheckpoint(dir, 1, world).ok());
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.message();
  for (int d = 0; d < to.dp; ++d)
    for (int t = 0; t < to.tp; ++t) {
      std::vector<float> want = rankStorage(to, t, d), got(want.size(), -1.0f);
      RankPlace place{t, d, [](const ManifestTensor &) { return true; }, nullptr};
      RestoreReport report;
      Status s = restoreCheckpoint(*c, to.m, reinterpret_cast<char *>(got.data()), place,
                                   /*partial=*/false, report);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(got, want) << "saved at tp " << from.tp << " dp " << from.dp
                           << ", resumed at tp " << to.tp << " dp " << to.dp << " rank (" << t
                           << ", " << d << ")";
      EXPECT_TRUE(report.unused.empty());
      EXPECT_TRUE(report.missing.empty());
    }
}
} // namespace

TEST(ShardedCheckpoint, ResumesUnderAnyMesh) {
  std::vector<std::pair<int, int>> meshes = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {2, 3}, {1, 4}};
  for (auto [ft, fd] : meshes)
    for (auto [tt, td] : meshes)
      roundTrip(layout(ft, fd), layout(tt, td));
}

// Ragged blocks (a fused GQA projection: q of 6 columns, k of 4, v of 2):
// every rank holds its part of each, saved and resumed under any mesh.
TEST(ShardedCheckpoint, RaggedBlocksResumeUnderAnyMesh) {
  std::vector<std::pair<int, int>> meshes = {{1, 1}, {2, 1}, {2, 2}, {1, 3}};
  for (auto [ft, fd] : meshes)
    for (auto [tt, td] : meshes)
      roundTrip(layout(ft, fd, {6, 4, 2}), layout(tt, td, {6, 4, 2}));
  Layout l = layout(2, 1, {6, 4, 2});
  std::vector<float> P = rankStorage(l, 1, 0);
  CheckpointShard s = checkpointShard(l.m, reinterpret_cast<const char *>(P.data()),
                                      {1, 0, [](const ManifestTensor &) { return true; }, nullptr});
  EXPECT_NE(s.piecesJson.find("\"w\":{\"global_shape\":[4,12],\"axis\":1,"
                              "\"slabs\":[[3,3],[8,2],[11,1]]}"),
            std::string::npos)
      << s.piecesJson;
}

TEST(ShardedCheckpoint, OnlyOneRankWritesEachPiece) {
  Layout l = layout(2, 2);
  std::vector<float> P = rankStorage(l, 1, 1);
  const char *base = reinterpret_cast<const char *>(P.data());
  // tp 1, dp 1: w's shard (tp-sharded, replicated over dp) is dp 0's to
  // write, b (replicated over tp) tp 0's; m's part is its own.
  CheckpointShard s = checkpointShard(l.m, base, {1, 1, [](const ManifestTensor &) { return true; }, nullptr});
  ASSERT_EQ(s.tensors.size(), 1u);
  EXPECT_EQ(s.tensors[0].name, "m");
  EXPECT_EQ(s.tensors[0].shape, (std::vector<int64_t>{12}));
  EXPECT_NE(s.piecesJson.find("\"m\":{\"global_shape\":[4,12],\"axis\":1,"
                              "\"slabs\":[[2,2],[6,2],[10,2]],\"flat\":[12,12]}"),
            std::string::npos)
      << s.piecesJson;
  s = checkpointShard(l.m, base, {0, 1, [](const ManifestTensor &) { return true; }, nullptr});
  ASSERT_EQ(s.tensors.size(), 2u);
  EXPECT_EQ(s.tensors[1].name, "b");
  EXPECT_EQ(s.tensors[1].shape, (std::vector<int64_t>{2})); // 5 = 3 + 2, no padding
  // Another stage's parameters are not written here.
  s = checkpointShard(l.m, base, {0, 0, [](const ManifestTensor &t) { return t.name == "b"; }, nullptr});
  ASSERT_EQ(s.tensors.size(), 1u);
  EXPECT_EQ(s.tensors[0].name, "b");
}

TEST(ShardedCheckpoint, IncompletePiecesAreAnError) {
  Layout from = layout(2, 1), to = layout(1, 1);
  TempDir tmp;
  std::string dir = tmp.file("ckpt");
  std::vector<float> P = rankStorage(from, 0, 0);
  CheckpointShard shard = checkpointShard(from.m, reinterpret_cast<const char *>(P.data()),
                                          {0, 0, [](const ManifestTensor &) { return true; }, nullptr});
  ASSERT_TRUE(saveCheckpoint(dir, 1, shard.tensors, {{"merak.pieces", shard.piecesJson}}).ok());
  Result<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.message();
  std::vector<float> got(100);
  RestoreReport report;
  Status s = restoreCheckpoint(*c, to.m, reinterpret_cast<char *>(got.data()),
                               {0, 0, [](const ManifestTensor &) { return true; }, nullptr},
                               /*partial=*/false, report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the pieces of tensor 'w' hold 24 of its 48 elements"),
            std::string::npos)
      << s.message();
}
