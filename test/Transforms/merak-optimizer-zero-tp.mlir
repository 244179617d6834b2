// RUN: merak-opt %s -merak-data-parallel="dp=2 zero=1" -merak-optimizer="optimizer=sgd momentum=0.9" | FileCheck %s
// ZeRO of a tensor-parallel shard: the local shard (2x3) is flattened,
// padded and split over dp; the state carries both layouts (merak.zero
// with the local shape); the squared norm of its parts is summed over dp,
// then over tp with the other shards.

// CHECK: merak.param @optimizer.sgd.momentum_buffer.t : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {merak.kind = "state", merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>, merak.zero = #merak.zero<parts = 2, shape = [2, 3]>}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.*]] = merak.reduce_scatter {{.*}} group = "dp" reduction = "mean" : tensor<6xf32> -> tensor<3xf32>
// CHECK: %[[DP:.*]] = merak.all_reduce {{.*}} group = "dp" reduction = "sum"
// CHECK: merak.all_reduce %[[DP]] group = "tp" reduction = "sum"
// The update runs on this rank's part: the parameter's local shard, the
// reduce-scattered gradient and the part-sized state.
// CHECK: %[[LR:.*]] = merak.get_param @optimizer.hparams.lr
// CHECK: %[[P:.*]] = merak.local_shard {{.*}} group = "dp" : tensor<6xf32> -> tensor<3xf32>
// CHECK: %[[B:.*]] = merak.get_param @optimizer.sgd.momentum_buffer.t : tensor<3xf32>
// CHECK: %[[U:.*]]:2 = merak.sgd_update %[[P]], %[[G]] momentum_buffer %[[B]] lr %[[LR]] momentum = 9.000000e-01 weight_decay = 0.000000e+00 : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
// CHECK: merak.set_param @optimizer.sgd.momentum_buffer.t, %[[U]]#1 : tensor<3xf32>
// CHECK: %[[FULL:.*]] = merak.all_gather %[[U]]#0 group = "dp" : tensor<3xf32> -> tensor<6xf32>
// CHECK: %[[R:.*]] = merak.reshape %[[FULL]] : tensor<6xf32> to tensor<2x3xf32>
// CHECK: merak.set_param @t, %[[R]]
merak.param @t : tensor<2x3xf32> = dense<1.0> : tensor<4x3xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32> {merak.name = "loss"}, tensor<2x3xf32> {merak.name = "grad:t"}) {
  %l = merak.reduce_sum %x axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<2x3xf32>
}
