//===- collectives_gpu.cpp - GPU ABI collectives (merak_rt/cuda/collectives.h)
//
// Forwards to the installed DeviceCollectives; without one every group has
// a single rank: all-reduce and all-gather copy, reduce-scatter over one
// part copies, groupRank is 0.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/collectives.h"

#include <cuda_runtime.h>

#include <string>

namespace merak::rt::gpu {
namespace {
DeviceCollectives *gCollectives = nullptr;

void must(const Status &s, const char *what) {
  if (!s.ok())
    fatal((std::string(what) + ": " + s.message()).c_str());
}

/// parts must be 1 without a communicator (the program was compiled for
/// a group of `parts` ranks).
void checkSerialParts(int64_t parts, const char *what) {
  if (parts != 1)
    fatal((std::string(what) + ": the program was compiled for a group of " +
           std::to_string(parts) +
           " ranks but runs without a device communicator")
              .c_str());
}
} // namespace

void setCollectives(DeviceCollectives *c) { gCollectives = c; }
DeviceCollectives *collectives() { return gCollectives; }

void allReduceBucketImpl(Group group, CollReduce reduce, DT t, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts) {
  if (gCollectives)
    return must(gCollectives->allReduce(group, reduce, t, n, in, out, counts,
                                        stream()),
                "all_reduce");
  for (int32_t i = 0; i < n; ++i)
    copyBytes(out[i], in[i], counts[i] * elemSize(t));
}

void reduceScatterBucketImpl(Group group, CollReduce reduce, DT t,
                             int64_t parts, int32_t n, const void *const *in,
                             void *const *out, const int64_t *counts) {
  if (gCollectives)
    return must(gCollectives->reduceScatter(group, reduce, t, parts, n, in, out,
                                            counts, stream()),
                "reduce_scatter");
  checkSerialParts(parts, "reduce_scatter");
  for (int32_t i = 0; i < n; ++i)
    copyBytes(out[i], in[i], counts[i] * elemSize(t));
}

void allGatherBucketImpl(Group group, DT t, int64_t parts, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts) {
  if (gCollectives)
    return must(gCollectives->allGather(group, t, parts, n, in, out, counts,
                                        stream()),
                "all_gather");
  checkSerialParts(parts, "all_gather");
  for (int32_t i = 0; i < n; ++i)
    copyBytes(out[i], in[i], counts[i] * elemSize(t));
}

void groupRank(Group group, void *out) {
  const int64_t r = gCollectives ? gCollectives->groupRank(group) : 0;
  // Pageable source: cudaMemcpyAsync copies it before returning.
  if (cudaMemcpyAsync(out, &r, sizeof r, cudaMemcpyHostToDevice,
                      static_cast<cudaStream_t>(stream())) != cudaSuccess)
    fatal("group_rank: cudaMemcpyAsync failed");
}

void localShard(Group group, DT t, int64_t parts, const void *in, void *out,
                int64_t count) {
  const int64_t r = gCollectives ? gCollectives->groupRank(group) : 0;
  if (!gCollectives)
    checkSerialParts(parts, "local_shard");
  copyBytes(out, static_cast<const char *>(in) + r * count * elemSize(t),
            count * elemSize(t));
}

void vocabCrossEntropy(Group, DT, const void *, int64_t, int64_t, DT,
                       const void *, int32_t, bool, int64_t, int64_t, void *) {
  fatal("cross_entropy over a tensor-parallel vocabulary is not yet "
        "supported on cuda");
}

void vocabCrossEntropyGrad(Group, DT, const void *, int64_t, int64_t, DT,
                           const void *, const void *, int32_t, bool, int64_t,
                           int64_t, void *) {
  fatal("cross_entropy_grad over a tensor-parallel vocabulary is not yet "
        "supported on cuda");
}

} // namespace merak::rt::gpu
