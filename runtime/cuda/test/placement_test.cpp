//===- placement_test.cpp - GPU and collectives choice (placement.h) ------===//
#include "merak_rt/cuda/collectives.h"
#include "merak_rt/cuda/placement.h"

#include <gtest/gtest.h>

using namespace merak::rt::cuda;
using merak::rt::gpu::CollectiveCall;
using merak::rt::gpu::CollKind;
using merak::rt::gpu::Group;
using merak::rt::cpu::CollReduce;
using merak::rt::cpu::DT;

TEST(CudaPlacement, DeviceIsLocalRankModuloDevices) {
  EXPECT_EQ(selectDevice(0, 8), 0);
  EXPECT_EQ(selectDevice(5, 8), 5);
  EXPECT_EQ(selectDevice(9, 8), 1);
  // One GPU shared by every rank of the node.
  EXPECT_EQ(selectDevice(0, 1), 0);
  EXPECT_EQ(selectDevice(3, 1), 0);
  EXPECT_EQ(selectDevice(3, 2), 1);
}

TEST(CudaPlacement, AutomaticChoice) {
  auto one = chooseCollectives(nullptr, 8, 8, true);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->kind, CollectivesKind::Nccl);
  // Two ranks, one GPU (the H200 test machine): NCCL would refuse it.
  auto shared = chooseCollectives("", 2, 1, true);
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->kind, CollectivesKind::Mpi);
  EXPECT_EQ(shared->why, "2 ranks on this node share 1 GPU(s); NCCL needs a GPU per rank");
  auto autoValue = chooseCollectives("auto", 4, 8, true);
  ASSERT_TRUE(autoValue.ok());
  EXPECT_EQ(autoValue->kind, CollectivesKind::Nccl);
  // Built without NCCL: always the fallback.
  auto noNccl = chooseCollectives(nullptr, 2, 8, false);
  ASSERT_TRUE(noNccl.ok());
  EXPECT_EQ(noNccl->kind, CollectivesKind::Mpi);
  EXPECT_STREQ(collectivesName(noNccl->kind), "mpi");
}

TEST(CudaPlacement, ForcedChoice) {
  auto mpi = chooseCollectives("mpi", 1, 8, true);
  ASSERT_TRUE(mpi.ok());
  EXPECT_EQ(mpi->kind, CollectivesKind::Mpi);
  EXPECT_EQ(mpi->why, "forced by MERAK_GPU_COLLECTIVES=mpi");
  // Forcing NCCL on a shared GPU is the user's call (NCCL then reports it).
  auto nccl = chooseCollectives("nccl", 2, 1, true);
  ASSERT_TRUE(nccl.ok());
  EXPECT_EQ(nccl->kind, CollectivesKind::Nccl);
  auto missing = chooseCollectives("nccl", 1, 1, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("built without NCCL"), std::string::npos);
  auto bad = chooseCollectives("gloo", 1, 1, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "MERAK_GPU_COLLECTIVES='gloo': expected nccl, mpi or auto");
}

TEST(CudaCollectiveCall, CountsAndDescription) {
  const int64_t counts[] = {3, 5};
  CollectiveCall rs{CollKind::ReduceScatter, Group::DP, CollReduce::Mean, DT::F32, 2, 2, counts};
  EXPECT_EQ(rs.inCount(1), 10);
  EXPECT_EQ(rs.outCount(1), 5);
  EXPECT_EQ(rs.describe(), "reduce-scatter (mean) of 2 f32 tensors on the dp group");
  CollectiveCall ag{CollKind::AllGather, Group::TP, CollReduce::Sum, DT::F32, 4, 1, counts};
  EXPECT_EQ(ag.inCount(0), 3);
  EXPECT_EQ(ag.outCount(0), 12);
  EXPECT_EQ(ag.describe(), "all-gather of 1 f32 tensor on the tp group");
  CollectiveCall ar{CollKind::AllReduce, Group::TP, CollReduce::Max, DT::F64, 1, 2, counts};
  EXPECT_EQ(ar.inCount(0), 3);
  EXPECT_EQ(ar.outCount(0), 3);
  EXPECT_EQ(ar.describe(), "all-reduce (max) of 2 f64 tensors on the tp group");
}
