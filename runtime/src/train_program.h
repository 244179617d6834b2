//===- train_program.h - ./train's program, data and inputs -----*- C++ -*-===//
//
// What ./train (train_main.cpp) reads from the embedded manifest (the
// tensors it feeds and reads), the datasets it opens for them, the
// constants, and each step's inputs written into the arena.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_TRAIN_PROGRAM_H
#define MERAK_RT_TRAIN_PROGRAM_H

#include "merak_rt/array_data.h"
#include "merak_rt/cli.h"
#include "merak_rt/data.h"

#include "manifest.h"
#include "train_memory.h"
#include "weights_file.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace merak::rt::train {

/// The embedded manifest and the tensors ./train feeds and reads.
struct Program {
  Manifest manifest;
  const ManifestTensor *tokens = nullptr, *labels = nullptr, *step = nullptr;
  const ManifestTensor *loss = nullptr, *gradNorm = nullptr, *lr = nullptr;
  std::vector<const ManifestTensor *> extraOutputs; // other float scalars
  int64_t batch = 0, seqLen = 0;
  /// Inputs fed from .npy arrays when there are no token ids.
  std::vector<const ManifestTensor *> arrayInputs;
  /// The loss's count of labels (role label_count), the labels it counts
  /// (the input with an ignore_index), and the step's pieces: dp ranks x
  /// micro-batches, over which the count is averaged.
  const ManifestTensor *labelCount = nullptr, *countedLabels = nullptr;
  int64_t pieces = 1;
};

/// Parses and checks the embedded manifest (an internal error otherwise).
Program loadProgram();

/// The training data: token ids, or one array per input of the model.
struct Datasets {
  std::optional<ArrayDataset> arrays;
  std::optional<TokenDataset> tokens;
};
/// Opens --data for `program` (ends the run with an error otherwise).
Datasets openData(const Program &program, const TrainOptions &o);

/// The constants, in the executable's data or the weights file (copied
/// when not aligned).
const char *constants(const Manifest &m, const WeightsFile *w, Buffer &constsCopy);

/// Step `s`'s inputs in the arena: this data-parallel rank's rows of the
/// global batch (token ids and labels, or every array input), the label
/// count (the global batch's labels other than the ignore_index over the
/// pieces; an error when there are none) and the step.
Status fillStepInputs(const Program &program, Datasets &data, int64_t s, int64_t dpRank, char *A,
                      std::vector<int64_t> &inputs, std::vector<int64_t> &labels);

} // namespace merak::rt::train

#endif // MERAK_RT_TRAIN_PROGRAM_H
