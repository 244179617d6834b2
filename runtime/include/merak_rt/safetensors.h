//===- safetensors.h - safetensors files and checkpoints --------*- C++ -*-===//
//
// Format (the Hugging Face safetensors layout, readable by PyTorch tools):
//
//   bytes [0, 8)        N, the header length, uint64 little-endian
//   bytes [8, 8+N)      a UTF-8 JSON object:
//                         {"NAME": {"dtype": "F32", "shape": [2, 3],
//                                   "data_offsets": [BEGIN, END]}, ...,
//                          "__metadata__": {"KEY": "VALUE", ...}}
//                       padded with spaces so that 8+N is a multiple of 8
//   bytes [8+N, EOF)    the data section: each tensor's elements, row-major,
//                       little-endian; BEGIN/END are relative to the data
//                       section start.
//
// The writer stores tensors contiguously in the order given, first at offset 0,
// and writes "__metadata__" last (only when there is metadata). The reader
// accepts members in any order and checks: header length within the file,
// well-formed JSON, known dtype, non-negative shape, END-BEGIN equal to the
// element count times the dtype size, offsets inside the data section, no
// overlap, no gap, no trailing bytes, no duplicate names.
//
// dtypes: F64 F32 F16 BF16 I64 I32 U16 U8 BOOL (BOOL is one byte, 0 or 1).
//
// All writes are atomic: the file is written to `<path>.tmp.<pid>` in the
// same directory, fflush'ed and fsync'ed, renamed over `path`, and the
// directory is fsync'ed.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SAFETENSORS_H
#define MERAK_RT_SAFETENSORS_H

#include "merak_rt/status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace merak::rt {

enum class DType { F64, F32, F16, BF16, I64, I32, U16, U8, BOOL };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The safetensors spelling: "F32", "BF16", ...
const char *dtypeName(DType dtype);
/// Inverse of dtypeName; nullopt for anything else.
std::optional<DType> parseDType(std::string_view name);

/// Product of the dimensions (1 for a scalar); nullopt on a negative
/// dimension or overflow.
std::optional<uint64_t> elementCount(const std::vector<int64_t> &shape);

/// A tensor to be written; does not own its data. `data` must hold
/// elementCount(shape) * dtypeSize(dtype) bytes.
struct TensorRef {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// A tensor read from a file; owns its bytes (empty when the file was read
/// with readSafetensorsHeader: SafetensorsFile::readData fetches them).
struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  uint64_t fileOffset = 0; ///< where the bytes start in the file
  uint64_t byteSize = 0;   ///< elements * dtypeSize(dtype)

  uint64_t numElements() const { return byteSize / dtypeSize(dtype); }
};

using Metadata = std::map<std::string, std::string>;

/// The contents of one safetensors file. Tensors are in data-offset order.
struct SafetensorsFile {
  std::string path;
  std::vector<Tensor> tensors;
  Metadata metadata;

  /// The tensor named `name`, or nullptr.
  const Tensor *find(const std::string &name) const;

  /// Copies tensor `name` into `dst` after checking that it exists and has
  /// exactly `dtype` and `shape`; the error names the file, the tensor and
  /// both shapes. `dst` must hold elementCount(shape) * dtypeSize(dtype) bytes.
  Status copyTensor(const std::string &name, DType dtype,
                    const std::vector<int64_t> &shape, void *dst) const;

  /// Copies `t`'s bytes (t.byteSize) into `dst`: from memory when the file
  /// was read whole, else from the file at `path`.
  Status readData(const Tensor &t, void *dst) const;

  std::unordered_map<std::string, size_t> index; // name -> position
};

/// Writes a safetensors file atomically. Fails (and leaves `path` untouched)
/// on duplicate names, the reserved name "__metadata__", names or metadata
/// that are not valid UTF-8, a negative dimension, a null data pointer for a
/// non-empty tensor, or an I/O error.
Status writeSafetensors(const std::string &path,
                        const std::vector<TensorRef> &tensors,
                        const Metadata &metadata = {});

