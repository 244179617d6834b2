//===- file_util.cpp - Atomic file writes (internal) ----------------------===//
#include "file_util.h"

#include <cerrno>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace merak::rt::detail {

std::string errnoMessage(int err) { return std::strerror(err); }

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

Status writeAll(std::FILE *file, const void *data, size_t size,
                const std::string &path) {
  const char *bytes = static_cast<const char *>(data);
  constexpr size_t kChunk = size_t(1) << 24;
  while (size > 0) {
    size_t n = size < kChunk ? size : kChunk;
    if (std::fwrite(bytes, 1, n, file) != n)
      return Status::error("cannot write '" + path +
                           "': " + errnoMessage(errno));
    bytes += n;
    size -= n;
  }
  return Status::success();
}

Status fsyncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::error("cannot open directory '" + dir +
                         "' to sync it: " + errnoMessage(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot sync directories; the rename is still atomic.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    return Status::error("cannot sync directory '" + dir +
                         "': " + errnoMessage(err));
  return Status::success();
}

Status writeFileAtomically(const std::string &path, const std::string &what,
                           const std::function<Status(std::FILE *)> &body) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error("cannot create " + what + " '" + tmp +
                         "': " + errnoMessage(errno));
  std::FILE *file = ::fdopen(fd, "wb");
  if (!file) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::error("cannot open " + what + " '" + tmp +
                         "': " + errnoMessage(err));
  }
  std::setvbuf(file, nullptr, _IOFBF, size_t(1) << 20);

  auto abandon = [&](Status status) {
    if (file)
      std::fclose(file);
    ::unlink(tmp.c_str());
    return status;
  };

  Status status;
  try {
    status = body(file);
  } catch (const std::exception &e) {
    status = Status::error("cannot write " + what + " '" + tmp +
                           "': " + e.what());
  }
  if (!status.ok())
    return abandon(status);
  if (std::fflush(file) != 0)
    return abandon(Status::error("cannot write " + what + " '" + tmp +
                                 "': " + errnoMessage(errno)));
  if (::fsync(::fileno(file)) != 0)
    return abandon(Status::error("cannot sync " + what + " '" + tmp +
                                 "': " + errnoMessage(errno)));
  int rc = std::fclose(file);
  file = nullptr;
  if (rc != 0)
    return abandon(Status::error("cannot close " + what + " '" + tmp +
                                 "': " + errnoMessage(errno)));
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return abandon(Status::error("cannot rename '" + tmp + "' to '" + path +
                                 "': " + errnoMessage(errno)));
  return fsyncDirectory(parentDirectory(path));
}

Status readSmallFile(const std::string &path, const std::string &what,
                     std::string &out) {
  out.clear();
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return Status::error("cannot open " + what + " '" + path +
                         "': " + errnoMessage(errno));
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    out.append(buffer, n);
    if (out.size() > (size_t(1) << 20)) {
      std::fclose(file);
      return Status::error(what + " '" + path + "' is unexpectedly large");
    }
  }
  bool failed = std::ferror(file);
  std::fclose(file);
  if (failed)
    return Status::error("cannot read " + what + " '" + path + "'");
  return Status::success();
}

} // namespace merak::rt::detail
