//===- collectives_nccl.cpp - NCCL collectives for the GPU ABI -------------===//
//
// createNcclCollectives (merak_rt/cuda/collectives.h): the step's
// collectives on the NCCL communicator of their mesh axis (cuda::NcclMesh).
// Every collective copies its inputs (on the compute stream) into its request
// slot's device buffers (later compute may overwrite them; the plan may
// alias a bucket's inputs and outputs), then runs on its communicator's
// stream, ordered after the compute stream's work so far by an event
// (NcclComm::groupStart); a bucket of n tensors is one NCCL group. It
// records the slot's event; the wait makes the compute stream wait for it
// (on the device) and copies the results out, so the compute enqueued
// between a start and its wait overlaps the communication. A blocking
// collective is a start and a wait on a slot of its own. synchronize() (end of
// the step) polls every communicator up to MERAK_COMM_TIMEOUT and aborts
// it on an error or a timeout, with the rank and collective in the message.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/comm.h"
#include "merak_rt/cuda/collectives.h"
#include "merak_rt/cuda/mixed.h"
#include "merak_rt/cuda/nccl.h"

#include "collectives_util.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace merak::rt::gpu {
namespace {

using cpu::axisOf;

cuda::ReduceOp reduceOp(CollReduce r) {
  return r == CollReduce::Sum    ? cuda::ReduceOp::Sum
         : r == CollReduce::Mean ? cuda::ReduceOp::Mean
                                 : cuda::ReduceOp::Max;
}

class NcclCollectives final : public DeviceCollectives {
public:
  NcclCollectives(Comm &comm, std::unique_ptr<cuda::NcclMesh> mesh)
      : comm_(comm), mesh_(std::move(mesh)) {}
  ~NcclCollectives() override {
    for (Slot &s : slots_)
      if (s.done)
        cudaEventDestroy(static_cast<cudaEvent_t>(s.done));
    if (blocking_.done)
      cudaEventDestroy(static_cast<cudaEvent_t>(blocking_.done));
  }

  std::string name() const override { return "nccl"; }
  int groupRank(Group g) const override { return comm_.groupRank(axisOf(g)); }
  int groupSize(Group g) const override { return comm_.groupSize(axisOf(g)); }

  /// Blocking: a start and its wait on a slot of its own. Going through the
  /// slot's packed buffers keeps the NCCL calls correct whatever the memory
  /// plan aliases between the bucket's inputs and outputs.
  Status run(const CollectiveCall &c, const void *const *in, void *const *out,
             cuda::StreamHandle s) override {
    if (Status st = startIn(blocking_, c, in, s); !st.ok())
      return st;
    return waitIn(blocking_, c, out, s);
  }

  Status start(int32_t slot, const CollectiveCall &c, const void *const *in,
               cuda::StreamHandle s) override {
    if (slot >= (int32_t)slots_.size())
      slots_.resize(slot + 1);
    return startIn(slots_[slot], c, in, s);
  }

  Status wait(int32_t slot, const CollectiveCall &c, void *const *out,
              cuda::StreamHandle s) override {
    if (slot >= (int32_t)slots_.size() || !slots_[slot].done)
      return Status::error(c.describe() + ": slot " + std::to_string(slot) +
                           " was not started on NCCL");
    return waitIn(slots_[slot], c, out, s);
  }

  Status allToAllV(Group g, DT t, const void *send, const int64_t *sendCounts, void *recv,
                   const int64_t *recvCounts, cuda::StreamHandle s) override {
    cuda::NcclComm *nc = mesh_->get(axisOf(g));
    if (!nc)
      return Status::error("rank " + std::to_string(comm_.rank()) + ": all-to-all on the " +
                           axisName(axisOf(g)) + " group: no NCCL communicator");
    const int n = nc->size();
    a2aBytes_.resize(2 * static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      a2aBytes_[r] = sendCounts[r] * elemSize(t);
      a2aBytes_[n + r] = recvCounts[r] * elemSize(t);
    }
    if (Status st = nc->allToAllV(send, a2aBytes_.data(), recv, a2aBytes_.data() + n, s);
        !st.ok())
      return st;
    return nc->joinInto(s);
  }

  Status synchronize() override {
    for (Axis a : {Axis::DP, Axis::TP, Axis::PP, Axis::EP, Axis::EDP})
      if (cuda::NcclComm *nc = mesh_->get(a))
        if (Status st = nc->synchronize(); !st.ok())
          return st;
    return Status::success();
  }

private:
  struct Slot {
    void *done = nullptr; // cudaEvent_t on the communicator's stream
    detail::DeviceScratch send, recv;
    std::vector<int64_t> inOff, outOff;
    char *result = nullptr;
  };

  /// Copies the inputs into sl's buffers (compute stream), posts the
  /// collective on the axis' communicator and records sl.done there.
  Status startIn(Slot &sl, const CollectiveCall &c, const void *const *in,
                 cuda::StreamHandle s) {
    cuda::NcclComm *nc = nullptr;
    if (Status st = check(c, nc); !st.ok())
      return st;
    if (!sl.done) {
      cudaEvent_t e = nullptr;
      if (Status st = cuda::cudaCheck(
              int(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)),
              "cudaEventCreateWithFlags");
          !st.ok())
        return st;
      sl.done = e;
    }
    const int64_t inBytes = detail::packOffsets(c, false, sl.inOff);
    const int64_t outBytes = detail::packOffsets(c, true, sl.outOff);
    if (Status st = sl.send.reserve(inBytes); !st.ok())
      return st;
    if (c.kind != CollKind::AllReduce)
      if (Status st = sl.recv.reserve(outBytes); !st.ok())
        return st;
    char *send = sl.send.get();
    char *recv = c.kind == CollKind::AllReduce ? send : sl.recv.get();
    packIn_.resize(c.n);
    packOut_.resize(c.n);
    for (int32_t i = 0; i < c.n; ++i) {
      copyBytes(send + sl.inOff[i], in[i], c.inCount(i) * elemSize(c.t));
      packIn_[i] = send + sl.inOff[i];
      packOut_[i] = recv + sl.outOff[i];
    }
    if (Status st = post(*nc, c, packIn_.data(), packOut_.data(), s); !st.ok())
      return st;
    sl.result = recv;
    return cuda::cudaCheck(
        int(cudaEventRecord(static_cast<cudaEvent_t>(sl.done),
                            static_cast<cudaStream_t>(nc->stream()))),
        "cudaEventRecord (collective)");
  }

