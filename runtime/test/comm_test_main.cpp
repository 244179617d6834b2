//===- comm_test_main.cpp - MPI programs for test/comm_test.py ------------===//
//
// Usage (under mpirun; see comm_test.py):
//   merak_comm_test layout PP DP TP   mesh coordinates, groups, collectives
//   merak_comm_test mismatch          compiled for dp=2 x tp=2 (4 ranks)
//   merak_comm_test dead              dp=3; rank 1 SIGKILLs itself mid-run
//   merak_comm_test hang              dp=3; rank 2 never joins an all-reduce
//   merak_comm_test repeat            dp=world; hash of all-reduced random
//                                     floats (printed by rank 0)
//   merak_comm_test zero              dp=world; ZeRO's bucketed collectives
//                                     (collectives.h: reduceScatterBucket,
//                                     allGatherBucket, localShard)
// Exit status 0 when every check passed; failures are printed per rank.
//
//===----------------------------------------------------------------------===//

#include "merak_rt/collectives.h"
#include "merak_rt/comm.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace merak::rt;

namespace {

int gFailures = 0;
int gRank = -1;

void fail(const std::string &msg) {
  if (gFailures < 20)
    std::fprintf(stderr, "comm_test: rank %d: FAIL: %s\n", gRank, msg.c_str());
  ++gFailures;
}

#define CHECK(cond, msg)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      fail(std::string(msg) + " (" #cond ")");                                 \
  } while (0)

void mustOk(const Status &s) {
  if (!s.ok()) {
    std::fprintf(stderr, "comm_test: %s\n", s.message().c_str());
    std::exit(1);
  }
}

/// The layout, computed independently of meshCoordOf: ranks numbered in
/// loop order pp, dp, tp (tp innermost).
std::vector<MeshCoord> enumerateMesh(const MeshShape &m) {
  std::vector<MeshCoord> out;
  for (int p = 0; p < m.pp; ++p)
    for (int d = 0; d < m.dp; ++d)
      for (int t = 0; t < m.tp; ++t)
        out.push_back(MeshCoord{p, d, t});
  return out;
}

int along(const MeshCoord &c, Axis a, int worldRank) {
  switch (a) {
  case Axis::PP:
    return c.pp;
  case Axis::DP:
    return c.dp;
  case Axis::TP:
    return c.tp;
  case Axis::World:
    return worldRank;
  case Axis::EP: // expert groups: checked by runExperts (the layouts here have ep = 1)
  case Axis::EDP:
    return -1;
  }
  return -1;
}

/// World ranks of my group along a, ordered by group rank.
std::vector<int> groupMembers(const std::vector<MeshCoord> &all, int me,
                              Axis a) {
  std::vector<int> members;
  const MeshCoord &c = all[me];
  int n = 0;
  for (int r = 0; r < (int)all.size(); ++r)
    n = std::max(n, along(all[r], a, r) + 1);
  members.assign(n, -1);
  for (int r = 0; r < (int)all.size(); ++r) {
    const MeshCoord &o = all[r];
    bool same = a == Axis::World ||
                ((a == Axis::PP || o.pp == c.pp) &&
                 (a == Axis::DP || o.dp == c.dp) &&
                 (a == Axis::TP || o.tp == c.tp));
    if (same)
      members[along(o, a, r)] = r;
  }
  return members;
}

// Values whose sums over up to 8 ranks are exact in every type.
template <typename T> T value(int rank, int64_t i);
template <> float value<float>(int rank, int64_t i) {
  return rank * 8.0f + (i % 16) * 0.5f + 1.0f;
}
template <> double value<double>(int rank, int64_t i) {
  return rank * 0.25 + i * 1024.0 + 0.125;
}
template <> int64_t value<int64_t>(int rank, int64_t i) {
  return (rank + 1) * 1000000000000LL + i * 7 - 3;
}

template <typename T> const char *typeName();
template <> const char *typeName<float>() { return "F32"; }
template <> const char *typeName<double>() { return "F64"; }
template <> const char *typeName<int64_t>() { return "I64"; }

