//===- checkpoint.cpp - checkpoint directories (step dirs + latest) -------===//
#include "merak_rt/safetensors.h"

#include "file_util.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <exception>
#include <sys/stat.h>
#include <unistd.h>

namespace merak::rt {

using detail::errnoMessage;

namespace {
constexpr const char *kLatest = "latest";
constexpr const char *kPartial = ".partial";
constexpr const char *kSuffix = ".safetensors";

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// Parses a decimal without sign or leading zeros; -1 otherwise.
int64_t parseNumber(const std::string &digits) {
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0'))
    return -1;
  return std::stoll(digits);
}

/// The step of "step_<N>" (a step directory) or "step_<N>.safetensors" (a
/// checkpoint of the first format); -1 for any other name.
int64_t parseStepName(const std::string &name, bool *legacy = nullptr) {
  const std::string prefix = "step_", suffix = kSuffix;
  if (name.compare(0, prefix.size(), prefix) != 0)
    return -1;
  std::string rest = name.substr(prefix.size());
  bool file = rest.size() > suffix.size() &&
              rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (file)
    rest.resize(rest.size() - suffix.size());
  if (legacy)
    *legacy = file;
  return parseNumber(rest);
}

/// (rank, world) of "shard-<R>-of-<W>.safetensors"; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> parseShardName(const std::string &name) {
  const std::string prefix = "shard-", mid = "-of-", suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() ||
      name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  std::string body = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  size_t at = body.find(mid);
  if (at == std::string::npos)
    return std::nullopt;
  int64_t rank = parseNumber(body.substr(0, at));
  int64_t world = parseNumber(body.substr(at + mid.size()));
  if (rank < 0 || world < 1 || rank >= world)
    return std::nullopt;
  return std::make_pair(rank, world);
}

/// The names in `dir` (without "." and "..").
Result<std::vector<std::string>> listDirectory(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return Result<std::vector<std::string>>::error("cannot list '" + dir +
                                                   "': " + errnoMessage(errno));
  std::vector<std::string> names;
  while (struct dirent *entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

/// Removes `path`: a file, or a directory of files (one level).
Status removeTree(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? Status::success()
                           : Status::error("cannot stat '" + path + "': " + errnoMessage(errno));
  if (S_ISDIR(st.st_mode)) {
    Result<std::vector<std::string>> names = listDirectory(path);
    if (!names.ok())
      return Status::error(names.message());
    for (const std::string &name : *names)
      if (::unlink(joinPath(path, name).c_str()) != 0 && errno != ENOENT)
        return Status::error("cannot remove '" + joinPath(path, name) +
                             "': " + errnoMessage(errno));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
      return Status::error("cannot remove '" + path + "': " + errnoMessage(errno));
    return Status::success();
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Status::error("cannot remove '" + path + "': " + errnoMessage(errno));
  return Status::success();
}

Status removeOldCheckpoints(const std::string &dir, int64_t newest, int keepLast) {
  Result<std::vector<std::string>> names = listDirectory(dir);
  if (!names.ok())
    return Status::error(names.message());
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const std::string &name : *names)
    if (int64_t step = parseStepName(name); step >= 0)
      steps.push_back({step, name});
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keepLast); i < steps.size(); ++i)
    if (steps[i].first != newest)
      if (Status s = removeTree(joinPath(dir, steps[i].second)); !s.ok())
        return Status::error("cannot remove an old checkpoint: " + s.message());
  return Status::success();
}

/// Removes what killed runs left in `dir`: unfinished step directories
/// ("step_N.partial") and half-written trackers ("latest.tmp.PID"). Called
/// after a commit, when no rank is writing into `dir`.
Status removeLeftovers(const std::string &dir) {
  Result<std::vector<std::string>> names = listDirectory(dir);
  if (!names.ok())
    return Status::error(names.message());
  const std::string partial = kPartial, tmp = std::string(kLatest) + ".tmp.";
  for (const std::string &name : *names) {
    bool unfinished = name.size() > partial.size() &&
                      name.compare(name.size() - partial.size(), partial.size(), partial) == 0 &&
                      parseStepName(name.substr(0, name.size() - partial.size())) >= 0;
    if (unfinished || name.compare(0, tmp.size(), tmp) == 0)
      if (Status s = removeTree(joinPath(dir, name)); !s.ok())
        return Status::error("cannot remove a killed run's leftover: " + s.message());
  }
  return Status::success();
}

std::string partialDir(const std::string &dir, int64_t step) {
  return joinPath(dir, checkpointName(step) + kPartial);
}

Result<Checkpoint> loadLatestImpl(const std::string &dir) {
  std::string latestPath = joinPath(dir, kLatest);
  std::string content;
  if (Status s = detail::readSmallFile(latestPath, "checkpoint tracker", content); !s.ok())
    return s;
  while (!content.empty() && (content.back() == '\n' || content.back() == '\r' ||
                              content.back() == ' ' || content.back() == '\t'))
    content.pop_back();
  bool legacy = false;
  int64_t step = parseStepName(content, &legacy);
  if (step < 0)
    return Result<Checkpoint>::error("checkpoint tracker '" + latestPath +
                                     "' is corrupt: it holds '" + content +
                                     "', expected a name of the form step_<N>");
  Checkpoint checkpoint;
  checkpoint.step = step;
  checkpoint.path = joinPath(dir, content);
  std::vector<std::string> files;
  if (legacy) {
    files.push_back(checkpoint.path);
  } else {
    Result<std::vector<std::string>> names = listDirectory(checkpoint.path);
    if (!names.ok())
      return Result<Checkpoint>::error("cannot load the latest checkpoint: " +
                                       names.message());
    int64_t world = -1;
    std::vector<std::string> byRank;
    for (const std::string &name : *names) {
      auto shard = parseShardName(name);
      if (!shard)
        continue; // e.g. a *.tmp.<pid> left by a killed writer
      if (world < 0) {
        world = shard->second;
        byRank.resize(static_cast<size_t>(world));
      } else if (shard->second != world) {
        return Result<Checkpoint>::error(
            "checkpoint '" + checkpoint.path + "' mixes shards of " + std::to_string(world) +
            " and " + std::to_string(shard->second) + " processes");
      }
      byRank[static_cast<size_t>(shard->first)] = name;
    }
    if (world < 0)
      return Result<Checkpoint>::error("checkpoint '" + checkpoint.path +
                                       "' holds no shard-<R>-of-<W>.safetensors file");
    for (int64_t r = 0; r < world; ++r) {
      if (byRank[static_cast<size_t>(r)].empty())
        return Result<Checkpoint>::error(
            "checkpoint '" + checkpoint.path + "' is incomplete: " +
            checkpointShardName(static_cast<int>(r), static_cast<int>(world)) + " is missing");
      files.push_back(joinPath(checkpoint.path, byRank[static_cast<size_t>(r)]));
    }
  }
  for (const std::string &path : files) {
    Result<SafetensorsFile> file = readSafetensorsHeader(path);
    if (!file.ok())
      return Result<Checkpoint>::error("cannot load the latest checkpoint: " + file.message());
    auto it = file->metadata.find("step");
    if (it != file->metadata.end() && it->second != std::to_string(step))
      return Result<Checkpoint>::error("checkpoint '" + file->path + "' records step " +
                                       it->second + " but its name says step " +
                                       std::to_string(step));
    checkpoint.shards.push_back(std::move(file).value());
  }
  return checkpoint;
}
} // namespace

