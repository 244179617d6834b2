//===- staged_device_main.cpp - ./train on a host stand-in for a GPU -------===//
//
// main() of the pipeline-staged-* tests (test/parallel/pipeline_staged_check.py):
// the training main with a StepBackend whose "device" is separate host
// memory behaving like a GPU towards the code above it, so that the path a
// --target cuda pipelined program takes through train_main.cpp and the
// pipeline runner (a non-host-resident PipelineMemory: staged messages,
// staged tied-gradient exchange, losses and outputs copied back) runs and
// is checked against the CPU program on a machine without a GPU.
//
// - A, P and C are their own allocations: P and C are copied in once, each
//   step copies its inputs in and its outputs back, checkpoints copy P back
//   (as runtime/cuda/main/train_main_cuda.cpp).
// - Fragments run at once on the host, so the "stream" is the program
//   order: a copy into device memory happens at once. A copy into host
//   memory reads its source at once (stream order) but delivers into the
//   destination only at synchronize(), as a device -> host cudaMemcpyAsync
//   is only known complete after a stream synchronisation: a runner that
//   read a message or a loss before synchronising sees stale bytes.
// - A copy out of a host buffer of the memory (a pinned message) reads it
//   at once, but on a GPU it could read it any time before the next
//   synchronisation: the bytes are remembered, and synchronize() fails if
//   they changed meanwhile (the runner gave the buffer back to MPI, or
//   rewrote it, too early).
//
// At exit every rank prints one line "staged device: rank R: ..." with its
// copy and synchronisation counts.
//
// Built as the archive merak_runtime_main_staged_test, linked in place of
// merak_runtime_main through merak-compile --runtime-dir.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/pipeline.h"
#include "merak_rt/program.h"
#include "merak_rt/step_backend.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using merak::rt::ByteRange;
using merak::rt::DeviceStep;
using merak::rt::PipelineMemory;
using merak::rt::Status;

char *alignedZeroed(uint64_t bytes) {
  void *p = nullptr;
  uint64_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
  if (::posix_memalign(&p, 256, n) != 0 || !p)
    return nullptr;
  std::memset(p, 0, n);
  return static_cast<char *>(p);
}

class StagedMemory final : public PipelineMemory {
public:
  const char *name() const override { return "staged test device"; }
  bool hostResident() const override { return false; }

  char *allocate(uint64_t bytes, bool host) override {
    char *p = alignedZeroed(bytes);
    if (p)
      (host ? hostBuffers_ : device_)[reinterpret_cast<uintptr_t>(p)] = bytes ? bytes : 1;
    return p;
  }
  void release(char *p, bool host) override {
    (host ? hostBuffers_ : device_).erase(reinterpret_cast<uintptr_t>(p));
    std::free(p);
  }
  /// A region of the device (A, P, C).
  void addDeviceRange(const char *p, uint64_t bytes) {
    device_[reinterpret_cast<uintptr_t>(p)] = bytes ? bytes : 1;
  }

  Status copy(void *dst, const void *src, uint64_t bytes) override {
    ++copies_;
    copiedBytes_ += bytes;
    if (!bytes)
      return Status();
    const bool toDevice = inside(device_, dst, bytes), fromDevice = inside(device_, src, bytes);
    if (toDevice) {
      if (!fromDevice && inside(hostBuffers_, src, bytes))
        reads_.push_back({static_cast<const char *>(src),
                          std::vector<char>(static_cast<const char *>(src),
                                            static_cast<const char *>(src) + bytes)});
      std::memmove(dst, src, bytes);
      return Status();
    }
    if (!fromDevice)
      return Status::error("staged test device: a host -> host copy of " +
                           std::to_string(bytes) + " bytes (the runner should not stage those)");
    // Device -> host: read now, delivered at synchronize().
    deliveries_.push_back({static_cast<char *>(dst),
                           std::vector<char>(static_cast<const char *>(src),
                                             static_cast<const char *>(src) + bytes)});
    return Status();
  }

  Status zero(void *dst, uint64_t bytes) override {
    if (bytes && !inside(device_, dst, bytes))
      return Status::error("staged test device: zero() of host memory");
    std::memset(dst, 0, bytes);
    return Status();
  }

