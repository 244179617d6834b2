//===- nccl.h - NCCL communicators per mesh axis ------------------*- C++ -*-===//
//
// One NCCL communicator per mesh axis (dp, tp, pp; the axis groups of
// merak_rt/comm.h), bootstrapped over the MPI axis communicators: group rank
// 0 creates the ncclUniqueId and broadcasts it (with a status word, so a
// failure on rank 0 reaches every rank instead of leaving them waiting).
//
// Streams: each communicator has its own CUDA stream. A collective called
// with a compute stream is ordered after the work already on that stream
// (an event recorded there, waited by the communicator's stream) and runs on
// the communicator's stream; joinInto(compute) makes a compute stream wait
// (on the device) for every collective issued so far, so communication
// overlaps the compute issued in between.
//
// Failures never hang silently. Communicators are created non-blocking
// (ncclConfig_t::blocking = 0): initialisation and every call are polled
// with ncclCommGetAsyncError, and synchronize() polls the communicator's
// stream, both up to the timeout (60 s or MERAK_COMM_TIMEOUT, as the MPI
// Comm). An asynchronous NCCL error or a timeout aborts the communicator
// (ncclCommAbort) and returns an error naming the world rank, the axis and
// group rank, and the collective:
//   "NCCL all-reduce (sum, bf16, 1048576 elements) on rank 3 (dp group rank
//    1 of 4): did not complete within 60 s (a peer rank may have died or
//    not joined); communicator aborted"
//
// This header includes no CUDA or NCCL header (streams are StreamHandle);
// the library is merak_runtime_nccl (only where NCCL was found at configure
// time).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_NCCL_H
#define MERAK_RT_CUDA_NCCL_H

#include "merak_rt/comm.h"
#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace merak::rt::cuda {

enum class ReduceOp : int32_t { Sum, Mean, Max };

/// How a group exchanges bootstrap bytes: a broadcast from group rank 0.
/// mpiBootstrap() does it over an axis of a Comm; tests use an in-process
/// fake.
class BootstrapTransport {
public:
  virtual ~BootstrapTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every rank's bytes[0, n) become group rank 0's; n is a multiple of 8.
  virtual Status broadcast(void *bytes, size_t n) = 0;
};
/// Broadcast over the axis communicator `a` of `comm` (Comm::broadcast +
/// wait, with the Comm's timeout and dead-rank handling).
std::unique_ptr<BootstrapTransport> mpiBootstrap(Comm &comm, Axis a);

constexpr size_t kNcclIdBytes = 128; // sizeof(ncclUniqueId)
using NcclId = std::array<unsigned char, kNcclIdBytes>;
/// Creates an id on group rank 0 (ncclGetUniqueId in production).
using NcclIdSource = std::function<Status(NcclId &)>;

/// Group rank 0 calls `source` and broadcasts [status word, id] (136
/// bytes); every rank returns the id, or, when rank 0 failed, the error
/// "rank 0 of the <name> group could not create the NCCL unique id"
/// (with rank 0's own message on rank 0).
Result<NcclId> exchangeNcclId(BootstrapTransport &t, const std::string &name,
                              const NcclIdSource &source);

/// "NCCL <what> on rank <worldRank> (<axis> group rank r of n): <detail>".
std::string ncclWhere(const std::string &what, int worldRank,
                      const std::string &axis, int groupRank, int groupSize);
/// ncclGetErrorString(code) plus the code ("unhandled system error (code
/// 2)"); code is an ncclResult_t. Needs no device.
std::string ncclErrorString(int code);

/// Seconds before a pending NCCL operation counts as hung: MERAK_COMM_TIMEOUT
/// when set to a positive number, else 60.
double ncclTimeoutSeconds();

