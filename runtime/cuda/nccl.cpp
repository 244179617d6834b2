//===- nccl.cpp - NCCL communicators per mesh axis --------------------------===//
#include "merak_rt/cuda/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace merak::rt::cuda {

static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "ncclUniqueId size");

namespace {

ncclDataType_t ncclType(DType t) {
  return t == DType::F32 ? ncclFloat32 : ncclBfloat16;
}
ncclRedOp_t ncclOp(ReduceOp op) {
  return op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Mean ? ncclAvg : ncclMax;
}
const char *typeName(DType t) { return t == DType::F32 ? "fp32" : "bf16"; }
const char *opName(ReduceOp op) {
  return op == ReduceOp::Sum ? "sum" : op == ReduceOp::Mean ? "mean" : "max";
}

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
void pause() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

} // namespace

Result<NcclId> exchangeNcclId(BootstrapTransport &t, const std::string &name,
                              const NcclIdSource &source) {
  // [0, 8): status word (0 ok, 1 rank 0 failed); [8, 136): the id.
  unsigned char msg[8 + kNcclIdBytes] = {};
  std::string ownError;
  if (t.rank() == 0) {
    NcclId id{};
    Status s = source(id);
    if (s.ok()) {
      std::memcpy(msg + 8, id.data(), kNcclIdBytes);
    } else {
      msg[0] = 1;
      ownError = s.message();
    }
  }
  Status b = t.broadcast(msg, sizeof msg);
  if (!b.ok())
    return Result<NcclId>::error("bootstrap of the " + name +
                                 " NCCL communicator: " + b.message());
  if (msg[0] != 0) {
    std::string m = "rank 0 of the " + name +
                    " group could not create the NCCL unique id";
    if (!ownError.empty())
      m += ": " + ownError;
    return Result<NcclId>::error(m);
  }
  NcclId id;
  std::memcpy(id.data(), msg + 8, kNcclIdBytes);
  return id;
}

std::string ncclWhere(const std::string &what, int worldRank,
                      const std::string &axis, int groupRank, int groupSize) {
  return "NCCL " + what + " on rank " + std::to_string(worldRank) + " (" +
         axis + " group rank " + std::to_string(groupRank) + " of " +
         std::to_string(groupSize) + ")";
}

std::string ncclErrorString(int code) {
  return std::string(ncclGetErrorString(static_cast<ncclResult_t>(code))) +
         " (code " + std::to_string(code) + ")";
}

double ncclTimeoutSeconds() {
  if (const char *e = std::getenv("MERAK_COMM_TIMEOUT")) {
    char *end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && v > 0)
      return v;
  }
  return 60.0;
}

// --- NcclComm -----------------------------------------------------------------

Result<std::unique_ptr<NcclComm>>
NcclComm::create(BootstrapTransport &t, const std::string &axis, int worldRank,
                 double timeoutSeconds) {
  std::unique_ptr<NcclComm> c(new NcclComm());
  c->axis_ = axis;
  c->rank_ = t.rank();
  c->size_ = t.size();
  c->worldRank_ = worldRank;
  c->timeout_ = timeoutSeconds > 0 ? timeoutSeconds : ncclTimeoutSeconds();
  const std::string where =
      ncclWhere("communicator setup", worldRank, axis, c->rank_, c->size_);
  // Checked before the bootstrap: every rank of a job sees the same
  // (missing) device, so none of them waits for the others.
  auto dc = deviceCount();
  if (!dc.ok())
    return Result<std::unique_ptr<NcclComm>>::error(dc.message());
  auto id = exchangeNcclId(t, axis, [](NcclId &out) {
    ncclUniqueId u;
    const ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess)
      return Status::error("ncclGetUniqueId: " + ncclErrorString(r));
    std::memcpy(out.data(), &u, kNcclIdBytes);
    return Status::success();
  });
  if (!id.ok())
    return Result<std::unique_ptr<NcclComm>>::error(where + ": " +
                                                    id.message());
  cudaStream_t s = nullptr;
  Status st = cudaCheck(int(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)),
                        "cudaStreamCreateWithFlags");
  if (!st.ok())
    return Result<std::unique_ptr<NcclComm>>::error(where + ": " +
                                                    st.message());
  c->stream_ = s;
  cudaEvent_t e1 = nullptr, e2 = nullptr;
  st = cudaCheck(int(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming)),
                 "cudaEventCreateWithFlags");
  if (st.ok())
    st = cudaCheck(int(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming)),
                   "cudaEventCreateWithFlags");
  c->ready_ = e1;
  c->done_ = e2;
  if (!st.ok())
    return Result<std::unique_ptr<NcclComm>>::error(where + ": " +
                                                    st.message());

  ncclUniqueId u;
  std::memcpy(&u, id->data(), kNcclIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r =
      ncclCommInitRankConfig(&comm, c->size_, u, c->rank_, &config);
  c->comm_ = comm;
  c->lastOp_ = "communicator setup";
  if (r != ncclSuccess && r != ncclInProgress)
    return Result<std::unique_ptr<NcclComm>>::error(
        c->fail("ncclCommInitRankConfig: " + ncclErrorString(r)).message());
  st = c->waitInit();
  if (!st.ok())
    return Result<std::unique_ptr<NcclComm>>::error(st.message());
  return c;
}

