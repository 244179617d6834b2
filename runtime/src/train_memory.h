//===- train_memory.h - ./train's buffers (internal) -----------*- C++ -*-===//
//
// The trainer's memory: aligned heap buffers (copied constants) and lazily
// committed anonymous mappings (the arena and the parameter storage).
// Allocation failures end the run naming the buffer (train_support.h).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_TRAIN_MEMORY_H
#define MERAK_RT_SRC_TRAIN_MEMORY_H

#include "train_support.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <sys/mman.h>

namespace merak::rt::train {

constexpr uint64_t kAlignment = 64;

struct FreeDeleter {
  void operator()(char *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

/// A zeroed, 64-byte aligned buffer of at least `bytes` bytes (and at least
/// 64, so that an empty region still has a valid pointer).
inline Buffer allocateAligned(uint64_t bytes, const char *what) {
  uint64_t rounded = bytes == 0 ? kAlignment
                                : (bytes + kAlignment - 1) / kAlignment *
                                      kAlignment;
  if (rounded < bytes)
    die(kExitError, std::string("cannot allocate the ") + what + ": " +
                        std::to_string(bytes) + " bytes is too large");
  void *p = nullptr;
  if (::posix_memalign(&p, kAlignment, rounded) != 0 || !p)
    die(kExitError, std::string("cannot allocate the ") + what + " (" +
                        std::to_string(bytes) + " bytes): out of memory");
  std::memset(p, 0, rounded);
  return Buffer(static_cast<char *>(p));
}

/// Zeroed anonymous memory whose pages exist only once touched: a pipeline
/// stage's rank maps the whole parameter storage and arena but commits only
/// what its fragments use.
class Mapping {
public:
  Mapping(uint64_t bytes, const char *what) : size_(std::max<uint64_t>(bytes, kAlignment)) {
    void *p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      die(kExitError, std::string("cannot allocate the ") + what + " (" +
                          std::to_string(bytes) + " bytes): " + std::strerror(errno));
    data_ = static_cast<char *>(p);
  }
  ~Mapping() { ::munmap(data_, size_); }
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;
  char *get() const { return data_; }

private:
  uint64_t size_;
  char *data_ = nullptr;
};

} // namespace merak::rt::train

#endif // MERAK_RT_SRC_TRAIN_MEMORY_H
