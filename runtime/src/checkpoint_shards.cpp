//===- checkpoint_shards.cpp - A program's sharded checkpoints ------------===//
#include "checkpoint_shards.h"

#include "json_util.h"
#include "sharding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

namespace merak::rt {

namespace {
constexpr const char *kPiecesKey = "merak.pieces";

bool samePiece(const Piece &a, const Piece &b) {
  if (a.globalShape != b.globalShape || a.flat != b.flat ||
      (a.flat && (a.flatBegin != b.flatBegin || a.flatCount != b.flatCount)))
    return false;
  if (a.slabs.empty() || b.slabs.empty())
    return a.slabs.empty() && b.slabs.empty();
  return a.axis == b.axis && a.slabs == b.slabs;
}

/// One stored piece of a tensor: which shard file, which tensor, where.
struct Stored {
  const SafetensorsFile *file;
  const Tensor *tensor;
  Piece piece;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
} // namespace

CheckpointShard checkpointShard(const Manifest &m, const char *P, const RankPlace &place) {
  CheckpointShard shard;
  // Tensors in params order.
  nlohmann::ordered_json pieces = nlohmann::ordered_json::object();
  for (const ManifestTensor &t : m.params) {
    if (t.kind == "scratch") // lives within a step (pipeline accumulators)
      continue;
    if (!place.writesStage(t) || !place.writes(t))
      continue;
    Piece p = pieceOf(t, place.partOf(t), place.zeroPartOf(t));
    shard.tensors.push_back({t.name, t.dtype, p.storedShape(), P + t.offset});
    if (p.whole())
      continue;
    pieces[t.name] = pieceJson(p);
  }
  shard.piecesJson = pieces.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return shard;
}

namespace {
/// The index of the first NaN or infinity among `n` elements of float type
/// `t` at `data`; -1 when all are finite (or `t` is not a float type).
int64_t firstNonFinite(DType t, const char *data, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    double v;
    if (t == DType::F32) {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      v = f;
    } else if (t == DType::F64) {
      std::memcpy(&v, data + 8 * i, 8);
    } else if (t == DType::BF16) {
      uint32_t bits = 0;
      std::memcpy(reinterpret_cast<char *>(&bits) + 2, data + 2 * i, 2);
      float f;
      std::memcpy(&f, &bits, 4);
      v = f;
    } else {
      return -1;
    }
    if (!std::isfinite(v))
      return static_cast<int64_t>(i);
  }
  return -1;
}
} // namespace

/// "'a', 'b', 'c' and 2 more".
std::string listNames(const std::vector<std::string> &names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 5);
  for (size_t i = 0; i < shown; ++i)
    out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown)
    out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

/// A placement table (--moe-rebalance-every) the program lacks: its
/// experts are in order only if it is the identity; otherwise resuming
/// would silently give experts each other's weights.
static Status checkUnusedPlacement(const std::string &name, const std::vector<Stored> &pieces) {
  if (name.rfind(kPlacementPrefix, 0) != 0 || pieces.size() != 1 ||
      pieces.front().tensor->dtype != DType::I64)
    return Status::success();
  const Stored &s = pieces.front();
  std::vector<int64_t> table(s.tensor->byteSize / sizeof(int64_t));
  if (Status st = s.file->readData(*s.tensor, table.data()); !st.ok())
    return st;
  for (size_t l = 0; l < table.size(); ++l)
    if (table[l] != static_cast<int64_t>(l))
      return Status::error(
          "checkpoint '" + s.file->path + "' holds experts moved by dynamic placement (its '" +
          name + "' is not the identity), but this program has no placement tables: resume "
          "it with a program compiled with --moe-rebalance-every");
  return Status::success();
}

