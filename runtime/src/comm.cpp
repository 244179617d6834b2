//===- comm.cpp - MPI communication (see merak_rt/comm.h) -----------------===//
//
// The only file of the runtime that includes <mpi.h>.
//
// Requests: a table of slots, each holding the MPI requests of one
// operation (several when a buffer is split into INT_MAX-sized chunks) and
// the axis it runs on (for messages). Request::id indexes the table.
//
// Waiting: MPI_Test in a loop (that also drives Open MPI's progress engine
// for the non-blocking collectives), spinning briefly, then yielding, then
// sleeping 50 us between polls, so an oversubscribed node is not starved.
// Past the timeout the job is aborted (MPI_Abort on MPI_COMM_WORLD); see the
// failure notes in comm.h for what mpirun 4.1.4 does on its own when a rank
// dies (it ends the job within seconds and names the rank), which is why the
// timeout is only the backstop for a rank that is alive but never joins.
//
//===----------------------------------------------------------------------===//

#include "merak_rt/comm.h"

#include "heartbeat.h"
#include "ops_util.h"

// Only MPI's C API (linked as MPI::MPI_C / libmpi): no C++ bindings, which
// would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <thread>

namespace merak::rt {

namespace {

MPI_Datatype mpiType(CommType t) {
  switch (t) {
  case CommType::F32:
    return MPI_FLOAT;
  case CommType::F64:
    return MPI_DOUBLE;
  case CommType::I64:
    return MPI_INT64_T;
  case CommType::BF16:
    return MPI_UINT16_T; // combined by bf16Op's user-defined operations
  }
  return MPI_DATATYPE_NULL;
}

template <bool Max>
void bf16Combine(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = cpu::detail::bf16ToFloat(a[i]), y = cpu::detail::bf16ToFloat(b[i]);
    b[i] = cpu::detail::floatToBf16(Max ? (x > y || x != x ? x : y) : x + y);
  }
}

/// The MPI operation of a sum (max) over t: MPI_SUM (MPI_MAX) but for
/// bf16, whose commutative user-defined operations are created on first
/// use (after MPI_Init) and live until MPI_Finalize frees them.
MPI_Op reduceOp(CommType t, bool max) {
  if (t != CommType::BF16)
    return max ? MPI_MAX : MPI_SUM;
  static MPI_Op sum = MPI_OP_NULL, mx = MPI_OP_NULL;
  MPI_Op &op = max ? mx : sum;
  if (op == MPI_OP_NULL)
    MPI_Op_create(max ? &bf16Combine<true> : &bf16Combine<false>, /*commute=*/1, &op);
  return op;
}

std::string mpiErrorString(int code) {
  char buf[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  buf[std::min(len, MPI_MAX_ERROR_STRING)] = '\0';
  return buf;
}

/// Set when this process's Comm::init called MPI_Init_thread; cleared by
/// the destructor's MPI_Finalize.
bool gOwnsMpi = false;

/// Most elements one MPI call moves: INT_MAX (MPI counts are int). The
/// environment variable MERAK_COMM_TEST_CHUNK_ELEMS lowers it, so the tests
/// exercise the chunked paths without 8 GiB buffers.
int64_t chunkLimit() {
  int64_t limit = INT_MAX;
  if (const char *s = std::getenv("MERAK_COMM_TEST_CHUNK_ELEMS")) {
    char *end = nullptr;
    long long v = std::strtoll(s, &end, 10);
    if (end != s && *end == '\0' && v > 0 && v < limit)
      limit = v;
  }
  return limit;
}

} // namespace

struct Comm::Impl {
  MeshShape mesh;
  MeshCoord coord;
  int rank = 0, size = 1;
  int localRank = 0, localSize = 1; // among the ranks sharing this node
  int nodeLeader = 0; // the world rank of this node's local rank 0
  // Two-level exchanges: per axis its node groups and the communicators of
  // this rank's node (within) and of its local index (across).
  struct Levels {
    Comm::NodeGroups groups;
    bool uniform = false;
    MPI_Comm within = MPI_COMM_NULL, across = MPI_COMM_NULL;
  };
  std::map<Axis, Levels> levels;
  MPI_Comm world = MPI_COMM_NULL, pp = MPI_COMM_NULL, dp = MPI_COMM_NULL,
           tp = MPI_COMM_NULL, ep = MPI_COMM_NULL, edp = MPI_COMM_NULL;
  double timeout = 60.0;
  int64_t chunk = INT_MAX;
  // Progress stamps shared by this node's ranks (heartbeat.h).
  MPI_Win heartbeatWin = MPI_WIN_NULL;
  std::unique_ptr<Heartbeat> heartbeat;

