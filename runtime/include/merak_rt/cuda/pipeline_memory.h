//===- pipeline_memory.h - The pipeline runner's buffers on a GPU -*- C++ -*-===//
//
// The PipelineMemory (merak_rt/pipeline.h) of --target cuda pipelined
// programs: stashes in device memory (cudaMalloc), messages in pinned host
// memory (cudaMallocHost) because activations and gradients between stages
// go over MPI (host-staged: the fragment's results are copied device ->
// host into the message, the runner synchronises and sends it; a received
// message is copied host -> device into the fragment's arguments), copies
// with cudaMemcpyAsync (cudaMemcpyDefault: unified addressing tells the
// direction) on the compute stream. synchronize() first waits for the
// device collectives (DeviceCollectives::synchronize, which times out and
// names the rank instead of hanging on a dead peer), then for the stream.
// No CUDA header here.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_PIPELINE_MEMORY_H
#define MERAK_RT_CUDA_PIPELINE_MEMORY_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/pipeline.h"

#include <memory>

namespace merak::rt::cuda {

/// The pipeline runner's memory on the current device, copying on `stream`.
std::unique_ptr<PipelineMemory> createPipelineMemory(StreamHandle stream);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_PIPELINE_MEMORY_H