  Status synchronize() override {
    ++syncs_;
    for (const Pending &d : deliveries_)
      std::memcpy(d.at, d.bytes.data(), d.bytes.size());
    deliveries_.clear();
    for (const Read &r : reads_)
      if (std::memcmp(r.at, r.bytes.data(), r.bytes.size()) != 0) {
        reads_.clear();
        return Status::error("staged test device: a host buffer was rewritten while a copy "
                             "to the device could still be reading it");
      }
    reads_.clear();
    return Status();
  }

  std::string stats() const {
    return std::to_string(copies_) + " copies (" + std::to_string(copiedBytes_) + " bytes), " +
           std::to_string(syncs_) + " synchronizations";
  }

private:
  static bool inside(const std::map<uintptr_t, uint64_t> &ranges, const void *p,
                     uint64_t bytes) {
    auto a = reinterpret_cast<uintptr_t>(p);
    auto it = ranges.upper_bound(a);
    if (it == ranges.begin())
      return false;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second;
  }
  struct Pending {
    char *at;
    std::vector<char> bytes;
  };
  struct Read {
    const char *at;
    std::vector<char> bytes;
  };
  std::map<uintptr_t, uint64_t> device_, hostBuffers_;
  std::vector<Pending> deliveries_;
  std::vector<Read> reads_;
  uint64_t copies_ = 0, copiedBytes_ = 0, syncs_ = 0;
};

class StagedBackend final : public merak::rt::StepBackend {
public:
  ~StagedBackend() override {
    for (char *p : {A_, P_, C_})
      std::free(p);
  }
  std::string name() const override { return "staged test device"; }
  Status open(merak::rt::Comm *) override { return Status(); }
  std::string describe() const override {
    return "running on a staged test device (host memory standing in for a GPU)";
  }
  Status setup(uint64_t arenaBytes, const char *hostP, uint64_t paramsBytes, const char *hostC,
               uint64_t constsBytes) override {
    A_ = alignedZeroed(arenaBytes);
    P_ = alignedZeroed(paramsBytes);
    C_ = alignedZeroed(constsBytes);
    if (!A_ || !P_ || !C_)
      return Status::error("staged test device: out of memory");
    std::memcpy(P_, hostP, paramsBytes);
    std::memcpy(C_, hostC, constsBytes);
    memory_.addDeviceRange(A_, arenaBytes);
    memory_.addDeviceRange(P_, paramsBytes);
    memory_.addDeviceRange(C_, constsBytes);
    return Status();
  }
  Status step(char *hostA, const std::vector<ByteRange> &inputs,
              const std::vector<ByteRange> &outputs, const DeviceStep &run) override {
    for (const ByteRange &r : inputs)
      std::memcpy(A_ + r.offset, hostA + r.offset, r.bytes);
    if (run) {
      if (Status s = run(A_, P_, C_); !s.ok())
        return s;
    } else {
      merak_train_step(A_, P_, C_);
    }
    if (Status s = memory_.synchronize(); !s.ok())
      return s;
    for (const ByteRange &r : outputs)
      std::memcpy(hostA + r.offset, A_ + r.offset, r.bytes);
    return Status();
  }
  Status downloadParams(char *hostP, const std::vector<ByteRange> &ranges) override {
    for (const ByteRange &r : ranges)
      std::memcpy(hostP + r.offset, P_ + r.offset, r.bytes);
    return Status();
  }
  PipelineMemory *pipelineMemory() override { return &memory_; }
  const StagedMemory &memory() const { return memory_; }

private:
  StagedMemory memory_;
  char *A_ = nullptr, *P_ = nullptr, *C_ = nullptr;
};

} // namespace

int main(int argc, char **argv) {
  StagedBackend backend;
  int code = merak::rt::trainMain(argc, argv, &backend);
  const char *rank = std::getenv("OMPI_COMM_WORLD_RANK");
  std::printf("staged device: rank %s: %s\n", rank ? rank : "0", backend.memory().stats().c_str());
  return code;
}
