//===- train_checkpoint.h - ./train's checkpoints: save, resume, stop -*- C++ -*-===//
//
// The run's side of the checkpoint protocol (safetensors.h, checkpoint_shards.h):
// rank 0 begins a checkpoint, every rank writes its shard, rank 0 commits;
// --resume restores this rank's pieces from a checkpoint of any mesh; a stop
// signal (stop_signals.h) ends the run with a coordinated checkpoint.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_TRAIN_CHECKPOINT_H
#define MERAK_RT_TRAIN_CHECKPOINT_H

#include "merak_rt/cli.h"
#include "merak_rt/comm.h"
#include "merak_rt/status.h"
#include "merak_rt/step_backend.h"

#include "checkpoint_shards.h"
#include "manifest.h"

#include <cstdint>
#include <vector>

namespace merak::rt::train {

/// Where this rank's checkpoints come from and go.
struct CheckpointSite {
  const Manifest &manifest;
  const TrainOptions &options;
  const RankPlace &place;
  Comm *comm = nullptr;            ///< null: one process
  StepBackend *backend = nullptr;  ///< a device program: P lives there
  std::vector<ByteRange> paramRanges; ///< what a checkpoint copies back
};

/// What a checkpoint copies back from the device: all of P, or for a
/// pipeline the params this rank uses (adjacent ones merged).
std::vector<ByteRange> checkpointRanges(const Manifest &m, const RankPlace &place,
                                        bool pipelined);

/// Restores P from the checkpoint dir's latest (this rank's pieces of every
/// parameter, from a checkpoint saved under any mesh); returns the number of
/// completed steps. Errors end the run (exit 1).
int64_t resumeFromCheckpoint(const CheckpointSite &site, char *P);

/// Checkpoint `steps` into --checkpoint-dir: beginCheckpoint on rank 0,
/// every rank's shard, commit on rank 0; the barriers order them (and time
/// out if a rank died).
Status saveCheckpoint(const CheckpointSite &site, int64_t steps, char *P);

/// The end of a run stopped by `signal` after `steps` steps: the checkpoint
/// of that step (unless the loop just wrote it), a barrier so that no rank
/// exits before rank 0 committed it, one line on rank 0. Returns the exit
/// code, 128 + signal.
int stopOnSignal(const CheckpointSite &site, int signal, int64_t steps, bool checkpointed,
                 char *P);

} // namespace merak::rt::train

#endif // MERAK_RT_TRAIN_CHECKPOINT_H
