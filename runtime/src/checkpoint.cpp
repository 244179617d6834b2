//===- checkpoint.cpp - checkpoint directories (step files + latest) ------===//
#include "merak_rt/safetensors.h"

#include "file_util.h"

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <exception>
#include <sys/stat.h>
#include <unistd.h>

namespace merak::rt {

using detail::errnoMessage;

namespace {
constexpr const char *kLatest = "latest";

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// Parses "step_<digits>.safetensors"; -1 if `name` is not of that form.
int64_t parseCheckpointFileName(const std::string &name) {
  const std::string prefix = "step_", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() ||
      name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  std::string digits = name.substr(
      prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0'))
    return -1;
  return std::stoll(digits);
}

Status removeOldCheckpoints(const std::string &dir, int64_t newest,
                            int keepLast) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return Status::error("cannot list checkpoint directory '" + dir +
                         "': " + errnoMessage(errno));
  std::vector<int64_t> steps;
  while (struct dirent *entry = ::readdir(d)) {
    int64_t step = parseCheckpointFileName(entry->d_name);
    if (step >= 0)
      steps.push_back(step);
  }
  ::closedir(d);
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keepLast); i < steps.size(); ++i) {
    if (steps[i] == newest)
      continue;
    std::string victim = joinPath(dir, checkpointFileName(steps[i]));
    if (::unlink(victim.c_str()) != 0 && errno != ENOENT)
      return Status::error("cannot remove old checkpoint '" + victim +
                           "': " + errnoMessage(errno));
  }
  return Status::success();
}
} // namespace

std::string checkpointFileName(int64_t step) {
  return "step_" + std::to_string(step) + ".safetensors";
}

bool hasCheckpoint(const std::string &dir) {
  struct stat st;
  return ::stat(joinPath(dir, kLatest).c_str(), &st) == 0;
}

Status saveCheckpoint(const std::string &dir, int64_t step,
                      const std::vector<TensorRef> &tensors,
                      const Metadata &metadata, int keepLast) {
  try {
    if (step < 0)
      return Status::error("cannot save checkpoint in '" + dir +
                           "': negative step " + std::to_string(step));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::error("cannot create checkpoint directory '" + dir +
                           "': " + errnoMessage(errno));
    std::string name = checkpointFileName(step);
    Metadata withStep = metadata;
    withStep["step"] = std::to_string(step);
    if (Status s = writeSafetensors(joinPath(dir, name), tensors, withStep);
        !s.ok())
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
    if (keepLast > 0)
      return removeOldCheckpoints(dir, step, keepLast);
    return Status::success();
  } catch (const std::exception &e) {
    return Status::error("cannot save checkpoint in '" + dir +
                         "': " + e.what());
  }
}

Result<Checkpoint> loadLatestCheckpoint(const std::string &dir) {
  try {
    std::string latestPath = joinPath(dir, kLatest);
    std::string content;
    if (Status s = detail::readSmallFile(latestPath, "checkpoint tracker",
                                         content);
        !s.ok())
      return s;
    while (!content.empty() &&
           (content.back() == '\n' || content.back() == '\r' ||
            content.back() == ' ' || content.back() == '\t'))
      content.pop_back();
    int64_t step = parseCheckpointFileName(content);
    if (step < 0)
      return Result<Checkpoint>::error(
          "checkpoint tracker '" + latestPath + "' is corrupt: it holds '" +
          content + "', expected a name of the form step_<N>.safetensors");
    Result<SafetensorsFile> file = readSafetensors(joinPath(dir, content));
    if (!file.ok())
      return Result<Checkpoint>::error("cannot load the latest checkpoint: " +
                                       file.message());
    auto it = file->metadata.find("step");
    if (it != file->metadata.end() && it->second != std::to_string(step))
      return Result<Checkpoint>::error(
          "checkpoint '" + file->path + "' records step " + it->second +
          " but its name says step " + std::to_string(step));
    Checkpoint checkpoint;
    checkpoint.step = step;
    checkpoint.file = std::move(file).value();
    return checkpoint;
  } catch (const std::exception &e) {
    return Result<Checkpoint>::error("cannot load checkpoint from '" + dir +
                                     "': " + e.what());
  }
}

} // namespace merak::rt