/// Polls the communicator until it leaves ncclInProgress.
Status NcclComm::waitInit() {
  const auto t0 = Clock::now();
  for (;;) {
    ncclResult_t a = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(
        static_cast<ncclComm_t>(comm_), &a);
    if (q != ncclSuccess)
      return fail("ncclCommGetAsyncError: " + ncclErrorString(q));
    if (a == ncclSuccess)
      return Status::success();
    if (a != ncclInProgress)
      return fail(ncclErrorString(a));
    if (secondsSince(t0) > timeout_)
      return fail("did not complete within " + std::to_string(int(timeout_)) +
                  " s (a peer rank may have died or not joined); "
                  "communicator aborted");
    pause();
  }
}

Status NcclComm::fail(const std::string &detail) {
  if (comm_ && !aborted_) {
    ncclCommAbort(static_cast<ncclComm_t>(comm_));
    comm_ = nullptr;
  }
  aborted_ = true;
  return Status::error(ncclWhere(lastOp_, worldRank_, axis_, rank_, size_) +
                       ": " + detail);
}

NcclComm::~NcclComm() {
  if (comm_) {
    ncclComm_t c = static_cast<ncclComm_t>(comm_);
    // Finalize flushes outstanding work (non-blocking: poll it like any
    // other operation); destroy after it, abort when it fails or hangs.
    const ncclResult_t f = aborted_ ? ncclInternalError : ncclCommFinalize(c);
    bool done = false;
    const auto t0 = Clock::now();
    while ((f == ncclSuccess || f == ncclInProgress) &&
           secondsSince(t0) < timeout_) {
      ncclResult_t a = ncclSuccess;
      if (ncclCommGetAsyncError(c, &a) != ncclSuccess)
        break;
      if (a == ncclSuccess) {
        done = true;
        break;
      }
      if (a != ncclInProgress)
        break;
      pause();
    }
    if (done)
      ncclCommDestroy(c);
    else
      ncclCommAbort(c);
  }
  if (ready_)
    cudaEventDestroy(static_cast<cudaEvent_t>(ready_));
  if (done_)
    cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  if (stream_)
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Status NcclComm::begin(const std::string &op, StreamHandle compute) {
  lastOp_ = op;
  if (aborted_ || !comm_)
    return Status::error(
        ncclWhere(op, worldRank_, axis_, rank_, size_) +
        ": the communicator was aborted after an earlier error");
  // Order after the compute stream's work so far (skipped inside a group:
  // groupStart already ordered it).
  if (groupDepth_ > 0)
    return Status::success();
  cudaStream_t cs = static_cast<cudaStream_t>(compute);
  cudaEvent_t ev = static_cast<cudaEvent_t>(ready_);
  Status s = cudaCheck(int(cudaEventRecord(ev, cs)), "cudaEventRecord");
  if (s.ok())
    s = cudaCheck(int(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_),
                                          ev, 0)),
                  "cudaStreamWaitEvent");
  if (!s.ok())
    return Status::error(ncclWhere(op, worldRank_, axis_, rank_, size_) +
                         ": " + s.message());
  return Status::success();
}

