//===- device.cpp - CUDA device, arena, streams, copies ----------------------===//
#include "merak_rt/cuda/device.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

namespace merak::rt::cuda {

std::string cudaErrorMessage(int code, const char *call) {
  if (code == 0)
    return "";
  auto err = static_cast<cudaError_t>(code);
  const char *str = cudaGetErrorString(err);
  const char *name = cudaGetErrorName(err);
  std::string msg = call ? call : "CUDA call";
  msg += ": ";
  msg += str ? str : "unknown CUDA error";
  msg += " (";
  msg += name ? name : "cudaError";
  msg += ")";
  return msg;
}

Status cudaCheck(int code, const char *call) {
  if (code == 0)
    return Status::success();
  return Status::error(cudaErrorMessage(code, call));
}

std::string noDeviceMessage(const std::string &detail) {
  return "no CUDA device: " + detail;
}

Result<int> deviceCount() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // Clear the sticky "last error" so later calls start clean.
    (void)cudaGetLastError();
    const char *s = cudaGetErrorString(err);
    return Result<int>::error(noDeviceMessage(
        std::string(s ? s : "unknown CUDA error") + " (cudaGetDeviceCount)"));
  }
  if (n <= 0)
    return Result<int>::error(
        noDeviceMessage("cudaGetDeviceCount returned 0 devices"));
  return n;
}

Result<Device> Device::open(int ordinal) {
  Result<int> n = deviceCount();
  if (!n)
    return n.status();
  if (ordinal < 0 || ordinal >= *n)
    return Result<Device>::error(
        "CUDA device " + std::to_string(ordinal) + " does not exist (" +
        std::to_string(*n) + " visible)");
  if (Status s = cudaCheck(cudaSetDevice(ordinal), "cudaSetDevice"); !s)
    return s;
  cudaDeviceProp prop;
  if (Status s = cudaCheck(cudaGetDeviceProperties(&prop, ordinal),
                           "cudaGetDeviceProperties");
      !s)
    return s;
  Device d;
  d.ordinal = ordinal;
  d.name = prop.name;
  d.ccMajor = prop.major;
  d.ccMinor = prop.minor;
  d.smCount = prop.multiProcessorCount;
  d.totalMemory = prop.totalGlobalMem;
  return d;
}

std::string Device::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.1f GiB)",
                name.c_str(), ccMajor, ccMinor, smCount,
                static_cast<double>(totalMemory) / (1024.0 * 1024 * 1024));
  return buf;
}

uint64_t alignUp(uint64_t value, uint64_t align) {
  if (align <= 1)
    return value;
  return (value + align - 1) / align * align;
}

uint64_t ArenaPlan::add(uint64_t bytes, uint64_t align) {
  uint64_t off = alignUp(end_, align ? align : 1);
  end_ = off + bytes;
  return off;
}

Result<Arena> Arena::create(uint64_t bytes) {
  Arena a;
  if (bytes == 0)
    return a;
  void *p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Result<Arena>::error(cudaErrorMessage(
        err, ("cudaMalloc(arena, " + std::to_string(bytes) + " bytes)").c_str()));
  }
  a.base_ = p;
  a.size_ = bytes;
  return a;
}

Arena::Arena(Arena &&o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}
Arena &Arena::operator=(Arena &&o) noexcept {
  if (this != &o) {
    if (base_)
      cudaFree(base_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}
Arena::~Arena() {
  if (base_)
    cudaFree(base_);
}

void *Arena::at(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset)
    return nullptr;
  return static_cast<char *>(base_) + offset;
}

Status Arena::zero(StreamHandle stream) {
  if (!base_)
    return Status::success();
  return cudaCheck(cudaMemsetAsync(base_, 0, size_,
                                   static_cast<cudaStream_t>(stream)),
                   "cudaMemsetAsync(arena)");
}

Result<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  if (Status st = cudaCheck(
          cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags");
      !st)
    return st;
  Stream out;
  out.handle_ = s;
  return out;
}
Stream::Stream(Stream &&o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)) {}
Stream &Stream::operator=(Stream &&o) noexcept {
  if (this != &o) {
    if (handle_)
      cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}
Stream::~Stream() {
  if (handle_)
    cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}
Status Stream::synchronize() const {
  return cudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)),
                   "cudaStreamSynchronize");
}

static Status copy(void *dst, const void *src, uint64_t bytes,
                   cudaMemcpyKind kind, StreamHandle stream, bool sync,
                   const char *what) {
  if (bytes == 0)
    return Status::success();
  auto s = static_cast<cudaStream_t>(stream);
  if (Status st = cudaCheck(cudaMemcpyAsync(dst, src, bytes, kind, s), what);
      !st)
    return st;
  if (sync)
    return cudaCheck(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return Status::success();
}

Status copyToDevice(void *dst, const void *src, uint64_t bytes,
                    StreamHandle stream, bool sync) {
  return copy(dst, src, bytes, cudaMemcpyHostToDevice, stream, sync,
              "cudaMemcpyAsync(host to device)");
}
Status copyToHost(void *dst, const void *src, uint64_t bytes,
                  StreamHandle stream, bool sync) {
  return copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream, sync,
              "cudaMemcpyAsync(device to host)");
}
Status memsetDevice(void *dst, int value, uint64_t bytes,
                    StreamHandle stream) {
  if (bytes == 0)
    return Status::success();
  return cudaCheck(cudaMemsetAsync(dst, value, bytes,
                                   static_cast<cudaStream_t>(stream)),
                   "cudaMemsetAsync");
}
Result<void *> deviceAlloc(uint64_t bytes) {
  void *p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Result<void *>::error(cudaErrorMessage(
        err, ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str()));
  }
  return p;
}
void deviceFree(void *p) {
  if (p)
    cudaFree(p);
}

uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f))
    return static_cast<uint16_t>((u >> 16) | 0x40); // quiet NaN
  u += 0x7fff + ((u >> 16) & 1);                    // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace merak::rt::cuda
