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
// dtypes: F64 F32 F16 BF16 I64 I32 U16 BOOL (BOOL is one byte, 0 or 1).
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

enum class DType { F64, F32, F16, BF16, I64, I32, U16, BOOL };

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

/// A tensor read from a file; owns its bytes.
struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  uint64_t numElements() const { return data.size() / dtypeSize(dtype); }
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

//===----------------------------------------------------------------------===//
// Checkpoint directories
//===----------------------------------------------------------------------===//
//
// A checkpoint directory holds `step_<STEP>.safetensors` files (STEP in
// decimal, no padding) and a tracker file `latest` whose content is the
// file name of the newest complete checkpoint followed by a newline, e.g.
// "step_100.safetensors\n". Both are written atomically, the tracker after
// the checkpoint, so a crash at any point leaves `latest` naming a complete
// file. Each checkpoint's metadata also carries "step" = STEP.
// A writer killed mid-way can leave a `*.tmp.<pid>` file behind; it is never
// read and may be deleted.

struct Checkpoint {
  int64_t step = 0;
  SafetensorsFile file;
};

/// The file name used for `step`: "step_<step>.safetensors".
std::string checkpointFileName(int64_t step);

/// Writes `dir/step_<step>.safetensors` and then `dir/latest`, both
/// atomically. Creates `dir` (one level) if it does not exist. When
/// `keepLast` > 0, afterwards deletes older `step_*.safetensors` files so
/// that only the newest `keepLast` remain.
Status saveCheckpoint(const std::string &dir, int64_t step,
                      const std::vector<TensorRef> &tensors,
                      const Metadata &metadata = {}, int keepLast = 0);

/// Reads `dir/latest` and loads the file it names.
Result<Checkpoint> loadLatestCheckpoint(const std::string &dir);

/// True when `dir/latest` exists (whether or not it is valid).
bool hasCheckpoint(const std::string &dir);

} // namespace merak::rt

#endif // MERAK_RT_SAFETENSORS_H
