//===- train_host_test.cpp - Host logic of attention/mixed/NCCL, no GPU ----===//
#include "merak_rt/cuda/attention.h"
#include "merak_rt/cuda/mixed.h"
#ifdef MERAK_HAVE_NCCL
#include "merak_rt/cuda/nccl.h"
#endif

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace merak::rt::cuda;
using merak::rt::Status;

namespace {
bool hasDevice() { return deviceCount().ok(); }
alignas(16) char arena[1 << 16];
bool contains(const std::string &s, const std::string &sub) {
  return s.find(sub) != std::string::npos;
}
} // namespace

TEST(CudaAttention, OperandLayouts) {
  const AttnOperand a = AttnOperand::bhtd(arena, 12, 1024, 64);
  EXPECT_EQ(a.strideB, 12 * 1024 * 64);
  EXPECT_EQ(a.strideH, 1024 * 64);
  EXPECT_EQ(a.strideT, 64);
  const AttnOperand o = AttnOperand::bthd(arena, 12, 1024, 64);
  EXPECT_EQ(o.strideB, 1024 * 768);
  EXPECT_EQ(o.strideH, 64);
  EXPECT_EQ(o.strideT, 768);
  // GPT-2's [B, T, 3C] qkv: k starts C elements in (bf16: 2 bytes each).
  const AttnOperand k = AttnOperand::packedQKV(arena, DType::BF16, 1, 12,
                                               1024, 64);
  EXPECT_EQ(static_cast<char *>(k.data) - arena, 768 * 2);
  EXPECT_EQ(k.strideB, 1024 * 3 * 768);
  EXPECT_EQ(k.strideH, 64);
  EXPECT_EQ(k.strideT, 3 * 768);
  const AttnOperand v = AttnOperand::packedQKV(arena, DType::F32, 2, 12,
                                               1024, 64);
  EXPECT_EQ(static_cast<char *>(v.data) - arena, 2 * 768 * 4);
}

TEST(CudaAttention, ChecksArguments) {
  AttnShape s;
  s.B = 2, s.H = 3, s.T = 77, s.D = 64;
  const AttnOperand ok = AttnOperand::bhtd(arena, 3, 77, 64);
  EXPECT_TRUE(checkAttention(DType::BF16, s, {{"q", ok}, {"k", ok}}).ok());
  EXPECT_TRUE(checkAttention(DType::F32, s,
                             {{"q", AttnOperand::packedQKV(arena, DType::F32,
                                                           2, 3, 77, 64)}})
                  .ok());

  AttnShape d48 = s;
  d48.D = 48;
  Status e = checkAttention(DType::F32, d48, {{"q", ok}});
  EXPECT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.message(), "head dim D=48 is not supported"))
      << e.message();

  AttnOperand odd = ok;
  odd.strideT = 68; // a multiple of 4 (fp32) but not of 8 (bf16)
  EXPECT_TRUE(checkAttention(DType::F32, s, {{"k", odd}}).ok());
  e = checkAttention(DType::BF16, s, {{"q", ok}, {"k", odd}});
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "attention: k: t stride 68 (elements) is not a "
                         "non-negative multiple of 8 (16 bytes of bf16)");

  AttnOperand mis = ok;
  mis.data = arena + 4;
  e = checkAttention(DType::F32, s, {{"v", mis}});
  EXPECT_TRUE(contains(e.message(), "v: base address is not 16-byte aligned"))
      << e.message();
  AttnOperand null;
  e = checkAttention(DType::F32, s, {{"o", null}});
  EXPECT_TRUE(contains(e.message(), "o: null pointer")) << e.message();
  AttnOperand overlap = ok;
  overlap.strideT = 32;
  e = checkAttention(DType::F32, s, {{"q", overlap}});
  EXPECT_TRUE(contains(e.message(), "smaller than D=64")) << e.message();
  AttnShape t0 = s;
  t0.T = 0;
  EXPECT_FALSE(checkAttention(DType::F32, t0, {{"q", ok}}).ok());
}

TEST(CudaAttention, LaunchRejectsBadArgsWithoutTouchingTheDevice) {
  AttnShape s;
  s.D = 100;
  const AttnOperand o = AttnOperand::bhtd(arena, 1, 1, 100);
  const Status e = attentionForward(DType::F32, s, o, o, o, o,
                                    reinterpret_cast<float *>(arena), nullptr);
  EXPECT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.message(), "D=100")) << e.message();
}

TEST(CudaAttention, Flops) {
  AttnShape s;
  s.B = 1, s.H = 1, s.T = 2, s.D = 1, s.causal = true;
  EXPECT_EQ(attentionForwardFlops(s), 4.0 * 3); // pairs (0,0) (1,0) (1,1)
  s.causal = false;
  EXPECT_EQ(attentionForwardFlops(s), 4.0 * 4);
  // GPT-2 124M layer at 16 x 1024 tokens: 4 * 16 * 12 * 64 * 1024*1025/2.
  s.B = 16, s.H = 12, s.T = 1024, s.D = 64, s.causal = true;
  EXPECT_DOUBLE_EQ(attentionForwardFlops(s),
                   4.0 * 16 * 12 * 64 * (1024.0 * 1025 / 2));
}

TEST(CudaMixed, BlockOffsets) {
  const CastSegment segs[] = {{arena, arena, 1},
                              {arena, arena, 0},
                              {arena, arena, kCastChunk},
                              {arena, arena, kCastChunk + 1}};
  const std::vector<int64_t> off = castBlockOffsets(segs, 4);
  EXPECT_EQ(off, (std::vector<int64_t>{0, 1, 1, 2, 4}));
}

