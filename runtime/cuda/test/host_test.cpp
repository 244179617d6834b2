//===- host_test.cpp - CUDA backend host logic, no GPU needed ---------------===//
#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/gemm.h"
#include "merak_rt/cuda/kernels.h"
#include "merak_rt/cuda/launch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

using namespace merak::rt::cuda;
using merak::rt::Result;
using merak::rt::Status;

namespace {
Dims dims(std::initializer_list<int64_t> l) {
  Dims d;
  for (int64_t v : l)
    d.d[d.rank++] = v;
  return d;
}
bool hasDevice() { return deviceCount().ok(); }
} // namespace

TEST(CudaArena, AlignUp) {
  EXPECT_EQ(alignUp(0, 256), 0u);
  EXPECT_EQ(alignUp(1, 256), 256u);
  EXPECT_EQ(alignUp(256, 256), 256u);
  EXPECT_EQ(alignUp(257, 256), 512u);
  EXPECT_EQ(alignUp(13, 1), 13u);
  EXPECT_EQ(alignUp(13, 0), 13u);
}

TEST(CudaArena, PlanOffsetsAreAlignedAndDisjoint) {
  ArenaPlan p;
  EXPECT_EQ(p.add(100), 0u);
  EXPECT_EQ(p.add(4), 256u);
  EXPECT_EQ(p.add(0), 512u);
  EXPECT_EQ(p.add(10, 16), 512u); // a zero-byte buffer takes no space
  EXPECT_EQ(p.add(1000), 768u);
  EXPECT_EQ(p.size(), 1792u); // 768 + 1000 = 1768 -> 7 * 256
  ArenaPlan empty;
  EXPECT_EQ(empty.size(), 0u);
}

TEST(CudaArena, EmptyArenaNeedsNoDevice) {
  Result<Arena> a = Arena::create(0);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->base(), nullptr);
  EXPECT_EQ(a->at(0), nullptr);
  EXPECT_TRUE(a->zero().ok());
}

TEST(CudaBroadcast, SameShapes) {
  auto p = planBroadcast(dims({4, 8}), dims({4, 8}), dims({4, 8}));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->kind, BroadcastKind::Same);
  EXPECT_EQ(p->numel, 32);
}

TEST(CudaBroadcast, Scalars) {
  auto a = planBroadcast(dims({}), dims({3, 5}), dims({3, 5}));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, BroadcastKind::ScalarA);
  auto b = planBroadcast(dims({2, 3, 5}), dims({1, 1}), dims({2, 3, 5}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kind, BroadcastKind::ScalarB);
  // A scalar with an operand that itself broadcasts is a general walk.
  auto g = planBroadcast(dims({1}), dims({4, 1}), dims({4, 6}));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->kind, BroadcastKind::General);
  EXPECT_EQ(g->strideA[0], 0);
  EXPECT_EQ(g->strideB[0], 1);
  EXPECT_EQ(g->strideB[1], 0);
  auto s = planBroadcast(dims({1}), dims({}), dims({1}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, BroadcastKind::Same);
  EXPECT_EQ(s->numel, 1);
}

TEST(CudaBroadcast, RowBiasCoalesces) {
  // [2,3,4,64] + [64]: outer dims merge into one of 24 rows.
  auto p = planBroadcast(dims({2, 3, 4, 64}), dims({64}), dims({2, 3, 4, 64}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, BroadcastKind::RowB);
  EXPECT_EQ(p->rank, 2);
  EXPECT_EQ(p->dims[0], 24);
  EXPECT_EQ(p->dims[1], 64);
  EXPECT_EQ(p->inner, 64);
  auto q = planBroadcast(dims({1, 4, 64}), dims({8, 4, 64}), dims({8, 4, 64}));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->kind, BroadcastKind::RowA);
  EXPECT_EQ(q->inner, 256);
}