  struct Slot {
    std::vector<MPI_Request> reqs;
    Axis axis = Axis::World;
    bool used = false;
    std::string error; // a failed post: reported by the wait
    /// MPI_Ialltoallv's count and displacement arrays, which must live
    /// until the exchange completes.
    std::vector<int> counts;
  };
  std::vector<Slot> slots;
  std::vector<int> freeSlots;

  MPI_Comm comm(Axis a) const {
    switch (a) {
    case Axis::World:
      return world;
    case Axis::PP:
      return pp;
    case Axis::DP:
      return dp;
    case Axis::TP:
      return tp;
    case Axis::EP:
      return ep;
    case Axis::EDP:
      return edp;
    }
    return world;
  }

  int newSlot(Axis a) {
    int id;
    if (!freeSlots.empty()) {
      id = freeSlots.back();
      freeSlots.pop_back();
    } else {
      id = static_cast<int>(slots.size());
      slots.emplace_back();
    }
    Slot &s = slots[id];
    s.reqs.clear();
    s.axis = a;
    s.used = true;
    s.error.clear();
    return id;
  }

  /// Records the request of one MPI call (or its failure) in slot id.
  void add(int id, int rc, MPI_Request q, const char *call) {
    Slot &s = slots[id];
    if (rc != MPI_SUCCESS) {
      if (s.error.empty())
        s.error = std::string(call) + " failed: " + mpiErrorString(rc);
      return;
    }
    s.reqs.push_back(q);
  }

  void release(int id) {
    Slot &s = slots[id];
    s.used = false;
    s.reqs.clear();
    s.error.clear();
    freeSlots.push_back(id);
  }

