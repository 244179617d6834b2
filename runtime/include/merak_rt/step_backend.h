//===- step_backend.h - Where ./train runs the generated step ----*- C++ -*-===//
//
// merak_train_main (train_main.cpp) owns everything that does not depend on
// the device: the command line, the manifest, data, parameter init and
// restore, checkpoints, metrics and traces, all on host memory (A, P, C as
// in program.h). A CPU program runs merak_train_step on those host regions.
// A device program (merak-compile --target cuda) passes a StepBackend that
// mirrors the regions on the device: P and C are copied once, each step
// copies the input tensors of A in and the output tensors back, and a
// checkpoint first copies P back to the host. A pipelined program
// (--pp/--microbatches/--recompute) runs the pipeline runner on the device
// regions in place of merak_train_step, with the backend's PipelineMemory
// (pipeline.h).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_STEP_BACKEND_H
#define MERAK_RT_STEP_BACKEND_H

#include "merak_rt/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace merak::rt {

class Comm;
class PipelineMemory;

/// Bytes [offset, offset + bytes) of a region.
struct ByteRange {
  uint64_t offset = 0, bytes = 0;
};

/// One step on the device regions A, P, C (a pipelined program: the
/// pipeline runner's step).
using DeviceStep = std::function<Status(char *A, char *P, const char *C)>;

class StepBackend {
public:
  virtual ~StepBackend() = default;
  /// The target's name in messages ("cuda").
  virtual std::string name() const = 0;
  /// Opens the device (after the command line was parsed, so --help works
  /// anywhere); the error ends the run with exit code 1. `comm` is the
  /// mesh communicator of a parallel program (null for a serial one): the
  /// backend picks its device and device collectives from it.
  virtual Status open(Comm *comm) = 0;
  /// One line about the device, printed at the start of the run.
  virtual std::string describe() const = 0;
  /// Allocates the device regions and copies P and C from the host.
  virtual Status setup(uint64_t arenaBytes, const char *hostP,
                       uint64_t paramsBytes, const char *hostC,
                       uint64_t constsBytes) = 0;
  /// Copies the `inputs` ranges of hostA to the device arena, runs one step
  /// (`run` on the device regions, or merak_train_step when it is empty)
  /// and copies the `outputs` ranges back into hostA.
  virtual Status step(char *hostA, const std::vector<ByteRange> &inputs,
                      const std::vector<ByteRange> &outputs,
                      const DeviceStep &run) = 0;
  /// The pipeline runner's memory on this device (after open()); null when
  /// the backend cannot run pipelined programs.
  virtual PipelineMemory *pipelineMemory() { return nullptr; }
  /// Copies the `ranges` of the device parameter storage into hostP (a
  /// pipelined program: only the params this rank's stages use, so the
  /// host pages of the others stay uncommitted).
  virtual Status downloadParams(char *hostP, const std::vector<ByteRange> &ranges) = 0;
};

/// ./train's main with the step on `backend` (null: on the host).
int trainMain(int argc, char **argv, StepBackend *backend);

} // namespace merak::rt

#endif // MERAK_RT_STEP_BACKEND_H
