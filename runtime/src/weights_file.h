//===- weights_file.h - a program's initial data next to it -----*- C++ -*-===//
//
// merak-compile writes a program's initial data (parameters, frozen
// buffers, the full tensors of tensor-parallel shards, the constants) into
// a safetensors file next to the executable instead of into it; the
// manifest's "weights" names the file and this compilation's id, which the
// file's metadata "merak.program" repeats. Each rank maps the file
// read-only, copies the tensors it uses (its stage's, its shard's rows) and
// releases their pages: its resident memory holds only its own parameters.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_WEIGHTS_FILE_H
#define MERAK_RT_SRC_WEIGHTS_FILE_H

#include "merak_rt/safetensors.h"
#include "merak_rt/status.h"

#include "checkpoint_shards.h"
#include "manifest.h"

#include <cstdint>
#include <memory>
#include <string>

namespace merak::rt {

class WeightsFile {
public:
  /// Maps `path` after checking its header (readSafetensorsHeader: no gap,
  /// no short or trailing data) and that its metadata "merak.program" is
  /// `id`; the errors name the file and say what to do.
  static Result<std::unique_ptr<WeightsFile>> open(const std::string &path,
                                                   const std::string &id);
  ~WeightsFile();
  WeightsFile(const WeightsFile &) = delete;
  WeightsFile &operator=(const WeightsFile &) = delete;

  /// Tensor `name`'s bytes when it holds exactly `bytes` bytes; else null.
  const char *tensor(const std::string &name, uint64_t bytes) const;
  /// Drops the mapped pages of every tensor but `keep` from memory (they
  /// are re-read from the file if touched again).
  void releaseExcept(const std::string &keep) const;
  const std::string &path() const { return header_.path; }

private:
  WeightsFile() = default;
  SafetensorsFile header_;
  char *map_ = nullptr;
  uint64_t size_ = 0;
};

/// The directory of the running executable (/proc/self/exe), "." if unknown.
std::string executableDirectory();

/// The name of the constants in a weights file.
inline constexpr const char *kConstantsTensor = "merak.constants";

/// Copies the initial data of the params this rank uses into P, from `w`
/// (its pages then released, the constants' kept) or, without one, from
/// merak_data; the other params' data is never read. A tensor missing from
/// `w` ends the program with an error naming it.
void loadInitialParams(const Manifest &m, const RankPlace &place, char *P,
                       const WeightsFile *w);

} // namespace merak::rt

#endif
