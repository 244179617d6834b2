//===- data.cpp - nanoGPT-style token files and batch samplers ------------===//
#include "merak_rt/data.h"

#include "file_util.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token files are little-endian uint16");

namespace merak::rt {

__extension__ typedef unsigned __int128 uint128; // GCC/Clang; silences -Wpedantic

const char *samplerName(Sampler sampler) {
  return sampler == Sampler::Random ? "random" : "sequential";
}

std::optional<Sampler> parseSampler(std::string_view name) {
  if (name == "sequential")
    return Sampler::Sequential;
  if (name == "random")
    return Sampler::Random;
  return std::nullopt;
}

uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Status TokenDataset::checkIds(int64_t limit) const {
  if (limit > 0xFFFF)
    return Status::success(); // every uint16 id fits
  // The maximum of each block first (vectorised), the position only when a
  // block holds a bad id.
  constexpr int64_t kBlock = 1 << 14;
  for (int64_t begin = 0; begin < numTokens_; begin += kBlock) {
    int64_t end = std::min(numTokens_, begin + kBlock);
    uint16_t top = 0;
    for (int64_t i = begin; i < end; ++i)
      top = std::max(top, tokens_[i]);
    if (top < limit)
      continue;
    for (int64_t i = begin; i < end; ++i)
      if (tokens_[i] >= limit)
        return Status::error("token file '" + path_ + "': token id " +
                             std::to_string(tokens_[i]) + " at byte offset " +
                             std::to_string(2 * i) + " (token " + std::to_string(i) +
                             ") is outside the model's vocabulary of " +
                             std::to_string(limit) + " ids (0.." +
                             std::to_string(limit - 1) +
                             "): was the file tokenized for this model?");
  }
  return Status::success();
}

Result<TokenDataset> TokenDataset::open(const std::string &path,
                                        int64_t seqLen, Sampler sampler,
                                        uint64_t seed) {
  auto fail = [&](const std::string &cause) {
    return Result<TokenDataset>::error("token file '" + path + "': " + cause);
  };
  if (seqLen < 1)
    return fail("sequence length must be at least 1, got " +
                std::to_string(seqLen));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open: " + detail::errnoMessage(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return fail("cannot stat: " + detail::errnoMessage(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (bytes % 2 != 0) {
    ::close(fd);
    return fail("size " + std::to_string(bytes) +
                " bytes is odd; expected a flat array of uint16 tokens");
  }
  int64_t numTokens = static_cast<int64_t>(bytes / 2);
  if (numTokens < seqLen + 2) {
    ::close(fd);
    return fail("holds " + std::to_string(numTokens) +
                " tokens; sequence length " + std::to_string(seqLen) +
                " needs at least " + std::to_string(seqLen + 2));
  }
  void *mapping = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd); // the mapping keeps the file alive
  if (mapping == MAP_FAILED)
    return fail("cannot mmap: " + detail::errnoMessage(err));

  TokenDataset dataset;
  dataset.path_ = path;
  dataset.mapping_ = mapping;
  dataset.mappingBytes_ = bytes;
  dataset.tokens_ = static_cast<const uint16_t *>(mapping);
  dataset.numTokens_ = numTokens;
  dataset.seqLen_ = seqLen;
  dataset.sampler_ = sampler;
  dataset.seed_ = seed;
  return Result<TokenDataset>(std::move(dataset));
}

TokenDataset::TokenDataset(TokenDataset &&other) noexcept {
  *this = std::move(other);
}

TokenDataset &TokenDataset::operator=(TokenDataset &&other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    tokens_ = other.tokens_;
    mapping_ = other.mapping_;
    mappingBytes_ = other.mappingBytes_;
    numTokens_ = other.numTokens_;
    seqLen_ = other.seqLen_;
    sampler_ = other.sampler_;
    seed_ = other.seed_;
    other.tokens_ = nullptr;
    other.mapping_ = nullptr;
    other.mappingBytes_ = 0;
    other.numTokens_ = 0;
  }
  return *this;
}

TokenDataset::~TokenDataset() { release(); }

void TokenDataset::release() {
  if (mapping_)
    ::munmap(mapping_, mappingBytes_);
  mapping_ = nullptr;
  tokens_ = nullptr;
  mappingBytes_ = 0;
}

int64_t TokenDataset::windowStart(int64_t step, int64_t batchSize,
                                  int64_t row) const {
  uint64_t m = static_cast<uint64_t>(numStarts());
  if (sampler_ == Sampler::Sequential) {
    uint128 index = static_cast<uint128>(step) *
                        static_cast<uint64_t>(batchSize) +
                    static_cast<uint64_t>(row);
    uint128 offset = index * static_cast<uint64_t>(seqLen_);
    return static_cast<int64_t>(offset % m);
  }
  uint64_t h = splitmix64(splitmix64(splitmix64(seed_) ^
                                     static_cast<uint64_t>(step)) ^
                          static_cast<uint64_t>(row));
  uint64_t rem = (0 - m) % m; // 2^64 mod m
  if (rem != 0) {
    uint64_t limit = 0 - rem; // 2^64 - rem
    while (h >= limit)
      h = splitmix64(h);
  }
  return static_cast<int64_t>(h % m);
}

Status TokenDataset::fill(int64_t step, int64_t batchSize, int64_t *inputs,
                          int64_t *labels) const {
  return fill(step, batchSize, 0, batchSize, inputs, labels);
}

Status TokenDataset::fill(int64_t step, int64_t globalBatch, int64_t rowBegin,
                          int64_t rowEnd, int64_t *inputs,
                          int64_t *labels) const {
  if (!tokens_)
    return Status::error("token dataset is not open");
  if (step < 0)
    return Status::error("token file '" + path_ + "': negative step " +
                         std::to_string(step));
  if (globalBatch < 1 || rowBegin < 0 || rowEnd < rowBegin ||
      rowEnd > globalBatch)
    return Status::error("token file '" + path_ + "': invalid rows [" +
                         std::to_string(rowBegin) + ", " +
                         std::to_string(rowEnd) + ") of a batch of " +
                         std::to_string(globalBatch));
  const int64_t t = seqLen_;
  for (int64_t row = rowBegin; row < rowEnd; ++row) {
    int64_t start = windowStart(step, globalBatch, row);
    const uint16_t *src = tokens_ + start;
    int64_t *in = inputs + (row - rowBegin) * t;
    int64_t *lab = labels + (row - rowBegin) * t;
    for (int64_t k = 0; k < t; ++k) {
      in[k] = src[k];
      lab[k] = src[k + 1];
    }
  }
  return Status::success();
}

} // namespace merak::rt