class NcclComm {
public:
  /// Bootstraps the communicator of one group (non-blocking init, polled up
  /// to `timeoutSeconds`, 0 = ncclTimeoutSeconds()). The current CUDA device
  /// must be set (Device::open); without a device the error starts with "no
  /// CUDA device: ". Every group rank must call it (collective).
  static Result<std::unique_ptr<NcclComm>>
  create(BootstrapTransport &t, const std::string &axis, int worldRank,
         double timeoutSeconds = 0);
  /// Finalizes (flushes) and destroys; aborts instead when the
  /// communicator has failed or finalizing does not finish in time.
  ~NcclComm();
  NcclComm(const NcclComm &) = delete;
  NcclComm &operator=(const NcclComm &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string &axis() const { return axis_; }
  StreamHandle stream() const { return stream_; }

  /// In place over `count` elements (fp32 or bf16; bf16 sums accumulate in
  /// bf16 inside NCCL's ring, pass fp32 for exact-as-fp32 sums); Mean is
  /// ncclAvg, Max ncclMax.
  Status allReduce(void *buf, int64_t count, DType t, ReduceOp op,
                   StreamHandle compute);
  /// recv[recvCount] = reduction over the group of send[rank*recvCount ..]
  /// (send holds size()*recvCount elements).
  Status reduceScatter(const void *send, void *recv, int64_t recvCount,
                       DType t, ReduceOp op, StreamHandle compute);
  /// recv[g*sendCount ..] = send of group rank g.
  Status allGather(const void *send, void *recv, int64_t sendCount, DType t,
                   StreamHandle compute);
  /// recv[g*bytes ..] = the `bytes` bytes of group rank g: a concatenation
  /// of any element type (expert parallelism's I64 ids).
  Status allGatherBytes(const void *send, void *recv, int64_t bytes, StreamHandle compute);
  /// Expert parallelism's exchange, one NCCL group of sends and receives:
  /// sendBytes[g] bytes of `send` (blocks in group-rank order) to group
  /// rank g, recvBytes[g] bytes from each into `recv` (same order); this
  /// rank's own block is a device copy on the communicator's stream.
  Status allToAllV(const void *send, const int64_t *sendBytes, void *recv,
                   const int64_t *recvBytes, StreamHandle compute);
  /// Point to point with group rank `peer`. A send and the matching recv
  /// between the same two ranks at the same time (a pipeline exchange) must
  /// be inside groupStart()/groupEnd(); the group is ordered after
  /// `compute` once, at groupStart (the calls inside ignore theirs).
  Status send(const void *buf, int64_t count, DType t, int peer,
              StreamHandle compute);
  Status recv(void *buf, int64_t count, DType t, int peer,
              StreamHandle compute);
  Status groupStart(StreamHandle compute);
  Status groupEnd();

  /// `compute` waits (on the device) for everything issued so far.
  Status joinInto(StreamHandle compute);
  /// Host wait for everything issued so far, polling the stream and
  /// ncclCommGetAsyncError up to the timeout; on an error or a timeout the
  /// communicator is aborted and the error names this rank and the last
  /// collective (`what`, when given, is appended: "gradient bucket 3").
  Status synchronize(const char *what = nullptr);
  /// False once an error or a timeout aborted the communicator.
  bool healthy() const { return !aborted_; }

private:
  NcclComm() = default;
  Status begin(const std::string &op, StreamHandle compute);
  Status finish(int ncclResult);
  Status fail(const std::string &detail);
  Status waitInit();

  void *comm_ = nullptr;   // ncclComm_t
  void *stream_ = nullptr; // cudaStream_t
  void *ready_ = nullptr;  // cudaEvent_t on the compute stream
  void *done_ = nullptr;   // cudaEvent_t on stream_
  int rank_ = 0, size_ = 1, worldRank_ = 0;
  int groupDepth_ = 0;
  double timeout_ = 60;
  bool aborted_ = false;
  std::string axis_, lastOp_;
};

/// The dp, tp, pp, ep and edp communicators of this rank (the axes of
/// extent 1 get none: get() returns nullptr for them).
class NcclMesh {
public:
  static Result<std::unique_ptr<NcclMesh>> create(Comm &comm,
                                                  double timeoutSeconds = 0);
  NcclComm *get(Axis a) const;

private:
  std::unique_ptr<NcclComm> dp_, tp_, pp_, ep_, edp_;
};

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_NCCL_H
