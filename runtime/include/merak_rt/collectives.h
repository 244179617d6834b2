//===- collectives.h - Collectives called by generated code -----*- C++ -*-===//
//
// The generated step's communication: `merak.all_reduce` lowers to one
// allReduceBucket call per bucket of tensors; ZeRO's `merak.reduce_scatter`,
// `merak.all_gather` and `merak.local_shard` to reduceScatterBucket,
// allGatherBucket and localShard (tensors split into `parts` equal parts
// along their leading dimension, i.e. contiguous runs of elements; `parts`
// is what the program was compiled for and must equal the group size). The communicator is the one
// the program's main created (setCommunicator); without one (a serial
// program, or a group of one rank) a collective is a copy.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_COLLECTIVES_H
#define MERAK_RT_COLLECTIVES_H

#include "merak_rt/ops.h"

#include <cstdint>

namespace merak::rt {
class Comm;
enum class Axis; // merak_rt/comm.h
}

namespace merak::rt::cpu {

/// Mesh axes as the compiler names them.
enum class Group : int32_t { DP = 0, TP = 1, PP = 2, EP = 3, EDP = 4 };
enum class CollReduce : int32_t { Sum = 0, Mean = 1, Max = 2 };
/// The communicator axis of a mesh group.
Axis axisOf(Group g);

/// The communicator collectives use; null for a serial program.
void setCommunicator(Comm *comm);
Comm *communicator();

// The entry points, documented in merak_rt/kernels.def (the GPU's
// merak_rt/cuda/collectives.h declares them from the same list).
#define MERAK_COLLECTIVE(name, ret, params) ret name params;
#define MERAK_COLLECTIVE_IMPL(name, ret, params) ret name params;
#include "merak_rt/kernels.def"

namespace detail {
inline void collect(const void **, void **, int64_t *) {}
template <typename... Rest>
void collect(const void **in, void **out, int64_t *counts, const void *i,
             void *o, int64_t count, Rest... rest) {
  *in = i;
  *out = o;
  *counts = count;
  collect(in + 1, out + 1, counts + 1, rest...);
}
} // namespace detail

/// allReduceBucketImpl with the tensors as (in, out, count) argument
/// triples, the form generated code calls.
template <typename... Triples>
void allReduceBucket(Group group, CollReduce reduce, DT t, Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  detail::collect(in, out, counts, triples...);
  allReduceBucketImpl(group, reduce, t, n, in, out, counts);
}

/// reduceScatterBucketImpl with (in, out, count of one part) triples.
template <typename... Triples>
void reduceScatterBucket(Group group, CollReduce reduce, DT t, int64_t parts,
                         Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  detail::collect(in, out, counts, triples...);
  reduceScatterBucketImpl(group, reduce, t, parts, n, in, out, counts);
}

/// allGatherBucketImpl with (in, out, count of one part) triples.
template <typename... Triples>
void allGatherBucket(Group group, DT t, int64_t parts, Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  detail::collect(in, out, counts, triples...);
  allGatherBucketImpl(group, t, parts, n, in, out, counts);
}

//===----------------------------------------------------------------------===//
// Started collectives (merak.*_start and merak.wait, built by merak-overlap)
//===----------------------------------------------------------------------===//
//
// A start packs its operands into the buffers of request slot `slot` (a
// small index the compiler assigns: the lowest one free at the start, free
// again after its wait) and posts the non-blocking collective; the wait
// completes it and unpacks into the results. The slots and their buffers
// live for the program and are reused, so a step allocates nothing once
// every slot has seen its largest bucket. A collective that does not
// complete within the communicator's timeout ends the job with a message
// naming it ("started all-reduce of 3 tensors on the dp group ..."). Without
// a communicator, or on a group of one rank, the wait copies the packed
// operands back (the identity).

namespace detail {
inline void collectPairs(const void **, int64_t *) {}
template <typename... Rest>
void collectPairs(const void **in, int64_t *counts, const void *i, int64_t count,
                  Rest... rest) {
  *in = i;
  *counts = count;
  collectPairs(in + 1, counts + 1, rest...);
}
} // namespace detail

/// allReduceStartImpl with (in, count) argument pairs.
template <typename... Pairs>
void allReduceStart(int32_t slot, Group group, CollReduce reduce, DT t, Pairs... pairs) {
  constexpr int32_t n = sizeof...(Pairs) / 2;
  static_assert(sizeof...(Pairs) % 2 == 0, "(in, count) pairs");
  const void *in[n];
  int64_t counts[n];
  detail::collectPairs(in, counts, pairs...);
  allReduceStartImpl(slot, group, reduce, t, n, in, counts);
}

/// reduceScatterStartImpl with (in, count of one part) pairs.
template <typename... Pairs>
void reduceScatterStart(int32_t slot, Group group, CollReduce reduce, DT t, int64_t parts,
                        Pairs... pairs) {
  constexpr int32_t n = sizeof...(Pairs) / 2;
  static_assert(sizeof...(Pairs) % 2 == 0, "(in, count) pairs");
  const void *in[n];
  int64_t counts[n];
  detail::collectPairs(in, counts, pairs...);
  reduceScatterStartImpl(slot, group, reduce, t, parts, n, in, counts);
}

/// allGatherStartImpl with (in, count) pairs.
template <typename... Pairs>
void allGatherStart(int32_t slot, Group group, DT t, int64_t parts, Pairs... pairs) {
  constexpr int32_t n = sizeof...(Pairs) / 2;
  static_assert(sizeof...(Pairs) % 2 == 0, "(in, count) pairs");
  const void *in[n];
  int64_t counts[n];
  detail::collectPairs(in, counts, pairs...);
  allGatherStartImpl(slot, group, t, parts, n, in, counts);
}

/// collectiveWaitImpl with the result pointers as arguments.
template <typename... Outs>
void collectiveWait(int32_t slot, Outs... outs) {
  void *out[] = {static_cast<void *>(outs)...};
  collectiveWaitImpl(slot, sizeof...(Outs), out);
}

// Every variadic form kernels.def names is defined above (else this fails
// to compile).
namespace kernels_def {
#define MERAK_COLLECTIVE_VARIADIC(name) using cpu::name;
#include "merak_rt/kernels.def"
} // namespace kernels_def

} // namespace merak::rt::cpu

#endif // MERAK_RT_COLLECTIVES_H