Status NcclComm::finish(int result) {
  ncclResult_t r = static_cast<ncclResult_t>(result);
  if (r == ncclInProgress) {
    // Non-blocking communicator: the call is being enqueued; wait for that
    // (not for the collective itself).
    const auto t0 = Clock::now();
    for (;;) {
      ncclResult_t a = ncclSuccess;
      if (ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &a) !=
          ncclSuccess)
        return fail("ncclCommGetAsyncError failed");
      if (a == ncclSuccess)
        break;
      if (a != ncclInProgress)
        return fail(ncclErrorString(a));
      if (secondsSince(t0) > timeout_)
        return fail("could not be enqueued within " +
                    std::to_string(int(timeout_)) +
                    " s; communicator aborted");
      pause();
    }
  } else if (r != ncclSuccess) {
    return fail(ncclErrorString(r));
  }
  if (groupDepth_ > 0)
    return Status::success();
  Status s = cudaCheck(int(cudaEventRecord(static_cast<cudaEvent_t>(done_),
                                           static_cast<cudaStream_t>(stream_))),
                       "cudaEventRecord");
  if (!s.ok())
    return Status::error(ncclWhere(lastOp_, worldRank_, axis_, rank_, size_) +
                         ": " + s.message());
  return Status::success();
}

static std::string describe(const char *name, DType t, int64_t count,
                            const char *op = nullptr) {
  std::string s = std::string(name) + " (";
  if (op)
    s += std::string(op) + ", ";
  return s + typeName(t) + ", " + std::to_string(count) + " elements)";
}

Status NcclComm::allReduce(void *buf, int64_t count, DType t, ReduceOp op,
                           StreamHandle compute) {
  Status s = begin(describe("all-reduce", t, count, opName(op)), compute);
  if (!s.ok())
    return s;
  return finish(ncclAllReduce(buf, buf, size_t(count), ncclType(t), ncclOp(op),
                              static_cast<ncclComm_t>(comm_),
                              static_cast<cudaStream_t>(stream_)));
}

Status NcclComm::reduceScatter(const void *send, void *recv, int64_t recvCount,
                               DType t, ReduceOp op, StreamHandle compute) {
  Status s =
      begin(describe("reduce-scatter", t, recvCount, opName(op)), compute);
  if (!s.ok())
    return s;
  return finish(ncclReduceScatter(send, recv, size_t(recvCount), ncclType(t),
                                  ncclOp(op), static_cast<ncclComm_t>(comm_),
                                  static_cast<cudaStream_t>(stream_)));
}

Status NcclComm::allGather(const void *send, void *recv, int64_t sendCount,
                           DType t, StreamHandle compute) {
  Status s = begin(describe("all-gather", t, sendCount), compute);
  if (!s.ok())
    return s;
  return finish(ncclAllGather(send, recv, size_t(sendCount), ncclType(t),
                              static_cast<ncclComm_t>(comm_),
                              static_cast<cudaStream_t>(stream_)));
}

Status NcclComm::allGatherBytes(const void *send, void *recv, int64_t bytes,
                                StreamHandle compute) {
  Status s = begin("all-gather (" + std::to_string(bytes) + " bytes)", compute);
  if (!s.ok())
    return s;
  return finish(ncclAllGather(send, recv, size_t(bytes), ncclUint8,
                              static_cast<ncclComm_t>(comm_),
                              static_cast<cudaStream_t>(stream_)));
}

Status NcclComm::allToAllV(const void *send, const int64_t *sendBytes, void *recv,
                           const int64_t *recvBytes, StreamHandle compute) {
  int64_t total = 0;
  for (int g = 0; g < size_; ++g)
    total += sendBytes[g];
  const std::string what = "all-to-all (" + std::to_string(total) + " bytes sent)";
  if (sendBytes[rank_] != recvBytes[rank_])
    return Status::error(ncclWhere(what, worldRank_, axis_, rank_, size_) +
                         ": this rank sends itself " + std::to_string(sendBytes[rank_]) +
                         " bytes but expects " + std::to_string(recvBytes[rank_]));
  if (Status s = groupStart(compute); !s.ok())
    return s;
  lastOp_ = what;
  const char *in = static_cast<const char *>(send);
  char *out = static_cast<char *>(recv);
  std::string error;
  auto posted = [&](int r, const char *call) {
    if (r != ncclSuccess && r != ncclInProgress && error.empty())
      error = std::string(call) + ": " + ncclErrorString(r);
  };
  for (int g = 0; g < size_ && error.empty(); ++g) {
    if (g == rank_ && sendBytes[g] > 0) {
      if (cudaError_t e = cudaMemcpyAsync(out, in, size_t(sendBytes[g]),
                                          cudaMemcpyDeviceToDevice,
                                          static_cast<cudaStream_t>(stream_));
          e != cudaSuccess)
        error = std::string("cudaMemcpyAsync (own block): ") + cudaGetErrorString(e);
    } else if (g != rank_) {
      if (sendBytes[g] > 0)
        posted(ncclSend(in, size_t(sendBytes[g]), ncclUint8, g, static_cast<ncclComm_t>(comm_),
                        static_cast<cudaStream_t>(stream_)),
               "ncclSend");
      if (recvBytes[g] > 0)
        posted(ncclRecv(out, size_t(recvBytes[g]), ncclUint8, g,
                        static_cast<ncclComm_t>(comm_), static_cast<cudaStream_t>(stream_)),
               "ncclRecv");
    }
    in += sendBytes[g];
    out += recvBytes[g];
  }
  Status end = groupEnd();
  lastOp_ = what; // a later asynchronous error names the all-to-all
  if (!error.empty())
    return fail(error);
  return end;
}

