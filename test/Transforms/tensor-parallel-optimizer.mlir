// RUN: merak-opt %s -merak-optimizer="optimizer=adamw" | FileCheck %s

// Optimizer state of a tensor-parallel shard is sharded alike (local type,
// full-shape zero initial value, the same merak.shard), and the squared norm
// of sharded gradients is summed over "tp" before the global norm.
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg.w : tensor<2x3xf32> = dense<0.000000e+00> : tensor<4x3xf32> {merak.kind = "state", merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg_sq.w : tensor<2x3xf32> = dense<0.000000e+00> : tensor<4x3xf32> {merak.kind = "state", merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg.b : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {merak.kind = "state"}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[SQ:.*]] = merak.sum_squares %[[G:.*]] : tensor<2x3xf32> -> tensor<f32>
// CHECK: %[[ALL:.*]] = merak.all_reduce %[[SQ]] group = "tp" reduction = "sum" : tensor<f32> -> tensor<f32>
// CHECK: %[[TOT:.*]] = merak.add %{{.*}}, %[[ALL]]
// CHECK: merak.sqrt %[[TOT]] : tensor<f32>
// The shard's update is elementwise on the local shard and its local state.
// CHECK: %[[W:.*]] = merak.get_param @w : tensor<2x3xf32>
// CHECK: %[[M:.*]] = merak.get_param @optimizer.adamw.exp_avg.w : tensor<2x3xf32>
// CHECK: %[[V:.*]] = merak.get_param @optimizer.adamw.exp_avg_sq.w : tensor<2x3xf32>
// CHECK: %[[U:[^,]*]], %{{.*}}, %{{.*}} = merak.adamw_update %[[W]], %[[G]], %[[M]], %[[V]] lr
// CHECK-SAME: -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: merak.set_param @w, %[[U]] : tensor<2x3xf32>
// CHECK: %[[UB:[^,]*]], %{{.*}}, %{{.*}} = merak.adamw_update {{.*}} -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK: merak.set_param @b, %[[UB]] : tensor<3xf32>
merak.param @w : tensor<2x3xf32> = dense<1.0> : tensor<4x3xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
merak.param @b : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32> {merak.name = "loss"}, tensor<2x3xf32> {merak.name = "grad:w"}, tensor<3xf32> {merak.name = "grad:b"}) {
  %w = merak.get_param @w : tensor<2x3xf32>
  %p = merak.mul %w, %x : tensor<2x3xf32>, tensor<2x3xf32>
  %l = merak.reduce_sum %p axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %b = merak.get_param @b : tensor<3xf32>
  return %l, %x, %b : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>
}