  /// The compute stream waits for sl's collective, then copies its results.
  Status waitIn(Slot &sl, const CollectiveCall &c, void *const *out,
                cuda::StreamHandle s) {
    if (Status st = cuda::cudaCheck(
            int(cudaStreamWaitEvent(static_cast<cudaStream_t>(s),
                                    static_cast<cudaEvent_t>(sl.done), 0)),
            "cudaStreamWaitEvent (collective wait)");
        !st.ok())
      return st;
    // A bf16 mean: NCCL summed in bf16 (see post); divide here in fp32 and
    // round once, as the CPU runtime does.
    const int n = comm_.groupSize(axisOf(c.group));
    const bool bf16Mean = c.t == DT::BF16 && c.reduce == CollReduce::Mean &&
                          c.kind != CollKind::AllGather && n > 1;
    for (int32_t i = 0; i < c.n; ++i) {
      if (bf16Mean) {
        if (Status st = cuda::scaleBf16(sl.result + sl.outOff[i], out[i],
                                        c.outCount(i), 1.0f / float(n), s);
            !st.ok())
          return st;
        continue;
      }
      copyBytes(out[i], sl.result + sl.outOff[i],
                c.outCount(i) * elemSize(c.t));
    }
    return Status::success();
  }

  Status check(const CollectiveCall &c, cuda::NcclComm *&nc) const {
    nc = mesh_->get(axisOf(c.group));
    if (!nc)
      return Status::error("rank " + std::to_string(comm_.rank()) + ": " +
                           c.describe() + ": no NCCL communicator");
    // I64 all-gathers (expert parallelism's ids) are concatenations of bytes.
    if (c.t != DT::F32 && c.t != DT::BF16 && !(c.t == DT::I64 && c.kind == CollKind::AllGather))
      return Status::error(
          "rank " + std::to_string(comm_.rank()) + ": " + c.describe() +
          ": NCCL collectives take f32 and bf16 only here (run with "
          "MERAK_GPU_COLLECTIVES=mpi)");
    if (c.kind != CollKind::AllReduce && c.parts != nc->size())
      return Status::error("rank " + std::to_string(comm_.rank()) + ": " +
                           c.describe() + ": compiled for " +
                           std::to_string(c.parts) + " parts, the group has " +
                           std::to_string(nc->size()) + " ranks");
    return Status::success();
  }

  /// One NCCL group: the n collectives from in[i] to out[i] (all-reduce in
  /// place on out[i]).
  Status post(cuda::NcclComm &nc, const CollectiveCall &c,
              const void *const *in, void *const *out, cuda::StreamHandle s) {
    if (Status st = nc.groupStart(s); !st.ok())
      return st;
    Status st = Status::success();
    const cuda::DType dt =
        c.t == DT::BF16 ? cuda::DType::BF16 : cuda::DType::F32;
    // ncclAvg on bf16 pre-multiplies by a bf16-rounded 1/n (inexact unless n
    // is a power of two): sum, and waitIn divides in fp32.
    const cuda::ReduceOp op = c.t == DT::BF16 && c.reduce == CollReduce::Mean
                                  ? cuda::ReduceOp::Sum
                                  : reduceOp(c.reduce);
    for (int32_t i = 0; i < c.n && st.ok(); ++i) {
      switch (c.kind) {
      case CollKind::AllReduce:
        st = nc.allReduce(out[i], c.counts[i], dt, op, s);
        break;
      case CollKind::ReduceScatter:
        st = nc.reduceScatter(in[i], out[i], c.counts[i], dt, op, s);
        break;
      case CollKind::AllGather:
        st = c.t == DT::I64 ? nc.allGatherBytes(in[i], out[i], c.counts[i] * 8, s)
                            : nc.allGather(in[i], out[i], c.counts[i], dt, s);
        break;
      }
    }
    Status end = nc.groupEnd();
    return st.ok() ? end : st;
  }

  Comm &comm_;
  std::unique_ptr<cuda::NcclMesh> mesh_;
  std::vector<Slot> slots_;
  Slot blocking_; // the blocking collectives' buffers
  std::vector<const void *> packIn_;
  std::vector<void *> packOut_;
  std::vector<int64_t> a2aBytes_;
};

} // namespace

Result<std::unique_ptr<DeviceCollectives>> createNcclCollectives(Comm &comm) {
  auto mesh = cuda::NcclMesh::create(comm, comm.timeoutSeconds());
  if (!mesh.ok())
    return Result<std::unique_ptr<DeviceCollectives>>::error(mesh.message());
  return std::unique_ptr<DeviceCollectives>(
      std::make_unique<NcclCollectives>(comm, std::move(*mesh)));
}

} // namespace merak::rt::gpu