TEST(CudaBroadcast, GeneralStrides) {
  // [4,1,6] * [1,5,1] -> [4,5,6]
  auto p = planBroadcast(dims({4, 1, 6}), dims({5, 1}), dims({4, 5, 6}));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->kind, BroadcastKind::General);
  ASSERT_EQ(p->rank, 3);
  EXPECT_EQ(p->dims[0], 4);
  EXPECT_EQ(p->dims[1], 5);
  EXPECT_EQ(p->dims[2], 6);
  EXPECT_EQ(p->strideA[0], 6);
  EXPECT_EQ(p->strideA[1], 0);
  EXPECT_EQ(p->strideA[2], 1);
  EXPECT_EQ(p->strideB[0], 0);
  EXPECT_EQ(p->strideB[1], 1);
  EXPECT_EQ(p->strideB[2], 0);
  // Column broadcast [8,16] + [8,1]: size-1 dims dropped, no merge.
  auto c = planBroadcast(dims({8, 16}), dims({8, 1}), dims({8, 16}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, BroadcastKind::General);
  EXPECT_EQ(c->strideB[0], 1);
  EXPECT_EQ(c->strideB[1], 0);
}

TEST(CudaBroadcast, Mismatch) {
  auto p = planBroadcast(dims({3, 4}), dims({5}), dims({3, 4}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("do not broadcast"), std::string::npos)
      << p.message();
  EXPECT_NE(p.message().find("[3,4]"), std::string::npos);
}

TEST(CudaLaunch, Vectorize) {
  alignas(16) float buf[16];
  EXPECT_EQ(vectorWidth(DType::F32), 4);
  EXPECT_EQ(vectorWidth(DType::BF16), 8);
  EXPECT_EQ(dtypeSize(DType::BF16), 2);
  EXPECT_TRUE(canVectorize(DType::F32, 8, buf, buf + 4));
  EXPECT_FALSE(canVectorize(DType::F32, 6, buf));
  EXPECT_FALSE(canVectorize(DType::F32, 8, buf + 1));
  EXPECT_FALSE(canVectorize(DType::BF16, 12, buf));
  EXPECT_TRUE(canVectorize(DType::BF16, 16, buf));
}

TEST(CudaLaunch, Elementwise) {
  EXPECT_EQ(elementwiseLaunch(0).grid, 0u);
  Launch l = elementwiseLaunch(1000);
  EXPECT_EQ(l.block, 256u);
  EXPECT_EQ(l.grid, 4u);
  EXPECT_EQ(elementwiseLaunch(int64_t(1) << 30, 132).grid, 132u * 8);
}

TEST(CudaLaunch, Rows) {
  RowLaunch w = rowLaunch(100, 768);
  EXPECT_TRUE(w.warpPerRow);
  EXPECT_EQ(w.block, 256u);
  EXPECT_EQ(w.rowsPerBlock, 8u);
  EXPECT_EQ(w.grid, 13u);
  RowLaunch b = rowLaunch(16, 50257);
  EXPECT_FALSE(b.warpPerRow);
  EXPECT_EQ(b.grid, 16u);
  EXPECT_EQ(b.block, 1024u);
  RowLaunch m = rowLaunch(4, 2048);
  EXPECT_FALSE(m.warpPerRow);
  EXPECT_EQ(m.block, 256u);
  EXPECT_EQ(rowLaunch(0, 10).grid, 0u);
}

TEST(CudaGemm, ColumnMajorMapping) {
  GemmShape s;
  s.M = 3, s.N = 5, s.K = 7;
  ColMajorGemm g = toColMajor(s);
  EXPECT_EQ(g.m, 5);
  EXPECT_EQ(g.n, 3);
  EXPECT_EQ(g.k, 7);
  EXPECT_FALSE(g.trans1);
  EXPECT_EQ(g.rows1, 5); // B [K,N] row-major = [N,K] column-major
  EXPECT_EQ(g.cols1, 7);
  EXPECT_EQ(g.ld1, 5);
  EXPECT_EQ(g.rows2, 7); // A [M,K] row-major = [K,M] column-major
  EXPECT_EQ(g.ld2, 7);
  EXPECT_EQ(g.ldc, 5);
  s.transA = s.transB = true;
  g = toColMajor(s);
  EXPECT_TRUE(g.trans1 && g.trans2);
  EXPECT_EQ(g.rows1, 7); // B stored [N,K]
  EXPECT_EQ(g.ld1, 7);
  EXPECT_EQ(g.rows2, 3); // A stored [K,M]
  EXPECT_EQ(g.ld2, 3);
}

TEST(CudaGemm, Validate) {
  GemmShape s;
  s.M = s.N = s.K = 4;
  EXPECT_TRUE(validate(s).ok());
  s.batch = 2;
  EXPECT_FALSE(validate(s).ok()); // strideC 0
  s.strideC = 16;
  EXPECT_TRUE(validate(s).ok());
  s.K = -1;
  EXPECT_FALSE(validate(s).ok());
}

TEST(CudaBf16, RoundTrip) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3f82); // 1 + 3*2^-8 -> 1 + 2^-6
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  EXPECT_TRUE(std::isinf(bf16ToFloat(floatToBf16(INFINITY))));
  for (float f : {0.1f, 3.14159f, -1234.5f, 1e-20f})
    EXPECT_NEAR(bf16ToFloat(floatToBf16(f)), f, std::fabs(f) / 128);
}