  [[noreturn]] void abortJob(const std::string &msg, int code) {
    std::fprintf(stderr, "train: error: rank %d: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; just in case
  }

  void checkCount(int64_t count, const char *op) {
    if (count < 0)
      abortJob(std::string("internal error: ") + op + " with negative count " +
                   std::to_string(count),
               1);
  }
  void checkPeer(Axis a, int peer, const char *op) {
    int n = 0;
    MPI_Comm_size(comm(a), &n);
    if (peer < 0 || peer >= n)
      abortJob(std::string("internal error: ") + op + " with group rank " +
                   std::to_string(peer) + " on the " + axisName(a) +
                   " group of " + std::to_string(n) + " ranks",
               1);
  }

  /// Slot ids to wait for, without allocating (a wait is on the hot path
  /// of started collectives and pipeline messages).
  struct SlotIds {
    const int *first;
    size_t count;
    const int *begin() const { return first; }
    const int *end() const { return first + count; }
  };

  /// Polls the requests of slots ids until all complete. On success or
  /// error the slots are released.
  Status waitSlots(SlotIds ids, const char *what) {
    struct Waiting { // the heartbeat shows this rank waiting until it returns
      Heartbeat *h;
      explicit Waiting(Heartbeat *h) : h(h) {
        if (h)
          h->enterWait();
      }
      ~Waiting() {
        if (h)
          h->leaveWait();
      }
    } waiting(heartbeat.get());
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    std::string error;
    Axis errorAxis = Axis::World;
    for (int id : ids)
      if (!slots[id].error.empty() && error.empty()) {
        error = slots[id].error;
        errorAxis = slots[id].axis;
      }
    long polls = 0;
    while (error.empty()) {
      bool done = true;
      Axis pending = Axis::World;
      for (int id : ids) {
        Slot &s = slots[id];
        for (MPI_Request &q : s.reqs) {
          if (q == MPI_REQUEST_NULL)
            continue;
          int flag = 0;
          MPI_Status st;
          int rc = MPI_Test(&q, &flag, &st);
          if (rc != MPI_SUCCESS) {
            error = mpiErrorString(rc);
            errorAxis = s.axis;
            break;
          }
          if (!flag) {
            done = false;
            pending = s.axis;
            break;
          }
        }
        if (!done || !error.empty())
          break;
      }
      if (done || !error.empty())
        break;
      ++polls;
      if (polls < 64)
        continue; // spin: most waits end within microseconds
      double elapsed =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (elapsed > timeout) {
        char t[32];
        std::snprintf(t, sizeof t, "%g", timeout);
        std::string cause =
            heartbeat ? heartbeat->diagnose() : std::string("a peer rank may have died");
        if (heartbeat)
          heartbeat->markAborting();
        abortJob(std::string(what) + " on the " + axisName(pending) +
                     " group did not complete within " + t + " s; " + cause,
                 1);
      }
      if (heartbeat)
        heartbeat->poll();
      if (elapsed < 0.002) {
        sched_yield();
      } else {
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, nullptr);
      }
    }
    if (!error.empty()) {
      // Leave the other requests as they are: the job is ending.
      for (int id : ids)
        release(id);
      return Status::error("rank " + std::to_string(rank) + ": " + what +
                           " on the " + axisName(errorAxis) +
                           " group failed: " + error);
    }
    for (int id : ids)
      release(id);
    return Status::success();
  }
};

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Comm::~Comm() {
  if (!impl_)
    return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    impl_->heartbeat.reset();
    if (impl_->heartbeatWin != MPI_WIN_NULL)
      MPI_Win_free(&impl_->heartbeatWin);
    for (auto &[axis, l] : impl_->levels)
      for (MPI_Comm *c : {&l.within, &l.across})
        if (*c != MPI_COMM_NULL)
          MPI_Comm_free(c);
    for (MPI_Comm *c :
         {&impl_->pp, &impl_->dp, &impl_->tp, &impl_->ep, &impl_->edp, &impl_->world})
      if (*c != MPI_COMM_NULL)
        MPI_Comm_free(c);
    if (gOwnsMpi)
      MPI_Finalize();
  }
  gOwnsMpi = false;
}

namespace {
/// Why `mesh` cannot run on a world of `size` processes; empty when it can.
std::string meshError(const MeshShape &mesh, int size) {
  if (mesh.pp < 1 || mesh.dp < 1 || mesh.tp < 1)
    return "invalid mesh dp=" + std::to_string(mesh.dp) + " x tp=" + std::to_string(mesh.tp) +
           " x pp=" + std::to_string(mesh.pp) + ": every extent must be >= 1";
  if (mesh.ep < 1 || mesh.dp % mesh.ep != 0)
    return "invalid mesh: ep=" + std::to_string(mesh.ep) + " must divide dp=" +
           std::to_string(mesh.dp);
  if (size != mesh.size())
    return "launched with " + std::to_string(size) +
           " processes, but this program was compiled for dp=" + std::to_string(mesh.dp) +
           " x tp=" + std::to_string(mesh.tp) + " x pp=" + std::to_string(mesh.pp) + " = " +
           std::to_string(mesh.size()) + " processes: run `mpirun -np " +
           std::to_string(mesh.size()) + " ...`";
  return "";
}
} // namespace

