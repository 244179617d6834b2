//===- collectives_gpu.cpp - GPU ABI collectives (merak_rt/cuda/collectives.h)
//
// Forwards to the installed DeviceCollectives. Without one (a serial
// program), or on a group of one rank, every collective is the identity: a
// copy (a started one copies its inputs into its slot's buffer at the start
// and out at the wait, since the compute after the start may overwrite
// them), and groupRank is 0. The request slots' descriptions (what each
// wait needs to know about its start) live here, shared by every
// implementation.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/collectives.h"

#include "collectives_util.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace merak::rt::gpu {
namespace {
DeviceCollectives *gCollectives = nullptr;

const char *groupName(Group g) {
  return g == Group::DP ? "dp" : g == Group::TP ? "tp" : g == Group::EP ? "ep" : g == Group::EDP ? "edp" : "pp";
}

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

bool distributed(Group g) {
  return gCollectives && gCollectives->groupSize(g) > 1;
}

/// A started collective: its call (with owned counts) until its wait.
struct Slot {
  bool active = false;
  CollectiveCall call;
  std::vector<int64_t> counts;
  detail::DeviceScratch identity; // the packed inputs (identity path)
  int64_t computed = -1; // >= 0: a result of this many bytes in identity (startComputed)
  std::string what;      // startComputed's description
};
std::vector<Slot> gSlots;
std::vector<int64_t> gOffsets;

const char *kindName(CollKind k) {
  return k == CollKind::AllReduce       ? "all_reduce"
         : k == CollKind::ReduceScatter ? "reduce_scatter"
                                        : "all_gather";
}

void blocking(const CollectiveCall &c, const void *const *in,
              void *const *out) {
  if (distributed(c.group))
    return must(gCollectives->run(c, in, out, stream()), kindName(c.kind));
  if (c.kind != CollKind::AllReduce)
    checkSerialParts(c.parts, kindName(c.kind));
  for (int32_t i = 0; i < c.n; ++i)
    if (in[i] != out[i])
      copyBytes(out[i], in[i], c.counts[i] * elemSize(c.t));
}

/// The free request slot `slot` (fatal when it is still in flight).
Slot &freeSlot(int32_t slot) {
  if (slot < 0)
    fatal("started collective: negative request slot");
  if (slot >= (int32_t)gSlots.size())
    gSlots.resize(slot + 1);
  Slot &s = gSlots[slot];
  if (s.active)
    fatal(("started collective: request slot " + std::to_string(slot) +
           " is still in flight (" +
           (s.computed >= 0 ? s.what : s.call.describe()) + ")")
              .c_str());
  return s;
}

void started(int32_t slot, CollectiveCall c, const void *const *in) {
  Slot &s = freeSlot(slot);
  s.computed = -1;
  s.counts.assign(c.counts, c.counts + c.n);
  c.counts = s.counts.data();
  s.call = c;
  s.active = true;
  if (distributed(c.group))
    return must(gCollectives->start(slot, s.call, in, stream()),
                kindName(c.kind));
  if (c.kind != CollKind::AllReduce)
    checkSerialParts(c.parts, kindName(c.kind));
  must(s.identity.reserve(detail::packOffsets(s.call, false, gOffsets)),
       "started collective");
  for (int32_t i = 0; i < c.n; ++i)
    copyBytes(s.identity.get() + gOffsets[i], in[i],
              c.counts[i] * elemSize(c.t));
}
} // namespace

char *detail::startComputed(int32_t slot, int64_t bytes, const char *what) {
  Slot &s = freeSlot(slot);
  must(s.identity.reserve(static_cast<uint64_t>(bytes)), what);
  s.computed = bytes;
  s.what = what;
  s.active = true;
  return s.identity.get();
}

std::string CollectiveCall::describe() const {
  std::string s = kind == CollKind::AllReduce       ? "all-reduce"
                  : kind == CollKind::ReduceScatter ? "reduce-scatter"
                                                    : "all-gather";
  if (kind != CollKind::AllGather)
    s += reduce == CollReduce::Sum    ? " (sum)"
         : reduce == CollReduce::Mean ? " (mean)"
                                      : " (max)";
  return s + " of " + std::to_string(n) + " " +
         (t == DT::F32    ? "f32"
          : t == DT::F64  ? "f64"
          : t == DT::BF16 ? "bf16"
                          : "integer") +
         (n == 1 ? " tensor" : " tensors") + " on the " + groupName(group) +
         " group";
}

void setCollectives(DeviceCollectives *c) { gCollectives = c; }
DeviceCollectives *collectives() { return gCollectives; }

void allReduceBucketImpl(Group group, CollReduce reduce, DT t, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts) {
  blocking({CollKind::AllReduce, group, reduce, t, 1, n, counts}, in, out);
}

void reduceScatterBucketImpl(Group group, CollReduce reduce, DT t,
                             int64_t parts, int32_t n, const void *const *in,
                             void *const *out, const int64_t *counts) {
  blocking({CollKind::ReduceScatter, group, reduce, t, parts, n, counts}, in,
           out);
}

void allGatherBucketImpl(Group group, DT t, int64_t parts, int32_t n,
                         const void *const *in, void *const *out,
                         const int64_t *counts) {
  blocking({CollKind::AllGather, group, CollReduce::Sum, t, parts, n, counts},
           in, out);
}

void allReduceStartImpl(int32_t slot, Group group, CollReduce reduce, DT t,
                        int32_t n, const void *const *in,
                        const int64_t *counts) {
  started(slot, {CollKind::AllReduce, group, reduce, t, 1, n, counts}, in);
}

void reduceScatterStartImpl(int32_t slot, Group group, CollReduce reduce, DT t,
                            int64_t parts, int32_t n, const void *const *in,
                            const int64_t *counts) {
  started(slot, {CollKind::ReduceScatter, group, reduce, t, parts, n, counts},
          in);
}

void allGatherStartImpl(int32_t slot, Group group, DT t, int64_t parts,
                        int32_t n, const void *const *in,
                        const int64_t *counts) {
  started(slot,
          {CollKind::AllGather, group, CollReduce::Sum, t, parts, n, counts},
          in);
}

void collectiveWaitImpl(int32_t slot, int32_t n, void *const *out) {
  if (slot < 0 || slot >= (int32_t)gSlots.size() || !gSlots[slot].active)
    fatal(("collective wait: request slot " + std::to_string(slot) +
           " was not started")
              .c_str());
  Slot &s = gSlots[slot];
  if (s.computed >= 0) { // computed at its start: one result
    if (n != 1)
      fatal(("collective wait: " + std::to_string(n) + " results for the " + s.what).c_str());
    s.active = false;
    copyBytes(out[0], s.identity.get(), s.computed);
    return;
  }
  if (n != s.call.n)
    fatal(("collective wait: " + std::to_string(n) + " results for the " +
           s.call.describe())
              .c_str());
  s.active = false;
  if (distributed(s.call.group))
    return must(gCollectives->wait(slot, s.call, out, stream()),
                kindName(s.call.kind));
  detail::packOffsets(s.call, false, gOffsets);
  for (int32_t i = 0; i < n; ++i)
    copyBytes(out[i], s.identity.get() + gOffsets[i],
              s.call.counts[i] * elemSize(s.call.t));
}

void collectiveProgress() {
  if (gCollectives)
    gCollectives->progress();
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

} // namespace merak::rt::gpu
