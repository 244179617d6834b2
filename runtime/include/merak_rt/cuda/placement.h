//===- placement.h - GPU and collectives choice of a parallel program -*- C++ -*-===//
//
// Host-only decisions of a --target cuda program run under mpirun (no CUDA
// call, unit-tested without a GPU):
//  - which GPU a rank uses: its rank among the ranks of its node modulo the
//    node's device count (the rank layout is the CPU program's: world rank
//    = merak_rt/comm.h's meshRankOf);
//  - which DeviceCollectives implementation carries the step's collectives:
//    NCCL (one GPU per rank; NCCL refuses a communicator with the same GPU
//    twice) or the host-staged MPI fallback (device -> host copy, the CPU
//    runtime's MPI collective, host -> device), chosen when ranks share a GPU
//    or NCCL was not built, or forced with MERAK_GPU_COLLECTIVES=mpi|nccl.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_PLACEMENT_H
#define MERAK_RT_CUDA_PLACEMENT_H

#include "merak_rt/status.h"

#include <string>

namespace merak::rt::cuda {

/// The CUDA device ordinal of the rank `localRank` of its node
/// (localRank % deviceCount; deviceCount > 0).
int selectDevice(int localRank, int deviceCount);

enum class CollectivesKind { Nccl, Mpi };
const char *collectivesName(CollectivesKind k); // "nccl", "mpi"

struct CollectivesChoice {
  CollectivesKind kind = CollectivesKind::Nccl;
  std::string why; // "forced by MERAK_GPU_COLLECTIVES=mpi", ...
};

/// The choice on one node: `env` is MERAK_GPU_COLLECTIVES (null or "" or
/// "auto": automatic), `localSize` the ranks on this node, `deviceCount`
/// its GPUs, `ncclBuilt` whether the program has NCCL. Errors: an unknown
/// value; "nccl" forced without NCCL. Every rank must end up with the same
/// kind: the caller combines the automatic choice over the job (any rank
/// needing the fallback makes every rank use it).
Result<CollectivesChoice> chooseCollectives(const char *env, int localSize,
                                            int deviceCount, bool ncclBuilt);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_PLACEMENT_H
