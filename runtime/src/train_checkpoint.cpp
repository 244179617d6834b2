//===- train_checkpoint.cpp - ./train's checkpoints: save, resume, stop ----===//
#include "train_checkpoint.h"

#include "merak_rt/safetensors.h"

#include "stop_signals.h"
#include "train_support.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace merak::rt::train {

namespace {

Metadata checkpointMetadata(const Manifest &m, const TrainOptions &o) {
  Metadata meta;
  meta["format"] = "pt"; // what Hugging Face loaders look for
  // (Strings of the manifest are valid UTF-8: the JSON reader checked.)
  if (!m.model.empty())
    meta["model"] = m.model;
  if (!m.optimizer.empty())
    meta["optimizer"] = m.optimizer;
  meta["sampler"] = samplerName(o.sampler);
  meta["seed"] = std::to_string(o.seed);
  return meta;
}

} // namespace

int64_t resumeFromCheckpoint(const CheckpointSite &site, char *P) {
  const Manifest &m = site.manifest;
  const TrainOptions &o = site.options;
  const RankPlace &place = site.place;
  if (!hasCheckpoint(o.checkpointDir))
    die(kExitError, "--resume: no checkpoint to resume from in '" +
                        o.checkpointDir + "' (it has no 'latest' file)");
  Result<Checkpoint> loaded = loadLatestCheckpoint(o.checkpointDir);
  if (!loaded.ok())
    die(kExitError, "--resume: " + loaded.message());
  RestoreReport report;
  if (Status s = restoreCheckpoint(*loaded, m, P, place, o.allowPartialResume, report); !s.ok())
    die(kExitError, "--resume: " + s.message());
  const SafetensorsFile &file = loaded->shards.front();
  if (!report.missing.empty())
    printWarning("--allow-partial-resume: checkpoint '" + loaded->path + "' lacks " +
                 std::to_string(report.missing.size()) + " tensor(s) (e.g. " +
                 report.missing.front() + "); they keep their initial values");
  if (!report.unused.empty())
    printWarning("--allow-partial-resume: checkpoint '" + loaded->path + "' holds " +
                 std::to_string(report.unused.size()) +
                 " tensor(s) this program does not use (e.g. '" + report.unused.front() +
                 "'); ignoring them");
  auto differs = [&](const char *key, const std::string &now,
                     const char *flag) {
    auto it = file.metadata.find(key);
    if (it != file.metadata.end() && it->second != now)
      printWarning(std::string("checkpoint '") + file.path +
                   "' was written with " + flag + " " + it->second +
                   ", this run uses " + now +
                   "; the batches differ from an uninterrupted run");
  };
  differs("sampler", samplerName(o.sampler), "--sampler");
  differs("seed", std::to_string(o.seed), "--seed");
  return loaded->step;
}

std::vector<ByteRange> checkpointRanges(const Manifest &m, const RankPlace &place,
                                        bool pipelined) {
  std::vector<ByteRange> paramRanges;
  if (!pipelined) {
    paramRanges.push_back({0, m.paramsBytes});
  } else {
    std::vector<ByteRange> used;
    for (const ManifestTensor &t : m.params)
      if (place.needs(t))
        used.push_back({t.offset, t.bytes});
    std::sort(used.begin(), used.end(),
              [](const ByteRange &a, const ByteRange &b) { return a.offset < b.offset; });
    for (const ByteRange &r : used)
      if (!paramRanges.empty() &&
          paramRanges.back().offset + paramRanges.back().bytes >= r.offset)
        paramRanges.back().bytes = std::max(paramRanges.back().bytes,
                                            r.offset + r.bytes - paramRanges.back().offset);
      else
        paramRanges.push_back(r);
  }
  return paramRanges;
}

Status saveCheckpoint(const CheckpointSite &site, int64_t steps, char *P) {
  const Manifest &m = site.manifest;
  const TrainOptions &o = site.options;
  Comm *comm = site.comm;
  const int worldSize = comm ? comm->worldSize() : 1;
  if (!comm || comm->rank() == 0)
    if (Status st = beginCheckpoint(o.checkpointDir, steps); !st.ok())
      return st;
  if (comm)
    comm->barrier();
  if (site.backend)
    if (Status st = site.backend->downloadParams(P, site.paramRanges); !st.ok())
      return st;
  CheckpointShard shard = checkpointShard(m, P, site.place);
  Metadata meta = checkpointMetadata(m, o);
  if (shard.piecesJson != "{}")
    meta["merak.pieces"] = shard.piecesJson;
  if (Status st = writeCheckpointShard(o.checkpointDir, steps, comm ? comm->rank() : 0,
                                       worldSize, shard.tensors, meta);
      !st.ok())
    return st;
  if (comm)
    comm->barrier();
  if (!comm || comm->rank() == 0)
    if (Status st = commitCheckpoint(o.checkpointDir, steps, worldSize,
                                         static_cast<int>(std::min<int64_t>(o.checkpointKeep, INT32_MAX))); !st.ok())
      return st;
  return Status();
}

int stopOnSignal(const CheckpointSite &site, int signal, int64_t steps, bool checkpointed,
                 char *P) {
  const TrainOptions &o = site.options;
  Comm *comm = site.comm;
  if (!o.checkpointDir.empty() && !checkpointed)
    if (Status st = saveCheckpoint(site, steps, P); !st.ok())
      die(kExitError, st.message());
  if (comm)
    comm->barrier();
  if (!comm || comm->rank() == 0) {
    std::string what =
        o.checkpointDir.empty()
            ? "no --checkpoint-dir, so nothing was saved"
            : "checkpoint " + o.checkpointDir + "/" + checkpointName(steps) +
                  " written; continue with --resume";
    std::fprintf(stderr, "train: %s: stopped after step %lld of %lld: %s (exit %d)\n",
                 stopSignalName(signal).c_str(), static_cast<long long>(steps),
                 static_cast<long long>(o.steps), what.c_str(), 128 + signal);
    std::fflush(stderr);
  }
  return 128 + signal;
}

} // namespace merak::rt::train