Status NcclComm::send(const void *buf, int64_t count, DType t, int peer,
                      StreamHandle compute) {
  Status s = begin(describe(("send to group rank " + std::to_string(peer))
                                .c_str(),
                            t, count),
                   compute);
  if (!s.ok())
    return s;
  return finish(ncclSend(buf, size_t(count), ncclType(t), peer,
                         static_cast<ncclComm_t>(comm_),
                         static_cast<cudaStream_t>(stream_)));
}

Status NcclComm::recv(void *buf, int64_t count, DType t, int peer,
                      StreamHandle compute) {
  Status s = begin(
      describe(("recv from group rank " + std::to_string(peer)).c_str(), t,
               count),
      compute);
  if (!s.ok())
    return s;
  return finish(ncclRecv(buf, size_t(count), ncclType(t), peer,
                         static_cast<ncclComm_t>(comm_),
                         static_cast<cudaStream_t>(stream_)));
}

Status NcclComm::groupStart(StreamHandle compute) {
  if (groupDepth_ > 0)
    return Status::error(ncclWhere("group", worldRank_, axis_, rank_, size_) +
                         ": groups do not nest");
  // The whole group is ordered after the compute stream's work so far.
  Status s = begin("group", compute);
  if (!s.ok())
    return s;
  const ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess)
    return fail("ncclGroupStart: " + ncclErrorString(r));
  ++groupDepth_;
  return Status::success();
}

Status NcclComm::groupEnd() {
  if (groupDepth_ == 0)
    return Status::error(ncclWhere("group", worldRank_, axis_, rank_, size_) +
                         ": groupEnd without groupStart");
  --groupDepth_;
  lastOp_ = "group of point-to-point operations";
  return finish(ncclGroupEnd());
}

Status NcclComm::joinInto(StreamHandle compute) {
  return cudaCheck(int(cudaStreamWaitEvent(static_cast<cudaStream_t>(compute),
                                           static_cast<cudaEvent_t>(done_),
                                           0)),
                   "cudaStreamWaitEvent (NCCL join)");
}

Status NcclComm::synchronize(const char *what) {
  if (aborted_ || !comm_)
    return Status::error(ncclWhere(lastOp_, worldRank_, axis_, rank_, size_) +
                         ": the communicator was aborted after an earlier "
                         "error");
  if (what && *what)
    lastOp_ += std::string(" of ") + what;
  const auto t0 = Clock::now();
  for (;;) {
    const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(done_));
    ncclResult_t a = ncclSuccess;
    const ncclResult_t g =
        ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &a);
    if (g != ncclSuccess)
      return fail("ncclCommGetAsyncError: " + ncclErrorString(g));
    if (a != ncclSuccess && a != ncclInProgress)
      return fail(ncclErrorString(a) + "; communicator aborted");
    if (q == cudaSuccess)
      return Status::success();
    if (q != cudaErrorNotReady)
      return fail(cudaErrorMessage(int(q), "cudaEventQuery"));
    if (secondsSince(t0) > timeout_)
      return fail("did not complete within " + std::to_string(int(timeout_)) +
                  " s (a peer rank may have died or not joined); "
                  "communicator aborted");
    pause();
  }
}

} // namespace merak::rt::cuda
