//===- placement.cpp - GPU and collectives choice (placement.h) ------------===//
#include "merak_rt/cuda/placement.h"

#include <cstring>

namespace merak::rt::cuda {

int selectDevice(int localRank, int deviceCount) {
  if (deviceCount <= 0 || localRank < 0)
    return 0;
  return localRank % deviceCount;
}

const char *collectivesName(CollectivesKind k) {
  return k == CollectivesKind::Nccl ? "nccl" : "mpi";
}

Result<CollectivesChoice> chooseCollectives(const char *env, int localSize,
                                            int deviceCount, bool ncclBuilt) {
  const std::string v = env ? env : "";
  if (v == "mpi")
    return CollectivesChoice{CollectivesKind::Mpi,
                             "forced by MERAK_GPU_COLLECTIVES=mpi"};
  if (v == "nccl") {
    if (!ncclBuilt)
      return Result<CollectivesChoice>::error(
          "MERAK_GPU_COLLECTIVES=nccl, but this program was built without "
          "NCCL (no nccl.h/libnccl.so when merak was configured)");
    return CollectivesChoice{CollectivesKind::Nccl,
                             "forced by MERAK_GPU_COLLECTIVES=nccl"};
  }
  if (!v.empty() && v != "auto")
    return Result<CollectivesChoice>::error(
        "MERAK_GPU_COLLECTIVES='" + v + "': expected nccl, mpi or auto");
  if (!ncclBuilt)
    return CollectivesChoice{CollectivesKind::Mpi,
                             "this program was built without NCCL"};
  if (deviceCount > 0 && localSize > deviceCount)
    return CollectivesChoice{
        CollectivesKind::Mpi,
        std::to_string(localSize) + " ranks on this node share " +
            std::to_string(deviceCount) +
            " GPU(s); NCCL needs a GPU per rank"};
  return CollectivesChoice{CollectivesKind::Nccl,
                           "one GPU per rank"};
}

} // namespace merak::rt::cuda
