//===- dropout_position.cpp - The training position merak.dropout reads ---===//
//
// See merak_rt/ops.h (TrainingPosition) and merak_rt/dropout_mask.h. Host
// code of both backends: the CUDA kernel takes the layout and key built here.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/dropout_mask.h"
#include "merak_rt/ops.h"

#include <string>

namespace merak::rt {

cpu::TrainingPosition &cpu::trainingPosition() {
  static TrainingPosition position;
  return position;
}

namespace {
/// Split {dim, blocks, parts} (or none) at part `part`.
dropout::Split splitOf(const cpu::Dims &s, int64_t part) {
  if (s.rank == 0)
    return {};
  return {s.d[0], s.d[1], s.d[2], part};
}
} // namespace

dropout::MaskLayout dropout::layoutAt(const cpu::Dims &dx, const cpu::Dims &batchSplit,
                                      const cpu::Dims &tpSplit) {
  const cpu::TrainingPosition &at = cpu::trainingPosition();
  if ((batchSplit.rank != 0 && batchSplit.rank != 3) || (tpSplit.rank != 0 && tpSplit.rank != 3))
    cpu::fatal("dropout: a split is {dim, blocks, parts}");
  const int64_t batchPart = at.dpRank * at.microbatches + at.microbatch;
  MaskLayout layout;
  // The tensor-parallel split was made on the batch-local tensor: first.
  if (!makeLayout(dx.rank, dx.d, splitOf(tpSplit, at.tpRank), splitOf(batchSplit, batchPart),
                  layout)) {
    std::string what = "dropout: the recorded splits (batch part " + std::to_string(batchPart) +
                       ", tp rank " + std::to_string(at.tpRank) +
                       ") do not fit this rank's shape or mesh position";
    cpu::fatal(what.c_str());
  }
  return layout;
}

uint64_t dropout::keyAt(int64_t seed) { return streamKey(seed, cpu::trainingPosition().step); }

} // namespace merak::rt
