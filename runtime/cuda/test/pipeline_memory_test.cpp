//===- pipeline_memory_test.cpp - The pipeline runner's CUDA memory -------===//
//
// cuda::createPipelineMemory (pipeline_memory.cpp) over the fake CUDA
// runtime of host_device_fake.cpp (host memory, a call record), so it runs
// without a GPU: device buffers come from cudaMalloc and host (message)
// buffers from pinned cudaMallocHost, both zeroed although the allocators
// are not; copies are cudaMemcpyAsync with cudaMemcpyDefault on the given
// stream; synchronize() asks the device collectives first and returns
// their error without waiting for the stream (a dead peer must not hang
// it); CUDA errors and failed allocations are reported, not thrown.
//
//===----------------------------------------------------------------------===//
#include "host_device_fake.h"

#include "merak_rt/cuda/collectives.h"
#include "merak_rt/cuda/pipeline_memory.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace merak::rt;

namespace {

void *const kStream = reinterpret_cast<void *>(0x1234);

/// Collectives whose synchronize() can fail; nothing else is called.
class FakeCollectives final : public gpu::DeviceCollectives {
public:
  std::string name() const override { return "fake"; }
  int groupRank(gpu::Group) const override { return 0; }
  int groupSize(gpu::Group) const override { return 2; }
  Status run(const gpu::CollectiveCall &, const void *const *, void *const *,
             cuda::StreamHandle) override {
    return Status::error("unexpected");
  }
  Status start(int32_t, const gpu::CollectiveCall &, const void *const *,
               cuda::StreamHandle) override {
    return Status::error("unexpected");
  }
  Status wait(int32_t, const gpu::CollectiveCall &, void *const *, cuda::StreamHandle) override {
    return Status::error("unexpected");
  }
  Status allToAllV(gpu::Group, gpu::DT, const void *, const int64_t *, void *, const int64_t *,
                   cuda::StreamHandle) override {
    return Status::error("unexpected");
  }
  Status synchronize() override {
    ++syncs;
    return error.empty() ? Status::success() : Status::error(error);
  }
  int syncs = 0;
  std::string error;
};

class PipelineMemoryTest : public ::testing::Test {
protected:
  void SetUp() override {
    gFakeCalls = FakeCalls();
    memory = cuda::createPipelineMemory(kStream);
  }
  void TearDown() override { gpu::setCollectives(nullptr); }
  std::unique_ptr<PipelineMemory> memory;
};

bool allZero(const char *p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i])
      return false;
  return true;
}

TEST_F(PipelineMemoryTest, NotHostResident) {
  EXPECT_FALSE(memory->hostResident());
  EXPECT_STREQ(memory->name(), "cuda");
}

TEST_F(PipelineMemoryTest, DeviceAndPinnedBuffersAreZeroed) {
  char *d = memory->allocate(1000, /*host=*/false);
  char *h = memory->allocate(1000, /*host=*/true);
  ASSERT_NE(d, nullptr);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(gFakeCalls.mallocs, 1);
  EXPECT_EQ(gFakeCalls.mallocHosts, 1);
  EXPECT_TRUE(allZero(d, 1000));
  EXPECT_TRUE(allZero(h, 1000));
  EXPECT_EQ(gFakeCalls.lastStream, kStream); // the device memset is on the stream
  memory->release(d, false);
  memory->release(h, true);
  EXPECT_EQ(gFakeCalls.frees, 1);
  EXPECT_EQ(gFakeCalls.freeHosts, 1);
  // A zero-byte buffer still has a valid base.
  char *z = memory->allocate(0, false);
  EXPECT_NE(z, nullptr);
  memory->release(z, false);
}

TEST_F(PipelineMemoryTest, FailedAllocationIsNull) {
  gFakeCalls.failAlloc = true;
  EXPECT_EQ(memory->allocate(64, false), nullptr);
  EXPECT_EQ(memory->allocate(64, true), nullptr);
}

TEST_F(PipelineMemoryTest, CopiesAreDefaultKindOnTheStream) {
  std::vector<float> src{1, 2, 3}, dst(3, 0);
  ASSERT_TRUE(memory->copy(dst.data(), src.data(), 12).ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(gFakeCalls.lastKind, static_cast<int>(cudaMemcpyDefault));
  EXPECT_EQ(gFakeCalls.lastStream, kStream);
  // An empty copy issues nothing.
  int before = gFakeCalls.memcpys;
  ASSERT_TRUE(memory->copy(dst.data(), src.data(), 0).ok());
  EXPECT_EQ(gFakeCalls.memcpys, before);
  ASSERT_TRUE(memory->zero(dst.data(), 8).ok());
  EXPECT_EQ(dst[0], 0.0f);
  EXPECT_EQ(dst[1], 0.0f);
  EXPECT_EQ(dst[2], 3.0f);
}

TEST_F(PipelineMemoryTest, CopyErrorNamesTheCall) {
  gFakeCalls.failMemcpy = true;
  char a[4] = {}, b[4] = {};
  Status s = memory->copy(a, b, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cudaMemcpyAsync (pipeline buffers)"), std::string::npos)
      << s.message();
}

TEST_F(PipelineMemoryTest, SynchronizeWaitsForCollectivesFirst) {
  ASSERT_TRUE(memory->synchronize().ok()); // none installed: the stream only
  EXPECT_EQ(gFakeCalls.streamSyncs, 1);
  FakeCollectives c;
  gpu::setCollectives(&c);
  ASSERT_TRUE(memory->synchronize().ok());
  EXPECT_EQ(c.syncs, 1);
  EXPECT_EQ(gFakeCalls.streamSyncs, 2);
  // A dead peer: the collectives' error, and no stream wait that could hang.
  c.error = "NCCL all-reduce (sum, f32, 8 elements) on rank 1 (pp group rank 1 of 2): did not "
            "complete within 60 s";
  Status s = memory->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), c.error);
  EXPECT_EQ(gFakeCalls.streamSyncs, 2);
}

} // namespace
