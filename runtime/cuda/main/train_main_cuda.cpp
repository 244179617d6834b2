//===- train_main_cuda.cpp - ./train for --target cuda programs -------------===//
//
// merak_train_main_cuda: the shared training main (train_main.cpp) with a
// StepBackend that runs the generated step on one GPU. The device arena,
// parameter storage and constants are cudaMalloc'd once; P and C are copied
// in after the host initialised (or restored) them; each step copies its
// inputs from the host arena, runs merak_train_step on the device regions
// (the step enqueues merak::rt::gpu calls on one stream), waits, reports
// any error a kernel recorded (gpu::checkErrors) and copies the outputs
// (loss, grad norm, ...) back. Checkpoints copy P back first.
//
// A parallel program (--dp/--tp/--zero) runs one process per mesh rank
// (mpirun, the CPU program's rank layout): each rank uses GPU (rank on its
// node) % (GPUs on the node) and the step's collectives go through a
// DeviceCollectives chosen by cuda::chooseCollectives (placement.h): NCCL
// with one GPU per rank, the host-staged MPI fallback when ranks share a
// GPU; every rank makes the same choice (the fallback wins when any rank
// needs it), and rank 0 prints it.
//
// A pipelined program (--pp/--microbatches/--recompute) runs the pipeline
// runner (pipeline.cpp) on the device regions instead of merak_train_step:
// its stashes live on the device, its messages in pinned host memory
// between the stages' MPI send/recv (cuda::createPipelineMemory).
//
// Exit codes are train_main.cpp's: without a GPU the run ends with exit
// code 1 and "train: error: no CUDA device: <reason>".
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/collectives.h"
#include "merak_rt/cuda/device.h"
#include "merak_rt/comm.h"
#include "merak_rt/cuda/ops.h"
#include "merak_rt/cuda/pipeline_memory.h"
#include "merak_rt/cuda/placement.h"
#include "merak_rt/program.h"
#include "merak_rt/step_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>

namespace merak::rt::cuda {
namespace {

class CudaBackend final : public StepBackend {
public:
  ~CudaBackend() override {
    gpu::setCollectives(nullptr);
    collectives_.reset();
    if (opened_)
      gpu::releaseContext();
    gpu::setStream(nullptr);
  }

  std::string name() const override { return "cuda"; }

  Status open(Comm *comm) override {
    int ordinal = 0;
    if (comm) {
      Result<int> count = deviceCount();
      if (!count.ok())
        return count.status();
      ordinal = selectDevice(comm->localRank(), *count);
    }
    Result<Device> d = Device::open(ordinal);
    if (!d.ok())
      return d.status();
    device_ = std::move(d).value();
    Result<Stream> s = Stream::create();
    if (!s.ok())
      return s.status();
    stream_ = std::move(s).value();
    gpu::setStream(stream_.handle());
    pipelineMemory_ = createPipelineMemory(stream_.handle());
    opened_ = true;
    if (comm)
      return openCollectives(*comm);
    return Status::success();
  }

  std::string describe() const override {
    return "running on " + device_.describe();
  }

  Status setup(uint64_t arenaBytes, const char *hostP, uint64_t paramsBytes,
               const char *hostC, uint64_t constsBytes) override {
    for (auto [region, bytes, name] :
         {std::tuple{&arena_, arenaBytes, "arena"},
          std::tuple{&params_, paramsBytes, "parameter storage"},
          std::tuple{&consts_, constsBytes, "constants"}}) {
      // 256 bytes at least: every region has a valid base pointer.
      Result<Arena> a = Arena::create(std::max<uint64_t>(bytes, 256));
      if (!a.ok())
        return Status::error(std::string("cannot allocate the device ") + name +
                             " (" + std::to_string(bytes) + " bytes): " + a.message());
      *region = std::move(a).value();
    }
    if (Status s = arena_.zero(stream_.handle()); !s.ok())
      return s;
    if (Status s = copyToDevice(params_.base(), hostP, paramsBytes, stream_.handle());
        !s.ok())
      return s;
    return copyToDevice(consts_.base(), hostC, constsBytes, stream_.handle());
  }

