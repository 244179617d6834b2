//===- device.h - CUDA device, arena and streams ------------------*- C++ -*-===//
//
// The host side of the runtime's CUDA backend. No CUDA header is included:
// streams travel as an opaque `StreamHandle` (a cudaStream_t), so generated
// code and the training main compile without the CUDA include path and only
// link merak_runtime_cuda (and cudart/cublasLt).
//
// Every fallible call returns a Status/Result whose message names the CUDA
// call and the CUDA error string; nothing throws, nothing exits.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_DEVICE_H
#define MERAK_RT_CUDA_DEVICE_H

#include "merak_rt/status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace merak::rt::cuda {

/// A cudaStream_t; nullptr is the legacy default stream.
using StreamHandle = void *;

/// "<call>: <cudaGetErrorString(code)> (<cudaGetErrorName(code)>)"; `code`
/// is a cudaError_t. Success (0) gives "".
std::string cudaErrorMessage(int code, const char *call);
/// Status::success() for cudaSuccess, else an error with cudaErrorMessage.
Status cudaCheck(int code, const char *call);

/// Number of visible devices, or an error "no CUDA device: <cuda error
/// string>" when cudaGetDeviceCount fails or reports 0 devices.
Result<int> deviceCount();

/// The message Device::open gives when there is no device: "no CUDA device:
/// <detail>"; `detail` is the CUDA error string (or "cudaGetDeviceCount
/// returned 0 devices").
std::string noDeviceMessage(const std::string &detail);

/// One GPU, made current for the calling thread by open().
struct Device {
  int ordinal = 0;
  std::string name;
  int ccMajor = 0, ccMinor = 0;
  int smCount = 0;
  uint64_t totalMemory = 0;

  /// cudaSetDevice(ordinal) after checking there is such a device; errors
  /// start with "no CUDA device: " when there is none at all.
  static Result<Device> open(int ordinal = 0);
  /// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
  std::string describe() const;
};

/// Plans arena offsets on the host (no device needed): every buffer starts
/// at a multiple of its alignment (default kArenaAlign, so 16-byte vector
/// accesses and cuBLASLt's alignment needs always hold).
constexpr uint64_t kArenaAlign = 256;
uint64_t alignUp(uint64_t value, uint64_t align);
class ArenaPlan {
public:
  /// Reserves `bytes` (0 allowed) and returns its offset.
  uint64_t add(uint64_t bytes, uint64_t align = kArenaAlign);
  /// Bytes the arena needs (a multiple of kArenaAlign).
  uint64_t size() const { return alignUp(end_, kArenaAlign); }

private:
  uint64_t end_ = 0;
};

/// One cudaMalloc'd block; buffers are base + offset (as the CPU arena).
/// Move-only; frees on destruction.
class Arena {
public:
  Arena() = default;
  static Result<Arena> create(uint64_t bytes);
  Arena(Arena &&o) noexcept;
  Arena &operator=(Arena &&o) noexcept;
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  ~Arena();

  void *base() const { return base_; }
  uint64_t size() const { return size_; }
  /// base + offset; nullptr when offset + bytes exceeds the size.
  void *at(uint64_t offset, uint64_t bytes = 0) const;
  /// Zeroes the whole arena on `stream`.
  Status zero(StreamHandle stream = nullptr);

private:
  void *base_ = nullptr;
  uint64_t size_ = 0;
};

/// A non-blocking stream; move-only, destroyed with the object.
class Stream {
public:
  Stream() = default;
  static Result<Stream> create();
  Stream(Stream &&o) noexcept;
  Stream &operator=(Stream &&o) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  StreamHandle handle() const { return handle_; }
  Status synchronize() const;

private:
  StreamHandle handle_ = nullptr;
};

/// Copies (cudaMemcpyAsync on `stream`, then synchronises it when `sync`).
Status copyToDevice(void *dst, const void *src, uint64_t bytes,
                    StreamHandle stream = nullptr, bool sync = true);
Status copyToHost(void *dst, const void *src, uint64_t bytes,
                  StreamHandle stream = nullptr, bool sync = true);
Status memsetDevice(void *dst, int value, uint64_t bytes,
                    StreamHandle stream = nullptr);
/// A separate allocation outside any arena (tests, workspaces).
Result<void *> deviceAlloc(uint64_t bytes);
void deviceFree(void *p);

/// bfloat16 conversion on the host (round to nearest even; NaN stays NaN).
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t h);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_DEVICE_H
