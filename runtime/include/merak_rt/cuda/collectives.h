//===- collectives.h - Collectives of the GPU ABI (--target cuda) -*- C++ -*-===//
//
// merak::rt::gpu's counterpart of merak_rt/collectives.h: the same entry
// points on device buffers, enqueued on the compute stream. They go
// through a DeviceCollectives implementation the training main installs
// (setCollectives; the NCCL communicator plugs in here). Without one (a
// serial program) every group has one rank and a collective is a device
// copy, as on the CPU. vocabCrossEntropy/vocabCrossEntropyGrad are
// host-staged (device -> host, the CPU runtime's vocabulary-parallel
// cross-entropy over MPI, host -> device) with either implementation.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_COLLECTIVES_H
#define MERAK_RT_CUDA_COLLECTIVES_H

#include "merak_rt/collectives.h"
#include "merak_rt/cuda/ops.h"

#include <cstdint>
#include <memory>
#include <string>

namespace merak::rt {
class Comm;
}

namespace merak::rt::gpu {

using cpu::CollReduce;
using cpu::Group;

/// One collective of generated code, as the CPU ABI describes it
/// (merak_rt/collectives.h): n tensors in one message; counts[i] is the
/// element count of tensor i (one part of it for reduce-scatter and
/// all-gather: reduce-scatter reads parts * counts[i] elements and writes
/// counts[i], all-gather reads counts[i] and writes parts * counts[i]).
enum class CollKind : int32_t { AllReduce, ReduceScatter, AllGather };
struct CollectiveCall {
  CollKind kind = CollKind::AllReduce;
  Group group = Group::DP;
  CollReduce reduce = CollReduce::Sum;
  DT t = DT::F32;
  int64_t parts = 1;
  int32_t n = 0;
  const int64_t *counts = nullptr;