Result<std::unique_ptr<Comm>> Comm::init(int *argc, char ***argv,
                                         MeshShape mesh) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return Result<std::unique_ptr<Comm>>::error(
        "MPI was already finalized (Comm::init can be called once per "
        "process)");
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS)
      return Result<std::unique_ptr<Comm>>::error("MPI_Init_thread failed: " +
                                                  mpiErrorString(rc));
    owns = true;
    // MPI_THREAD_SINGLE would do as well in practice: only the main thread
    // ever calls MPI.
  }

  auto impl = std::make_unique<Impl>();
  MPI_Comm_rank(MPI_COMM_WORLD, &impl->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &impl->size);
  impl->chunk = chunkLimit();

  // Checks every rank must agree on before building communicators.
  std::string error = meshError(mesh, impl->size);
  if (const char *s = std::getenv("MERAK_COMM_TIMEOUT"); s && *s) {
    char *end = nullptr;
    double v = std::strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0) || v > 1e9) {
      if (error.empty())
        error = std::string("MERAK_COMM_TIMEOUT='") + s +
                "': expected a positive number of seconds";
    } else {
      impl->timeout = v;
    }
  }
  // The lowest rank with an error reports it (world rank 0 for a size
  // mismatch, which every rank sees); every rank learns whether one did.
  int mine = error.empty() ? INT_MAX : impl->rank, reporter = INT_MAX;
  MPI_Allreduce(&mine, &reporter, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (reporter != INT_MAX) {
    if (!owns) // someone else's MPI: leave it running, every rank reports
      return Result<std::unique_ptr<Comm>>::error(
          error.empty() ? "rank " + std::to_string(reporter) +
                              " failed to set up communication"
                        : error);
    // MPI_Finalize is collective (all ranks reach it here), so the reporter
    // is finalised cleanly. It returns the error; its caller prints it and
    // exits 1, and mpirun then kills the others, which wait here so that
    // they neither print a copy of the message nor end the job first.
    MPI_Finalize();
    if (impl->rank == reporter)
      return Result<std::unique_ptr<Comm>>::error(error);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::_Exit(1);
  }
  gOwnsMpi = owns;

  const MeshShape &m = mesh;
  impl->mesh = m;
  impl->coord = meshCoordOf(m, impl->rank);
  const MeshCoord &c = impl->coord;
  auto fail = [&](const char *call, int rc) {
    return Result<std::unique_ptr<Comm>>::error(
        "rank " + std::to_string(impl->rank) + ": " + call +
        " failed: " + mpiErrorString(rc));
  };
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->world);
  if (rc != MPI_SUCCESS)
    return fail("MPI_Comm_dup", rc);
  // Errors come back as codes (reported by wait) instead of aborting inside
  // MPI without naming the operation.
  MPI_Comm_set_errhandler(impl->world, MPI_ERRORS_RETURN);
  struct Split {
    MPI_Comm *out;
    int color, key;
    const char *name;
  } splits[] = {
      {&impl->tp, c.pp * m.dp + c.dp, c.tp, "tp"},
      {&impl->dp, c.pp * m.tp + c.tp, c.dp, "dp"},
      {&impl->pp, c.dp * m.tp + c.tp, c.pp, "pp"},
      {&impl->ep, (c.pp * m.tp + c.tp) * m.dp + c.edp(m), c.ep(m), "ep"},
      {&impl->edp, (c.pp * m.tp + c.tp) * m.dp + c.ep(m), c.edp(m), "edp"},
  };
  for (const Split &s : splits) {
    rc = MPI_Comm_split(impl->world, s.color, s.key, s.out);
    if (rc != MPI_SUCCESS)
      return fail("MPI_Comm_split", rc);
    MPI_Comm_set_errhandler(*s.out, MPI_ERRORS_RETURN);
  }
  {
    // The ranks on this node (GPU selection: local rank modulo devices).
    MPI_Comm node = MPI_COMM_NULL;
    rc = MPI_Comm_split_type(impl->world, MPI_COMM_TYPE_SHARED, impl->rank,
                             MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
      return fail("MPI_Comm_split_type", rc);
    MPI_Comm_rank(node, &impl->localRank);
    MPI_Comm_size(node, &impl->localSize);
    impl->nodeLeader = impl->rank;
    MPI_Bcast(&impl->nodeLeader, 1, MPI_INT, 0, node);
    // One heartbeat slot per rank of the node, contiguous from local rank 0.
    void *mine = nullptr;
    rc = MPI_Win_allocate_shared(sizeof(Heartbeat::Slot), sizeof(Heartbeat::Slot),
                                 MPI_INFO_NULL, node, &mine, &impl->heartbeatWin);
    if (rc != MPI_SUCCESS)
      return fail("MPI_Win_allocate_shared", rc);
    MPI_Aint bytes = 0;
    int unit = 0;
    void *first = nullptr;
    rc = MPI_Win_shared_query(impl->heartbeatWin, 0, &bytes, &unit, &first);
    if (rc != MPI_SUCCESS)
      return fail("MPI_Win_shared_query", rc);
    auto *slots = static_cast<Heartbeat::Slot *>(first);
    new (slots + impl->localRank) Heartbeat::Slot();
    impl->heartbeat =
        std::make_unique<Heartbeat>(slots, impl->localSize, impl->localRank, impl->rank);
    MPI_Barrier(node); // every slot initialised before anyone reads one
    MPI_Comm_free(&node);
  }
  std::unique_ptr<Comm> comm(new Comm(std::move(impl)));
  // Sanity: the group ranks MPI assigned are the mesh coordinates.
  for (Axis a : {Axis::PP, Axis::DP, Axis::TP, Axis::EP, Axis::EDP}) {
    int r = -1, n = -1;
    MPI_Comm_rank(comm->impl_->comm(a), &r);
    MPI_Comm_size(comm->impl_->comm(a), &n);
    if (r != comm->groupRank(a) || n != comm->groupSize(a))
      comm->abort(std::string("internal error: the ") + axisName(a) +
                      " communicator has rank " + std::to_string(r) + " of " +
                      std::to_string(n) + ", expected " +
                      std::to_string(comm->groupRank(a)) + " of " +
                      std::to_string(comm->groupSize(a)),
                  1);
  }
  return comm;
}