TEST(CudaMixed, RejectsBadSegments) {
  const CastSegment neg{arena, arena, -1};
  Status e = castSegments(DType::F32, DType::BF16, &neg, 1, false, nullptr);
  EXPECT_TRUE(contains(e.message(), "segment 0 has a negative size"));
  const CastSegment null{nullptr, arena, 5};
  e = castSegments(DType::F32, DType::BF16, &null, 1, false, nullptr);
  EXPECT_TRUE(contains(e.message(), "segment 0 has a null pointer"));
  const CastSegment good{arena, arena, 5};
  e = castSegments(DType::BF16, DType::BF16, &good, 1, true, nullptr);
  EXPECT_TRUE(contains(e.message(), "needs an fp32 destination"));
}

#ifdef MERAK_HAVE_NCCL
namespace {
/// In-process group of `n` ranks (one thread each): rank 0's bytes are
/// copied to the others.
struct FakeGroup {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<unsigned char> bytes;
  bool ready = false;
  bool failBroadcast = false;
};
class FakeTransport final : public BootstrapTransport {
public:
  FakeTransport(FakeGroup &g, int rank, int size)
      : g_(g), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status broadcast(void *p, size_t n) override {
    if (g_.failBroadcast)
      return Status::error("peer rank 2 did not join (test)");
    std::unique_lock<std::mutex> l(g_.mu);
    if (rank_ == 0) {
      g_.bytes.assign(static_cast<unsigned char *>(p),
                      static_cast<unsigned char *>(p) + n);
      g_.ready = true;
      g_.cv.notify_all();
    } else {
      g_.cv.wait(l, [&] { return g_.ready; });
      std::memcpy(p, g_.bytes.data(), n);
    }
    return Status::success();
  }

private:
  FakeGroup &g_;
  int rank_, size_;
};

std::vector<merak::rt::Result<NcclId>>
runGroup(int n, FakeGroup &g, const NcclIdSource &src) {
  std::vector<merak::rt::Result<NcclId>> out(
      n, merak::rt::Result<NcclId>::error("not run"));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      FakeTransport t(g, r, n);
      out[r] = exchangeNcclId(t, "dp", src);
    });
  for (auto &t : ts)
    t.join();
  return out;
}
} // namespace

TEST(CudaNccl, UniqueIdReachesEveryRank) {
  FakeGroup g;
  int calls = 0;
  auto res = runGroup(4, g, [&](NcclId &id) {
    ++calls; // only rank 0 generates
    for (size_t i = 0; i < id.size(); ++i)
      id[i] = static_cast<unsigned char>(i * 7 + 3);
    return Status::success();
  });
  EXPECT_EQ(calls, 1);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(res[r].ok()) << res[r].message();
    for (size_t i = 0; i < kNcclIdBytes; ++i)
      ASSERT_EQ((*res[r])[i], static_cast<unsigned char>(i * 7 + 3));
  }
  EXPECT_EQ(g.bytes.size(), 8 + kNcclIdBytes);
}

TEST(CudaNccl, RankZeroFailureReachesEveryRank) {
  FakeGroup g;
  auto res = runGroup(3, g, [](NcclId &) {
    return Status::error("ncclGetUniqueId: unhandled system error");
  });
  EXPECT_EQ(res[0].message(), "rank 0 of the dp group could not create the "
                              "NCCL unique id: ncclGetUniqueId: unhandled "
                              "system error");
  for (int r = 1; r < 3; ++r)
    EXPECT_EQ(res[r].message(),
              "rank 0 of the dp group could not create the NCCL unique id");
}

TEST(CudaNccl, TransportFailureIsReported) {
  FakeGroup g;
  g.failBroadcast = true;
  auto res = runGroup(2, g, [](NcclId &) { return Status::success(); });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(res[r].message(), "bootstrap of the dp NCCL communicator: peer "
                                "rank 2 did not join (test)");
}

TEST(CudaNccl, Messages) {
  EXPECT_EQ(ncclWhere("all-reduce (sum, bf16, 10 elements)", 3, "dp", 1, 4),
            "NCCL all-reduce (sum, bf16, 10 elements) on rank 3 (dp group "
            "rank 1 of 4)");
  const std::string s = ncclErrorString(2); // ncclSystemError
  EXPECT_TRUE(contains(s, "(code 2)")) << s;
  EXPECT_GT(s.size(), std::string(" (code 2)").size()) << s;
}

TEST(CudaNccl, Timeout) {
  unsetenv("MERAK_COMM_TIMEOUT");
  EXPECT_EQ(ncclTimeoutSeconds(), 60.0);
  setenv("MERAK_COMM_TIMEOUT", "2.5", 1);
  EXPECT_EQ(ncclTimeoutSeconds(), 2.5);
  setenv("MERAK_COMM_TIMEOUT", "-1", 1);
  EXPECT_EQ(ncclTimeoutSeconds(), 60.0);
  unsetenv("MERAK_COMM_TIMEOUT");
}

TEST(CudaNccl, NoDevicePath) {
  if (hasDevice())
    GTEST_SKIP() << "a CUDA device is present";
  FakeGroup g;
  FakeTransport t(g, 0, 1);
  auto c = NcclComm::create(t, "tp", 0, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message().rfind("no CUDA device: ", 0), 0u) << c.message();
  EXPECT_FALSE(g.ready); // failed before any bootstrap traffic
}
#endif