  int64_t inCount(int32_t i) const {
    return kind == CollKind::ReduceScatter ? parts * counts[i] : counts[i];
  }
  int64_t outCount(int32_t i) const {
    return kind == CollKind::AllGather ? parts * counts[i] : counts[i];
  }
  /// "all-reduce (sum) of 3 f32 tensors on the dp group" (for messages).
  std::string describe() const;
};

/// A device communicator (one rank of a mesh): what generated code's
/// collectives need. Buffers are device pointers; `stream` is the compute
/// stream: a collective reads its inputs after the work enqueued there so
/// far, and the compute work enqueued after a blocking collective (or after
/// a wait) sees its results. Errors name the rank and the collective. The
/// training main picks the implementation (placement.h): NCCL on its own
/// streams ordered by CUDA events (collectives_nccl.cpp), or the
/// host-staged MPI fallback (collectives_staged.cpp).
class DeviceCollectives {
public:
  virtual ~DeviceCollectives() = default;
  /// "nccl" or "mpi (host-staged)".
  virtual std::string name() const = 0;
  /// This rank's coordinate in `group` and the group's size.
  virtual int groupRank(Group group) const = 0;
  virtual int groupSize(Group group) const = 0;
  /// The blocking collective: out[i] gets its result.
  virtual Status run(const CollectiveCall &c, const void *const *in,
                     void *const *out, cuda::StreamHandle stream) = 0;
  /// merak.*_start: takes (copies) the inputs now, in stream order, and
  /// posts the collective under request slot `slot`.
  virtual Status start(int32_t slot, const CollectiveCall &c,
                       const void *const *in, cuda::StreamHandle stream) = 0;
  /// merak.wait: the results of slot's collective (`c` as its start) into
  /// out, in stream order.
  virtual Status wait(int32_t slot, const CollectiveCall &c, void *const *out,
                      cuda::StreamHandle stream) = 0;
  /// Expert parallelism's exchange on `group` (blocking, in stream order):
  /// sendCounts[g] elements of t from `send` (blocks in group-rank order)
  /// go to group rank g, and recvCounts[g] elements from each land in
  /// `recv` (blocks in the same order). Any element type: rows are copied,
  /// not reduced.
  virtual Status allToAllV(Group group, DT t, const void *send, const int64_t *sendCounts,
                           void *recv, const int64_t *recvCounts,
                           cuda::StreamHandle stream) = 0;
  /// Called between kernels while a collective is in flight (MPI progresses
  /// only inside MPI calls).
  virtual void progress() {}
  /// Host wait, before the training main synchronises the compute stream at
  /// the end of a step: every collective issued so far has completed, or
  /// the error (a timeout aborts the communicator instead of hanging).
  virtual Status synchronize() { return Status::success(); }
};

/// The host-staged MPI implementation over the CPU runtime's communicator
/// (cpu::setCommunicator must have installed `comm`): each collective
/// waits for the compute stream, copies its inputs to the host, runs the
/// CPU runtime's collective (started ones: cpu::*StartImpl, progressed by
/// cpu::collectiveProgress, completed by cpu::collectiveWaitImpl) and copies
/// the results back. Works with any number of ranks per GPU.
std::unique_ptr<DeviceCollectives> createStagedCollectives(Comm &comm);
/// NCCL, one communicator per mesh axis of extent > 1 (cuda::NcclMesh,
/// bootstrapped over `comm`); defined in merak_runtime_nccl only.
Result<std::unique_ptr<DeviceCollectives>> createNcclCollectives(Comm &comm);

/// The communicator collectives use; null for a serial program.
void setCollectives(DeviceCollectives *c);
DeviceCollectives *collectives();

// The entry points of merak_rt/collectives.h, declared from the same list
// (merak_rt/kernels.def, where they are documented); pointers are device
// pointers (groupRank's *out is a device i64).
#define MERAK_COLLECTIVE(name, ret, params) ret name params;
#define MERAK_COLLECTIVE_IMPL(name, ret, params) ret name params;
#include "merak_rt/kernels.def"

/// The (in, out, count) triple forms generated code calls.
template <typename... Triples>
void allReduceBucket(Group group, CollReduce reduce, DT t, Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  cpu::detail::collect(in, out, counts, triples...);
  gpu::allReduceBucketImpl(group, reduce, t, n, in, out, counts);
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
  gpu::reduceScatterBucketImpl(group, reduce, t, parts, n, in, out, counts);
}
template <typename... Triples>
void allGatherBucket(Group group, DT t, int64_t parts, Triples... triples) {
  constexpr int32_t n = sizeof...(Triples) / 3;
  static_assert(sizeof...(Triples) % 3 == 0, "(in, out, count) triples");
  const void *in[n];
  void *out[n];
  int64_t counts[n];
  cpu::detail::collect(in, out, counts, triples...);
  gpu::allGatherBucketImpl(group, t, parts, n, in, out, counts);
}

// --- started collectives (merak.*_start, merak.wait; see merak_rt/collectives.h)

template <typename... Pairs>
void allReduceStart(int32_t slot, Group group, CollReduce reduce, DT t,
                    Pairs... pairs) {
  constexpr int32_t n = sizeof...(Pairs) / 2;
  static_assert(sizeof...(Pairs) % 2 == 0, "(in, count) pairs");
  const void *in[n];
  int64_t counts[n];
  cpu::detail::collectPairs(in, counts, pairs...);
  gpu::allReduceStartImpl(slot, group, reduce, t, n, in, counts);
}
template <typename... Pairs>
void reduceScatterStart(int32_t slot, Group group, CollReduce reduce, DT t,
                        int64_t parts, Pairs... pairs) {
  constexpr int32_t n = sizeof...(Pairs) / 2;
  static_assert(sizeof...(Pairs) % 2 == 0, "(in, count) pairs");
  const void *in[n];
  int64_t counts[n];
  cpu::detail::collectPairs(in, counts, pairs...);
  gpu::reduceScatterStartImpl(slot, group, reduce, t, parts, n, in, counts);
}
template <typename... Pairs>
void allGatherStart(int32_t slot, Group group, DT t, int64_t parts,
                    Pairs... pairs) {
  constexpr int32_t n = sizeof...(Pairs) / 2;
  static_assert(sizeof...(Pairs) % 2 == 0, "(in, count) pairs");
  const void *in[n];
  int64_t counts[n];
  cpu::detail::collectPairs(in, counts, pairs...);
  gpu::allGatherStartImpl(slot, group, t, parts, n, in, counts);
}
template <typename... Outs> void collectiveWait(int32_t slot, Outs... outs) {
  void *out[] = {static_cast<void *>(outs)...};
  gpu::collectiveWaitImpl(slot, sizeof...(Outs), out);
}

// Every variadic form kernels.def names is defined above (else this fails
// to compile).
namespace kernels_def {
#define MERAK_COLLECTIVE_VARIADIC(name) using gpu::name;
#include "merak_rt/kernels.def"
} // namespace kernels_def

} // namespace merak::rt::gpu


#endif // MERAK_RT_CUDA_COLLECTIVES_H
