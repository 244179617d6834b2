//===- sharding.h - Where a rank's piece of a tensor lies (internal) -*- C++ -*-===//
//
// A parameter of a parallel program is held whole, or in pieces:
//   - tensor parallelism ("shard" {axis, parts, blocks}): tp rank r holds
//     part r of every block of dimension `axis` of the full tensor, viewed
//     as [blocks, parts, n / (blocks * parts)] (see include/merak_rt/program.h);
//   - ZeRO-1 ("zero"): dp rank r holds elements [r * k, (r + 1) * k) of the
//     flattened tensor (of the tp shard, when both), zero-padded past its end.
// A Piece describes either, or both, in the full tensor's coordinates: the
// "local" tensor is the full one with dimension `axis` cut to `slabs` (runs
// [start, start + length) of that dimension, concatenated in order; none =
// the whole dimension), and the piece is that local tensor, or, when `flat`,
// the elements [flatBegin, flatBegin + flatCount) of it flattened. Sharded
// checkpoints store each rank's pieces with this description (as JSON), so
// that a checkpoint resumes under any other (dp, tp, pp).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_SHARDING_H
#define MERAK_RT_SRC_SHARDING_H

#include "manifest.h"
#include "merak_rt/status.h"

#include <string>
#include <utility>
#include <vector>

namespace merak::rt {

struct Piece {
  std::vector<int64_t> globalShape;
  int64_t axis = 0;
  std::vector<std::pair<int64_t, int64_t>> slabs; ///< (start, length) along axis
  bool flat = false;
  uint64_t flatBegin = 0, flatCount = 0;

  bool whole() const { return slabs.empty() && !flat; }
  /// Elements of the local tensor (before any flat cut).
  uint64_t localElements() const;
  /// Elements the piece holds.
  uint64_t elements() const { return flat ? flatCount : localElements(); }
  /// The shape the piece is stored with: the local tensor's, or [flatCount].
  std::vector<int64_t> storedShape() const;
};

/// The piece of `t` that the rank holding shard part `part` (its tp rank,
/// or its ep rank for an expert shard) and dp rank `dpRank` hold (t.shape's
/// content, without the ZeRO padding).
Piece pieceOf(const ManifestTensor &t, int part, int dpRank);

/// Copies between a full tensor and a piece of it (elementSize bytes per
/// element): `toFull` writes `piece` into its place in `full`, otherwise the
/// piece is cut out of `full`.
void copyPiece(const Piece &p, size_t elementSize, void *full, void *piece, bool toFull);

/// Copies part `part`'s shard (tp or ep rank) of `full` (t.globalShape) to `local`
/// (t.shape); `t` must not be ZeRO-sharded.
void extractShard(const ManifestTensor &t, int part, const void *full, void *local);

/// The JSON form of a piece: {"global_shape": [...], "axis": a,
/// "slabs": [[start, length], ...], "flat": [begin, count]} ("slabs" and
/// "flat" only when present; members in this order).
nlohmann::ordered_json pieceJson(const Piece &p);

/// Reads pieceJson's form back; checks that the slabs and the flat range
/// lie inside the global shape.
Result<Piece> parsePiece(const nlohmann::json &v);

} // namespace merak::rt

#endif // MERAK_RT_SRC_SHARDING_H
