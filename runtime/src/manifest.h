//===- manifest.h - The manifest of a generated program (internal) -*- C++ -*-===//
//
// Reads the JSON manifest that merak-compile embeds in every generated
// training program (format: include/merak_rt/program.h) through its schema
// (include/merak_rt/manifest_schema.h: the types, what is required) and
// validates it. Not a public header: train_main.cpp is its only user.
//
// Validation is strict, since a bad manifest means a compiler bug and the
// program would otherwise read or write outside its buffers:
//  - "format" is 1 (checked before the schema); no key is given twice in an
//    object; every integer is non-negative; the constants lie after the
//    parameter storage (consts_offset >= params_init_bytes);
//  - every param/input/output has a non-empty name unique in its list, a
//    known dtype, and offset + bytes inside its region (P for params, A for
//    inputs and outputs); a param's "bytes", when given, equals its shape's
//    byte size;
//  - param kinds are trainable | frozen | state | scratch | hparam; a "shard" has
//    group "tp" (the default) with parts == mesh.tp or "ep" (an expert
//    weight) with parts == mesh.ep, a "global_shape" equal to "shape" but
//    for dimension axis (parts times larger, a multiple of blocks * parts),
//    and "data_bytes" (when given) the global shape's byte size; a "zero"
//    has parts == mesh.dp (mesh.dp / mesh.ep for an "ep" shard's state), a
//    "global_shape" and the shape [ceil(N / parts)] (N the elements it
//    splits); mesh.ep divides mesh.dp; input roles are
//    tokens | labels | step | other, each of the first three at most once;
//  - tokens is a rank-2 [B, T] I64 or I32 tensor with B, T >= 1; labels has
//    the tokens' shape and is I64 or I32; step is an I64 or I32 scalar;
//  - the outputs "loss", "grad_norm" and "lr", when present, are F32 or F64
//    scalars;
//  - every "hparams" value names a scalar F32 or F64 param;
//  - "defaults.lr" (if any) is a finite non-negative number, "sampler"
//    "random" or "sequential"; mesh sizes lie in [1, 65536];
//  - "moe" tables name distinct unsharded I64 [E] params of kind frozen; a
//    shard's "placement" names one of them, on an "ep" shard of axis 0
//    whose global_shape[0] is that E.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_MANIFEST_H
#define MERAK_RT_SRC_MANIFEST_H

#include "merak_rt/data.h"
#include "merak_rt/manifest_schema.h"
#include "merak_rt/safetensors.h"
#include "merak_rt/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace merak::rt {

/// The name prefix of merak.expert_place's table parameters
/// ("moe.placement.<table>"; "moe".tables name them).
constexpr const char *kPlacementPrefix = "moe.placement.";

