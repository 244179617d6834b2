//===- data_test.cpp - token files and samplers ---------------------------===//
#include "merak_rt/data.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

using namespace merak::rt;
using merak::rt::testing::TempDir;
using merak::rt::testing::writeFile;

namespace {
/// Writes tokens 0, 1, ..., n-1 (mod 65536), so a window's first input
/// token is its start (for n <= 65536).
std::string writeTokens(const TempDir &dir, int64_t n,
                        const std::string &name = "tokens.bin") {
  std::string bytes;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t t = static_cast<uint16_t>(i);
    bytes += static_cast<char>(t & 0xFF);
    bytes += static_cast<char>(t >> 8);
  }
  std::string path = dir.file(name);
  writeFile(path, bytes);
  return path;
}

/// The random sampler, re-implemented from the formula in data.h.
int64_t referenceRandomStart(uint64_t seed, uint64_t step, uint64_t row,
                             uint64_t m) {
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(mix(mix(seed) ^ step) ^ row);
  unsigned __int128 two64 = static_cast<unsigned __int128>(1) << 64;
  unsigned __int128 limit = two64 - two64 % m;
  while (h >= limit)
    h = mix(h);
  return static_cast<int64_t>(h % m);
}
} // namespace

TEST(TokenDataset, OpenAndTokens) {
  TempDir dir;
  std::string path = writeTokens(dir, 100);
  Result<TokenDataset> d = TokenDataset::open(path, 8);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->numTokens(), 100);
  EXPECT_EQ(d->seqLen(), 8);
  EXPECT_EQ(d->numStarts(), 91);
  EXPECT_EQ(d->token(0), 0);
  EXPECT_EQ(d->token(99), 99);
  EXPECT_EQ(d->sampler(), Sampler::Sequential);
  EXPECT_EQ(d->path(), path);

  TokenDataset moved = std::move(d).value();
  EXPECT_EQ(moved.token(42), 42);
}

TEST(TokenDataset, LittleEndian) {
  TempDir dir;
  std::string path = dir.file("le.bin");
  writeFile(path, std::string("\x34\x12\xff\xff\x01\x00\x00\x01", 8));
  Result<TokenDataset> d = TokenDataset::open(path, 2);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->token(0), 0x1234);
  EXPECT_EQ(d->token(1), 0xFFFF);
  EXPECT_EQ(d->token(2), 1);
  EXPECT_EQ(d->token(3), 0x100);
}

TEST(TokenDataset, OpenErrors) {
  TempDir dir;
  auto expectError = [](const std::string &path, int64_t t,
                        const std::string &cause) {
    Result<TokenDataset> d = TokenDataset::open(path, t);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.message().find(path), std::string::npos) << d.message();
    EXPECT_NE(d.message().find(cause), std::string::npos) << d.message();
  };
  expectError(dir.file("missing.bin"), 8, "cannot open");
  writeFile(dir.file("odd.bin"), std::string(21, 'x'));
  expectError(dir.file("odd.bin"), 8, "is odd");
  std::string path = writeTokens(dir, 9, "short.bin");
  expectError(path, 8, "holds 9 tokens; sequence length 8 needs at least 10");
  writeFile(dir.file("empty.bin"), "");
  expectError(dir.file("empty.bin"), 8, "holds 0 tokens");
  expectError(dir.path(), 8, "not a regular file");
  path = writeTokens(dir, 10, "exact.bin");
  expectError(path, 0, "at least 1");
  EXPECT_TRUE(TokenDataset::open(path, 8).ok()); // N = T + 2 is enough
}

TEST(TokenDataset, SequentialWindowsExact) {
  TempDir dir;
  const int64_t n = 100, t = 8, b = 3, m = n - t - 1; // m = 91
  Result<TokenDataset> d = TokenDataset::open(writeTokens(dir, n), t);
  ASSERT_TRUE(d.ok());
  std::vector<int64_t> in(b * t), lab(b * t);
  for (int64_t s = 0; s < 10; ++s) {
    ASSERT_TRUE(d->fill(s, b, in.data(), lab.data()).ok());
    for (int64_t r = 0; r < b; ++r) {
      int64_t start = ((s * b + r) * t) % m;
      EXPECT_EQ(d->windowStart(s, b, r), start);
      for (int64_t k = 0; k < t; ++k) {
        EXPECT_EQ(in[r * t + k], start + k) << s << "," << r << "," << k;
        EXPECT_EQ(lab[r * t + k], start + k + 1) << s << "," << r << "," << k;
      }
    }
  }
  // Hand-computed values, wrap-around included.
  EXPECT_EQ(d->windowStart(0, b, 0), 0);
  EXPECT_EQ(d->windowStart(0, b, 2), 16);
  EXPECT_EQ(d->windowStart(3, b, 2), 88);  // 11 * 8 = 88
  EXPECT_EQ(d->windowStart(4, b, 0), 5);   // 96 mod 91
  EXPECT_EQ(d->windowStart(4, b, 1), 13);  // 104 mod 91
  // The last possible start (m - 1 = 90) keeps the labels inside the file.
  Result<TokenDataset> e = TokenDataset::open(writeTokens(dir, 10, "ten"), 1);
  ASSERT_TRUE(e.ok()); // m = 8
  std::vector<int64_t> i1(1), l1(1);
  ASSERT_TRUE(e->fill(7, 1, i1.data(), l1.data()).ok());
  EXPECT_EQ(i1[0], 7);
  EXPECT_EQ(l1[0], 8);
  ASSERT_TRUE(e->fill(8, 1, i1.data(), l1.data()).ok());
  EXPECT_EQ(i1[0], 0);
  // No overflow for huge steps (128-bit intermediate).
  int64_t huge = int64_t(1) << 60;
  unsigned __int128 exact =
      (static_cast<unsigned __int128>(huge) * 7 + 5) * 8 % 91;
  EXPECT_EQ(d->windowStart(huge, 7, 5), static_cast<int64_t>(exact));
}

