//===- sharding.cpp - Where a rank's piece of a tensor lies ---------------===//
#include "sharding.h"

#include "json_util.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

namespace merak::rt {

uint64_t Piece::localElements() const {
  uint64_t n = 1;
  for (size_t d = 0; d < globalShape.size(); ++d) {
    if (static_cast<int64_t>(d) == axis && !slabs.empty()) {
      uint64_t len = 0;
      for (const auto &s : slabs)
        len += static_cast<uint64_t>(s.second);
      n *= len;
    } else {
      n *= static_cast<uint64_t>(globalShape[d]);
    }
  }
  return n;
}

std::vector<int64_t> Piece::storedShape() const {
  if (flat)
    return {static_cast<int64_t>(flatCount)};
  std::vector<int64_t> shape = globalShape;
  if (!slabs.empty()) {
    shape[static_cast<size_t>(axis)] = 0;
    for (const auto &s : slabs)
      shape[static_cast<size_t>(axis)] += s.second;
  }
  return shape;
}

Piece pieceOf(const ManifestTensor &t, int part, int dpRank) {
  Piece p;
  p.globalShape = t.sharded() || t.zeroSharded() ? t.globalShape : t.shape;
  if (t.sharded()) {
    // A padded axis (vocabulary parallelism): the last shards' rows past
    // the real length are zeros that no piece holds.
    p.axis = t.shardAxis;
    int64_t n = t.globalShape[t.shardAxis], chunk = t.shardChunk();
    for (int64_t b = 0, offset = 0; b < t.shardBlocks; ++b) {
      if (!t.shardBlockSizes.empty()) { // blocks of their own lengths
        int64_t len = t.shardBlockSizes[static_cast<size_t>(b)] / t.shardParts;
        p.slabs.push_back({offset + part * len, len});
        offset += t.shardBlockSizes[static_cast<size_t>(b)];
        continue;
      }
      int64_t start = std::min(n, (b * t.shardParts + part) * chunk);
      p.slabs.push_back({start, std::min(chunk, n - start)});
    }
  }
  if (t.zeroSharded()) {
    // Of the (padded) source the parts split, the real elements are the
    // prefix the piece's slabs hold.
    uint64_t n = std::min<uint64_t>(t.zeroSourceElements(), p.localElements());
    uint64_t begin = static_cast<uint64_t>(dpRank) * t.elements;
    p.flat = true;
    p.flatBegin = std::min(begin, n);
    p.flatCount = begin >= n ? 0 : std::min(t.elements, n - begin);
  }
  return p;
}

void copyPiece(const Piece &p, size_t elementSize, void *full, void *piece, bool toFull) {
  // The local tensor is `outer` rows; row o holds, for each slab, a run of
  // length * inner bytes taken from the full row at start * inner.
  uint64_t inner = elementSize, outer = 1;
  for (size_t d = 0; d < p.globalShape.size(); ++d) {
    if (static_cast<int64_t>(d) < p.axis)
      outer *= static_cast<uint64_t>(p.globalShape[d]);
    else if (static_cast<int64_t>(d) > p.axis)
      inner *= static_cast<uint64_t>(p.globalShape[d]);
  }
  std::vector<std::pair<int64_t, int64_t>> slabs = p.slabs;
  int64_t n = p.globalShape.empty() ? 1 : p.globalShape[static_cast<size_t>(p.axis)];
  if (slabs.empty())
    slabs.push_back({0, n});
  uint64_t localRow = 0;
  for (const auto &s : slabs)
    localRow += static_cast<uint64_t>(s.second) * inner;
  uint64_t fullRow = static_cast<uint64_t>(n) * inner;
  uint64_t lo = p.flat ? p.flatBegin * elementSize : 0;
  uint64_t hi = p.flat ? (p.flatBegin + p.flatCount) * elementSize : outer * localRow;
  char *f = static_cast<char *>(full), *q = static_cast<char *>(piece);
  for (uint64_t o = lo / std::max<uint64_t>(localRow, 1); o < outer && o * localRow < hi; ++o) {
    uint64_t local = o * localRow;
    for (const auto &s : slabs) {
      uint64_t len = static_cast<uint64_t>(s.second) * inner;
      uint64_t a = std::max(local, lo), b = std::min(local + len, hi);
      if (a < b) {
        char *src = f + o * fullRow + static_cast<uint64_t>(s.first) * inner + (a - local);
        char *dst = q + (a - lo);
        if (toFull)
          std::memcpy(src, dst, b - a);
        else
          std::memcpy(dst, src, b - a);
      }
      local += len;
    }
  }
}

void extractShard(const ManifestTensor &t, int part, const void *full, void *local) {
  copyPiece(pieceOf(t, part, 0), dtypeSize(t.dtype), const_cast<void *>(full), local,
            /*toFull=*/false);
}

nlohmann::ordered_json pieceJson(const Piece &p) {
  nlohmann::ordered_json j = {{"global_shape", p.globalShape}, {"axis", p.axis}};
  if (!p.slabs.empty())
    j["slabs"] = p.slabs;
  if (p.flat)
    j["flat"] = {p.flatBegin, p.flatCount};
  return j;
}

Result<Piece> parsePiece(const nlohmann::json &v) {
  auto bad = [](const std::string &why) { return Result<Piece>::error("bad piece: " + why); };
  if (!v.is_object())
    return bad("not an object");
  Piece p;
  auto shape = v.find("global_shape");
  if (shape == v.end() || !shape->is_array())
    return bad("no \"global_shape\"");
  for (const nlohmann::json &d : *shape) {
    std::optional<int64_t> n = nonNegativeInteger(d);
    if (!n)
      return bad("\"global_shape\" must hold non-negative integers");
    p.globalShape.push_back(*n);
  }
  // [a, b] of non-negative integers.
  auto pair = [](const nlohmann::json &j) -> std::optional<std::pair<int64_t, int64_t>> {
    if (!j.is_array() || j.size() != 2)
      return std::nullopt;
    std::optional<int64_t> a = nonNegativeInteger(j[0]), b = nonNegativeInteger(j[1]);
    if (!a || !b)
      return std::nullopt;
    return std::make_pair(*a, *b);
  };
  if (auto axis = v.find("axis"); axis != v.end()) {
    std::optional<int64_t> a = nonNegativeInteger(*axis);
    if (!a || (*a >= static_cast<int64_t>(p.globalShape.size()) && *a != 0))
      return bad("\"axis\" out of range");
    p.axis = *a;
  }
  if (auto slabs = v.find("slabs"); slabs != v.end()) {
    if (!slabs->is_array() || p.globalShape.empty())
      return bad("\"slabs\" must be an array (of a tensor with dimensions)");
    int64_t n = p.globalShape[static_cast<size_t>(p.axis)];
    for (const nlohmann::json &s : *slabs) {
      auto slab = pair(s);
      if (!slab || slab->first > n - slab->second)
        return bad("a slab must be [start, length] inside dimension " + std::to_string(p.axis));
      p.slabs.push_back(*slab);
    }
  }
  if (auto flat = v.find("flat"); flat != v.end()) {
    auto range = pair(*flat);
    if (!range)
      return bad("\"flat\" must be [begin, count]");
    p.flat = true;
    p.flatBegin = static_cast<uint64_t>(range->first);
    p.flatCount = static_cast<uint64_t>(range->second);
    if (p.flatBegin + p.flatCount > p.localElements())
      return bad("\"flat\" runs past the end of the tensor");
  }
  return p;
}

} // namespace merak::rt
