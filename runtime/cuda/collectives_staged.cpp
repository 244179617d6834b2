//===- collectives_staged.cpp - Host-staged MPI collectives for the GPU ABI ===//
//
// createStagedCollectives (merak_rt/cuda/collectives.h): device -> host,
// the CPU runtime's MPI collective (merak_rt/collectives.h, which names the
// rank and collective on an error and aborts the job on a timeout), host ->
// device. The fallback when ranks share a GPU (NCCL refuses the same GPU
// twice in a communicator) or MERAK_GPU_COLLECTIVES=mpi. Also the
// vocabulary-parallel cross-entropy of the GPU ABI, with either
// implementation (no GPU kernel for it yet).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/comm.h"
#include "merak_rt/cuda/collectives.h"

#include "collectives_util.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace merak::rt::gpu {
namespace {

using cpu::axisOf;

/// Host staging: grow-only buffers, copies in stream order.
struct Staging {
  std::vector<char> in, out;
  std::vector<int64_t> inOff, outOff;
  std::vector<const void *> inPtr;
  std::vector<void *> outPtr;

  /// Waits for the compute stream, copies the inputs to `in`.
  Status download(const CollectiveCall &c, const void *const *dev,
                  cuda::StreamHandle s) {
    in.resize(detail::packOffsets(c, false, inOff));
    inPtr.resize(c.n);
    for (int32_t i = 0; i < c.n; ++i) {
      inPtr[i] = in.data() + inOff[i];
      if (Status st = cuda::copyToHost(in.data() + inOff[i], dev[i],
                                       c.inCount(i) * elemSize(c.t), s,
                                       /*sync=*/false);
          !st.ok())
        return st;
    }
    return cuda::cudaCheck(
        int(cudaStreamSynchronize(static_cast<cudaStream_t>(s))),
        "cudaStreamSynchronize (host-staged collective)");
  }
  void *const *outputs(const CollectiveCall &c) {
    out.resize(detail::packOffsets(c, true, outOff));
    outPtr.resize(c.n);
    for (int32_t i = 0; i < c.n; ++i)
      outPtr[i] = out.data() + outOff[i];
    return outPtr.data();
  }
  /// Copies the outputs to the device (pageable source: the copy has read
  /// it when cudaMemcpyAsync returns).
  Status upload(const CollectiveCall &c, void *const *dev,
                cuda::StreamHandle s) {
    for (int32_t i = 0; i < c.n; ++i)
      if (Status st = cuda::copyToDevice(dev[i], out.data() + outOff[i],
                                         c.outCount(i) * elemSize(c.t), s,
                                         /*sync=*/false);
          !st.ok())
        return st;
    return Status::success();
  }
};

class StagedCollectives final : public DeviceCollectives {
public:
  explicit StagedCollectives(Comm &comm) : comm_(comm) {}
  std::string name() const override { return "mpi (host-staged)"; }
  int groupRank(Group g) const override { return comm_.groupRank(axisOf(g)); }
  int groupSize(Group g) const override { return comm_.groupSize(axisOf(g)); }

  Status run(const CollectiveCall &c, const void *const *in, void *const *out,
             cuda::StreamHandle s) override {
    if (Status st = staging_.download(c, in, s); !st.ok())
      return where(c, st);
    void *const *hostOut = staging_.outputs(c);
    switch (c.kind) {
    case CollKind::AllReduce:
      cpu::allReduceBucketImpl(c.group, c.reduce, c.t, c.n,
                               staging_.inPtr.data(), hostOut, c.counts);
      break;
    case CollKind::ReduceScatter:
      cpu::reduceScatterBucketImpl(c.group, c.reduce, c.t, c.parts, c.n,
                                   staging_.inPtr.data(), hostOut, c.counts);
      break;
    case CollKind::AllGather:
      cpu::allGatherBucketImpl(c.group, c.t, c.parts, c.n,
                               staging_.inPtr.data(), hostOut, c.counts);
      break;
    }
    return where(c, staging_.upload(c, out, s));
  }

  Status start(int32_t slot, const CollectiveCall &c, const void *const *in,
               cuda::StreamHandle s) override {
    if (Status st = staging_.download(c, in, s); !st.ok())
      return where(c, st);
    // The CPU runtime packs the inputs into its slot's buffers: staging_
    // is free again when this returns.
    switch (c.kind) {
    case CollKind::AllReduce:
      cpu::allReduceStartImpl(slot, c.group, c.reduce, c.t, c.n,
                              staging_.inPtr.data(), c.counts);
      break;
    case CollKind::ReduceScatter:
      cpu::reduceScatterStartImpl(slot, c.group, c.reduce, c.t, c.parts, c.n,
                                  staging_.inPtr.data(), c.counts);
      break;
    case CollKind::AllGather:
      cpu::allGatherStartImpl(slot, c.group, c.t, c.parts, c.n,
                              staging_.inPtr.data(), c.counts);
      break;
    }
    return Status::success();
  }

  Status wait(int32_t slot, const CollectiveCall &c, void *const *out,
              cuda::StreamHandle s) override {
    cpu::collectiveWaitImpl(slot, c.n, staging_.outputs(c));
    return where(c, staging_.upload(c, out, s));
  }