std::string checkpointName(int64_t step) { return "step_" + std::to_string(step); }

std::string checkpointShardName(int rank, int world) {
  return "shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + kSuffix;
}

bool hasCheckpoint(const std::string &dir) {
  struct stat st;
  return ::stat(joinPath(dir, kLatest).c_str(), &st) == 0;
}

Status prepareCheckpointDir(const std::string &dir, int rank) {
  auto cannotCreate = [&dir](int err) {
    return Status::error("cannot create checkpoint directory '" + dir + "': " +
                         errnoMessage(err));
  };
  // mkdir -p: each parent (a prefix ending before a '/'), then `dir`.
  for (size_t end = dir.find('/', 1); end != std::string::npos; end = dir.find('/', end + 1))
    if (::mkdir(dir.substr(0, end).c_str(), 0755) != 0 && errno != EEXIST)
      return cannotCreate(errno);
  struct stat st;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return cannotCreate(errno);
  if (::stat(dir.c_str(), &st) != 0)
    return cannotCreate(errno);
  if (!S_ISDIR(st.st_mode))
    return cannotCreate(ENOTDIR);
  // The probe: a file written, closed and removed, as a checkpoint would.
  std::string probe =
      joinPath(dir, ".probe-" + std::to_string(rank) + "-" + std::to_string(::getpid()));
  int err = 0;
  if (std::FILE *f = std::fopen(probe.c_str(), "w")) {
    if (std::fputs("merak\n", f) < 0)
      err = errno;
    if (std::fclose(f) != 0 && !err)
      err = errno;
    if (::unlink(probe.c_str()) != 0 && !err)
      err = errno;
  } else {
    err = errno;
  }
  if (err)
    return Status::error("checkpoint directory '" + dir + "' is not writable: " +
                         errnoMessage(err));
  return Status::success();
}