Status restoreCheckpoint(const Checkpoint &c, const Manifest &m, char *P, const RankPlace &place,
                         bool partial, RestoreReport &report) {
  report = RestoreReport();
  // Every stored piece, by tensor name.
  std::unordered_map<std::string, std::vector<Stored>> stored;
  for (const SafetensorsFile &file : c.shards) {
    std::map<std::string, Piece> pieces;
    if (auto it = file.metadata.find(kPiecesKey); it != file.metadata.end()) {
      nlohmann::json root;
      std::string error = "not an object";
      try {
        root = nlohmann::json::parse(it->second);
      } catch (const nlohmann::json::parse_error &e) {
        error = jsonErrorText(e);
      }
      if (!root.is_object())
        return Status::error("checkpoint '" + file.path + "': malformed \"" + kPiecesKey +
                             "\" metadata: " + error);
      for (const auto &[name, v] : root.items()) {
        Result<Piece> p = parsePiece(v);
        if (!p.ok())
          return Status::error("checkpoint '" + file.path + "': tensor '" + name +
                               "': " + p.message());
        pieces[name] = std::move(p).value();
      }
    }
    for (const Tensor &t : file.tensors) {
      Piece p;
      if (auto it = pieces.find(t.name); it != pieces.end())
        p = it->second;
      else
        p.globalShape = t.shape;
      if (p.storedShape() != t.shape)
        return Status::error("checkpoint '" + file.path + "': tensor '" + t.name +
                             "' has shape " + shapeText(t.shape) + " but its piece needs " +
                             shapeText(p.storedShape()));
      stored[t.name].push_back({&file, &t, std::move(p)});
    }
  }

  std::vector<char> full, part;
  for (const ManifestTensor &t : m.params) {
    if (t.kind == "scratch" || (place.needs && !place.needs(t)))
      continue;
    auto it = stored.find(t.name);
    if (it == stored.end() && t.name.rfind(kPlacementPrefix, 0) == 0 && t.kind == "frozen")
      continue; // a checkpoint without placement: the experts in order (the initial identity)
    if (it == stored.end()) {
      report.missing.push_back(t.name + " (" + dtypeName(t.dtype) + " " +
                               shapeText(t.sharded() || t.zeroSharded() ? t.globalShape
                                                                        : t.shape) +
                               ")");
      continue;
    }
    Piece mine = pieceOf(t, place.partOf(t), place.zeroPartOf(t));
    uint64_t es = dtypeSize(t.dtype), covered = 0;
    for (const Stored &s : it->second) {
      if (s.tensor->dtype != t.dtype)
        return Status::error("checkpoint '" + s.file->path + "': tensor '" + t.name +
                             "' has dtype " + dtypeName(s.tensor->dtype) + ", expected " +
                             dtypeName(t.dtype));
      if (s.piece.globalShape != mine.globalShape)
        return Status::error("checkpoint '" + s.file->path + "': tensor '" + t.name +
                             "' has shape " + shapeText(s.piece.globalShape) + ", expected " +
                             shapeText(mine.globalShape));
      covered += s.piece.elements();
    }
    Piece whole;
    whole.globalShape = mine.globalShape;
    uint64_t total = whole.localElements();
    if (covered != total)
      return Status::error("checkpoint '" + c.path + "': the pieces of tensor '" + t.name +
                           "' hold " + std::to_string(covered) + " of its " +
                           std::to_string(total) + " elements (shards of different saves?)");
    char *dst = P + t.offset;
    const Stored *exact = nullptr;
    for (const Stored &s : it->second)
      if (samePiece(s.piece, mine))
        exact = &s;
    if (exact) {
      if (Status st = exact->file->readData(*exact->tensor, dst); !st.ok())
        return st;
    } else {
      full.resize(total * es);
      for (const Stored &s : it->second) {
        part.resize(s.tensor->byteSize);
        if (Status st = s.file->readData(*s.tensor, part.data()); !st.ok())
          return st;
        copyPiece(s.piece, es, full.data(), part.data(), /*toFull=*/true);
      }
      copyPiece(mine, es, full.data(), dst, /*toFull=*/false);
    }
    uint64_t got = mine.elements() * es; // ZeRO parts: zero padding past the end
    if (got < t.bytes)
      std::memset(dst + got, 0, t.bytes - got);
    // Training cannot continue from a diverged state: say so here rather
    // than at the first step's loss.
    if (int64_t bad = firstNonFinite(t.dtype, dst, mine.elements()); bad >= 0)
      return Status::error("checkpoint '" + c.path + "': tensor '" + t.name +
                           "' holds a non-finite value (NaN or infinity) at element " +
                           std::to_string(bad) +
                           "; it cannot be resumed from (was it saved after the loss "
                           "diverged?)");
  }

  for (const auto &[name, pieces] : stored)
    if (!m.param(name)) {
      if (Status st = checkUnusedPlacement(name, pieces); !st.ok())
        return st;
      report.unused.push_back(name);
    }
  std::sort(report.unused.begin(), report.unused.end());
  if (partial || (report.missing.empty() && report.unused.empty()))
    return Status::success();
  std::string why = "checkpoint '" + c.path + "' does not match this program";
  if (!report.missing.empty())
    why += "; it lacks " + std::to_string(report.missing.size()) + " tensor(s) the program needs: " +
           listNames(report.missing);
  if (!report.unused.empty())
    why += "; it holds " + std::to_string(report.unused.size()) +
           " tensor(s) the program does not use: " + listNames(report.unused);
  return Status::error(why + " (was it written by a different model? --allow-partial-resume "
                             "restores what matches and keeps the rest at its initial value)");
}

} // namespace merak::rt
