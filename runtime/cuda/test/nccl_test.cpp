//===- nccl_test.cpp - Single-rank NCCL communicator on a GPU -------------===//
//
// One GPU allows one rank per communicator (NCCL rejects two ranks on the
// same device), so this checks the single-rank semantics (every collective
// is the identity, send/recv to self) and the stream/event plumbing; the
// multi-rank logic that needs no device (bootstrap, messages) is in
// train_host_test.cpp.
//
//===----------------------------------------------------------------------===//
#include "train_test.h"

#ifdef MERAK_HAVE_NCCL
#include "merak_rt/cuda/nccl.h"
#endif

#include <cstdio>
#include <string>

namespace merak::rt::cuda::test {

#ifdef MERAK_HAVE_NCCL
namespace {
class SelfTransport final : public BootstrapTransport {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status broadcast(void *, size_t) override { return Status::success(); }
};

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}
} // namespace

void testNccl() {
  SelfTransport t;
  auto c = NcclComm::create(t, "dp", 0, 30);
  if (!c.ok()) {
    expect(false, "NCCL communicator: " + c.message());
    return;
  }
  NcclComm &comm = **c;
  auto cs = Stream::create();
  must(cs.status(), "Stream::create");
  const StreamHandle compute = cs->handle();
  for (DType dt : {DType::F32, DType::BF16}) {
    const std::string tn = dt == DType::F32 ? "f32" : "bf16";
    const int64_t n = 1 << 20;
    const std::vector<float> x = roundTo(randn(n, 1.f), dt);
    Buf a(n * 4), b(n * 4), r(n * 4);
    putTyped(a.p, x, dt);
    must(comm.allReduce(a.p, n, dt, ReduceOp::Sum, compute), "allReduce");
    must(comm.allReduce(a.p, n, dt, ReduceOp::Mean, compute), "allReduce");
    must(comm.reduceScatter(a.p, b.p, n, dt, ReduceOp::Sum, compute),
         "reduceScatter");
    must(comm.allGather(b.p, r.p, n, dt, compute), "allGather");
    must(comm.joinInto(compute), "joinInto");
    must(comm.synchronize("test collectives"), "synchronize");
    must(cs->synchronize(), "compute synchronize");
    compare("nccl 1-rank all-reduce/reduce-scatter/all-gather " + tn,
            getTyped(r.p, n, dt), toDouble(x), 0.0);
    // Send to self and receive, inside a group.
    must(memsetDevice(b.p, 0, n * 4), "memset");
    must(comm.groupStart(compute), "groupStart");
    must(comm.send(a.p, n, dt, 0, compute), "send");
    must(comm.recv(b.p, n, dt, 0, compute), "recv");
    must(comm.groupEnd(), "groupEnd");
    must(comm.synchronize(), "synchronize");
    compare("nccl 1-rank send/recv to self " + tn, getTyped(b.p, n, dt),
            toDouble(x), 0.0);
  }
  Status bad = comm.groupEnd();
  expect(!bad.ok() && bad.message().find("rank 0 (dp group rank 0 of 1)") !=
                          std::string::npos,
         "unbalanced groupEnd is an error naming the rank: " + bad.message());
}
#else
void testNccl() { std::printf("skip nccl: built without NCCL\n"); }
#endif

} // namespace merak::rt::cuda::test
