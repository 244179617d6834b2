// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=adamw lr=0.01" -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=adan" -verify-diagnostics | FileCheck %s --check-prefix=ADAN
// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=sgd momentum=0.9 clip-norm=1.0" -verify-diagnostics | FileCheck %s --check-prefix=SGD

// @train_step: the @loss_grad arguments plus `step`; returns loss, the
// gradient norm and the learning rate; writes parameters and state.
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg.w : tensor<3xf32> = dense<0.000000e+00>
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg_sq.w : tensor<3xf32> = dense<0.000000e+00>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{.*}}: tensor<3xf32>, %[[STEP:.*]]: tensor<i64> {merak.name = "step"})
// CHECK-SAME: -> (tensor<f32> {merak.name = "loss"}, tensor<f32> {merak.name = "grad_norm"}, tensor<f32> {merak.name = "lr"})
// CHECK-DAG: merak.set_param @optimizer.adamw.exp_avg.w
// CHECK-DAG: merak.set_param @optimizer.adamw.exp_avg_sq.w
// CHECK: merak.set_param @w
// ADAN-DAG: merak.param @optimizer.adan.prev_grad.w
// ADAN-DAG: merak.param @optimizer.adan.exp_avg_diff.w
// ADAN: merak.set_param @optimizer.adan.prev_grad.w
// SGD-DAG: merak.param @optimizer.sgd.momentum_buffer.w
// SGD: merak.min
// SGD: merak.set_param @w
merak.param @w : tensor<3xf32> = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
func.func @loss_grad(%x: tensor<3xf32>) -> (tensor<f32> {merak.name = "loss"}, tensor<3xf32> {merak.name = "grad:w"}) {
  %w = merak.get_param @w : tensor<3xf32>
  %p = merak.mul %w, %x : tensor<3xf32>, tensor<3xf32>
  %l = merak.reduce_sum %p axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{merak-optimizer: no @loss_grad (run merak-autodiff with entry=loss)}}
module {
}
