//===- cli.h - Command line of generated training programs ------*- C++ -*-===//
//
//   ./train --data FILE --steps N [--lr X] [--seed S]
//           [--sampler random|sequential]
//           [--checkpoint-dir DIR [--checkpoint-every K] [--resume]]
//           [--metrics FILE] [--trace FILE | --profile-ops FILE] [--log-every K]
//           [--stop-signals LIST] [--help]
//
// Defaults come from the caller (the hyper-parameters compiled into the
// program). Values are given as `--flag VALUE` or `--flag=VALUE`. Parsing is
// strict: an unknown flag, a positional argument, a missing or non-numeric
// value, a flag given twice, a negative --steps, a non-positive
// --checkpoint-every / --log-every, a negative or non-finite --lr,
// --checkpoint-every or --resume without a checkpoint directory, or a missing
// --data / --steps (when the defaults have none) is an error whose message
// names the flag. The caller prints it and chooses the exit code. --help (or
// -h) stops parsing and sets `help`.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CLI_H
#define MERAK_RT_CLI_H

#include "merak_rt/data.h"
#include "merak_rt/status.h"

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

namespace merak::rt {

struct TrainOptions {
  std::string data;          ///< --data; required when empty in the defaults
  int64_t steps = -1;        ///< --steps; required when < 0 in the defaults
  double lr = 1e-3;          ///< --lr (peak learning rate)
  uint64_t seed = 0;         ///< --seed
  Sampler sampler = Sampler::Random; ///< --sampler
  std::string checkpointDir; ///< --checkpoint-dir; empty: no checkpoints
  /// --checkpoint-every; 0: only after the last step (when a directory is set)
  int64_t checkpointEvery = 0;
  /// --checkpoint-keep; the newest N checkpoints stay, older ones are
  /// deleted after each commit; 0: all stay
  int64_t checkpointKeep = 0;
  bool resume = false;       ///< --resume from checkpointDir/latest
  /// --allow-partial-resume: restore the tensors that match, keep the
  /// others at their initial values (otherwise a mismatch is an error).
  bool allowPartialResume = false;
  std::string metricsPath;   ///< --metrics; empty: no JSONL metrics
  /// --moe-histogram: rank 0's rows per expert, written at the end.
  std::string moeHistogramPath;
  /// --moe-rebalance-every: dynamic expert placement's period in steps (0:
  /// off); the program's default comes from merak-compile.
  int64_t moeRebalanceEvery = 0;
  /// --moe-rebalance-min-rows: the rows a rebalance must save over the next
  /// K steps for each expert it moves; -1: what moving the expert's weights
  /// and optimizer state costs on the all-to-all.
  int64_t moeRebalanceMinRows = -1;
  std::string tracePath;     ///< --trace; empty: no trace
  /// --profile-ops: the op-cost file to merge op timings into; empty: none
  std::string profileOpsPath;
  int64_t logEvery = 10;     ///< --log-every (progress lines off a terminal)
  /// --stop-signals: the signals that stop the run after the current step
  /// with a checkpoint (stop_signals.h); empty: none are caught.
  std::vector<int> stopSignals{SIGTERM, SIGINT, SIGUSR1};
  bool help = false;         ///< --help / -h was given
};

/// Parses argv[1..argc) on top of `defaults`.
Result<TrainOptions> parseTrainArgs(int argc, const char *const *argv,
                                    const TrainOptions &defaults);

/// The --help text, showing the defaults.
std::string trainUsage(const std::string &program,
                       const TrainOptions &defaults);

} // namespace merak::rt

#endif // MERAK_RT_CLI_H
