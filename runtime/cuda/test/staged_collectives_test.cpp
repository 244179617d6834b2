//===- staged_collectives_test.cpp - GPU ABI collectives, host-staged -----===//
//
// Run as `mpirun -np 2 merak_cuda_staged_tests` (a tp group of 2 ranks):
// merak::rt::gpu's collectives (collectives_gpu.cpp: calls, request slots)
// over createStagedCollectives (collectives_staged.cpp) with host memory
// standing in for device memory (host_device_fake.cpp), against values
// computed here: blocking all-reduce (sum, mean, max, in place),
// reduce-scatter and all-gather buckets, started collectives whose inputs
// are overwritten before their waits and waited out of order, localShard,
// groupRank, and the vocabulary-parallel cross-entropy and its gradient
// against the CPU runtime's serial crossEntropy over the full rows, and
// expert parallelism's all-to-all (blocking, started, compact) and
// expert_shadow against the CPU runtime's.
// Prints "ok: N checks" on rank 0; exits 1 naming the first failed check.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/comm.h"
#include "merak_rt/cuda/collectives.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace merak::rt;
using gpu::CollReduce;
using gpu::DT;
using gpu::Group;

namespace {
int gRank = 0, gChecks = 0;

void expect(bool ok, const std::string &what) {
  ++gChecks;
  if (!ok) {
    std::fprintf(stderr, "FAIL (rank %d): %s\n", gRank, what.c_str());
    std::exit(1);
  }
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                const std::string &what, float tol = 1e-6f) {
  expect(got.size() == want.size(), what + ": size");
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > tol * std::max(1.0f, std::fabs(want[i])))
      expect(false, what + ": element " + std::to_string(i) + " is " +
                        std::to_string(got[i]) + ", expected " +
                        std::to_string(want[i]));
  ++gChecks;
}

/// Rank r's value for element i of tensor k.
float val(int r, int k, int64_t i) { return float(1 + r * 100 + k * 10) + 0.25f * i; }

std::vector<float> filled(int r, int k, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = val(r, k, i);
  return v;
}

/// Expert parallelism (collectives_experts.cpp) against the CPU runtime's
/// own collectives on the same rows: 2 ranks holding 2 experts each, 5
/// rows per rank of 3 elements; ids (the group's, as all-gathered) with
/// dropped rows (-1).
void checkExperts(int r) {
  const int64_t S = 5, row = 3, perRank = 2;
  const std::vector<int64_t> ids{0, 3, -1, 2, 1, 3, 3, 0, -1, 2};
  auto both = [&](bool combine, int64_t compact, int k, const std::string &what) {
    const int64_t inRows = combine ? (compact > 0 ? compact : 2 * S) : S;
    const int64_t outRows = combine ? S : (compact > 0 ? compact : 2 * S);
    std::vector<float> in = filled(r, k, inRows * row), got(outRows * row, -7.f),
                       want(outRows * row, -9.f), started(outRows * row, -5.f);
    gpu::expertAllToAll(Group::TP, DT::F32, combine, 2, ids.data(), S, row, perRank, 0,
                        in.data(), got.data(), false, compact);
    cpu::expertAllToAll(Group::TP, DT::F32, combine, 2, ids.data(), S, row, perRank, 0,
                        in.data(), want.data(), false, compact);
    expectNear(got, want, what, 0.f);
    gpu::expertAllToAllStart(5, Group::TP, DT::F32, combine, 2, ids.data(), S, row, perRank,
                             0, in.data(), compact);
    in.assign(in.size(), 1e9f); // the start took its input
    gpu::collectiveWait(5, started.data());
    expectNear(started, want, what + " (started)", 0.f);
  };
  both(false, 0, 20, "all-to-all dispatch");
  both(true, 0, 21, "all-to-all combine");
  // Compact: rank 0's experts get 3 rows, rank 1's 5; 6 places each.
  both(false, 6, 22, "all-to-all dispatch (compact)");
  both(true, 6, 23, "all-to-all combine (compact)");
  // Shadowing expert 3 (rank 1's): its weights to every rank, and the
  // copies' gradients summed back to rank 1.
  const int64_t M = 2, matrix = 4;
  const std::vector<int64_t> slots{3, -1};
  for (bool reduce : {false, true}) {
    const int64_t inN = (reduce ? M : perRank) * matrix, outN = (reduce ? perRank : M) * matrix;
    std::vector<float> in = filled(r, reduce ? 25 : 24, inN), got(outN, -7.f),
                       want(outN, -9.f);
    gpu::expertShadow(Group::TP, DT::F32, reduce, 2, slots.data(), M, perRank, matrix,
                      in.data(), got.data());
    cpu::expertShadow(Group::TP, DT::F32, reduce, 2, slots.data(), M, perRank, matrix,
                      in.data(), want.data());
    expectNear(got, want, reduce ? "expert_shadow reduce" : "expert_shadow broadcast", 0.f);
  }
}
} // namespace

