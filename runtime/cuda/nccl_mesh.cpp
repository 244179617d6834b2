//===- nccl_mesh.cpp - NCCL communicators over the MPI mesh axes -----------===//
//
// The MPI side of nccl.h (the id broadcast over a Comm axis, NcclMesh), in
// its own object so that programs using NcclComm with another transport do
// not pull in MPI.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/nccl.h"

namespace merak::rt::cuda {
namespace {

class MpiBootstrap final : public BootstrapTransport {
public:
  MpiBootstrap(Comm &c, Axis a) : comm_(c), axis_(a) {}
  int rank() const override { return comm_.groupRank(axis_); }
  int size() const override { return comm_.groupSize(axis_); }
  Status broadcast(void *bytes, size_t n) override {
    if (n % 8 != 0)
      return Status::error("bootstrap broadcast: size not a multiple of 8");
    Comm::Request r =
        comm_.broadcast(axis_, bytes, int64_t(n / 8), CommType::I64, 0);
    return comm_.wait(r, "NCCL unique id broadcast");
  }

private:
  Comm &comm_;
  Axis axis_;
};

} // namespace

std::unique_ptr<BootstrapTransport> mpiBootstrap(Comm &comm, Axis a) {
  return std::make_unique<MpiBootstrap>(comm, a);
}

// --- NcclMesh -----------------------------------------------------------------

Result<std::unique_ptr<NcclMesh>> NcclMesh::create(Comm &comm,
                                                   double timeoutSeconds) {
  std::unique_ptr<NcclMesh> m(new NcclMesh());
  const std::pair<Axis, std::unique_ptr<NcclComm> NcclMesh::*> axes[] = {
      {Axis::DP, &NcclMesh::dp_},
      {Axis::TP, &NcclMesh::tp_},
      {Axis::PP, &NcclMesh::pp_},
      {Axis::EP, &NcclMesh::ep_},
      {Axis::EDP, &NcclMesh::edp_}};
  // Same order on every rank: each rank is in exactly one group per axis.
  for (const auto &[a, member] : axes) {
    if (comm.groupSize(a) <= 1)
      continue;
    auto t = mpiBootstrap(comm, a);
    auto c = NcclComm::create(*t, axisName(a), comm.rank(), timeoutSeconds);
    if (!c.ok())
      return Result<std::unique_ptr<NcclMesh>>::error(c.message());
    (*m).*member = std::move(*c);
  }
  return m;
}

NcclComm *NcclMesh::get(Axis a) const {
  switch (a) {
  case Axis::DP:
    return dp_.get();
  case Axis::TP:
    return tp_.get();
  case Axis::PP:
    return pp_.get();
  case Axis::EP:
    return ep_.get();
  case Axis::EDP:
    return edp_.get();
  default:
    return nullptr;
  }
}

} // namespace merak::rt::cuda
