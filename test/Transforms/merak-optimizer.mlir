// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=adamw lr=0.01" -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=adan" -verify-diagnostics | FileCheck %s --check-prefix=ADAN
// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=sgd momentum=0.9 clip-norm=1.0" -verify-diagnostics | FileCheck %s --check-prefix=SGD
// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=sgd nesterov=true weight-decay=0.1" -verify-diagnostics | FileCheck %s --check-prefix=PLAIN
// RUN: merak-opt %s -split-input-file -merak-optimizer="optimizer=sgd momentum=0.5 nesterov=true weight-decay=0.1" -verify-diagnostics | FileCheck %s --check-prefix=NESTEROV

// @train_step: the @loss_grad arguments plus `step`; returns loss, the
// gradient norm and the learning rate; one fused update op per parameter
// whose results set_param writes (state, then the parameter).
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg.w : tensor<3xf32> = dense<0.000000e+00>
// CHECK-DAG: merak.param @optimizer.adamw.exp_avg_sq.w : tensor<3xf32> = dense<0.000000e+00>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>, %[[STEP:.*]]: tensor<i64> {merak.name = "step"})
// CHECK-SAME: -> (tensor<f32> {merak.name = "loss"}, tensor<f32> {merak.name = "grad_norm"}, tensor<f32> {merak.name = "lr"})
// CHECK: %[[LR:.*]] = merak.get_param @optimizer.hparams.lr : tensor<f32>
// CHECK: %[[P:.*]] = merak.get_param @w : tensor<3xf32>
// CHECK: %[[M:.*]] = merak.get_param @optimizer.adamw.exp_avg.w
// CHECK: %[[V:.*]] = merak.get_param @optimizer.adamw.exp_avg_sq.w
// CHECK: %[[NP:.*]], %[[NM:.*]], %[[NV:.*]] = merak.adamw_update %[[P]], %[[X]], %[[M]], %[[V]] lr %[[LR]] step %[[STEP]]
// CHECK-SAME: beta1 = 9.000000e-01 beta2 = 0.99899999999999999 eps = 1.000000e-08 weight_decay = 1.000000e-02
// CHECK-SAME: : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK-NEXT: merak.set_param @optimizer.adamw.exp_avg.w, %[[NM]]
// CHECK-NEXT: merak.set_param @optimizer.adamw.exp_avg_sq.w, %[[NV]]
// CHECK-NEXT: merak.set_param @w, %[[NP]]
// CHECK-NEXT: return
// ADAN-DAG: merak.param @optimizer.adan.prev_grad.w
// ADAN-DAG: merak.param @optimizer.adan.exp_avg_diff.w
// ADAN-LABEL: func.func @train_step
// ADAN-SAME: (%[[X:.*]]: tensor<3xf32>, %[[STEP:.*]]: tensor<i64>
// ADAN: %[[G:.*]] = merak.get_param @optimizer.adan.prev_grad.w
// ADAN: %[[M:.*]] = merak.get_param @optimizer.adan.exp_avg.w
// ADAN: %[[D:.*]] = merak.get_param @optimizer.adan.exp_avg_diff.w
// ADAN: %[[N:.*]] = merak.get_param @optimizer.adan.exp_avg_sq.w
// ADAN: %[[NP:.*]], %[[NM:.*]], %[[ND:.*]], %[[NN:.*]], %[[NG:.*]] = merak.adan_update %{{.*}}, %[[X]], %[[M]], %[[D]], %[[N]], %[[G]] lr %{{.*}} step %[[STEP]]
// ADAN-SAME: beta1 = 2.000000e-02 beta2 = 8.000000e-02 beta3 = 1.000000e-02 eps = 1.000000e-08 weight_decay = 0.000000e+00
// ADAN-NEXT: merak.set_param @optimizer.adan.exp_avg.w, %[[NM]]
// ADAN-NEXT: merak.set_param @optimizer.adan.exp_avg_diff.w, %[[ND]]
// ADAN-NEXT: merak.set_param @optimizer.adan.exp_avg_sq.w, %[[NN]]
// ADAN-NEXT: merak.set_param @optimizer.adan.prev_grad.w, %[[NG]]
// ADAN-NEXT: merak.set_param @w, %[[NP]]
// SGD with momentum and clipping: the clip coefficient min(1, c / (norm +
// 1e-6)) is the op's `clip` operand.
// SGD-DAG: merak.param @optimizer.sgd.momentum_buffer.w
// SGD-LABEL: func.func @train_step
// SGD: %[[NORM:.*]] = merak.sqrt
// SGD: %[[ADD:.*]] = merak.add %[[NORM]], %{{.*}}
// SGD: %[[DIV:.*]] = merak.div %{{.*}}, %[[ADD]]
// SGD: %[[COEF:.*]] = merak.min %{{.*}}, %[[DIV]]
// SGD: %[[LR:.*]] = merak.get_param @optimizer.hparams.lr
// SGD: %[[B:.*]] = merak.get_param @optimizer.sgd.momentum_buffer.w
// SGD: %[[U:.*]]:2 = merak.sgd_update %{{.*}}, %{{.*}} momentum_buffer %[[B]] lr %[[LR]] clip %[[COEF]] momentum = 9.000000e-01 weight_decay = 0.000000e+00 :
// SGD-NEXT: merak.set_param @optimizer.sgd.momentum_buffer.w, %[[U]]#1
// SGD-NEXT: merak.set_param @w, %[[U]]#0
// Plain SGD (momentum 0: no state, nesterov has no effect, as torch).
// PLAIN-NOT: momentum_buffer
// PLAIN: %[[U:.*]] = merak.sgd_update %{{.*}}, %{{.*}} lr %{{.*}} momentum = 0.000000e+00 weight_decay = 1.000000e-01 : (tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// PLAIN-NEXT: merak.set_param @w, %[[U]]
// NESTEROV: merak.sgd_update {{.*}} momentum_buffer {{.*}} momentum = 5.000000e-01 weight_decay = 1.000000e-01 {nesterov}
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
