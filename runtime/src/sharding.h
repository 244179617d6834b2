//===- sharding.h - Tensor-parallel parameter shards (internal) -*- C++ -*-===//
//
// A param with a manifest "shard" {axis, parts, blocks} holds, on tp rank r,
// part r of every block of dimension `axis` of its full tensor, viewed as
// [blocks, parts, n / (blocks * parts)] (see include/merak_rt/program.h).
// These helpers cut a shard out of a full tensor (start-up from the
// embedded data, --resume from a checkpoint of full tensors) and assemble
// full tensors from the shards of a tp group (checkpoints). Not a public
// header: train_main.cpp is its only user.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_SHARDING_H
#define MERAK_RT_SRC_SHARDING_H

#include "manifest.h"
#include "merak_rt/comm.h"
#include "merak_rt/status.h"

#include <vector>

namespace merak::rt {

/// Copies tp rank `part`'s shard of `full` (t.globalShape) to `local`
/// (t.shape).
void extractShard(const ManifestTensor &t, int part, const void *full, void *local);

/// Writes `local`, tp rank `part`'s shard, into its place in `full`.
void insertShard(const ManifestTensor &t, int part, const void *local, void *full);

/// The full tensors of every sharded param in `m` (in manifest order, empty
/// vectors for replicated params), gathered over the tp group of this rank
/// from each rank's P. Collective over the tp group: every rank of the group
/// calls it with the same manifest.
/// ZeRO-1 state of a shard (both "shard" and "zero") is read from
/// (*zeroShards)[i], the shard gatherZeroParts assembled.
Result<std::vector<std::vector<char>>> gatherShards(
    const Manifest &m, const char *P, Comm &comm,
    const std::vector<std::vector<char>> *zeroShards = nullptr);

/// ZeRO-1 (a param with "zero"): copies dp rank `part`'s part of `full`
/// (t.globalShape, flattened) to `local` (t.shape), zero-filling the padding
/// past the full tensor's end.
void extractZeroPart(const ManifestTensor &t, int part, const void *full, void *local);

/// The full tensors of every ZeRO-1 param in `m` (manifest order, empty
/// vectors for the others), gathered over the dp group of this rank from
/// each rank's P and cut to the global shape (for ZeRO state of a
/// tensor-parallel shard: to this tp rank's shard). Collective over the dp
/// group.
Result<std::vector<std::vector<char>>> gatherZeroParts(const Manifest &m, const char *P,
                                                       Comm &comm);

} // namespace merak::rt

#endif // MERAK_RT_SRC_SHARDING_H