int Comm::rank() const { return impl_->rank; }
int Comm::worldSize() const { return impl_->size; }
int Comm::localRank() const { return impl_->localRank; }
int Comm::localSize() const { return impl_->localSize; }
const MeshShape &Comm::mesh() const { return impl_->mesh; }
MeshCoord Comm::coord() const { return impl_->coord; }
double Comm::timeoutSeconds() const { return impl_->timeout; }

int Comm::groupSize(Axis a) const {
  switch (a) {
  case Axis::World:
    return impl_->size;
  case Axis::PP:
    return impl_->mesh.pp;
  case Axis::DP:
    return impl_->mesh.dp;
  case Axis::TP:
    return impl_->mesh.tp;
  case Axis::EP:
    return impl_->mesh.ep;
  case Axis::EDP:
    return impl_->mesh.dp / impl_->mesh.ep;
  }
  return 1;
}

int Comm::groupRank(Axis a) const {
  switch (a) {
  case Axis::World:
    return impl_->rank;
  case Axis::PP:
    return impl_->coord.pp;
  case Axis::DP:
    return impl_->coord.dp;
  case Axis::TP:
    return impl_->coord.tp;
  case Axis::EP:
    return impl_->coord.ep(impl_->mesh);
  case Axis::EDP:
    return impl_->coord.edp(impl_->mesh);
  }
  return 0;
}

