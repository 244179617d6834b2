//===- array_data.h - Sample arrays for non-token models --------*- C++ -*-===//
//
// Models whose inputs are not token ids (an MLP on features, a CNN on
// images) train from a directory of numpy .npy files, one per program input
// (`<input name>.npy`, labels included), each [N, <the input's per-sample
// shape>] with the same N. Row r of step s (global batch B) is sample
//   Sequential: (s * B + r) mod N
//   Random:     the token sampler's counter-based draw with M = N
//               (data.h: h = mix(mix(mix(seed) ^ s) ^ r), rejection, h mod N)
// so, as for tokens, any rank can compute any row of any step.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_ARRAY_DATA_H
#define MERAK_RT_ARRAY_DATA_H

#include "merak_rt/data.h"
#include "merak_rt/safetensors.h"
#include "merak_rt/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace merak::rt {

/// One program input fed from `<dir>/<name>.npy`.
struct ArraySpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> sampleShape; ///< the input's shape without the batch dim
  /// Integer arrays: values must lie in [0, indexLimit) (class labels,
  /// ids; the manifest's index_limit); 0: unchecked.
  int64_t indexLimit = 0;
  /// A value allowed outside the limit (labels: the loss's ignore_index).
  std::optional<int64_t> ignoreIndex;
};

class ArrayDataset {
public:
  /// Reads every array; errors name the file and say what differs (missing
  /// file, not a .npy, Fortran order, dtype, per-sample shape, row counts).
  static Result<ArrayDataset> open(const std::string &dir,
                                   const std::vector<ArraySpec> &specs,
                                   Sampler sampler, uint64_t seed);

  int64_t samples() const { return samples_; }
  /// The sample index of global row r of step s.
  int64_t sampleOf(int64_t step, int64_t globalBatch, int64_t row) const;
  /// Writes global rows [rowBegin, rowEnd) of step `step` of array i to dst.
  Status fill(size_t i, int64_t step, int64_t globalBatch, int64_t rowBegin,
              int64_t rowEnd, void *dst) const;

  /// How many elements of integer array i in step `step`'s global rows
  /// differ from `value` (the labels the loss counts: not its ignore_index).
  Result<int64_t> countOther(size_t i, int64_t step, int64_t globalBatch, int64_t value) const;

  /// One input's rows (public for the index check in array_data.cpp).
  struct Array {
    std::string path;
    DType dtype = DType::F32;
    std::vector<char> data; ///< N rows of rowBytes
    int64_t rowBytes = 0;
  };

private:
  std::vector<Array> arrays_;
  int64_t samples_ = 0;
  Sampler sampler_ = Sampler::Sequential;
  uint64_t seed_ = 0;
};

} // namespace merak::rt

#endif // MERAK_RT_ARRAY_DATA_H