  PipelineMemory *pipelineMemory() override { return pipelineMemory_.get(); }

  Status step(char *hostA, const std::vector<ByteRange> &inputs,
              const std::vector<ByteRange> &outputs, const DeviceStep &run) override {
    char *A = static_cast<char *>(arena_.base());
    for (const ByteRange &r : inputs)
      if (Status s = copyToDevice(A + r.offset, hostA + r.offset, r.bytes,
                                  stream_.handle(), /*sync=*/false);
          !s.ok())
        return s;
    char *P = static_cast<char *>(params_.base());
    const char *C = static_cast<const char *>(consts_.base());
    if (run) {
      if (Status s = run(A, P, C); !s.ok())
        return s;
    } else {
      merak_train_step(A, P, C);
    }
    // Communication first: a hung collective times out here (and aborts
    // its communicator) instead of blocking the stream synchronisation.
    if (collectives_)
      if (Status s = collectives_->synchronize(); !s.ok())
        return s;
    if (Status s = gpu::checkErrors(); !s.ok())
      return s;
    for (const ByteRange &r : outputs)
      if (Status s = copyToHost(hostA + r.offset, A + r.offset, r.bytes,
                                stream_.handle(), /*sync=*/false);
          !s.ok())
        return s;
    return stream_.synchronize();
  }

  Status downloadParams(char *hostP, const std::vector<ByteRange> &ranges) override {
    const char *P = static_cast<const char *>(params_.base());
    for (const ByteRange &r : ranges)
      if (Status s = copyToHost(hostP + r.offset, P + r.offset, r.bytes, stream_.handle(),
                                /*sync=*/false);
          !s.ok())
        return s;
    return stream_.synchronize();
  }

private:
  /// Chooses and creates the device collectives (every rank the same kind).
  Status openCollectives(Comm &comm) {
#ifdef MERAK_HAVE_NCCL
    const bool nccl = true;
#else
    const bool nccl = false;
#endif
    Result<int> count = deviceCount();
    if (!count.ok())
      return count.status();
    const char *env = std::getenv("MERAK_GPU_COLLECTIVES");
    Result<CollectivesChoice> choice =
        chooseCollectives(env, comm.localSize(), *count, nccl);
    if (!choice.ok())
      return choice.status();
    // One rank needing the fallback (a node with more ranks than GPUs)
    // makes every rank use it.
    double mpi = choice->kind == CollectivesKind::Mpi ? 1 : 0;
    Comm::Request r = comm.allReduceMax(Axis::World, &mpi, 1, CommType::F64);
    if (Status s = comm.wait(r, "choice of the GPU collectives"); !s.ok())
      return s;
    if (mpi > 0 && choice->kind == CollectivesKind::Nccl)
      choice = CollectivesChoice{CollectivesKind::Mpi,
                                 "another node's ranks share a GPU"};
    if (choice->kind == CollectivesKind::Mpi) {
      collectives_ = gpu::createStagedCollectives(comm);
    } else {
#ifdef MERAK_HAVE_NCCL
      Result<std::unique_ptr<gpu::DeviceCollectives>> c =
          gpu::createNcclCollectives(comm);
      if (!c.ok())
        return c.status();
      collectives_ = std::move(c).value();
#endif
    }
    gpu::setCollectives(collectives_.get());
    if (comm.rank() == 0)
      std::printf("train: GPU collectives: %s (%s); %d rank(s) on this node, "
                  "%d GPU(s)\n",
                  collectives_->name().c_str(), choice->why.c_str(),
                  comm.localSize(), *count);
    return Status::success();
  }

  std::unique_ptr<gpu::DeviceCollectives> collectives_;
  std::unique_ptr<PipelineMemory> pipelineMemory_;
  bool opened_ = false;
  Device device_;
  Stream stream_;
  Arena arena_, params_, consts_;
};

} // namespace
} // namespace merak::rt::cuda

extern "C" int merak_train_main_cuda(int argc, char **argv) {
  int code;
  {
    merak::rt::cuda::CudaBackend backend;
    code = merak::rt::trainMain(argc, argv, &backend);
  }
  return code;
}
