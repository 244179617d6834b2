// RUN: merak-opt --merak-plan-memory --merak-to-emitc=target=cuda %s | mlir-translate --mlir-to-cpp | FileCheck %s

// target=cuda: blocking and started collectives, ZeRO's local shard and the
// vocabulary-parallel cross-entropy lower to the GPU ABI's entry points of
// the same names (merak_rt/cuda/collectives.h), qualified as gpu:: so that
// argument-dependent lookup on Group/CollReduce does not also find
// merak::rt::cpu's; slots, groups, parts and (pointer, count) lists are the
// CPU lowering's. The runtime sends them to the NCCL communicator of the
// axis or the host-staged MPI fallback.

// CHECK: #include "merak_rt/cuda/ops.h"
// CHECK: #include "merak_rt/cuda/collectives.h"
// CHECK: using namespace merak::rt::gpu;
// CHECK: gpu::allReduceBucket(Group::TP, CollReduce::Sum, DT::F32, [[IN:v[0-9]+]], [[OUT:v[0-9]+]], 4);
// CHECK: gpu::allReduceStart(0, Group::DP, CollReduce::Mean, DT::F32, {{v[0-9]+}}, 4, {{v[0-9]+}}, 6);
// CHECK-NEXT: gpu::opMark(
// CHECK-NEXT: gpu::unary(
// CHECK-NEXT: gpu::collectiveProgress();
// CHECK: gpu::reduceScatterStart(1, Group::DP, CollReduce::Sum, DT::F32, 2, {{v[0-9]+}}, 2);
// CHECK: gpu::collectiveWait(0, {{v[0-9]+}}, {{v[0-9]+}});
// CHECK: gpu::collectiveWait(1, {{v[0-9]+}});
// CHECK: gpu::allGatherBucket(Group::DP, DT::F32, 2, {{v[0-9]+}}, {{v[0-9]+}}, 2);
// CHECK: gpu::localShard(Group::DP, DT::F32, 2, {{v[0-9]+}}, {{v[0-9]+}}, 2);
// CHECK: gpu::vocabCrossEntropy(Group::TP, DT::F32,
// CHECK: gpu::opMark(-1);
func.func @train_step(%a: tensor<4xf32>, %b: tensor<2x3xf32>, %l: tensor<2x4xf32>,
                      %y: tensor<2xi64>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<4xf32>,
        tensor<2xf32>, tensor<f32>) {
  %t = merak.all_reduce %a group = "tp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
  %r = merak.all_reduce_start %t, %b group = "dp" reduction = "mean" : tensor<4xf32>, tensor<2x3xf32>
  %e = merak.exp %a : tensor<4xf32>
  %s = merak.reduce_scatter_start %e group = "dp" reduction = "sum" parts = 2 : tensor<4xf32>
  %x:2 = merak.wait %r : tensor<4xf32>, tensor<2x3xf32>
  %z = merak.wait %s : tensor<2xf32>
  %g = merak.all_gather %z group = "dp" : tensor<2xf32> -> tensor<4xf32>
  %h = merak.local_shard %g group = "dp" : tensor<4xf32> -> tensor<2xf32>
  %c = merak.cross_entropy %l, %y axis = 1 reduction = "mean" {group = "tp"} : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
  return %t, %x#0, %x#1, %z, %g, %h, %c : tensor<4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>, tensor<f32>
}
