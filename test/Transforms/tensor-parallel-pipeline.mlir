// RUN: merak-opt %s -merak-tensor-parallel=tp=2 -merak-attach-loss=loss=model-output \
// RUN:   -merak-pipeline="pp=2 microbatches=2 dp=2" -merak-optimizer="optimizer=sgd momentum=0.9" | FileCheck %s

// 3D parallelism: merak-tensor-parallel shards @forward (two residual MLP
// blocks, column- then row-parallel) before merak-pipeline cuts it, so each
// stage's fragments hold local shapes and the tp collectives. The balanced
// cut lies on the residual stream between the blocks (after h1, before the
// second block's f; the positions after fc4, where the stage after the cut
// would read no parameter, are no cut points). The costs (CostOpInterface
// FLOPs) count no arithmetic for the tp collectives and tp_identity.
// CHECK: merak.pipeline = #merak.pipeline_plan<stages = 2, microbatches = {{[0-9]+}}, cut_points = 6, cuts = [5], costs = [152, 160]
// CHECK-SAME: owners = {{\[}}["fc1.weight", "fc2.weight", "fc2.bias"], ["fc3.weight", "fc4.weight"]]
// Sharded params keep their full initial value; their accumulators are
// local-shaped scratch (never checkpointed).
// CHECK-DAG: merak.param @fc1.weight : tensor<4x4xf32> = dense<5.000000e-01> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @pipeline.grad.fc1.weight : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {merak.kind = "scratch"}
// CHECK-DAG: merak.param @optimizer.sgd.momentum_buffer.fc3.weight : tensor<4x4xf32> = dense<0.000000e+00> : tensor<8x4xf32> {merak.kind = "state", merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
//
// Stage 0: f on the data input, g (all_reduce tp) before fc2's bias.
// CHECK-LABEL: func.func @stage0_forward
// CHECK-SAME: -> (tensor<2x4xf32> {merak.name = "act:0"})
// CHECK: merak.tp_identity
// CHECK: merak.matmul %{{.*}} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x4xf32>
// CHECK: return
//
// The update: gradients averaged over dp; the squared norm sums the sharded
// gradients over tp, adds the replicated ones (fc2.bias) once, then sums
// over the stages.
// CHECK-LABEL: func.func @stage0_update
// CHECK: merak.all_reduce %{{.*}}, %{{.*}}, %{{.*}} group = "dp" reduction = "mean"
// CHECK: %[[SH:.*]] = merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<f32>
// CHECK-NEXT: %[[ALL:.*]] = merak.add %{{.*}}, %[[SH]]
// CHECK-NEXT: merak.all_reduce %[[ALL]] group = "pp" reduction = "sum" : tensor<f32>
//
// Stage 1 receives h1 replicated and applies f itself.
// CHECK-LABEL: func.func @stage1_forward
// CHECK-SAME: (%[[H:.*]]: tensor<2x4xf32> {merak.name = "act:0"}) -> (tensor<f32> {merak.name = "loss"})
// CHECK: merak.tp_identity %[[H]]
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum"
// CHECK: return
//
// Its backward recomputes the forward (one g), then runs the VJPs: g's is
// the identity, f's all-reduces the cotangent of h1 over tp before the
// residual path's cotangent is added and sent to stage 0.
// CHECK-LABEL: func.func @stage1_backward
// CHECK-SAME: -> (tensor<2x4xf32> {merak.name = "cot:0"})
// CHECK: merak.all_reduce %{{.*}} group = "tp"
// CHECK: merak.gelu_grad
// CHECK: %[[R:.*]] = merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x4xf32>
// CHECK-NEXT: %[[C:.*]] = merak.add %{{.*}}, %[[R]]
// CHECK-NOT: merak.all_reduce
// CHECK: return %[[C]]
// CHECK-LABEL: func.func @stage1_update
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<f32>
// CHECK: merak.all_reduce %{{.*}} group = "pp" reduction = "sum" : tensor<f32>
merak.param @fc1.weight : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @fc2.weight : tensor<4x8xf32> = dense<0.25> : tensor<4x8xf32>
merak.param @fc2.bias : tensor<4xf32> = dense<0.125> : tensor<4xf32>
merak.param @fc3.weight : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @fc4.weight : tensor<4x8xf32> = dense<0.25> : tensor<4x8xf32>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w1 = merak.get_param @fc1.weight : tensor<8x4xf32>
  %w2 = merak.get_param @fc2.weight : tensor<4x8xf32>
  %b2 = merak.get_param @fc2.bias : tensor<4xf32>
  %w3 = merak.get_param @fc3.weight : tensor<8x4xf32>
  %w4 = merak.get_param @fc4.weight : tensor<4x8xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %x, %t1 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %g1 = merak.gelu %m1 : tensor<2x8xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %m2 = merak.matmul %g1, %t2 : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %y2 = merak.add %b2, %m2 : tensor<4xf32>, tensor<2x4xf32>
  %h1 = merak.add %x, %y2 : tensor<2x4xf32>, tensor<2x4xf32>
  %t3 = merak.transpose %w3 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m3 = merak.matmul %h1, %t3 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %g3 = merak.gelu %m3 : tensor<2x8xf32>
  %t4 = merak.transpose %w4 perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %m4 = merak.matmul %g3, %t4 : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %h2 = merak.add %h1, %m4 : tensor<2x4xf32>, tensor<2x4xf32>
  %sq = merak.mul %h2, %h2 : tensor<2x4xf32>, tensor<2x4xf32>
  %l = merak.reduce_sum %sq axes = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