template <typename T>
void checkCollectives(Comm &comm, const std::vector<MeshCoord> &all, Axis a,
                      CommType ct, int64_t count) {
  const int me = comm.rank();
  const std::vector<int> members = groupMembers(all, me, a);
  const int n = (int)members.size(), g = comm.groupRank(a);
  std::string where = std::string(typeName<T>()) + " " + axisName(a) +
                      " count " + std::to_string(count) + ": ";

  // Post several operations at once, then wait for all of them.
  std::vector<T> ar(count), agSend(count), ag(count * n), agInPlace(count * n),
      rsSend(count * n), rs(count), bc(count), bc0(count), ringOut(count),
      ringIn(count);
  for (int64_t i = 0; i < count; ++i) {
    ar[i] = value<T>(me, i);
    agSend[i] = value<T>(me, i);
    agInPlace[g * count + i] = value<T>(me, i);
    bc[i] = g == n - 1 ? value<T>(me, i) : T(-1);
    bc0[i] = g == 0 ? value<T>(me, i + 3) : T(-1);
    ringOut[i] = value<T>(me, i + 11);
  }
  for (int64_t i = 0; i < count * n; ++i)
    rsSend[i] = value<T>(me, i);
  const int64_t bytes = count * (int64_t)sizeof(T);
  std::vector<Comm::Request> rs1;
  rs1.push_back(comm.allReduceSum(a, ar.data(), count, ct));
  rs1.push_back(comm.allGather(a, agSend.data(), ag.data(), count, ct));
  rs1.push_back(comm.allGather(a, agInPlace.data() + g * count,
                               agInPlace.data(), count, ct));
  rs1.push_back(comm.reduceScatterSum(a, rsSend.data(), rs.data(), count, ct));
  rs1.push_back(comm.broadcast(a, bc.data(), count, ct, n - 1));
  rs1.push_back(comm.broadcast(a, bc0.data(), count, ct, 0));
  rs1.push_back(comm.recv(a, (g + n - 1) % n, ringIn.data(), bytes, 7));
  rs1.push_back(comm.send(a, (g + 1) % n, ringOut.data(), bytes, 7));
  mustOk(comm.waitAll(rs1, "collective checks"));
  for (const Comm::Request &r : rs1)
    CHECK(r.id == -1, where + "request not reset");

  for (int64_t i = 0; i < count; ++i) {
    T sum = 0, rsSum = 0;
    for (int m : members) {
      sum += value<T>(m, i);
      rsSum += value<T>(m, g * count + i);
    }
    CHECK(ar[i] == sum, where + "all-reduce element " + std::to_string(i));
    CHECK(rs[i] == rsSum,
          where + "reduce-scatter element " + std::to_string(i));
    CHECK(bc[i] == value<T>(members[n - 1], i),
          where + "broadcast from last, element " + std::to_string(i));
    CHECK(bc0[i] == value<T>(members[0], i + 3),
          where + "broadcast from 0, element " + std::to_string(i));
    CHECK(ringIn[i] == value<T>(members[(g + n - 1) % n], i + 11),
          where + "ring recv element " + std::to_string(i));
    for (int j = 0; j < n; ++j) {
      CHECK(ag[j * count + i] == value<T>(members[j], i),
            where + "all-gather block " + std::to_string(j) + " element " +
                std::to_string(i));
      CHECK(agInPlace[j * count + i] == value<T>(members[j], i),
            where + "in-place all-gather block " + std::to_string(j) +
                " element " + std::to_string(i));
    }
  }
}