Status beginCheckpoint(const std::string &dir, int64_t step) {
  if (step < 0)
    return Status::error("cannot save checkpoint in '" + dir + "': negative step " +
                         std::to_string(step));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::error("cannot create checkpoint directory '" + dir +
                         "': " + errnoMessage(errno));
  std::string partial = partialDir(dir, step);
  if (Status s = removeTree(partial); !s.ok())
    return s;
  if (::mkdir(partial.c_str(), 0755) != 0)
    return Status::error("cannot create checkpoint directory '" + partial +
                         "': " + errnoMessage(errno));
  return Status::success();
}

Status writeCheckpointShard(const std::string &dir, int64_t step, int rank, int world,
                            const std::vector<TensorRef> &tensors, const Metadata &metadata) {
  try {
    Metadata withStep = metadata;
    withStep["step"] = std::to_string(step);
    withStep["merak.rank"] = std::to_string(rank);
    withStep["merak.world"] = std::to_string(world);
    return writeSafetensors(joinPath(partialDir(dir, step), checkpointShardName(rank, world)),
                            tensors, withStep);
  } catch (const std::exception &e) {
    return Status::error("cannot save checkpoint in '" + dir + "': " + e.what());
  }
}

Status commitCheckpoint(const std::string &dir, int64_t step, int world, int keepLast) {
  try {
    std::string partial = partialDir(dir, step);
    for (int r = 0; r < world; ++r) {
      std::string shard = joinPath(partial, checkpointShardName(r, world));
      struct stat st;
      if (::stat(shard.c_str(), &st) != 0)
        return Status::error("cannot complete checkpoint '" + partial + "': " + shard +
                             " was not written");
    }
    std::string name = checkpointName(step), final = joinPath(dir, name);
    if (Status s = removeTree(final); !s.ok()) // from an earlier run
      return s;
    if (::rename(partial.c_str(), final.c_str()) != 0)
      return Status::error("cannot rename '" + partial + "' to '" + final +
                           "': " + errnoMessage(errno));
    if (Status s = detail::fsyncDirectory(dir); !s.ok())
      return s;
    std::string content = name + "\n";
    if (Status s = detail::writeFileAtomically(
            joinPath(dir, kLatest), "checkpoint tracker",
            [&](std::FILE *file) {
              return detail::writeAll(file, content.data(), content.size(),
                                      joinPath(dir, kLatest));
            });
        !s.ok())
      return s;
    if (Status s = removeLeftovers(dir); !s.ok())
      return s;
    if (keepLast > 0)
      return removeOldCheckpoints(dir, step, keepLast);
    return Status::success();
  } catch (const std::exception &e) {
    return Status::error("cannot save checkpoint in '" + dir + "': " + e.what());
  }
}

Status saveCheckpoint(const std::string &dir, int64_t step, const std::vector<TensorRef> &tensors,
                      const Metadata &metadata, int keepLast) {
  if (Status s = beginCheckpoint(dir, step); !s.ok())
    return s;
  if (Status s = writeCheckpointShard(dir, step, 0, 1, tensors, metadata); !s.ok())
    return s;
  return commitCheckpoint(dir, step, 1, keepLast);
}

Result<Checkpoint> loadLatestCheckpoint(const std::string &dir) {
  try {
    return loadLatestImpl(dir);
  } catch (const std::exception &e) {
    return Result<Checkpoint>::error("cannot load checkpoint from '" + dir + "': " + e.what());
  }
}

} // namespace merak::rt
