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
}

namespace merak::rt::cpu {

/// Mesh axes as the compiler names them.
enum class Group : int32_t { DP = 0, TP = 1, PP = 2 };
enum class CollReduce : int32_t { Sum = 0, Mean = 1, Max = 2 };

/// The communicator collectives use; null for a serial program.
void setCommunicator(Comm *comm);
Comm *communicator();

/// All-reduces n tensors of type t over `group` as one message: out[i] =
/// reduce over the group of in[i] (counts[i] elements); in[i] may equal
/// out[i]. Mean divides by the group size after summing. F32 and F64. A
/// failed or timed-out collective ends the job (Comm::abort).
void allReduceBucketImpl(Group group, CollReduce reduce, DT t, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts);

/// ZeRO: n tensors; in[i] holds parts * counts[i] elements and out[i] gets
/// counts[i]: part g (elements [g * counts[i], (g + 1) * counts[i])) of the
/// reduction over the group of in[i] on group rank g. One message.
void reduceScatterBucketImpl(Group group, CollReduce reduce, DT t, int64_t parts, int32_t n,
                             const void *const *in, void *const *out,
                             const int64_t *counts);
/// ZeRO: n tensors of counts[i] elements; out[i] (parts * counts[i]) gets
/// every group rank's in[i] in group-rank order. One message.
void allGatherBucketImpl(Group group, DT t, int64_t parts, int32_t n, const void *const *in,
                         void *const *out, const int64_t *counts);
/// merak.group_rank: *out (an i64) = this rank's coordinate in `group` (0
/// without a communicator).
void groupRank(Group group, void *out);

/// Vocabulary-parallel merak.cross_entropy (`group` set): logits are rows x
/// n, this group rank r's classes [r * n, (r + 1) * n); labels (rows, global
/// class ids). Row max all-reduced (max), the sum of exp and the picked
/// logit all-reduced (sum) over the group; y as crossEntropy's (reduction
/// 0 none, 1 mean, 2 sum). Every rank gets the full loss.
/// `classes` >= 0: the real number of classes over the group; the columns
/// at global index >= classes are padding (left out; zero gradient). -1:
/// every column is a class.
void vocabCrossEntropy(Group group, DT t, const void *logits, int64_t rows, int64_t n,
                       DT labT, const void *labels, int32_t reduction, bool hasIgnore,
                       int64_t ignoreIndex, int64_t classes, void *y);
/// Its gradient: dlogits (rows x n, local) = (softmax - onehot) * w with the
/// global softmax (recomputed: two all-reduces), w as crossEntropyGrad's.
void vocabCrossEntropyGrad(Group group, DT t, const void *logits, int64_t rows, int64_t n,
                           DT labT, const void *labels, const void *g, int32_t reduction,
                           bool hasIgnore, int64_t ignoreIndex, int64_t classes,
                           void *dlogits);

/// out (count elements) = part groupRank of in (parts * count elements).
void localShard(Group group, DT t, int64_t parts, const void *in, void *out, int64_t count);

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

} // namespace merak::rt::cpu

#endif // MERAK_RT_COLLECTIVES_H
