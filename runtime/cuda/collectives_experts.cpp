//===- collectives_experts.cpp - Expert parallelism's GPU collectives ------===//
//
// merak::rt::gpu's expertAllToAll, expertAllToAllStart and expertShadow
// (kernels.def documents them): the CPU's semantics on device buffers.
//
// The all-to-all copies the group's expert ids to the host (a stream
// synchronisation, as Megatron's alltoall dispatcher needs its token counts
// on the host), plans the exchange there with the CPU's planRowExchange
// (merak_rt/expert_rows.h: the same rows in the same order), packs the rows
// to send on the device (moveRows), exchanges them through the installed
// DeviceCollectives::allToAllV (NCCL's grouped send/recv, or host-staged
// MPI_Alltoallv) and unpacks them. The two-level form is the flat exchange
// here (NCCL routes by topology itself; the result is the same), and a
// started all-to-all runs whole at its start into its request slot
// (startComputed), its wait copying the result out: correct, but without
// the overlap the CPU's started form gives.
//
// expertShadow broadcasts each shadowed expert's matrix as a sum in which
// only its owner contributes (exact: the others add zeros) and reduces the
// copies' gradients with one all-reduce, both through allReduceBucket.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/collectives.h"
#include "merak_rt/expert_rows.h"

#include "collectives_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

namespace merak::rt::gpu {
namespace {

void must(const Status &s, const char *what) {
  if (!s.ok())
    fatal((std::string(what) + ": " + s.message()).c_str());
}

/// The group's size and this rank's coordinate (1 and 0 without a
/// communicator, when the program must have been compiled for one part).
std::pair<int, int> groupOf(Group g, int64_t parts, const char *what) {
  DeviceCollectives *c = collectives();
  const int size = c ? c->groupSize(g) : 1;
  if (size != parts)
    fatal((std::string(what) + ": the program was compiled for a group of " +
           std::to_string(parts) + " ranks but runs with " + std::to_string(size))
              .c_str());
  return {size, size > 1 ? c->groupRank(g) : 0};
}

std::vector<int64_t> idsToHost(const void *ids, int64_t n, const char *what) {
  std::vector<int64_t> h(static_cast<size_t>(n));
  must(cuda::copyToHost(h.data(), ids, static_cast<uint64_t>(n) * 8, stream(), /*sync=*/true),
       what);
  return h;
}

void zeroDevice(void *p, int64_t bytes, const char *what) {
  must(cuda::cudaCheck(int(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes),
                                           static_cast<cudaStream_t>(stream()))),
                       "cudaMemsetAsync"),
       what);
}

/// Device buffers of the exchange (grow-only; every use is in stream
/// order on the compute stream, so one set serves every call).
struct Buffers {
  detail::DeviceScratch send, recv, index;
};
Buffers &buffers() {
  static Buffers b;
  return b;
}

/// The row indices of the plan on the device: send rows, then receive rows.
int64_t *uploadIndex(const cpu::detail::RowExchange &x, const char *what) {
  std::vector<int64_t> all(x.sendRows);
  all.insert(all.end(), x.recvRows.begin(), x.recvRows.end());
  must(buffers().index.reserve(std::max<size_t>(1, all.size()) * 8), what);
  auto *dev = reinterpret_cast<int64_t *>(buffers().index.get());
  must(cuda::copyToDevice(dev, all.data(), all.size() * 8, stream(), /*sync=*/false), what);
  return dev;
}