uint16_t bf16Of(float f) { // exact for the values used below
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}
float floatOf(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// CommType::BF16: sums and maxima of small integers (every partial sum
/// exact in bf16, whatever order MPI combines in), a reduce-scatter, and in
/// a group of two the rounding of a sum to nearest even.
void checkBf16(Comm &comm, const std::vector<MeshCoord> &all, Axis a, int64_t count) {
  const int me = comm.rank();
  const std::vector<int> members = groupMembers(all, me, a);
  const int n = (int)members.size(), g = comm.groupRank(a);
  const std::string where = std::string("BF16 ") + axisName(a) + " count " +
                            std::to_string(count) + ": ";
  auto v = [](int rank, int64_t i) { return float((rank + 1) * (i % 4 + 1)); };
  std::vector<uint16_t> sum(count), mx(count), rsSend(count * n), rs(count);
  for (int64_t i = 0; i < count; ++i) {
    sum[i] = mx[i] = bf16Of(v(me, i));
  }
  for (int64_t i = 0; i < count * n; ++i)
    rsSend[i] = bf16Of(v(me, i));
  std::vector<Comm::Request> reqs;
  reqs.push_back(comm.allReduceSum(a, sum.data(), count, CommType::BF16));
  reqs.push_back(comm.allReduceMax(a, mx.data(), count, CommType::BF16));
  reqs.push_back(comm.reduceScatterSum(a, rsSend.data(), rs.data(), count, CommType::BF16));
  mustOk(comm.waitAll(reqs, "bf16 collectives"));
  for (int64_t i = 0; i < count; ++i) {
    float s = 0, m = 0, r = 0;
    for (int k : members) {
      s += v(k, i);
      m = std::max(m, v(k, i));
      r += v(k, g * count + i);
    }
    CHECK(floatOf(sum[i]) == s, where + "all-reduce sum element " + std::to_string(i));
    CHECK(floatOf(mx[i]) == m, where + "all-reduce max element " + std::to_string(i));
    CHECK(floatOf(rs[i]) == r, where + "reduce-scatter element " + std::to_string(i));
  }
  if (n != 2)
    return;
  // 1 + 2^-8 and (1 + 2^-7) + 2^-8 are ties: to even, 1 and 1 + 2^-6; and
  // 1 + 3 * 2^-9 (above the tie) rounds up to 1 + 2^-7.
  const float lead[3] = {1.0f, 1.0f + 0x1p-7f, 1.0f};
  const float tail[3] = {0x1p-8f, 0x1p-8f, 0x1.8p-8f};
  const float want[3] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f};
  uint16_t tie[3];
  for (int i = 0; i < 3; ++i)
    tie[i] = bf16Of(g == 0 ? lead[i] : tail[i]);
  Comm::Request r = comm.allReduceSum(a, tie, 3, CommType::BF16);
  mustOk(comm.wait(r, "bf16 rounding"));
  for (int i = 0; i < 3; ++i)
    CHECK(floatOf(tie[i]) == want[i], where + "rounding case " + std::to_string(i));
}

int runLayout(int argc, char **argv, MeshShape mesh) {
  auto comm = Comm::init(&argc, &argv, mesh);
  if (!comm.ok()) {
    std::fprintf(stderr, "train: error: %s\n", comm.message().c_str());
    return 1;
  }
  Comm &c = **comm;
  gRank = c.rank();
  const std::vector<MeshCoord> all = enumerateMesh(mesh);
  CHECK(c.worldSize() == mesh.size(), "world size");
  CHECK(c.mesh().pp == mesh.pp && c.mesh().dp == mesh.dp &&
            c.mesh().tp == mesh.tp,
        "mesh");
  const MeshCoord want = all[c.rank()], got = c.coord();
  CHECK(got.pp == want.pp && got.dp == want.dp && got.tp == want.tp, "coord");
  for (int r = 0; r < mesh.size(); ++r) {
    MeshCoord k = meshCoordOf(mesh, r);
    CHECK(k.pp == all[r].pp && k.dp == all[r].dp && k.tp == all[r].tp,
          "meshCoordOf(" + std::to_string(r) + ")");
    CHECK(meshRankOf(mesh, all[r]) == r, "meshRankOf(" + std::to_string(r) + ")");
  }
  for (Axis a : {Axis::World, Axis::PP, Axis::DP, Axis::TP}) {
    std::vector<int> members = groupMembers(all, c.rank(), a);
    CHECK(c.groupSize(a) == (int)members.size(),
          std::string("group size ") + axisName(a));
    CHECK(members[c.groupRank(a)] == c.rank(),
          std::string("group rank ") + axisName(a));
  }
  for (Axis a : {Axis::World, Axis::PP, Axis::DP, Axis::TP})
    for (int64_t count : {1, 5, 37}) {
      checkCollectives<float>(c, all, a, CommType::F32, count);
      checkCollectives<double>(c, all, a, CommType::F64, count);
      checkCollectives<int64_t>(c, all, a, CommType::I64, count);
      checkBf16(c, all, a, count);
    }
  // Zero counts complete at once; waiting an empty request is a no-op.
  Comm::Request none = c.allReduceSum(Axis::DP, nullptr, 0, CommType::F32);
  CHECK(none.id == -1, "zero-count request");
  mustOk(c.wait(none, "nothing"));
  c.barrier();

  // Every rank's failure count, summed (and the job's verdict agreed).
  int64_t failures = gFailures;
  Comm::Request r = c.allReduceSum(Axis::World, &failures, 1, CommType::I64);
  mustOk(c.wait(r, "failure count"));
  if (c.rank() == 0)
    std::printf("layout pp=%d dp=%d tp=%d: %s (%" PRId64 " failures)\n",
                mesh.pp, mesh.dp, mesh.tp, failures ? "FAILED" : "ok",
                failures);
  std::fflush(stdout);
  return failures ? 1 : 0;
}

