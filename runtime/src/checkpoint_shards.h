//===- checkpoint_shards.h - A program's sharded checkpoints (internal) -*- C++ -*-===//
//
// What one rank of a (dp, tp, pp) program writes into a checkpoint and how
// any rank of any other mesh reads its parameters back (the directory
// layout is in include/merak_rt/safetensors.h).
//
// Writing: each parameter (and optimizer state tensor) is written by
// exactly one rank: the first pipeline stage that holds it, dp rank 0
// unless it is ZeRO-sharded (then every dp rank writes its part), tp rank
// 0 unless it is tensor-parallel (then every tp rank writes its shard).
// A tensor is stored under its ONNX/manifest name with the shape of the
// piece; the shard's metadata "merak.pieces" maps the name of every tensor
// that is not whole to its piece (sharding.h, as JSON), including the full
// tensor's global shape. Nothing is gathered or sent to write a checkpoint.
//
// Reading: every rank reads the headers of all shards, and for each of its
// parameters the pieces it needs: directly when one stored piece is exactly
// its own (same mesh), otherwise by assembling the full tensor from the
// pieces (one tensor at a time) and cutting its piece out.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_CHECKPOINT_SHARDS_H
#define MERAK_RT_SRC_CHECKPOINT_SHARDS_H

#include "manifest.h"
#include "merak_rt/safetensors.h"
#include "merak_rt/status.h"

#include <functional>
#include <string>
#include <vector>

namespace merak::rt {

/// This rank's place in the mesh.
struct RankPlace {
  int tp = 0, dp = 0;
  /// Whether this rank's stage is the one to write parameter `t`.
  std::function<bool(const ManifestTensor &)> writesStage;
  /// Whether this rank restores `t` (null: every param).
  std::function<bool(const ManifestTensor &)> needs;
  /// The expert-parallel group's size (mesh.ep, dividing dp).
  int ep = 1;

  /// This rank's part of a sharded `t`: its ep rank for an expert shard,
  /// its tp rank otherwise.
  int partOf(const ManifestTensor &t) const { return t.expertShard ? dp % ep : tp; }
  /// This rank's ZeRO part of a ZeRO-split `t`: its dp rank, or for an
  /// expert shard its rank in the expert-data-parallel group (dp / ep).
  int zeroPartOf(const ManifestTensor &t) const { return t.expertShard ? dp / ep : dp; }
  /// Whether this rank writes `t` to a checkpoint: tensors replicated over
  /// a group are written by its rank 0 (an expert shard is replicated over
  /// tp and over the expert-data-parallel group, dp / ep).
  bool writes(const ManifestTensor &t) const {
    bool tpReplica = !t.sharded() || t.expertShard;
    int dpReplica = t.zeroSharded() ? 0 : t.expertShard ? dp / ep : dp;
    return !(tpReplica && tp != 0) && dpReplica == 0;
  }
};

/// One shard file's content (pointing into P) and its "merak.pieces".
struct CheckpointShard {
  std::vector<TensorRef> tensors;
  std::string piecesJson;
};

/// The tensors this rank writes (see above).
CheckpointShard checkpointShard(const Manifest &m, const char *P, const RankPlace &place);

/// What a restore found besides the tensors it filled: parameters the
/// checkpoint lacks (kept at their initial values) and tensors of the
/// checkpoint the program does not use.
struct RestoreReport {
  std::vector<std::string> missing, unused;
};

/// Fills every parameter of P that is not scratch and that the rank needs
/// from checkpoint `c` (this rank's pieces). Unless `partial`, a parameter
/// the checkpoint lacks or a tensor the program does not use is an error
/// listing them all (a checkpoint of another model); with `partial` they
/// are only reported.
Status restoreCheckpoint(const Checkpoint &c, const Manifest &m, char *P, const RankPlace &place,
                         bool partial, RestoreReport &report);

} // namespace merak::rt

#endif // MERAK_RT_SRC_CHECKPOINT_SHARDS_H
