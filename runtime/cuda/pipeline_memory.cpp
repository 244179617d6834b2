//===- pipeline_memory.cpp - The pipeline runner's buffers on a GPU -------===//
//
// See merak_rt/cuda/pipeline_memory.h. Host sources of copies are either
// pageable (the runner's step counter, loss and tied-gradient sum: a
// pageable host -> device cudaMemcpyAsync has staged its source when it
// returns) or the pinned messages, which the runner gives back to MPI only
// after synchronize().
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/pipeline_memory.h"

#include "merak_rt/cuda/collectives.h"

#include <cuda_runtime_api.h>

#include <cstring>

namespace merak::rt::cuda {
namespace {

class CudaPipelineMemory final : public PipelineMemory {
public:
  explicit CudaPipelineMemory(StreamHandle stream)
      : stream_(static_cast<cudaStream_t>(stream)) {}

  const char *name() const override { return "cuda"; }
  bool hostResident() const override { return false; }

  char *allocate(uint64_t bytes, bool host) override {
    const uint64_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
    void *p = nullptr;
    if (host) {
      if (cudaMallocHost(&p, n) != cudaSuccess || !p)
        return nullptr;
      std::memset(p, 0, n);
      return static_cast<char *>(p);
    }
    if (cudaMalloc(&p, n) != cudaSuccess || !p)
      return nullptr;
    // Ordered before every later use of the buffer on the stream.
    if (cudaMemsetAsync(p, 0, n, stream_) != cudaSuccess) {
      cudaFree(p);
      return nullptr;
    }
    return static_cast<char *>(p);
  }

  void release(char *p, bool host) override {
    if (host)
      cudaFreeHost(p);
    else
      cudaFree(p);
  }

  Status copy(void *dst, const void *src, uint64_t bytes) override {
    if (!bytes)
      return Status::success();
    return cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
                     "cudaMemcpyAsync (pipeline buffers)");
  }

  Status zero(void *dst, uint64_t bytes) override {
    if (!bytes)
      return Status::success();
    return cudaCheck(cudaMemsetAsync(dst, 0, bytes, stream_),
                     "cudaMemsetAsync (pipeline accumulators)");
  }

  Status synchronize() override {
    // A collective a fragment started (the dp gradient buckets, the
    // update's norm) first: a dead peer is a timeout naming the rank, not
    // a stream that never drains.
    if (gpu::DeviceCollectives *c = gpu::collectives())
      if (Status s = c->synchronize(); !s.ok())
        return s;
    return cudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (pipeline)");
  }

private:
  cudaStream_t stream_;
};

} // namespace

std::unique_ptr<PipelineMemory> createPipelineMemory(StreamHandle stream) {
  return std::make_unique<CudaPipelineMemory>(stream);
}

} // namespace merak::rt::cuda
