//===- weights_file.cpp - a program's initial data next to it -------------===//
#include "weights_file.h"

#include "merak_rt/program.h"
#include "sharding.h"
#include "train_support.h"

#include <algorithm>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace merak::rt {

Result<std::unique_ptr<WeightsFile>> WeightsFile::open(const std::string &path,
                                                       const std::string &id) {
  using R = Result<std::unique_ptr<WeightsFile>>;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return R::error("the weights file '" + path + "' is missing (" + std::strerror(errno) +
                    "): merak-compile writes it next to the executable; keep the two together");
  Result<SafetensorsFile> header = readSafetensorsHeader(path);
  if (!header.ok())
    return R::error("the weights file '" + path + "' is unreadable: " + header.message());
  std::unique_ptr<WeightsFile> w(new WeightsFile());
  w->header_ = std::move(header).value();
  auto it = w->header_.metadata.find("merak.program");
  if (it == w->header_.metadata.end() || it->second != id)
    return R::error("the weights file '" + path + "' belongs to another compilation " +
                    "(merak.program '" +
                    (it == w->header_.metadata.end() ? std::string("absent") : it->second) +
                    "', this executable's is '" + id + "'): recompile, or copy the file "
                    "written with this executable");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return R::error("cannot open the weights file '" + path + "': " + std::strerror(errno));
  w->size_ = (uint64_t)st.st_size;
  if (w->size_ > 0) {
    void *p = ::mmap(nullptr, w->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return R::error("cannot map the weights file '" + path + "': " + std::strerror(e));
    }
    w->map_ = static_cast<char *>(p);
  }
  ::close(fd);
  return w;
}

WeightsFile::~WeightsFile() {
  if (map_)
    ::munmap(map_, size_);
}

const char *WeightsFile::tensor(const std::string &name, uint64_t bytes) const {
  const Tensor *t = header_.find(name);
  if (!t || t->byteSize != bytes || t->fileOffset + bytes > size_)
    return nullptr;
  return map_ + t->fileOffset;
}

void WeightsFile::releaseExcept(const std::string &keep) const {
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const Tensor &t : header_.tensors) {
    if (t.name == keep || t.byteSize == 0)
      continue;
    // Whole pages inside the tensor only (a neighbour may share the ends).
    uint64_t begin = (t.fileOffset + page - 1) / page * page;
    uint64_t end = (t.fileOffset + t.byteSize) / page * page;
    if (end > begin)
      ::madvise(map_ + begin, end - begin, MADV_DONTNEED);
  }
}

/// Where `bytes` bytes of `t`'s initial data lie: its tensor in the weights
/// file, or merak_data at `offset`.
namespace {
const char *initialData(const WeightsFile *w, const ManifestTensor &t, uint64_t offset,
                        uint64_t bytes) {
  if (!w)
    return reinterpret_cast<const char *>(merak_data) + offset;
  const char *p = w->tensor(t.name, bytes);
  if (!p)
    train::die(train::kExitError, "the weights file '" + w->path() + "' has no tensor '" + t.name + "' of " +
                        std::to_string(bytes) + " bytes (recompile the program)");
  return p;
}
} // namespace

void loadInitialParams(const Manifest &m, const RankPlace &place, char *P,
                       const WeightsFile *w) {
  for (const ManifestTensor &t : m.params) {
    if (!place.needs(t))
      continue;
    if (t.sharded() && t.dataBytes > 0) { // this rank's tensor- or expert-parallel shard
      extractShard(t, place.partOf(t), initialData(w, t, t.dataOffset, t.dataBytes),
                   P + t.offset);
    } else if (t.offset < m.paramsInitBytes) {
      uint64_t n = std::min<uint64_t>(t.bytes, m.paramsInitBytes - t.offset);
      std::memcpy(P + t.offset, initialData(w, t, t.offset, n), n);
    }
  }
  if (w)
    w->releaseExcept(kConstantsTensor);
}

std::string executableDirectory() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return ".";
  std::string exe(buf, (size_t)n);
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : exe.substr(0, slash);
}

} // namespace merak::rt