TEST(CudaErrors, MessageNamesCallAndError) {
  // cudaErrorMemoryAllocation == 2; cudaGetErrorString needs no device.
  std::string m = cudaErrorMessage(2, "cudaMalloc(arena, 64 bytes)");
  EXPECT_EQ(m.rfind("cudaMalloc(arena, 64 bytes): ", 0), 0u) << m;
  EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
  EXPECT_EQ(cudaErrorMessage(0, "x"), "");
  EXPECT_TRUE(cudaCheck(0, "x").ok());
  Status s = cudaCheck(2, "cudaMalloc");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("cudaMalloc: ", 0), 0u);
  EXPECT_EQ(noDeviceMessage("boom"), "no CUDA device: boom");
}

TEST(CudaErrors, NoDeviceIsAClearError) {
  if (hasDevice())
    GTEST_SKIP() << "a CUDA device is present";
  Result<int> n = deviceCount();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.message().rfind("no CUDA device: ", 0), 0u) << n.message();
  EXPECT_GT(n.message().size(), std::string("no CUDA device: ").size());
  Result<Device> d = Device::open(0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.message().rfind("no CUDA device: ", 0), 0u) << d.message();
  // Allocations and streams fail with an error naming the call, no crash.
  Result<Arena> a = Arena::create(1024);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find("cudaMalloc"), std::string::npos) << a.message();
  Result<Stream> st = Stream::create();
  EXPECT_FALSE(st.ok());
}

TEST(CudaErrors, ArgumentChecksNeedNoDevice) {
  Dims a = dims({3, 4}), b = dims({5});
  Status s = binary(Binary::Add, DType::F32, nullptr, a, nullptr, b, nullptr,
                    a, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(softmaxForward(false, DType::F32, nullptr, nullptr, -1, 4,
                              nullptr)
                   .ok());
  EXPECT_FALSE(adamwStep(nullptr, nullptr, nullptr, nullptr, 4, 1e-3f, 0.9f,
                         0.999f, 1e-8f, 0.f, 0, nullptr, nullptr)
                   .ok()); // step 0
  // Empty work launches nothing and succeeds.
  EXPECT_TRUE(unary(Unary::Relu, DType::F32, nullptr, nullptr, 0, nullptr).ok());
  Blas none;
  GemmShape g;
  g.M = g.N = g.K = 2;
  EXPECT_FALSE(none.gemm(GemmPrecision::F32, g, 1.f, nullptr, nullptr, 0.f,
                         nullptr, nullptr)
                   .ok());
}