/// In-place all-reduce with `op`, in chunks of at most impl.chunk elements
/// under one request.
static Comm::Request allReduceWith(Comm::Impl &impl, Axis a, void *buf, int64_t count,
                                   CommType t, MPI_Op op) {
  impl.checkCount(count, "all-reduce");
  if (count == 0)
    return Comm::Request{};
  const int64_t es = commTypeSize(t);
  int id = impl.newSlot(a);
  for (int64_t o = 0; o < count; o += impl.chunk) {
    int k = static_cast<int>(std::min(impl.chunk, count - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, static_cast<char *>(buf) + o * es, k,
                            mpiType(t), op, impl.comm(a), &q);
    impl.add(id, rc, q, "MPI_Iallreduce");
  }
  return Comm::Request{id};
}

Comm::Request Comm::allReduceSum(Axis a, void *buf, int64_t count,
                                 CommType t) {
  return allReduceWith(*impl_, a, buf, count, t, reduceOp(t, false));
}

Comm::Request Comm::allReduceMax(Axis a, void *buf, int64_t count,
                                 CommType t) {
  return allReduceWith(*impl_, a, buf, count, t, reduceOp(t, true));
}

Comm::Request Comm::allGather(Axis a, const void *send, void *recv,
                              int64_t countPerRank, CommType t) {
  impl_->checkCount(countPerRank, "all-gather");
  if (countPerRank == 0)
    return Request{};
  const int64_t es = commTypeSize(t);
  const MPI_Datatype dt = mpiType(t);
  char *r = static_cast<char *>(recv);
  const char *s = static_cast<const char *>(send);
  const bool inPlace = s == r + groupRank(a) * countPerRank * es;
  int id = impl_->newSlot(a);
  if (countPerRank <= impl_->chunk) {
    int k = static_cast<int>(countPerRank);
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(inPlace ? MPI_IN_PLACE : s, k, dt, r, k, dt,
                            impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Iallgather");
    return Request{id};
  }
  // Chunk [o, o+k) of every rank's block: received through a datatype of k
  // elements whose extent is a whole block, so the group ranks' pieces land
  // countPerRank elements apart. (In place, MPI takes this rank's piece from
  // recv + o + groupRank * countPerRank: exactly its slot.)
  for (int64_t o = 0; o < countPerRank; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, countPerRank - o));
    MPI_Datatype block = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
    MPI_Type_contiguous(k, dt, &block);
    MPI_Type_create_resized(block, 0, static_cast<MPI_Aint>(countPerRank * es),
                            &strided);
    MPI_Type_commit(&strided);
    MPI_Type_free(&block);
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(inPlace ? MPI_IN_PLACE : s + o * es, k, dt,
                            r + o * es, 1, strided, impl_->comm(a), &q);
    // Freeing a datatype does not affect operations already using it.
    MPI_Type_free(&strided);
    impl_->add(id, rc, q, "MPI_Iallgather");
  }
  return Request{id};
}

Comm::Request Comm::reduceScatterSum(Axis a, const void *send, void *recv,
                                     int64_t countPerRank, CommType t) {
  impl_->checkCount(countPerRank, "reduce-scatter");
  if (countPerRank == 0)
    return Request{};
  const int64_t es = commTypeSize(t);
  const MPI_Datatype dt = mpiType(t);
  const int n = groupSize(a), me = groupRank(a);
  const char *s = static_cast<const char *>(send);
  char *r = static_cast<char *>(recv);
  int id = impl_->newSlot(a);
  if (countPerRank * n <= impl_->chunk) {
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter_block(s, r, static_cast<int>(countPerRank),
                                       dt, reduceOp(t, false), impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Ireduce_scatter_block");
    return Request{id};
  }
  // Huge buffers: one reduction per (chunk, destination), each to the group
  // rank that owns the block (no extra memory; still a fixed schedule).
  for (int64_t o = 0; o < countPerRank; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, countPerRank - o));
    for (int root = 0; root < n; ++root) {
      MPI_Request q = MPI_REQUEST_NULL;
      int rc = MPI_Ireduce(s + (root * countPerRank + o) * es,
                           root == me ? r + o * es : nullptr, k, dt, reduceOp(t, false),
                           root, impl_->comm(a), &q);
      impl_->add(id, rc, q, "MPI_Ireduce");
    }
  }
  return Request{id};
}

/// MPI_Ialltoallv on `comm` (n ranks), reported as an exchange over `a`.
static Comm::Request allToAllVOn(Comm::Impl &impl, Axis a, MPI_Comm comm, int n,
                                 const void *send, const int64_t *sendCounts, void *recv,
                                 const int64_t *recvCounts, CommType t) {
  int id = impl.newSlot(a);
  std::vector<int> &arrays = impl.slots[id].counts;
  arrays.assign(4 * static_cast<size_t>(n), 0);
  int *sc = arrays.data(), *sd = sc + n, *rc = sd + n, *rd = rc + n;
  int64_t sendAt = 0, recvAt = 0;
  for (int g = 0; g < n; ++g) {
    impl.checkCount(sendCounts[g], "all-to-all");
    impl.checkCount(recvCounts[g], "all-to-all");
    if (sendAt + sendCounts[g] > INT_MAX || recvAt + recvCounts[g] > INT_MAX)
      impl.abortJob(std::string("all-to-all over ") + axisName(a) +
                          ": more than 2^31 - 1 elements in one exchange (use more ranks "
                          "or smaller micro-batches)",
                      1);
    sc[g] = static_cast<int>(sendCounts[g]);
    sd[g] = static_cast<int>(sendAt);
    rc[g] = static_cast<int>(recvCounts[g]);
    rd[g] = static_cast<int>(recvAt);
    sendAt += sendCounts[g];
    recvAt += recvCounts[g];
  }
  MPI_Request q = MPI_REQUEST_NULL;
  const MPI_Datatype dt = mpiType(t);
  int code = MPI_Ialltoallv(send, sc, sd, dt, recv, rc, rd, dt, comm, &q);
  impl.add(id, code, q, "MPI_Ialltoallv");
  return Comm::Request{id};
}

