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

} // namespace merak::rt::cpu
