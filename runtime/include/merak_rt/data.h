//===- data.h - nanoGPT-style token files and batch samplers ----*- C++ -*-===//
//
// A token file is a flat array of little-endian uint16 token ids with no
// header (what nanoGPT's prepare.py writes as train.bin). The file is
// memory-mapped read-only.
//
// Notation: N tokens in the file, sequence length T, global batch size B,
// step s (from 0), global row r (from 0, 0 <= r < B). Every sampler picks a
// window start in [0, M) with M = N - T - 1, and the row's
//   inputs = tokens[start     : start + T]
//   labels = tokens[start + 1 : start + T + 1]
// (so every window, labels included, lies inside the file; open() requires
// N >= T + 2, i.e. M >= 1).
//
// Sampler::Sequential (exactly):
//   start(s, r) = ((s * B + r) * T) mod M
// computed without overflow (128-bit intermediate).
//
// Sampler::Random (exactly; with wrapping uint64 arithmetic):
//   mix(z):  z += 0x9E3779B97F4A7C15;
//            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//            z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//            return z ^ (z >> 31);                       (splitmix64)
//   h = mix(mix(mix(seed) ^ s) ^ r)
//   limit = 2^64 - (2^64 mod M)     (the largest multiple of M <= 2^64)
//   while h >= limit: h = mix(h)    (rejection: exactly uniform)
//   start(s, r) = h mod M
// It is a pure function of (seed, s, r, M): any process can compute any row
// of any step without state, and B does not enter it. Rows are sampled
// independently (with replacement).
//
// Data parallelism: fill(step, B, rowBegin, rowEnd, ...) fills global rows
// [rowBegin, rowEnd) only, so ranks that split the rows of a global batch
// together see exactly the batch one process would see.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_DATA_H
#define MERAK_RT_DATA_H

#include "merak_rt/status.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace merak::rt {

enum class Sampler { Sequential, Random };

/// "sequential" / "random".
const char *samplerName(Sampler sampler);
std::optional<Sampler> parseSampler(std::string_view name);

/// splitmix64's output function applied to z (see the formula above).
uint64_t splitmix64(uint64_t z);

class TokenDataset {
public:
  /// Maps `path` read-only. Errors if the file is missing or unreadable, its
  /// size is odd, seqLen < 1, or it holds fewer than seqLen + 2 tokens.
  static Result<TokenDataset> open(const std::string &path, int64_t seqLen,
                                   Sampler sampler = Sampler::Sequential,
                                   uint64_t seed = 0);

  TokenDataset(TokenDataset &&other) noexcept;
  TokenDataset &operator=(TokenDataset &&other) noexcept;
  TokenDataset(const TokenDataset &) = delete;
  TokenDataset &operator=(const TokenDataset &) = delete;
  ~TokenDataset();

  void setSampler(Sampler sampler, uint64_t seed = 0) {
    sampler_ = sampler;
    seed_ = seed;
  }
  Sampler sampler() const { return sampler_; }
  uint64_t seed() const { return seed_; }

  const std::string &path() const { return path_; }
  int64_t numTokens() const { return numTokens_; }
  int64_t seqLen() const { return seqLen_; }
  /// Number of distinct window starts, M = N - T - 1.
  int64_t numStarts() const { return numTokens_ - seqLen_ - 1; }
  uint16_t token(int64_t i) const { return tokens_[i]; }
  const uint16_t *tokens() const { return tokens_; }

  /// Checks that every token id is below `limit` (the model's vocabulary,
  /// the manifest's index_limit): one pass over the file. The error names
  /// the file, the first bad id, its byte offset and the limit.
  Status checkIds(int64_t limit) const;

  /// Window start for global row `row` of step `step` with global batch size
  /// `batchSize` under the current sampler.
  int64_t windowStart(int64_t step, int64_t batchSize, int64_t row) const;

  /// Fills a whole batch: `inputs` and `labels` each receive batchSize * T
  /// values, row-major [batchSize, T].
  Status fill(int64_t step, int64_t batchSize, int64_t *inputs,
              int64_t *labels) const;

  /// Fills global rows [rowBegin, rowEnd) of the batch of `step` with global
  /// batch size `globalBatch`; `inputs`/`labels` receive
  /// (rowEnd - rowBegin) * T values. Errors on negative step or a row range
  /// outside [0, globalBatch].
  Status fill(int64_t step, int64_t globalBatch, int64_t rowBegin,
              int64_t rowEnd, int64_t *inputs, int64_t *labels) const;

private:
  TokenDataset() = default;
  void release();

  std::string path_;
  const uint16_t *tokens_ = nullptr;
  void *mapping_ = nullptr;
  size_t mappingBytes_ = 0;
  int64_t numTokens_ = 0;
  int64_t seqLen_ = 0;
  Sampler sampler_ = Sampler::Sequential;
  uint64_t seed_ = 0;
};

} // namespace merak::rt

#endif // MERAK_RT_DATA_H