/// Reads and validates a whole safetensors file.
Result<SafetensorsFile> readSafetensors(const std::string &path);

/// Reads and validates the header of a safetensors file (every check
/// readSafetensors makes but reading the data); tensors' `data` stay empty.
Result<SafetensorsFile> readSafetensorsHeader(const std::string &path);

//===----------------------------------------------------------------------===//
// Checkpoint directories
//===----------------------------------------------------------------------===//
//
// A checkpoint directory holds one sub-directory per saved step and a
// tracker file `latest` naming the newest complete one:
//
//   DIR/latest                                  "step_<S>\n"
//   DIR/step_<S>/shard-<R>-of-<W>.safetensors   one file per process R of W
//
// Each process of a parallel job writes the tensors (or the pieces of
// tensors) it alone holds into its own shard file; a piece records where it
// lies in the full tensor (see runtime/src/checkpoint_shards.h), so a
// checkpoint saved at one (dp, tp, pp) resumes at any other. A single
// process writes `shard-0-of-1.safetensors` with whole tensors: an ordinary
// safetensors file PyTorch tools load.
//
// Saving: one process calls beginCheckpoint (creates DIR/step_<S>.partial),
// every process calls writeCheckpointShard (each file atomic), and once all
// have finished one process calls commitCheckpoint, which checks that all W
// shards are there, renames the .partial directory to step_<S> and then
// rewrites `latest` atomically. A crash at any point leaves `latest` naming
// a complete checkpoint. Every shard's metadata carries "step" = S,
// "merak.rank" = R and "merak.world" = W.
// A checkpoint of the first format (latest naming a single
// step_<S>.safetensors file) still loads, as one whole-tensor shard.

struct Checkpoint {
  int64_t step = 0;
  std::string path; ///< DIR/step_<S> (or the single file of the first format)
  /// The shard files in rank order, headers only: SafetensorsFile::readData
  /// reads a tensor's bytes when they are needed.
  std::vector<SafetensorsFile> shards;
};

/// "step_<step>", the name of a step's checkpoint directory.
std::string checkpointName(int64_t step);

/// "shard-<rank>-of-<world>.safetensors".
std::string checkpointShardName(int rank, int world);

/// Makes `dir` usable for checkpoints before a run starts: creates it and
/// its parents (like mkdir -p), then writes and removes a probe file in it
/// (named after `rank`, so that ranks sharing `dir` do not collide). The
/// error names `dir` and the OS error.
Status prepareCheckpointDir(const std::string &dir, int rank);

/// Starts saving step `step`: creates `dir` (one level) and an empty
/// `dir/step_<step>.partial` (removing what an interrupted save left there).
Status beginCheckpoint(const std::string &dir, int64_t step);

/// Writes process `rank` of `world`'s shard into the .partial directory
/// created by beginCheckpoint, atomically.
Status writeCheckpointShard(const std::string &dir, int64_t step, int rank,
                            int world, const std::vector<TensorRef> &tensors,
                            const Metadata &metadata = {});

/// Completes step `step` once every one of the `world` shards is written:
/// renames the .partial directory to step_<step>, rewrites `dir/latest`,
/// deletes what killed runs left (other .partial directories, half-written
/// trackers), and when `keepLast` > 0 deletes older step directories so
/// that only the newest `keepLast` remain.
Status commitCheckpoint(const std::string &dir, int64_t step, int world,
                        int keepLast = 0);

/// One process's whole checkpoint: begin, shard 0 of 1, commit.
Status saveCheckpoint(const std::string &dir, int64_t step,
                      const std::vector<TensorRef> &tensors,
                      const Metadata &metadata = {}, int keepLast = 0);

/// Reads `dir/latest` and the headers of every shard of the checkpoint it
/// names, checking that all shards are present and agree on the step.
Result<Checkpoint> loadLatestCheckpoint(const std::string &dir);

/// True when `dir/latest` exists (whether or not it is valid).
bool hasCheckpoint(const std::string &dir);

} // namespace merak::rt

#endif // MERAK_RT_SAFETENSORS_H
