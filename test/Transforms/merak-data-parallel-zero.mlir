// RUN: merak-opt %s -split-input-file -merak-data-parallel="dp=4 zero=1" -merak-optimizer="optimizer=adamw clip-norm=1.0" -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-data-parallel="dp=4 zero=1" -merak-optimizer="optimizer=sgd momentum=0.9 bucket-bytes=16" -verify-diagnostics | FileCheck %s --check-prefix=SGD
// RUN: merak-opt %s -split-input-file -merak-data-parallel="dp=1 zero=1" -verify-diagnostics | FileCheck %s --check-prefix=DP1

// The state is the local part (zeros), with the layout for checkpoints.
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg.w : tensor<2xf32> = dense<0.000000e+00> : tensor<2xf32> {merak.kind = "state", merak.zero = #merak.zero<parts = 4, shape = [2, 3]>}
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg_sq.b : tensor<1xf32> = dense<0.000000e+00> : tensor<1xf32> {merak.kind = "state", merak.zero = #merak.zero<parts = 4, shape = [4]>}

// ZeRO stage 1 over dp = 4. @loss_grad: each gradient is flattened, padded
// with zeros to a multiple of 4 elements (w: 6 -> 8) and reduce-scattered
// (mean) in the bucket; the results are this rank's parts, marked with
// their layout.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: -> (tensor<f32> {merak.name = "loss"}, tensor<2xf32> {merak.name = "grad:w", merak.zero = #merak.zero<parts = 4, shape = [2, 3]>}, tensor<1xf32> {merak.name = "grad:b", merak.zero = #merak.zero<parts = 4, shape = [4]>})
// CHECK: %[[FLAT:.*]] = merak.reshape %{{.*}} : tensor<2x3xf32> to tensor<6xf32>
// CHECK: %[[PAD:.*]] = merak.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: %[[PADDED:.*]] = merak.concat %[[FLAT]], %[[PAD]] axis = 0 : tensor<6xf32>, tensor<2xf32> -> tensor<8xf32>
// CHECK: %[[RS:.*]]:2 = merak.reduce_scatter %{{.*}}, %[[PADDED]] group = "dp" reduction = "mean" : tensor<4xf32>, tensor<8xf32> -> tensor<1xf32>, tensor<2xf32>
// CHECK: merak.all_reduce %{{.*}} group = "dp" reduction = "mean" : tensor<f32> -> tensor<f32>
// CHECK: return %{{.*}}, %[[RS]]#1, %[[RS]]#0

// @train_step: the global norm sums the parts' squares over "dp"; the
// parameter's part is local_shard of the same flattened, padded layout;
// the updated parts are all-gathered (one bucket), un-padded, reshaped and
// written whole.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[SQW:.*]] = merak.sum_squares %{{.*}} : tensor<2xf32> -> tensor<f32>
// CHECK: %[[SQB:.*]] = merak.sum_squares %{{.*}} : tensor<1xf32> -> tensor<f32>
// CHECK: %[[SQ:.*]] = merak.add %[[SQW]], %[[SQB]]
// CHECK: %[[ALL:.*]] = merak.all_reduce %[[SQ]] group = "dp" reduction = "sum" : tensor<f32> -> tensor<f32>
// CHECK: %[[TOT:.*]] = merak.add %{{.*}}, %[[ALL]]
// CHECK: merak.sqrt %[[TOT]]
// CHECK: %[[W:.*]] = merak.get_param @w : tensor<2x3xf32>
// CHECK: %[[WF:.*]] = merak.reshape %[[W]] : tensor<2x3xf32> to tensor<6xf32>
// CHECK: %[[WP:.*]] = merak.concat %[[WF]], %{{.*}} axis = 0
// CHECK: %[[WS:.*]] = merak.local_shard %[[WP]] group = "dp" : tensor<8xf32> -> tensor<2xf32>
// CHECK: merak.set_param @optimizer.adamw.exp_avg.w, %{{.*}} : tensor<2xf32>
// CHECK: merak.local_shard %{{.*}} group = "dp" : tensor<4xf32> -> tensor<1xf32>
// CHECK: %[[AG:.*]]:2 = merak.all_gather %{{.*}}, %{{.*}} group = "dp" : tensor<2xf32>, tensor<1xf32> -> tensor<8xf32>, tensor<4xf32>
// CHECK: %[[CUT:.*]] = merak.slice %[[AG]]#0 starts = [0] limits = [6] strides = [1] : tensor<8xf32> to tensor<6xf32>
// CHECK: %[[NEWW:.*]] = merak.reshape %[[CUT]] : tensor<6xf32> to tensor<2x3xf32>
// CHECK: merak.set_param @w, %[[NEWW]] : tensor<2x3xf32>
// CHECK: merak.set_param @b, %[[AG]]#1 : tensor<4xf32>

// A 16-byte bucket: every updated parameter is gathered on its own.
// SGD-DAG: merak.param @optimizer.sgd.momentum_buffer.w : tensor<2xf32> = dense<0.000000e+00> : tensor<2xf32> {merak.kind = "state", merak.zero = #merak.zero<parts = 4, shape = [2, 3]>}
// SGD-LABEL: func.func @train_step
// SGD: merak.all_gather %{{.*}} group = "dp" : tensor<2xf32> -> tensor<8xf32>
// SGD: merak.set_param @w
// SGD: merak.all_gather %{{.*}} group = "dp" : tensor<1xf32> -> tensor<4xf32>
// SGD: merak.set_param @b

// With one rank there is nothing to shard.
// DP1-LABEL: func.func @loss_grad
// DP1-NOT: merak.zero
// DP1-NOT: merak.reduce_scatter
merak.param @w : tensor<2x3xf32> = dense<1.0> : tensor<2x3xf32>
merak.param @b : tensor<4xf32> = dense<1.0> : tensor<4xf32>
func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32> {merak.name = "loss"}, tensor<2x3xf32> {merak.name = "grad:w"}, tensor<4xf32> {merak.name = "grad:b"}) {
  %w = merak.get_param @w : tensor<2x3xf32>
  %p = merak.mul %w, %x : tensor<2x3xf32>, tensor<2x3xf32>
  %l = merak.reduce_sum %p axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %b = merak.get_param @b : tensor<4xf32>
  %gb = merak.mul %b, %b : tensor<4xf32>, tensor<4xf32>
  return %l, %x, %gb : tensor<f32>, tensor<2x3xf32>, tensor<4xf32>
}

