//===- host_device_fake.cpp - Host memory as "device" memory for tests ----===//
//
// The few CUDA runtime calls and merak::rt::cuda / merak::rt::gpu helpers
// that collectives_gpu.cpp, collectives_staged.cpp and
// collectives_experts.cpp use (and ops_experts.cu's moveRows), on host memory
// (cudaMemcpyAsync is memmove, streams are synchronous), so that their
// bookkeeping and the host-staged MPI path run under mpirun on a machine
// without a GPU (merak_cuda_staged_tests), and the pipeline runner's CUDA
// memory (pipeline_memory.cpp) runs too (merak_cuda_pipeline_memory_tests,
// which read the call record in host_device_fake.h). Not linked with cudart.
//
//===----------------------------------------------------------------------===//
#include "host_device_fake.h"

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/ops.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

FakeCalls gFakeCalls;

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       cudaMemcpyKind kind, cudaStream_t stream) {
  ++gFakeCalls.memcpys;
  gFakeCalls.lastKind = static_cast<int>(kind);
  gFakeCalls.lastStream = stream;
  if (gFakeCalls.failMemcpy)
    return cudaErrorInvalidValue;
  std::memmove(dst, src, count);
  return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t) {
  ++gFakeCalls.streamSyncs;
  return cudaSuccess;
}
extern "C" cudaError_t cudaMemsetAsync(void *dst, int value, size_t count, cudaStream_t stream) {
  gFakeCalls.lastStream = stream;
  std::memset(dst, value, count);
  return cudaSuccess;
}
extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) {
  ++gFakeCalls.mallocs;
  if (gFakeCalls.failAlloc)
    return cudaErrorMemoryAllocation;
  *p = std::malloc(bytes ? bytes : 1);
  // Not zeroed, as cudaMalloc: a caller that needs zeros must say so.
  std::memset(*p, 0xA5, bytes);
  return cudaSuccess;
}
extern "C" cudaError_t cudaFree(void *p) {
  ++gFakeCalls.frees;
  std::free(p);
  return cudaSuccess;
}
extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes) {
  ++gFakeCalls.mallocHosts;
  if (gFakeCalls.failAlloc)
    return cudaErrorMemoryAllocation;
  *p = std::malloc(bytes ? bytes : 1);
  std::memset(*p, 0x5A, bytes);
  return cudaSuccess;
}
extern "C" cudaError_t cudaFreeHost(void *p) {
  ++gFakeCalls.freeHosts;
  std::free(p);
  return cudaSuccess;
}

namespace merak::rt::cuda {
Status cudaCheck(int code, const char *call) {
  return code == 0 ? Status::success()
                   : Status::error(std::string(call) + ": fake CUDA error " +
                                   std::to_string(code));
}
Status copyToDevice(void *dst, const void *src, uint64_t bytes, StreamHandle,
                    bool) {
  std::memmove(dst, src, bytes);
  return Status::success();
}
Status copyToHost(void *dst, const void *src, uint64_t bytes, StreamHandle,
                  bool) {
  std::memmove(dst, src, bytes);
  return Status::success();
}
Result<void *> deviceAlloc(uint64_t bytes) {
  void *p = std::malloc(bytes ? bytes : 1);
  if (!p)
    return Result<void *>::error("malloc failed");
  return p;
}
void deviceFree(void *p) { std::free(p); }
} // namespace merak::rt::cuda

namespace merak::rt::gpu {
namespace {
cuda::StreamHandle gStream = nullptr;
}
void setStream(cuda::StreamHandle s) { gStream = s; }
cuda::StreamHandle stream() { return gStream; }
void fatal(const char *what) {
  std::fprintf(stderr, "merak runtime: %s\n", what);
  std::exit(3);
}
void copyBytes(void *dst, const void *src, int64_t bytes) {
  std::memmove(dst, src, bytes);
}
namespace detail {
// ops_experts.cu's row gather/scatter (the all-to-all's pack and unpack).
void moveRows(const void *src, void *dst, const int64_t *index, int64_t rows, int64_t rowBytes,
              bool scatter) {
  const char *s = static_cast<const char *>(src);
  char *d = static_cast<char *>(dst);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(scatter ? d + index[r] * rowBytes : d + r * rowBytes,
                scatter ? s + r * rowBytes : s + index[r] * rowBytes, rowBytes);
}
} // namespace detail
} // namespace merak::rt::gpu