int main(int argc, char **argv) {
  MeshShape mesh;
  mesh.tp = 2;
  Result<std::unique_ptr<Comm>> opened = Comm::init(&argc, &argv, mesh);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.message().c_str());
    return 1;
  }
  std::unique_ptr<Comm> comm = std::move(opened).value();
  cpu::setCommunicator(comm.get());
  std::unique_ptr<gpu::DeviceCollectives> staged = gpu::createStagedCollectives(*comm);
  gpu::setCollectives(staged.get());
  const int r = comm->groupRank(Axis::TP);
  gRank = comm->rank();
  expect(staged->groupSize(Group::TP) == 2 && staged->groupRank(Group::TP) == r,
         "group size and rank");

  // Blocking all-reduce, two tensors in one bucket; the second in place.
  {
    std::vector<float> a = filled(r, 0, 5), b = filled(r, 1, 3), out(5);
    gpu::allReduceBucket(Group::TP, CollReduce::Sum, DT::F32, a.data(), out.data(),
                         int64_t(5), b.data(), b.data(), int64_t(3));
    std::vector<float> wa(5), wb(3);
    for (int i = 0; i < 5; ++i)
      wa[i] = val(0, 0, i) + val(1, 0, i);
    for (int i = 0; i < 3; ++i)
      wb[i] = val(0, 1, i) + val(1, 1, i);
    expectNear(out, wa, "all-reduce sum");
    expectNear(b, wb, "all-reduce sum in place");
    std::vector<float> m = filled(r, 2, 4), mx = filled(r, 3, 4);
    gpu::allReduceBucket(Group::TP, CollReduce::Mean, DT::F32, m.data(), m.data(), int64_t(4));
    gpu::allReduceBucket(Group::TP, CollReduce::Max, DT::F32, mx.data(), mx.data(), int64_t(4));
    std::vector<float> wm(4), wx(4);
    for (int i = 0; i < 4; ++i) {
      wm[i] = (val(0, 2, i) + val(1, 2, i)) / 2;
      wx[i] = std::max(val(0, 3, i), val(1, 3, i));
    }
    expectNear(m, wm, "all-reduce mean");
    expectNear(mx, wx, "all-reduce max");
  }
  // Reduce-scatter (parts 2: rank g gets part g of the sum) and all-gather.
  {
    std::vector<float> a = filled(r, 0, 6), b = filled(r, 1, 2), oa(3), ob(1);
    gpu::reduceScatterBucket(Group::TP, CollReduce::Mean, DT::F32, 2, a.data(), oa.data(),
                             int64_t(3), b.data(), ob.data(), int64_t(1));
    std::vector<float> wa(3), wb(1);
    for (int i = 0; i < 3; ++i)
      wa[i] = (val(0, 0, r * 3 + i) + val(1, 0, r * 3 + i)) / 2;
    wb[0] = (val(0, 1, r) + val(1, 1, r)) / 2;
    expectNear(oa, wa, "reduce-scatter mean, tensor 0");
    expectNear(ob, wb, "reduce-scatter mean, tensor 1");
    std::vector<float> g = filled(r, 4, 2), og(4);
    gpu::allGatherBucket(Group::TP, DT::F32, 2, g.data(), og.data(), int64_t(2));
    expectNear(og, {val(0, 4, 0), val(0, 4, 1), val(1, 4, 0), val(1, 4, 1)}, "all-gather");
  }
  // Started collectives: inputs overwritten right after the start (the
  // memory plan may reuse them), waits in the other order, progress polled.
  {
    std::vector<float> a = filled(r, 0, 4), b = filled(r, 1, 2), c = filled(r, 2, 4);
    gpu::allReduceStart(0, Group::TP, CollReduce::Sum, DT::F32, a.data(), int64_t(4),
                        b.data(), int64_t(2));
    gpu::reduceScatterStart(1, Group::TP, CollReduce::Sum, DT::F32, 2, c.data(), int64_t(2));
    std::vector<float> g = filled(r, 3, 3);
    gpu::allGatherStart(2, Group::TP, DT::F32, 2, g.data(), int64_t(3));
    for (std::vector<float> *v : {&a, &b, &c, &g})
      for (float &x : *v)
        x = -7;
    gpu::collectiveProgress();
    std::vector<float> oc(2), og(6), oa(4), ob(2);
    gpu::collectiveWait(1, oc.data());
    gpu::collectiveWait(2, og.data());
    gpu::collectiveProgress();
    gpu::collectiveWait(0, oa.data(), ob.data());
    std::vector<float> wa(4), wb(2), wc(2), wg(6);
    for (int i = 0; i < 4; ++i)
      wa[i] = val(0, 0, i) + val(1, 0, i);
    for (int i = 0; i < 2; ++i) {
      wb[i] = val(0, 1, i) + val(1, 1, i);
      wc[i] = val(0, 2, r * 2 + i) + val(1, 2, r * 2 + i);
    }
    for (int g2 = 0; g2 < 2; ++g2)
      for (int i = 0; i < 3; ++i)
        wg[g2 * 3 + i] = val(g2, 3, i);
    expectNear(oa, wa, "started all-reduce, tensor 0");
    expectNear(ob, wb, "started all-reduce, tensor 1");
    expectNear(oc, wc, "started reduce-scatter");
    expectNear(og, wg, "started all-gather");
    // The slot is free again after its wait.
    std::vector<float> d = filled(r, 5, 1), od(1);
    gpu::allReduceStart(0, Group::TP, CollReduce::Mean, DT::F32, d.data(), int64_t(1));
    gpu::collectiveWait(0, od.data());
    expectNear(od, {(val(0, 5, 0) + val(1, 5, 0)) / 2}, "slot 0 reused");
  }
  // localShard and groupRank.
  {
    std::vector<float> full = filled(0, 6, 4), part(2);
    gpu::localShard(Group::TP, DT::F32, 2, full.data(), part.data(), 2);
    expectNear(part, {val(0, 6, 2 * r), val(0, 6, 2 * r + 1)}, "local shard");
    int64_t gr = -1;
    gpu::groupRank(Group::TP, &gr);
    expect(gr == r, "groupRank");
  }
  // Vocabulary-parallel cross-entropy: 3 rows, 4 classes per rank (8 in
  // all), against the serial cross-entropy of the full rows.
  {
    const int64_t rows = 3, n = 4, classes = 2 * n;
    std::vector<float> full(rows * classes);
    for (int64_t i = 0; i < rows * classes; ++i)
      full[i] = std::sin(0.7f * float(i)) * 2;
    std::vector<int64_t> labels{1, 6, 3};
    std::vector<float> local(rows * n);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j)
        local[i * n + j] = full[i * classes + r * n + j];
    float y = 0, want = 0;
    gpu::vocabCrossEntropy(Group::TP, DT::F32, local.data(), rows, n, DT::I64, labels.data(),
                           1, false, -100, -1, &y);
    cpu::Dims dl{2, {rows, classes}};
    cpu::crossEntropy(DT::F32, full.data(), dl, 1, DT::I64, labels.data(), 1, false, -100,
                      &want);
    expectNear({y}, {want}, "vocabulary-parallel cross-entropy", 1e-5f);
    float g = 1;
    std::vector<float> dlocal(rows * n), dfull(rows * classes), wantLocal(rows * n);
    gpu::vocabCrossEntropyGrad(Group::TP, DT::F32, local.data(), rows, n, DT::I64,
                               labels.data(), &g, 1, false, -100, -1, dlocal.data());
    cpu::crossEntropyGrad(DT::F32, full.data(), dl, 1, DT::I64, labels.data(), &g, 1, false,
                          -100, dfull.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j)
        wantLocal[i * n + j] = dfull[i * classes + r * n + j];
    expectNear(dlocal, wantLocal, "vocabulary-parallel cross-entropy gradient", 1e-5f);
  }
  checkExperts(r);
  gpu::setCollectives(nullptr);
  cpu::setCommunicator(nullptr);
  if (gRank == 0)
    std::printf("ok: %d checks\n", gChecks);
  return 0;
}