/// A param, input or output of the manifest.
struct ManifestTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;   ///< in P (params) or A (inputs, outputs)
  uint64_t bytes = 0;    ///< elementCount(shape) * dtypeSize(dtype)
  uint64_t elements = 0; ///< elementCount(shape)
  std::string kind;      ///< params: trainable | frozen | state | scratch | hparam
  std::string role;      ///< inputs: tokens | labels | step | other
  /// Integer inputs: values lie in [0, indexLimit); 0: no limit recorded.
  int64_t indexLimit = 0;
  /// Labels: a value the loss skips, allowed outside the limit.
  std::optional<int64_t> ignoreIndex;
  /// Params sharded over tp ("shard"; shardParts == 0: replicated): dim
  /// shardAxis of globalShape is [shardBlocks, shardParts, rest]; this rank
  /// holds part tp_i of every block. dataBytes == 0: no initial data (zeros).
  int64_t shardAxis = 0, shardParts = 0, shardBlocks = 1;
  /// The blocks' full lengths when they differ ("block_sizes"; empty:
  /// shardBlocks equal blocks). Each is cut into shardParts equal parts.
  std::vector<int64_t> shardBlockSizes;
  /// The shard's parts are held by the "ep" group's ranks (an expert
  /// weight under expert parallelism), not the "tp" group's.
  bool expertShard = false;
  /// An expert shard's placement table ("moe".tables[i].table), or -1.
  int64_t placement = -1;
  std::vector<int64_t> globalShape;
  uint64_t dataOffset = 0, dataBytes = 0;
  bool sharded() const { return shardParts > 0; }
  /// ZeRO-1 optimizer state ("zero"; zeroParts == 0: whole): globalShape
  /// flattened, zero-padded to zeroParts * shape[0] elements; dp rank r
  /// holds elements [r * shape[0], (r + 1) * shape[0]).
  /// Both "shard" and "zero" (ZeRO-1 state of a tensor-parallel shard):
  /// globalShape is the full tensor; the tp rank's shard (globalShape with
  /// dim shardAxis divided by shardParts) is what is flattened and split.
  int64_t zeroParts = 0;
  bool zeroSharded() const { return zeroParts > 0; }
  /// A shard's length of shardAxis per block: ceil(n / (blocks * parts))
  /// (vocabulary parallelism pads the axis to divide; the padding rows are
  /// zeros at the end of the last shards).
  int64_t shardChunk() const {
    int64_t n = globalShape[shardAxis], k = shardBlocks * shardParts;
    return (n + k - 1) / k;
  }
  /// This rank's length of shardAxis: every block's part.
  int64_t shardLocalLength() const {
    if (shardBlockSizes.empty())
      return shardChunk() * shardBlocks;
    int64_t n = 0;
    for (int64_t len : shardBlockSizes)
      n += len / shardParts;
    return n;
  }
  /// Elements of the tensor the ZeRO parts split (before padding): the
  /// local shard's (padding rows included) or the full tensor's.
  uint64_t zeroSourceElements() const {
    uint64_t n = 1;
    for (size_t d = 0; d < globalShape.size(); ++d)
      n *= static_cast<uint64_t>(
          sharded() && static_cast<int64_t>(d) == shardAxis ? shardLocalLength() : globalShape[d]);
    return n;
  }
};

struct Manifest {
  int64_t format = 0;
  std::string entry;
  uint64_t arenaBytes = 0, paramsBytes = 0, constsOffset = 0, constsBytes = 0;
  /// Bytes of P initialised from the data; the rest starts as zeros.
  uint64_t paramsInitBytes = 0;
  std::vector<ManifestTensor> params, inputs, outputs;
  /// hparam name ("lr") -> param name, in manifest order.
  std::vector<std::pair<std::string, std::string>> hparams;
  std::vector<std::string> ops;
  /// Shape keys of the ops (as many as ops, or none: an older program).
  std::vector<std::string> opKeys;
  std::string model; ///< "" when absent

  // "defaults" (each optional).
  std::optional<double> defaultLr;
  std::optional<uint64_t> defaultSeed;
  std::optional<Sampler> defaultSampler;
  std::string optimizer; ///< defaults.optimizer (or a top-level "optimizer")
  /// "mesh": {"pp", "dp", "tp"} the program was compiled for (default 1s);
  /// the token inputs hold this rank's 1/dp of the global batch.
  int64_t meshPp = 1, meshDp = 1, meshTp = 1;
  /// "mesh"."ep": expert parallelism, dividing meshDp (default 1).
  int64_t meshEp = 1;
  /// A pipelined program's fragments and schedules (checked by
  /// PipelineRunner::create).
  std::optional<schema::Pipeline> pipeline;
  /// The initial data's safetensors file next to the executable; absent:
  /// merak_data (its offsets are then data_offset, consts_offset, ...).
  std::optional<schema::Weights> weights;
  /// Dynamic expert placement: the tables and the default rebalancing
  /// period (absent: none).
  std::optional<schema::Moe> moe;

  /// Lookups; nullptr when absent.
  const ManifestTensor *param(const std::string &name) const;
  const ManifestTensor *inputWithRole(const std::string &role) const;
  const ManifestTensor *output(const std::string &name) const;
};

/// Parses and validates `text`; the error says what is wrong and where
/// ("params[3] ('wte'): offset 4096 + 1024 bytes exceeds params_bytes 4608").
Result<Manifest> parseManifest(std::string_view text);

} // namespace merak::rt

#endif // MERAK_RT_SRC_MANIFEST_H
