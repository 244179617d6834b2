//===- collectives_util.h - Helpers of the GPU collectives ----------------===//
//
// Private to runtime/cuda: grow-only device buffers for request slots and
// the packing of a collective's tensors into one buffer (each tensor at a
// 256-byte aligned offset).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_COLLECTIVES_UTIL_H
#define MERAK_RT_CUDA_COLLECTIVES_UTIL_H

#include "merak_rt/cuda/collectives.h"

#include <cstdint>
#include <vector>

namespace merak::rt::gpu::detail {

/// A device allocation that only grows (frees the old one: cudaFree waits
/// for the device, which happens only while sizes still grow).
class DeviceScratch {
public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;
  DeviceScratch(DeviceScratch &&o) noexcept : p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  ~DeviceScratch() { cuda::deviceFree(p_); }
  Status reserve(uint64_t bytes) {
    if (bytes <= bytes_)
      return Status::success();
    cuda::deviceFree(p_);
    p_ = nullptr;
    bytes_ = 0;
    Result<void *> a = cuda::deviceAlloc(bytes);
    if (!a.ok())
      return a.status();
    p_ = *a;
    bytes_ = bytes;
    return Status::success();
  }
  char *get() const { return static_cast<char *>(p_); }

private:
  void *p_ = nullptr;
  uint64_t bytes_ = 0;
};

inline int64_t alignUp(int64_t v) { return (v + 255) / 256 * 256; }

/// Gathers (dst row i = src row index[i]) or scatters (dst row index[i] =
/// src row i) `rows` rows of rowBytes bytes on the compute stream; index is
/// a device array of I64 (ops_experts.cu). Expert parallelism's pack and
/// unpack.
void moveRows(const void *src, void *dst, const int64_t *index, int64_t rows, int64_t rowBytes,
              bool scatter);

/// A started collective whose result its start computes (expert
/// parallelism's exchange: its row plan needs the ids on the host, so the
/// GPU runs it whole at the start): marks request slot `slot` in flight
/// (`what` names it in errors) and returns a device buffer of `bytes` for
/// the result, which the wait copies into its one output
/// (collectives_gpu.cpp).
char *startComputed(int32_t slot, int64_t bytes, const char *what);

/// Byte offsets of the call's inputs (or outputs) packed one after the
/// other; returns the total.
inline int64_t packOffsets(const CollectiveCall &c, bool outputs,
                           std::vector<int64_t> &offsets) {
  offsets.resize(c.n);
  int64_t at = 0;
  for (int32_t i = 0; i < c.n; ++i) {
    offsets[i] = at;
    at += alignUp((outputs ? c.outCount(i) : c.inCount(i)) * elemSize(c.t));
  }
  return at;
}

} // namespace merak::rt::gpu::detail

#endif // MERAK_RT_CUDA_COLLECTIVES_UTIL_H