Comm::Request Comm::allToAllV(Axis a, const void *send, const int64_t *sendCounts, void *recv,
                              const int64_t *recvCounts, CommType t) {
  return allToAllVOn(*impl_, a, impl_->comm(a), groupSize(a), send, sendCounts, recv,
                     recvCounts, t);
}


const Comm::NodeGroups *Comm::nodeGroups(Axis a) {
  auto found = impl_->levels.find(a);
  if (found != impl_->levels.end())
    return found->second.uniform ? &found->second.groups : nullptr;
  Impl::Levels &l = impl_->levels[a];
  int node = impl_->nodeLeader;
  if (const char *s = std::getenv("MERAK_RANKS_PER_NODE"); s && std::atoi(s) > 0)
    node = impl_->rank / std::atoi(s);
  const int n = groupSize(a), me = groupRank(a);
  std::vector<int> ids(n);
  MPI_Allgather(&node, 1, MPI_INT, ids.data(), 1, MPI_INT, impl_->comm(a));
  NodeGroups &g = l.groups;
  std::map<int, int> index; // node id -> node number, by first group rank
  g.nodeOf.resize(n);
  g.localOf.resize(n);
  for (int r = 0; r < n; ++r) {
    auto [it, added] = index.try_emplace(ids[r], static_cast<int>(index.size()));
    if (added)
      g.members.emplace_back();
    g.nodeOf[r] = it->second;
    g.localOf[r] = static_cast<int>(g.members[it->second].size());
    g.members[it->second].push_back(r);
  }
  g.nodes = static_cast<int>(g.members.size());
  g.perNode = static_cast<int>(g.members[0].size());
  l.uniform = std::all_of(g.members.begin(), g.members.end(),
                          [&](const std::vector<int> &m) { return (int)m.size() == g.perNode; });
  // Every rank knows every node's size, so all agree on `uniform`.
  if (l.uniform) {
    MPI_Comm_split(impl_->comm(a), g.nodeOf[me], me, &l.within);
    MPI_Comm_split(impl_->comm(a), g.localOf[me], g.nodeOf[me], &l.across);
  }
  return l.uniform ? &g : nullptr;
}

Comm::Request Comm::allToAllVLevel(Axis a, bool acrossNodes, const void *send,
                                   const int64_t *sendCounts, void *recv,
                                   const int64_t *recvCounts, CommType t) {
  const NodeGroups *g = nodeGroups(a);
  if (!g)
    impl_->abortJob(std::string("internal error: a two-level all-to-all over ") + axisName(a) +
                        " whose nodes hold different numbers of its ranks",
                    1);
  Impl::Levels &l = impl_->levels[a];
  return allToAllVOn(*impl_, a, acrossNodes ? l.across : l.within,
                     acrossNodes ? g->nodes : g->perNode, send, sendCounts, recv, recvCounts, t);
}