  Status allToAllV(Group g, DT t, const void *send, const int64_t *sendCounts, void *recv,
                   const int64_t *recvCounts, cuda::StreamHandle s) override {
    const int n = comm_.groupSize(axisOf(g));
    int64_t sent = 0, received = 0;
    for (int r = 0; r < n; ++r) {
      sent += sendCounts[r];
      received += recvCounts[r];
    }
    if (t != DT::F32 && t != DT::F64 && t != DT::BF16 && t != DT::I64)
      return Status::error("rank " + std::to_string(comm_.rank()) +
                           ": all-to-all (host-staged): f32, f64, bf16 or i64 rows only");
    const CommType ct = t == DT::F32    ? CommType::F32
                        : t == DT::F64  ? CommType::F64
                        : t == DT::BF16 ? CommType::BF16
                                        : CommType::I64;
    const int64_t es = elemSize(t);
    a2aSend_.resize(static_cast<size_t>(sent * es));
    a2aRecv_.resize(static_cast<size_t>(received * es));
    Status st = cuda::copyToHost(a2aSend_.data(), send, sent * es, s, /*sync=*/true);
    if (st.ok()) {
      Comm::Request r = comm_.allToAllV(axisOf(g), a2aSend_.data(), sendCounts, a2aRecv_.data(),
                                        recvCounts, ct);
      st = comm_.wait(r, "all-to-all of expert rows (host-staged)");
    }
    if (st.ok())
      st = cuda::copyToDevice(recv, a2aRecv_.data(), received * es, s, /*sync=*/false);
    if (st.ok())
      return st;
    return Status::error("rank " + std::to_string(comm_.rank()) + ": all-to-all on the " +
                         axisName(axisOf(g)) + " group (host-staged): " + st.message());
  }

  void progress() override { cpu::collectiveProgress(); }

private:
  Status where(const CollectiveCall &c, const Status &st) const {
    if (st.ok())
      return st;
    return Status::error("rank " + std::to_string(comm_.rank()) + ": " +
                         c.describe() + " (host-staged): " + st.message());
  }

  Comm &comm_;
  Staging staging_;
  std::vector<char> a2aSend_, a2aRecv_;
};

/// Device -> host copy of `bytes` into `buf` (after the compute stream).
void toHost(std::vector<char> &buf, const void *dev, int64_t bytes,
            const char *what) {
  // NCCL collectives the stream waits for: polled with their timeout first,
  // so a dead peer is reported instead of hanging the stream wait below.
  if (DeviceCollectives *c = collectives())
    if (Status s = c->synchronize(); !s.ok())
      fatal((std::string(what) + ": " + s.message()).c_str());
  buf.resize(bytes);
  Status s = cuda::copyToHost(buf.data(), dev, bytes, stream(), /*sync=*/true);
  if (!s.ok())
    fatal((std::string(what) + ": " + s.message()).c_str());
}

void toDevice(void *dev, const std::vector<char> &buf, const char *what) {
  Status s = cuda::copyToDevice(dev, buf.data(), buf.size(), stream(),
                                /*sync=*/false);
  if (!s.ok())
    fatal((std::string(what) + ": " + s.message()).c_str());
}

std::vector<char> gLogits, gLabels, gGrad, gOut;

} // namespace

std::unique_ptr<DeviceCollectives> createStagedCollectives(Comm &comm) {
  return std::make_unique<StagedCollectives>(comm);
}

void vocabCrossEntropy(Group group, DT t, const void *logits, int64_t rows,
                       int64_t n, DT labT, const void *labels,
                       int32_t reduction, bool hasIgnore, int64_t ignoreIndex,
                       int64_t classes, void *y) {
  const char *what = "cross_entropy (vocabulary-parallel, host-staged)";
  toHost(gLogits, logits, rows * n * elemSize(t), what);
  toHost(gLabels, labels, rows * elemSize(labT), what);
  gOut.resize((reduction == 0 ? rows : 1) * elemSize(t));
  cpu::vocabCrossEntropy(group, t, gLogits.data(), rows, n, labT,
                         gLabels.data(), reduction, hasIgnore, ignoreIndex,
                         classes, gOut.data());
  toDevice(y, gOut, what);
}

void vocabCrossEntropyGrad(Group group, DT t, const void *logits, int64_t rows,
                           int64_t n, DT labT, const void *labels,
                           const void *g, int32_t reduction, bool hasIgnore,
                           int64_t ignoreIndex, int64_t classes,
                           void *dlogits) {
  const char *what = "cross_entropy_grad (vocabulary-parallel, host-staged)";
  toHost(gLogits, logits, rows * n * elemSize(t), what);
  toHost(gLabels, labels, rows * elemSize(labT), what);
  toHost(gGrad, g, (reduction == 0 ? rows : 1) * elemSize(t), what);
  gOut.resize(rows * n * elemSize(t));
  cpu::vocabCrossEntropyGrad(group, t, gLogits.data(), rows, n, labT,
                             gLabels.data(), gGrad.data(), reduction,
                             hasIgnore, ignoreIndex, classes, gOut.data());
  toDevice(dlogits, gOut, what);
}

} // namespace merak::rt::gpu
