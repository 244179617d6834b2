//===- comm.cpp - MPI communication (see merak_rt/comm.h) -----------------===//
//
// With comm_exchange.cpp (the collectives and messages) and comm_impl.h
// (Comm::Impl), the only files of the runtime that include <mpi.h>.
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

#include "comm_impl.h"

#include "ops_util.h"

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

template <bool Max>
void bf16Combine(void *in, void *inout, int *len, MPI_Datatype *);

} // namespace

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

namespace {
template <bool Max>
void bf16Combine(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = cpu::detail::bf16ToFloat(a[i]), y = cpu::detail::bf16ToFloat(b[i]);
    b[i] = cpu::detail::floatToBf16(Max ? (x > y || x != x ? x : y) : x + y);
  }
}
} // namespace

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

namespace {

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