Comm::Request Comm::broadcast(Axis a, void *buf, int64_t count, CommType t,
                              int rootGroupRank) {
  impl_->checkCount(count, "broadcast");
  impl_->checkPeer(a, rootGroupRank, "broadcast");
  if (count == 0)
    return Request{};
  const int64_t es = commTypeSize(t);
  int id = impl_->newSlot(a);
  for (int64_t o = 0; o < count; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, count - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(static_cast<char *>(buf) + o * es, k, mpiType(t),
                        rootGroupRank, impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Ibcast");
  }
  return Request{id};
}

Comm::Request Comm::send(Axis a, int peerGroupRank, const void *buf,
                         int64_t bytes, int tag) {
  impl_->checkCount(bytes, "send");
  impl_->checkPeer(a, peerGroupRank, "send");
  if (tag < 0 || tag > 32767)
    impl_->abortJob("internal error: send with tag " + std::to_string(tag) +
                        " outside [0, 32767]",
                    1);
  if (bytes == 0)
    return Request{};
  int id = impl_->newSlot(a);
  // Chunks of one message pair up in order: MPI does not overtake messages
  // between the same ranks with the same tag and communicator.
  for (int64_t o = 0; o < bytes; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, bytes - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Isend(static_cast<const char *>(buf) + o, k, MPI_BYTE,
                       peerGroupRank, tag, impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Isend");
  }
  return Request{id};
}

Comm::Request Comm::recv(Axis a, int peerGroupRank, void *buf, int64_t bytes,
                         int tag) {
  impl_->checkCount(bytes, "recv");
  impl_->checkPeer(a, peerGroupRank, "recv");
  if (tag < 0 || tag > 32767)
    impl_->abortJob("internal error: recv with tag " + std::to_string(tag) +
                        " outside [0, 32767]",
                    1);
  if (bytes == 0)
    return Request{};
  int id = impl_->newSlot(a);
  for (int64_t o = 0; o < bytes; o += impl_->chunk) {
    int k = static_cast<int>(std::min(impl_->chunk, bytes - o));
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Irecv(static_cast<char *>(buf) + o, k, MPI_BYTE, peerGroupRank,
                       tag, impl_->comm(a), &q);
    impl_->add(id, rc, q, "MPI_Irecv");
  }
  return Request{id};
}

Status Comm::wait(Request &r, const char *what) {
  if (r.id < 0)
    return Status::success();
  if (r.id >= static_cast<int>(impl_->slots.size()) ||
      !impl_->slots[r.id].used)
    impl_->abortJob(std::string("internal error: wait for ") + what +
                        " on a request that is not pending",
                    1);
  int id = r.id;
  r.id = -1;
  return impl_->waitSlots({&id, 1}, what);
}

bool Comm::test(Request &r) {
  if (r.id < 0)
    return true;
  if (r.id >= static_cast<int>(impl_->slots.size()) || !impl_->slots[r.id].used)
    impl_->abortJob("internal error: test of a request that is not pending", 1);
  Impl::Slot &s = impl_->slots[r.id];
  if (!s.error.empty())
    return false; // the wait reports it
  for (MPI_Request &q : s.reqs) {
    if (q == MPI_REQUEST_NULL)
      continue;
    int flag = 0;
    MPI_Status st;
    if (MPI_Test(&q, &flag, &st) != MPI_SUCCESS || !flag)
      return false; // an error: the wait's own MPI_Test reports it
  }
  return true;
}

Status Comm::waitAll(std::vector<Request> &rs, const char *what) {
  std::vector<int> ids;
  ids.reserve(rs.size());
  for (Request &r : rs) {
    if (r.id < 0)
      continue;
    if (r.id >= static_cast<int>(impl_->slots.size()) ||
        !impl_->slots[r.id].used ||
        std::find(ids.begin(), ids.end(), r.id) != ids.end())
      impl_->abortJob(std::string("internal error: wait for ") + what +
                          " on a request that is not pending",
                      1);
    ids.push_back(r.id);
    r.id = -1;
  }
  if (ids.empty())
    return Status::success();
  return impl_->waitSlots({ids.data(), ids.size()}, what);
}

void Comm::barrier() {
  int id = impl_->newSlot(Axis::World);
  MPI_Request q = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(impl_->world, &q);
  impl_->add(id, rc, q, "MPI_Ibarrier");
  Status s = impl_->waitSlots({&id, 1}, "barrier");
  if (!s.ok()) { // the message already names the rank
    std::fprintf(stderr, "train: error: %s\n", s.message().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }
}

void Comm::abort(const std::string &msg, int code) {
  impl_->abortJob(msg, code);
}

} // namespace merak::rt