void exchange(Group group, DT t, bool combine, int64_t parts, const void *ids, int64_t S,
              int64_t row, int64_t perRank, int64_t shadowSlots, const void *in, void *out,
              int64_t compact, const char *what) {
  if (t != DT::F32 && t != DT::F64 && t != DT::BF16)
    fatal("all_to_all supports f32, f64 and bf16 only");
  const auto [size, me] = groupOf(group, parts, "all_to_all");
  std::vector<int64_t> h = idsToHost(ids, size * S, what);
  if (!combine && shadowSlots == 0) // (with shadowing the plan saw the ids)
    cpu::recordExpertRows(h.data(), size * S, perRank * parts);
  cpu::detail::RowExchange x = cpu::detail::planRowExchange(
      h.data(), size, me, S, perRank, shadowSlots, combine, compact);
  const int64_t rowBytes = row * elemSize(t);
  const int64_t sent = static_cast<int64_t>(x.sendRows.size());
  const int64_t received = static_cast<int64_t>(x.recvRows.size());
  const int64_t outRows = combine ? S : compact > 0 ? compact : size * S;
  int64_t *index = uploadIndex(x, what);
  Buffers &b = buffers();
  must(b.send.reserve(std::max<int64_t>(1, sent) * rowBytes), what);
  detail::moveRows(in, b.send.get(), index, sent, rowBytes, /*scatter=*/false);
  const char *arrived = b.send.get();
  if (size > 1) {
    must(b.recv.reserve(std::max<int64_t>(1, received) * rowBytes), what);
    for (int i = 0; i < size; ++i) {
      x.sendCounts[i] *= row;
      x.recvCounts[i] *= row;
    }
    must(collectives()->allToAllV(group, t, b.send.get(), x.sendCounts.data(), b.recv.get(),
                                  x.recvCounts.data(), stream()),
         what);
    arrived = b.recv.get();
  }
  if (received < outRows)
    zeroDevice(out, outRows * rowBytes, what);
  detail::moveRows(arrived, out, index + sent, received, rowBytes, /*scatter=*/true);
}

const char *exchangeName(bool combine) {
  return combine ? "all-to-all combining the experts' rows"
                 : "all-to-all dispatching tokens to their experts";
}

} // namespace

void expertAllToAll(Group group, DT t, bool combine, int64_t parts, const void *ids, int64_t S,
                    int64_t row, int64_t perRank, int64_t shadowSlots, const void *in,
                    void *out, bool /*hierarchical*/, int64_t compact) {
  exchange(group, t, combine, parts, ids, S, row, perRank, shadowSlots, in, out, compact,
           exchangeName(combine));
}

void expertAllToAllStart(int32_t slot, Group group, DT t, bool combine, int64_t parts,
                         const void *ids, int64_t S, int64_t row, int64_t perRank,
                         int64_t shadowSlots, const void *in, int64_t compact) {
  const int64_t outRows = combine ? S : compact > 0 ? compact : parts * S;
  char *result = detail::startComputed(slot, outRows * row * elemSize(t), exchangeName(combine));
  exchange(group, t, combine, parts, ids, S, row, perRank, shadowSlots, in, result, compact,
           exchangeName(combine));
}

void expertShadow(Group group, DT t, bool reduce, int64_t parts, const void *slotsData,
                  int64_t M, int64_t perRank, int64_t matrix, const void *in, void *out) {
  if (t != DT::F32 && t != DT::F64 && t != DT::BF16)
    fatal("expert_shadow supports f32, f64 and bf16 only");
  const char *what = reduce ? "reducing shadowed experts' gradients to their owners"
                            : "broadcasting a shadowed expert's weights";
  const auto [size, me] = groupOf(group, parts, "expert_shadow");
  std::vector<int64_t> slots = idsToHost(slotsData, M, what);
  const int64_t bytes = matrix * elemSize(t);
  auto owner = [&](int64_t j) {
    return cpu::detail::shadowSlotOwner(slots.data(), j, perRank, parts);
  };
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  const bool any = std::any_of(slots.begin(), slots.end(), [](int64_t e) { return e >= 0; });
  if (!reduce) { // out [M, matrix]: each used slot from its owner
    zeroDevice(dst, M * bytes, what);
    for (int64_t j = 0; j < M; ++j)
      if (owner(j) == me)
        copyBytes(dst + j * bytes, src + (slots[j] - me * perRank) * bytes, bytes);
  } else { // out [perRank, matrix]: the group's sum of each slot at its owner
    zeroDevice(dst, perRank * bytes, what);
    if (!any)
      return; // nothing shadowed (the same plan on every rank): no message
    detail::DeviceScratch &sum = buffers().send;
    must(sum.reserve(static_cast<uint64_t>(M * bytes)), what);
    copyBytes(sum.get(), src, M * bytes);
    src = sum.get();
  }
  if (size > 1 && any) {
    void *buf = reduce ? buffers().send.get() : dst;
    const int64_t count = M * matrix;
    const void *ins[] = {buf};
    void *outs[] = {buf};
    gpu::allReduceBucketImpl(group, CollReduce::Sum, t, 1, ins, outs, &count);
  }
  if (reduce)
    for (int64_t j = 0; j < M; ++j)
      if (owner(j) == me)
        copyBytes(dst + (slots[j] - me * perRank) * bytes, src + j * bytes, bytes);
}

} // namespace merak::rt::gpu