TEST(TokenDataset, ShardedRowsMatchTheFullBatch) {
  TempDir dir;
  const int64_t t = 16, b = 8;
  for (Sampler sampler : {Sampler::Sequential, Sampler::Random}) {
    Result<TokenDataset> d =
        TokenDataset::open(writeTokens(dir, 1000), t, sampler, 77);
    ASSERT_TRUE(d.ok());
    std::vector<int64_t> in(b * t), lab(b * t);
    ASSERT_TRUE(d->fill(5, b, in.data(), lab.data()).ok());
    for (int64_t begin = 0; begin < b; begin += 2) {
      std::vector<int64_t> si(2 * t), sl(2 * t);
      ASSERT_TRUE(d->fill(5, b, begin, begin + 2, si.data(), sl.data()).ok());
      EXPECT_TRUE(std::equal(si.begin(), si.end(), in.begin() + begin * t));
      EXPECT_TRUE(std::equal(sl.begin(), sl.end(), lab.begin() + begin * t));
    }
    EXPECT_TRUE(d->fill(5, b, 3, 3, nullptr, nullptr).ok()); // empty range
  }
}

TEST(TokenDataset, FillErrors) {
  TempDir dir;
  Result<TokenDataset> d = TokenDataset::open(writeTokens(dir, 100), 8);
  ASSERT_TRUE(d.ok());
  std::vector<int64_t> in(64), lab(64);
  EXPECT_FALSE(d->fill(-1, 2, in.data(), lab.data()).ok());
  EXPECT_FALSE(d->fill(0, 0, in.data(), lab.data()).ok());
  EXPECT_FALSE(d->fill(0, 4, 3, 5, in.data(), lab.data()).ok());
  EXPECT_FALSE(d->fill(0, 4, -1, 2, in.data(), lab.data()).ok());
  Status s = d->fill(0, 4, 3, 2, in.data(), lab.data());
  EXPECT_NE(s.message().find("invalid rows [3, 2) of a batch of 4"),
            std::string::npos)
      << s.message();
}

TEST(TokenDataset, RandomSamplerFollowsTheDocumentedFormula) {
  TempDir dir;
  const int64_t n = 1000, t = 10;
  Result<TokenDataset> d =
      TokenDataset::open(writeTokens(dir, n), t, Sampler::Random, 1234);
  ASSERT_TRUE(d.ok());
  const uint64_t m = static_cast<uint64_t>(n - t - 1);
  for (int64_t s = 0; s < 50; ++s)
    for (int64_t r = 0; r < 8; ++r) {
      int64_t start = d->windowStart(s, 8, r);
      EXPECT_EQ(start, referenceRandomStart(1234, s, r, m));
      EXPECT_EQ(start, d->windowStart(s, 3, r)) << "batch size must not matter";
      EXPECT_GE(start, 0);
      EXPECT_LT(start, static_cast<int64_t>(m));
    }
  // splitmix64 reference values (seed 0 sequence of the original generator).
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  // Different seeds give different batches; the same seed the same ones.
  Result<TokenDataset> other =
      TokenDataset::open(writeTokens(dir, n, "b.bin"), t, Sampler::Random, 1);
  int same = 0;
  for (int64_t r = 0; r < 64; ++r)
    same += d->windowStart(0, 64, r) == other->windowStart(0, 64, r);
  EXPECT_LT(same, 4);
  other->setSampler(Sampler::Random, 1234);
  for (int64_t r = 0; r < 64; ++r)
    EXPECT_EQ(d->windowStart(9, 64, r), other->windowStart(9, 64, r));
}

TEST(TokenDataset, RandomSamplerIsUniform) {
  TempDir dir;
  // m = 3 does not divide 2^64: exercises the rejection bound.
  for (int64_t n : {int64_t(5), int64_t(13)}) {
    Result<TokenDataset> d =
        TokenDataset::open(writeTokens(dir, n, "u" + std::to_string(n)), 1,
                           Sampler::Random, 99);
    ASSERT_TRUE(d.ok());
    const int64_t m = n - 2;
    std::map<int64_t, int> counts;
    const int samples = 60000;
    for (int i = 0; i < samples; ++i) {
      int64_t start = d->windowStart(i / 16, 16, i % 16);
      ASSERT_EQ(start, referenceRandomStart(99, i / 16, i % 16, m));
      ++counts[start];
    }
    ASSERT_EQ(static_cast<int64_t>(counts.size()), m);
    double expected = double(samples) / double(m);
    for (auto [start, count] : counts)
      EXPECT_NEAR(count, expected, expected * 0.06) << "start " << start;
  }
}

TEST(TokenDataset, SamplerNames) {
  EXPECT_EQ(parseSampler("random"), Sampler::Random);
  EXPECT_EQ(parseSampler("sequential"), Sampler::Sequential);
  EXPECT_FALSE(parseSampler("Random").has_value());
  EXPECT_STREQ(samplerName(Sampler::Random), "random");
  EXPECT_STREQ(samplerName(Sampler::Sequential), "sequential");
}
