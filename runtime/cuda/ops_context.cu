//===- ops_context.cu - The GPU ABI's context: stream, errors, scratch -----===//
//
// One context per process (generated programs are single-threaded hosts):
// the compute stream, a device error word kernels write bad indices to, a
// few grow-only scratch buffers, and copyBytes/opMark/fatal.
//
//===----------------------------------------------------------------------===//
#include "ops_common.cuh"

#include <cstdio>
#include <cstdlib>

namespace merak::rt::gpu {
namespace {
struct Context {
  cuda::StreamHandle stream = nullptr;
  int *error = nullptr;
  void *scratch[detail::kScratchSlots] = {};
  uint64_t scratchBytes[detail::kScratchSlots] = {};
};
Context &ctx() {
  static Context c;
  return c;
}

[[noreturn]] void cudaFatal(cudaError_t e, const char *call) {
  fatal(cuda::cudaErrorMessage(static_cast<int>(e), call).c_str());
}
} // namespace

void setStream(cuda::StreamHandle s) { ctx().stream = s; }
cuda::StreamHandle stream() { return ctx().stream; }

void fatal(const char *what) { cpu::fatal(what); }

namespace detail {
int *errorWord() {
  Context &c = ctx();
  if (!c.error) {
    if (cudaError_t e = cudaMalloc(&c.error, sizeof(int)); e != cudaSuccess)
      cudaFatal(e, "cudaMalloc (error word)");
    if (cudaError_t e = cudaMemsetAsync(c.error, 0, sizeof(int), cs());
        e != cudaSuccess)
      cudaFatal(e, "cudaMemsetAsync (error word)");
  }
  return c.error;
}

void *scratch(int slot, uint64_t bytes) {
  Context &c = ctx();
  if (bytes <= c.scratchBytes[slot] && c.scratch[slot])
    return c.scratch[slot];
  if (c.scratch[slot]) {
    // The buffer may still be in use by queued kernels.
    cudaStreamSynchronize(detail::cs());
    cudaFree(c.scratch[slot]);
    c.scratch[slot] = nullptr;
  }
  uint64_t size = bytes < 256 ? 256 : bytes;
  if (cudaError_t e = cudaMalloc(&c.scratch[slot], size); e != cudaSuccess)
    cudaFatal(e, "cudaMalloc (scratch)");
  c.scratchBytes[slot] = size;
  return c.scratch[slot];
}

void checkLaunch(const char *kernel) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    cudaFatal(e, kernel);
}
} // namespace detail

Status checkErrors() {
  Context &c = ctx();
  if (Status s = cuda::cudaCheck(static_cast<int>(cudaStreamSynchronize(detail::cs())),
                                 "the step's kernels");
      !s.ok())
    return s;
  if (!c.error)
    return Status::success();
  int code = 0;
  if (Status s = cuda::cudaCheck(
          static_cast<int>(cudaMemcpyAsync(&code, c.error, sizeof(int),
                                           cudaMemcpyDeviceToHost, detail::cs())),
          "cudaMemcpy (error word)");
      !s.ok())
    return s;
  if (Status s = cuda::cudaCheck(static_cast<int>(cudaStreamSynchronize(detail::cs())),
                                 "the error word's copy");
      !s.ok())
    return s;
  if (code == detail::kErrNone)
    return Status::success();
  // On the compute stream (non-blocking: the legacy stream would not order
  // the clear before the next step's kernels).
  cudaMemsetAsync(c.error, 0, sizeof(int), detail::cs());
  switch (code) {
  case detail::kErrGatherIndex:
    return Status::error("gather: index out of range");
  case detail::kErrGatherElementsIndex:
    return Status::error("gather_elements: index out of range");
  case detail::kErrLabel:
    return Status::error("cross_entropy: label out of range");
  case detail::kErrIntDivZero:
    return Status::error("div/rem: integer division by zero");
  }
  return Status::error("a kernel reported error code " + std::to_string(code));
}

void releaseContext() {
  Context &c = ctx();
  cudaStreamSynchronize(detail::cs());
  for (int i = 0; i < detail::kScratchSlots; ++i) {
    cudaFree(c.scratch[i]);
    c.scratch[i] = nullptr;
    c.scratchBytes[i] = 0;
  }
  cudaFree(c.error);
  c.error = nullptr;
  detail::releaseBlas();
}

void copyBytes(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0 || dst == src)
    return;
  if (cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                      cudaMemcpyDeviceToDevice, detail::cs());
      e != cudaSuccess)
    cudaFatal(e, "copyBytes: cudaMemcpyAsync");
}

void opMark(int64_t index) {
  if (!cpu::opRecorderSet())
    return;
  cudaStreamSynchronize(detail::cs());
  cpu::opMark(index);
}

} // namespace merak::rt::gpu