int runMismatch(int argc, char **argv) {
  MeshShape mesh;
  mesh.dp = 2;
  mesh.tp = 2;
  auto comm = Comm::init(&argc, &argv, mesh);
  if (!comm.ok()) {
    std::fprintf(stderr, "train: error: %s\n", comm.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "comm_test: init unexpectedly succeeded\n");
  return 0;
}

/// dp=3: one all-reduce that succeeds, then rank 1 (or rank 2, `hang`)
/// leaves while the others wait in the next one.
int runFailure(int argc, char **argv, bool kill) {
  MeshShape mesh;
  mesh.dp = 3;
  auto comm = Comm::init(&argc, &argv, mesh);
  if (!comm.ok()) {
    std::fprintf(stderr, "train: error: %s\n", comm.message().c_str());
    return 1;
  }
  Comm &c = **comm;
  std::vector<float> grad(1000, 1.0f);
  Comm::Request r = c.allReduceSum(Axis::DP, grad.data(), 1000, CommType::F32);
  mustOk(c.wait(r, "all-reduce of gradient bucket 0"));
  if (grad[0] != 3.0f) {
    std::fprintf(stderr, "comm_test: bad sum %g\n", grad[0]);
    return 1;
  }
  std::printf("rank %d: first all-reduce done\n", c.rank());
  std::fflush(stdout);
  if (kill && c.rank() == 1) {
    usleep(300 * 1000);
    std::fprintf(stderr, "comm_test: rank 1 kills itself\n");
    std::fflush(stderr);
    raise(SIGKILL);
  }
  if (!kill && c.rank() == 2) {
    sleep(120); // never joins; the others abort the job first
    return 0;
  }
  r = c.allReduceSum(Axis::DP, grad.data(), 1000, CommType::F32);
  Status s = c.wait(r, kill ? "all-reduce of gradient bucket 3"
                            : "all-reduce of gradient bucket 1");
  if (!s.ok()) {
    std::fprintf(stderr, "train: error: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "comm_test: rank %d: second all-reduce completed?\n",
               c.rank());
  return 0;
}

uint64_t fnv1a(const void *p, size_t n) {
  const unsigned char *b = static_cast<const unsigned char *>(p);
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/// The launcher's world (OMPI_COMM_WORLD_SIZE ranks) as one dp group,
/// which is also one ep group with `expertGroup`; sets gRank. Null after
/// printing Comm::init's error.
std::unique_ptr<Comm> initWorldAsDp(int &argc, char **&argv, bool expertGroup = false) {
  MeshShape mesh;
  if (const char *s = std::getenv("OMPI_COMM_WORLD_SIZE"))
    mesh.dp = std::atoi(s);
  mesh.ep = expertGroup ? mesh.dp : 1;
  auto comm = Comm::init(&argc, &argv, mesh);
  if (!comm.ok()) {
    std::fprintf(stderr, "train: error: %s\n", comm.message().c_str());
    return nullptr;
  }
  gRank = (*comm)->rank();
  return std::move(*comm);
}

/// Random floats of mixed magnitudes (sums that depend on the order);
/// prints the hash of each all-reduced buffer, after checking that every
/// rank got the same bits.
int runRepeat(int argc, char **argv) {
  std::unique_ptr<Comm> comm = initWorldAsDp(argc, argv);
  if (!comm)
    return 1;
  Comm &c = *comm;
  for (int64_t count : {1000, 70000, 1 << 20}) {
    std::mt19937 gen(1234 + c.rank() * 7919 + (int)count);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(count);
    for (float &v : x)
      v = u(gen) * std::ldexp(1.0f, (int)(gen() % 40) - 20);
    Comm::Request r = c.allReduceSum(Axis::DP, x.data(), count, CommType::F32);
    mustOk(c.wait(r, "all-reduce of random data"));
    int64_t h = (int64_t)fnv1a(x.data(), x.size() * sizeof(float));
    std::vector<int64_t> hs(c.worldSize());
    r = c.allGather(Axis::World, &h, hs.data(), 1, CommType::I64);
    mustOk(c.wait(r, "all-gather of hashes"));
    for (int i = 0; i < c.worldSize(); ++i)
      CHECK(hs[i] == h, "rank " + std::to_string(i) +
                            " got different bits for count " +
                            std::to_string(count));
    if (c.rank() == 0)
      std::printf("hash count=%" PRId64 " %016" PRIx64 "\n", count,
                  (uint64_t)h);
  }
  std::fflush(stdout);
  return gFailures ? 1 : 0;
}

/// ZeRO's entry points on a bucket of two tensors of different part sizes
/// (3 and 5 elements per rank). Values are small integers, so sums are exact.
int runZero(int argc, char **argv) {
  std::unique_ptr<Comm> comm = initWorldAsDp(argc, argv);
  if (!comm)
    return 1;
  Comm &c = *comm;
  const int n = c.worldSize();
  cpu::setCommunicator(&c);
  const int64_t counts[2] = {3, 5};
  // in[t][i] = rank * 100 + t * 10 + i (every rank holds n parts of each).
  std::vector<float> in[2], out[2], gathered[2], local[2];
  for (int t = 0; t < 2; ++t) {
    for (int64_t i = 0; i < n * counts[t]; ++i)
      in[t].push_back((float)(c.rank() * 100 + t * 10 + i));
    out[t].assign(counts[t], -1.0f);
    gathered[t].assign(n * counts[t], -1.0f);
    local[t].assign(counts[t], -1.0f);
  }
  cpu::reduceScatterBucket(cpu::Group::DP, cpu::CollReduce::Sum, cpu::DT::F32, n,
                           in[0].data(), out[0].data(), counts[0], in[1].data(),
                           out[1].data(), counts[1]);
  int rankSum = n * (n - 1) / 2;
  for (int t = 0; t < 2; ++t)
    for (int64_t i = 0; i < counts[t]; ++i) {
      float want = (float)(rankSum * 100 + n * (t * 10 + c.rank() * counts[t] + i));
      CHECK(out[t][i] == want, "reduce_scatter tensor " + std::to_string(t) + " element " +
                                   std::to_string(i));
    }
  cpu::reduceScatterBucket(cpu::Group::DP, cpu::CollReduce::Mean, cpu::DT::F32, n,
                           in[0].data(), out[0].data(), counts[0], in[1].data(),
                           out[1].data(), counts[1]);
  float want = (float)(rankSum * 100 + n * (10 + c.rank() * counts[1])) / (float)n;
  CHECK(out[1][0] == want, "reduce_scatter mean");
  // Gathering every rank's part of its own tensor gives back the rank's
  // input only where the part is its own; gather the parts it owns.
  for (int t = 0; t < 2; ++t)
    cpu::localShard(cpu::Group::DP, cpu::DT::F32, n, in[t].data(), local[t].data(), counts[t]);
  for (int t = 0; t < 2; ++t)
    for (int64_t i = 0; i < counts[t]; ++i)
      CHECK(local[t][i] == in[t][c.rank() * counts[t] + i], "local_shard");
  cpu::allGatherBucket(cpu::Group::DP, cpu::DT::F32, n, local[0].data(), gathered[0].data(),
                       counts[0], local[1].data(), gathered[1].data(), counts[1]);
  for (int t = 0; t < 2; ++t)
    for (int g = 0; g < n; ++g)
      for (int64_t i = 0; i < counts[t]; ++i)
        CHECK(gathered[t][g * counts[t] + i] ==
                  (float)(g * 100 + t * 10 + g * counts[t] + i),
              "all_gather tensor " + std::to_string(t) + " part " + std::to_string(g));
  cpu::setCommunicator(nullptr);
  if (c.rank() == 0 && !gFailures)
    std::printf("zero dp=%d: ok\n", n);
  std::fflush(stdout);
  return gFailures ? 1 : 0;
}

/// Dynamic shadowing on the skewed routing (every row to expert 0, held by
/// rank 0): the plan shadows expert 0 alone (one slot) and renames every
/// row to its own rank's copy, so the all-to-all moves nothing; the
/// broadcast gives every rank rank 0's matrix of expert 0, and the reduce
/// brings the sum of every rank's slot back to rank 0's expert 0. One rank
/// shadows nothing (it would not lower its load).
void runShadowing(int n, int me, int64_t S, int64_t W, int64_t perRank) {
  const int64_t E = perRank * n, M = 1;
  std::vector<int64_t> ids(n * S, 0), routed(n * S, -7), slots(M, -7);
  cpu::takeExpertShadowCounts();
  cpu::expertShadowPlan(ids.data(), n, S, perRank, M, /*minRows=*/S, routed.data(),
                        slots.data());
  cpu::ExpertShadowCounts counts = cpu::takeExpertShadowCounts();
  if (n == 1) {
    CHECK(slots[0] == -1 && routed == ids && counts.shadowed == 0, "one rank shadows nothing");
    return;
  }
  CHECK(slots[0] == 0 && counts.plans == 1 && counts.shadowed == 1, "plan shadows expert 0");
  for (int i = 0; i < n; ++i)
    for (int64_t s = 0; s < S; ++s)
      CHECK(routed[i * S + s] == E + i * M, "plan renames row " + std::to_string(i * S + s));
  std::vector<int64_t> cold(n * S, 1), coldRouted(n * S), coldSlots(M);
  cpu::expertShadowPlan(cold.data(), n, S, perRank, M, /*minRows=*/S * n, coldRouted.data(),
                        coldSlots.data());
  CHECK(coldSlots[0] == -1 && coldRouted == cold, "no expert over min_rows: nothing shadowed");
  // Balanced: rank i's rows all go to rank i + 1's first expert; spreading
  // one would load another rank more.
  std::vector<int64_t> even(n * S), evenRouted(n * S), evenSlots(M);
  for (int64_t r = 0; r < n * S; ++r)
    even[r] = (r / S + 1) % n * perRank;
  cpu::expertShadowPlan(even.data(), n, S, perRank, M, /*minRows=*/0, evenRouted.data(),
                        evenSlots.data());
  CHECK(evenSlots[0] == -1 && evenRouted == even, "balanced routing: nothing shadowed");
  std::vector<float> x(S * W), xr(n * S * W, -1.0f), y(S * W, -1.0f);
  for (int64_t r = 0; r < S * W; ++r)
    x[r] = (float)(me * 1000 + r);
  cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, false, n, routed.data(), S, W, perRank, M,
                      x.data(), xr.data());
  for (int64_t r = 0; r < n * S * W; ++r)
    CHECK(xr[r] == (r / (S * W) == me ? x[r % (S * W)] : 0.0f),
          "shadowed dispatch keeps row " + std::to_string(r / W) + " local");
  cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, true, n, routed.data(), S, W, perRank, M,
                      xr.data(), y.data());
  CHECK(y == x, "shadowed combine takes the local rows back");
  std::vector<float> w(perRank * W), ws(M * W, -1.0f), back(perRank * W, -1.0f);
  for (int64_t r = 0; r < perRank * W; ++r)
    w[r] = (float)(me * 100 + r);
  cpu::expertShadow(cpu::Group::EP, cpu::DT::F32, false, n, slots.data(), M, perRank, W,
                    w.data(), ws.data());
  for (int64_t j = 0; j < W; ++j)
    CHECK(ws[j] == (float)j, "broadcast element " + std::to_string(j));
  std::vector<float> g(M * W);
  for (int64_t j = 0; j < W; ++j)
    g[j] = (float)(me + 1 + j);
  cpu::expertShadow(cpu::Group::EP, cpu::DT::F32, true, n, slots.data(), M, perRank, W,
                    g.data(), back.data());
  for (int64_t r = 0; r < perRank * W; ++r)
    CHECK(back[r] == (me == 0 && r < W ? (float)(n * (n + 1) / 2 + n * r) : 0.0f),
          "reduce element " + std::to_string(r));
}

/// Dropped rows (id -1, an expert capacity) and compact rows: a dropped
/// row goes nowhere and comes back zero; with `compact` R rows a rank's
/// dispatched rows are the positional ones in order, then zeros, and a
/// combine reads them from there. Flat, two-level and started alike.
void runCompact(int n, int me, int64_t S, int64_t W, int64_t perRank) {
  const int64_t E = perRank * n;
  std::vector<int64_t> ids(n * S);
  for (int i = 0; i < n; ++i)
    for (int64_t s = 0; s < S; ++s)
      ids[i * S + s] = (i + s) % 3 == 0 ? -1 : (i * 3 + s) % E;
  auto owner = [&](int64_t r) { return ids[r] < 0 ? int64_t(-1) : ids[r] / perRank; };
  // Each rank's rows in the group's order; R holds the busiest rank's.
  std::vector<std::vector<int64_t>> rowsOf(n);
  for (int64_t r = 0; r < n * S; ++r)
    if (owner(r) >= 0)
      rowsOf[owner(r)].push_back(r);
  int64_t R = 1;
  for (auto &rows : rowsOf)
    R = std::max<int64_t>(R, static_cast<int64_t>(rows.size()));
  std::vector<float> x(S * W), xr(n * S * W, -1.0f);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t j = 0; j < W; ++j)
      x[s * W + j] = (float)(me * 1000 + s * 10 + j);
  cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, false, n, ids.data(), S, W, perRank, 0,
                      x.data(), xr.data());
  for (int64_t r = 0; r < n * S; ++r)
    if (owner(r) != me)
      for (int64_t j = 0; j < W; ++j)
        CHECK(xr[r * W + j] == 0.0f, "a dropped or other rank's row is zero: " +
                                         std::to_string(r));
  std::vector<float> ycl(R * W);
  for (int64_t k = 0; k < R * W; ++k)
    ycl[k] = (float)(me * 100000 + k);
  for (bool twoLevel : {false, true})
    for (bool started : {false, true}) {
      if (twoLevel && started)
        continue; // the two-level exchange is not started
      const std::string form = twoLevel ? "two-level" : started ? "started" : "flat";
      std::vector<float> xc(R * W, -1.0f), y(S * W, -1.0f);
      if (started) {
        cpu::expertAllToAllStart(0, cpu::Group::EP, cpu::DT::F32, false, n, ids.data(), S, W,
                                 perRank, 0, x.data(), R);
        cpu::collectiveWait(0, xc.data());
        cpu::expertAllToAllStart(0, cpu::Group::EP, cpu::DT::F32, true, n, ids.data(), S, W,
                                 perRank, 0, ycl.data(), R);
        cpu::collectiveWait(0, y.data());
      } else {
        cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, false, n, ids.data(), S, W, perRank,
                            0, x.data(), xc.data(), twoLevel, R);
        cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, true, n, ids.data(), S, W, perRank, 0,
                            ycl.data(), y.data(), twoLevel, R);
      }
      const std::vector<int64_t> &mine = rowsOf[me];
      for (int64_t k = 0; k < R; ++k)
        for (int64_t j = 0; j < W; ++j)
          CHECK(xc[k * W + j] ==
                    (k < (int64_t)mine.size() ? xr[mine[k] * W + j] : 0.0f),
                form + " compact dispatch row " + std::to_string(k));
      for (int64_t s = 0; s < S; ++s) {
        const int64_t r = me * S + s, o = owner(r);
        const int64_t k = o < 0 ? -1
                                : std::find(rowsOf[o].begin(), rowsOf[o].end(), r) -
                                      rowsOf[o].begin();
        for (int64_t j = 0; j < W; ++j)
          CHECK(y[s * W + j] == (o < 0 ? 0.0f : (float)(o * 100000 + k * W + j)),
                form + " compact combine row " + std::to_string(s));
      }
    }
}

