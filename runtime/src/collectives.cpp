//===- collectives.cpp - Collectives called by generated code -------------===//
#include "merak_rt/collectives.h"

#include "merak_rt/comm.h"

#include <cstring>
#include <string>
#include <vector>

namespace merak::rt::cpu {
namespace {
Comm *gComm = nullptr;

Axis axisOf(Group g) {
  switch (g) {
  case Group::DP:
    return Axis::DP;
  case Group::TP:
    return Axis::TP;
  case Group::PP:
    return Axis::PP;
  }
  return Axis::World;
}

template <typename T>
void scaleCopy(const T *src, T *dst, int64_t n, T scale) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = src[i] * scale;
}
} // namespace

void setCommunicator(Comm *comm) { gComm = comm; }
Comm *communicator() { return gComm; }

void allReduceBucketImpl(Group group, CollReduce reduce, DT t, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts) {
  if (t != DT::F32 && t != DT::F64)
    fatal("all_reduce supports f32 and f64 only");
  int64_t es = elemSize(t);
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  if (size == 1) {
    for (int32_t i = 0; i < n; ++i)
      if (in[i] != out[i])
        std::memmove(out[i], in[i], counts[i] * es);
    return;
  }
  // Pack into one buffer, reduce it in place, unpack (with the mean's scale).
  static thread_local std::vector<char> scratch;
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  if ((int64_t)scratch.size() < total * es)
    scratch.resize(total * es);
  char *p = scratch.data();
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(p, in[i], counts[i] * es);
    p += counts[i] * es;
  }
  Comm::Request r = gComm->allReduceSum(axisOf(group), scratch.data(), total,
                                        t == DT::F32 ? CommType::F32 : CommType::F64);
  Status s = gComm->wait(r, "all-reduce of a gradient bucket");
  if (!s.ok())
    gComm->abort(s.message(), 1);
  p = scratch.data();
  for (int32_t i = 0; i < n; ++i) {
    if (reduce == CollReduce::Mean && t == DT::F32)
      scaleCopy((const float *)p, (float *)out[i], counts[i], 1.0f / size);
    else if (reduce == CollReduce::Mean)
      scaleCopy((const double *)p, (double *)out[i], counts[i], 1.0 / size);
    else
      std::memcpy(out[i], p, counts[i] * es);
    p += counts[i] * es;
  }
}

namespace {
/// The group size, which must be what the program was compiled for.
int zeroGroupSize(Group group, int64_t parts, const char *what) {
  int size = gComm ? gComm->groupSize(axisOf(group)) : 1;
  if (parts != size)
    fatal((std::string(what) + ": compiled for " + std::to_string(parts) +
           " ranks, but the group has " + std::to_string(size))
              .c_str());
  return size;
}

void checkFloat(DT t, const char *what) {
  if (t != DT::F32 && t != DT::F64)
    fatal((std::string(what) + " supports f32 and f64 only").c_str());
}

CommType commType(DT t) { return t == DT::F32 ? CommType::F32 : CommType::F64; }

void waitOrAbort(Comm::Request &r, const char *what) {
  Status s = gComm->wait(r, what);
  if (!s.ok())
    gComm->abort(s.message(), 1);
}
} // namespace

void reduceScatterBucketImpl(Group group, CollReduce reduce, DT t, int64_t parts, int32_t n,
                             const void *const *in, void *const *out,
                             const int64_t *counts) {
  checkFloat(t, "reduce_scatter");
  int size = zeroGroupSize(group, parts, "reduce_scatter");
  int64_t es = elemSize(t);
  if (size == 1) {
    for (int32_t i = 0; i < n; ++i)
      if (in[i] != out[i])
        std::memmove(out[i], in[i], counts[i] * es);
    return;
  }
  // Pack rank-major (every tensor's part g, for g = 0..size-1), so that one
  // reduce-scatter of `total` elements per rank serves the bucket.
  static thread_local std::vector<char> send, recv;
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  if ((int64_t)send.size() < total * size * es)
    send.resize(total * size * es);
  if ((int64_t)recv.size() < total * es)
    recv.resize(total * es);
  char *p = send.data();
  for (int g = 0; g < size; ++g)
    for (int32_t i = 0; i < n; ++i) {
      std::memcpy(p, static_cast<const char *>(in[i]) + g * counts[i] * es, counts[i] * es);
      p += counts[i] * es;
    }
  Comm::Request r = gComm->reduceScatterSum(axisOf(group), send.data(), recv.data(), total,
                                            commType(t));
  waitOrAbort(r, "reduce-scatter of a gradient bucket");
  p = recv.data();
  for (int32_t i = 0; i < n; ++i) {
    if (reduce == CollReduce::Mean && t == DT::F32)
      scaleCopy((const float *)p, (float *)out[i], counts[i], 1.0f / size);
    else if (reduce == CollReduce::Mean)
      scaleCopy((const double *)p, (double *)out[i], counts[i], 1.0 / size);
    else
      std::memcpy(out[i], p, counts[i] * es);
    p += counts[i] * es;
  }
}

void allGatherBucketImpl(Group group, DT t, int64_t parts, int32_t n, const void *const *in,
                         void *const *out, const int64_t *counts) {
  checkFloat(t, "all_gather");
  int size = zeroGroupSize(group, parts, "all_gather");
  int64_t es = elemSize(t);
  if (size == 1) {
    for (int32_t i = 0; i < n; ++i)
      if (in[i] != out[i])
        std::memmove(out[i], in[i], counts[i] * es);
    return;
  }
  static thread_local std::vector<char> send, recv;
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i)
    total += counts[i];
  if ((int64_t)send.size() < total * es)
    send.resize(total * es);
  if ((int64_t)recv.size() < total * size * es)
    recv.resize(total * size * es);
  char *p = send.data();
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(p, in[i], counts[i] * es);
    p += counts[i] * es;
  }
  Comm::Request r = gComm->allGather(axisOf(group), send.data(), recv.data(), total,
                                     commType(t));
  waitOrAbort(r, "all-gather of updated parameter parts");
  p = recv.data();
  for (int g = 0; g < size; ++g)
    for (int32_t i = 0; i < n; ++i) {
      std::memcpy(static_cast<char *>(out[i]) + g * counts[i] * es, p, counts[i] * es);
      p += counts[i] * es;
    }
}

void localShard(Group group, DT t, int64_t parts, const void *in, void *out, int64_t count) {
  int size = zeroGroupSize(group, parts, "local_shard");
  int rank = size == 1 ? 0 : gComm->groupRank(axisOf(group));
  int64_t es = elemSize(t);
  std::memmove(out, static_cast<const char *>(in) + rank * count * es, count * es);
}

} // namespace merak::rt::cpu
