//===- sharding.cpp - Tensor-parallel parameter shards --------------------===//
#include "sharding.h"

#include <algorithm>
#include <cstring>

namespace merak::rt {

namespace {
/// The copy pattern of one shard: `outer` x `blocks` runs of `run` bytes;
/// the full tensor's stride between outer rows is `fullRow` bytes and the
/// shard's `localRow`.
struct ShardGeometry {
  int64_t outer = 1, blocks = 1, run = 0, fullRow = 0, localRow = 0, partStride = 0;
};

ShardGeometry geometry(const ManifestTensor &t) {
  ShardGeometry g;
  int64_t inner = static_cast<int64_t>(dtypeSize(t.dtype));
  for (size_t d = 0; d < t.globalShape.size(); ++d) {
    if (static_cast<int64_t>(d) < t.shardAxis)
      g.outer *= t.globalShape[d];
    else if (static_cast<int64_t>(d) > t.shardAxis)
      inner *= t.globalShape[d];
  }
  int64_t n = t.globalShape[t.shardAxis];
  int64_t chunk = n / (t.shardBlocks * t.shardParts);
  g.blocks = t.shardBlocks;
  g.run = chunk * inner;
  g.partStride = g.run;
  g.fullRow = n * inner;
  g.localRow = n / t.shardParts * inner;
  return g;
}
} // namespace

void extractShard(const ManifestTensor &t, int part, const void *full, void *local) {
  ShardGeometry g = geometry(t);
  const char *src = static_cast<const char *>(full);
  char *dst = static_cast<char *>(local);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t b = 0; b < g.blocks; ++b)
      std::memcpy(dst + o * g.localRow + b * g.run,
                  src + o * g.fullRow + (b * t.shardParts + part) * g.partStride, g.run);
}

void insertShard(const ManifestTensor &t, int part, const void *local, void *full) {
  ShardGeometry g = geometry(t);
  const char *src = static_cast<const char *>(local);
  char *dst = static_cast<char *>(full);
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t b = 0; b < g.blocks; ++b)
      std::memcpy(dst + o * g.fullRow + (b * t.shardParts + part) * g.partStride,
                  src + o * g.localRow + b * g.run, g.run);
}

Result<std::vector<std::vector<char>>> gatherShards(
    const Manifest &m, const char *P, Comm &comm,
    const std::vector<std::vector<char>> *zeroShards) {
  std::vector<std::vector<char>> full(m.params.size());
  std::vector<char> parts;
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ManifestTensor &t = m.params[i];
    if (!t.sharded())
      continue;
    // ZeRO state of a shard: the shard assembled by gatherZeroParts.
    const char *local = P + t.offset;
    uint64_t bytes = t.bytes;
    if (t.zeroSharded()) {
      if (!zeroShards || (*zeroShards)[i].size() != t.zeroSourceElements() * dtypeSize(t.dtype))
        return Status::error("cannot gather '" + t.name + "': its ZeRO parts were not gathered");
      local = (*zeroShards)[i].data();
      bytes = (*zeroShards)[i].size();
    }
    // Gathered as bytes counted in 4-byte words when possible.
    CommType type = CommType::F32;
    int64_t count = static_cast<int64_t>(bytes / 4);
    if (bytes % 4 != 0)
      return Status::error("cannot gather '" + t.name + "': " + std::to_string(bytes) +
                           " bytes is not a multiple of 4");
    parts.resize(bytes * t.shardParts);
    Comm::Request r = comm.allGather(Axis::TP, local, parts.data(), count, type);
    if (Status st = comm.wait(r, "gather of a tensor-parallel shard for a checkpoint");
        !st.ok())
      return st;
    full[i].resize(bytes * t.shardParts);
    for (int p = 0; p < t.shardParts; ++p)
      insertShard(t, p, parts.data() + p * bytes, full[i].data());
  }
  return full;
}

void extractZeroPart(const ManifestTensor &t, int part, const void *full, void *local) {
  uint64_t n = t.zeroSourceElements();
  uint64_t es = dtypeSize(t.dtype), begin = static_cast<uint64_t>(part) * t.elements;
  uint64_t count = begin >= n ? 0 : std::min(t.elements, n - begin);
  std::memcpy(local, static_cast<const char *>(full) + begin * es, count * es);
  std::memset(static_cast<char *>(local) + count * es, 0, (t.elements - count) * es);
}

Result<std::vector<std::vector<char>>> gatherZeroParts(const Manifest &m, const char *P,
                                                       Comm &comm) {
  std::vector<std::vector<char>> full(m.params.size());
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ManifestTensor &t = m.params[i];
    if (!t.zeroSharded())
      continue;
    if (t.bytes % 4 != 0)
      return Status::error("cannot gather '" + t.name + "': " + std::to_string(t.bytes) +
                           " bytes is not a multiple of 4");
    uint64_t n = t.zeroSourceElements();
    full[i].resize(t.bytes * t.zeroParts);
    Comm::Request r = comm.allGather(Axis::DP, P + t.offset, full[i].data(),
                                     static_cast<int64_t>(t.bytes / 4), CommType::F32);
    if (Status st = comm.wait(r, "gather of ZeRO optimizer state for a checkpoint"); !st.ok())
      return st;
    full[i].resize(n * dtypeSize(t.dtype)); // drop the padding
  }
  return full;
}

} // namespace merak::rt