/// Expert parallelism's all-to-all (expertAllToAll) on dp = ep = n ranks,
/// 2 experts per rank, S = 5 rows of 3 floats per rank; routings: mixed
/// ((rank + s) % E), and every row to expert 0 (rank 0 receives all, the
/// others nothing). Dispatch leaves row i*S + s = rank i's row s where this
/// rank holds its expert, zero elsewhere; combine brings every row back from
/// the rank holding its expert. The ep/edp groups are the dp group and one
/// rank.
int runExperts(int argc, char **argv) {
  std::unique_ptr<Comm> comm = initWorldAsDp(argc, argv, /*expertGroup=*/true);
  if (!comm)
    return 1;
  Comm &c = *comm;
  const int n = c.worldSize();
  cpu::setCommunicator(&c);
  CHECK(c.groupSize(Axis::EP) == n && c.groupRank(Axis::EP) == c.rank(), "ep group");
  CHECK(c.groupSize(Axis::EDP) == 1 && c.groupRank(Axis::EDP) == 0, "edp group");
  const int64_t S = 5, W = 3, perRank = 2, E = perRank * n;
  const int me = c.rank();
  for (bool skewed : {false, true}) {
    std::vector<int64_t> ids(n * S);
    for (int i = 0; i < n; ++i)
      for (int64_t s = 0; s < S; ++s)
        ids[i * S + s] = skewed ? 0 : (i + s) % E;
    auto owner = [&](int i, int64_t s) { return ids[i * S + s] / perRank; };
    std::vector<float> x(S * W), xr(n * S * W, -1.0f), yl(n * S * W), y(S * W, -1.0f);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t j = 0; j < W; ++j)
        x[s * W + j] = (float)(me * 1000 + s * 10 + j);
    cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, false, n, ids.data(), S, W, perRank, 0,
                        x.data(), xr.data());
    for (int i = 0; i < n; ++i)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t j = 0; j < W; ++j)
          CHECK(xr[(i * S + s) * W + j] ==
                    (owner(i, s) == me ? (float)(i * 1000 + s * 10 + j) : 0.0f),
                std::string(skewed ? "skewed" : "mixed") + " dispatch row " +
                    std::to_string(i * S + s));
    for (int64_t r = 0; r < n * S; ++r)
      for (int64_t j = 0; j < W; ++j)
        yl[r * W + j] = (float)(me * 100000 + r * 10 + j);
    cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, true, n, ids.data(), S, W, perRank, 0,
                        yl.data(), y.data());
    for (int64_t s = 0; s < S; ++s)
      for (int64_t j = 0; j < W; ++j)
        CHECK(y[s * W + j] == (float)(owner(me, s) * 100000 + (me * S + s) * 10 + j),
              std::string(skewed ? "skewed" : "mixed") + " combine row " + std::to_string(s));
    // The two-level exchange (nodes from MERAK_RANKS_PER_NODE) moves the
    // same rows to the same places.
    std::vector<float> xr2(n * S * W, -1.0f), y2(S * W, -1.0f);
    cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, false, n, ids.data(), S, W, perRank, 0,
                        x.data(), xr2.data(), /*hierarchical=*/true);
    cpu::expertAllToAll(cpu::Group::EP, cpu::DT::F32, true, n, ids.data(), S, W, perRank, 0,
                        yl.data(), y2.data(), /*hierarchical=*/true);
    CHECK(xr2 == xr && y2 == y, std::string(skewed ? "skewed" : "mixed") +
                                    " two-level dispatch and combine equal the flat ones");
  }
  runShadowing(n, me, S, W, perRank);
  runCompact(n, me, S, W, perRank);
  const Comm::NodeGroups *nodes = c.nodeGroups(Axis::EP);
  cpu::setCommunicator(nullptr);
  if (c.rank() == 0 && !gFailures)
    std::printf("experts ep=%d (%s): ok\n", n,
                nodes ? (std::to_string(nodes->nodes) + " nodes of " +
                         std::to_string(nodes->perNode)).c_str()
                      : "nodes of unequal sizes");
  std::fflush(stdout);
  return gFailures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "layout" && argc == 5) {
    MeshShape m;
    m.pp = std::atoi(argv[2]);
    m.dp = std::atoi(argv[3]);
    m.tp = std::atoi(argv[4]);
    return runLayout(argc, argv, m);
  }
  if (cmd == "mismatch")
    return runMismatch(argc, argv);
  if (cmd == "dead" || cmd == "hang")
    return runFailure(argc, argv, cmd == "dead");
  if (cmd == "repeat")
    return runRepeat(argc, argv);
  if (cmd == "zero")
    return runZero(argc, argv);
  if (cmd == "experts")
    return runExperts(argc, argv);
  std::fprintf(stderr, "usage: merak_comm_test layout PP DP TP | mismatch | "
                       "dead | hang | repeat | zero | experts\n");
  return 2;
}
