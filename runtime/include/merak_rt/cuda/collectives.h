//===- collectives.h - Collectives of the GPU ABI (--target cuda) -*- C++ -*-===//
//
// merak::rt::gpu's counterpart of merak_rt/collectives.h: the same entry
// points on device buffers, enqueued on the compute stream. They go
// through a DeviceCollectives implementation the training main installs
// (setCollectives; the NCCL communicator plugs in here). Without one (a
// serial program) every group has one rank and a collective is a device
// copy, as on the CPU. vocabCrossEntropy/vocabCrossEntropyGrad need a
// communicator: merak-compile --target cuda rejects tensor-parallel
// programs for now, and the runtime reports them as fatal.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_COLLECTIVES_H
#define MERAK_RT_CUDA_COLLECTIVES_H

#include "merak_rt/collectives.h"
#include "merak_rt/cuda/ops.h"

#include <cstdint>

namespace merak::rt::gpu {

using cpu::CollReduce;
using cpu::Group;

/// A device communicator (one rank of a mesh): what generated code's
/// collectives need. Buffers are device pointers; work goes on `stream`.
class DeviceCollectives {
public:
  virtual ~DeviceCollectives() = default;
  /// This rank's coordinate in `group` and the group's size.
  virtual int groupRank(Group group) const = 0;
  virtual int groupSize(Group group) const = 0;
  /// As cpu::allReduceBucketImpl (n tensors, one message).
  virtual Status allReduce(Group group, CollReduce reduce, DT t, int32_t n,
                           const void *const *in, void *const *out,
                           const int64_t *counts, cuda::StreamHandle stream) = 0;
  /// As cpu::reduceScatterBucketImpl.
  virtual Status reduceScatter(Group group, CollReduce reduce, DT t,
                               int64_t parts, int32_t n, const void *const *in,
                               void *const *out, const int64_t *counts,
                               cuda::StreamHandle stream) = 0;
  /// As cpu::allGatherBucketImpl.
  virtual Status allGather(Group group, DT t, int64_t parts, int32_t n,
                           const void *const *in, void *const *out,
                           const int64_t *counts, cuda::StreamHandle stream) = 0;
};

/// The communicator collectives use; null for a serial program.
void setCollectives(DeviceCollectives *c);
DeviceCollectives *collectives();

void allReduceBucketImpl(Group group, CollReduce reduce, DT t, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts);
void reduceScatterBucketImpl(Group group, CollReduce reduce, DT t,
                             int64_t parts, int32_t n, const void *const *in,
                             void *const *out, const int64_t *counts);
void allGatherBucketImpl(Group group, DT t, int64_t parts, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts);
/// *out (a device i64) = this rank's coordinate in `group`.
void groupRank(Group group, void *out);
void localShard(Group group, DT t, int64_t parts, const void *in, void *out,
                int64_t count);
void vocabCrossEntropy(Group group, DT t, const void *logits, int64_t rows,
                       int64_t n, DT labT, const void *labels,
                       int32_t reduction, bool hasIgnore, int64_t ignoreIndex,
                       int64_t classes, void *y);
void vocabCrossEntropyGrad(Group group, DT t, const void *logits, int64_t rows,
                           int64_t n, DT labT, const void *labels,
                           const void *g, int32_t reduction, bool hasIgnore,
                           int64_t ignoreIndex, int64_t classes, void *dlogits);

/// The (in, out, count) triple forms generated code calls.
template <typename... Triples>
void allReduceBucket(Group group, CollReduce reduce, DT t, Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  cpu::detail::collect(in, out, counts, triples...);
  allReduceBucketImpl(group, reduce, t, n, in, out, counts);
}
template <typename... Triples>
void reduceScatterBucket(Group group, CollReduce reduce, DT t, int64_t parts,
                         Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  cpu::detail::collect(in, out, counts, triples...);
  reduceScatterBucketImpl(group, reduce, t, parts, n, in, out, counts);
}
template <typename... Triples>
void allGatherBucket(Group group, DT t, int64_t parts, Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  cpu::detail::collect(in, out, counts, triples...);
  allGatherBucketImpl(group, t, parts, n, in, out, counts);
}

} // namespace merak::rt::gpu

#endif // MERAK_RT_CUDA_COLLECTIVES_H
