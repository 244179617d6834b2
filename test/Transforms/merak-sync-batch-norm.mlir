// RUN: merak-opt %s -split-input-file -merak-sync-batch-norm -verify-diagnostics | FileCheck %s

// dp = 2: the training normalisation is written out with its sums
// all-reduced over dp (x has 2 x 2 = 4 values per channel here, 8 over the
// group): the mean, the centred squares' mean, rsqrt(var + eps), scale and
// bias; the running statistics blend the global ones (the variance
// unbiased by 8 / 7) and the batch counter counts.
// CHECK-DAG: merak.param @bn.running_mean : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {merak.kind = "buffer"}
// CHECK-DAG: merak.param @bn.num_batches_tracked : tensor<i64> = dense<0> : tensor<i64> {merak.kind = "buffer"}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: merak.batch_norm
// CHECK: %[[S1:.*]] = merak.reduce_sum %[[X:[^ ]*]] axes = [0, 2] {keepdims}
// CHECK: %[[A1:.*]] = merak.all_reduce %[[S1]] group = "dp" reduction = "sum"
// CHECK: %[[C1:.*]] = merak.constant dense<1.250000e-01> : tensor<1x3x1xf32>
// CHECK: %[[MEAN:.*]] = merak.mul %[[A1]], %[[C1]]
// CHECK: %[[XC:.*]] = merak.sub %[[X]], %[[MEAN]]
// CHECK: %[[SQ:.*]] = merak.mul %[[XC]], %[[XC]]
// CHECK: %[[S2:.*]] = merak.reduce_sum %[[SQ]] axes = [0, 2] {keepdims}
// CHECK: %[[A2:.*]] = merak.all_reduce %[[S2]] group = "dp" reduction = "sum"
// CHECK: %[[VAR:.*]] = merak.mul %[[A2]]
// CHECK: merak.rsqrt
// CHECK: merak.set_param @bn.running_mean
// CHECK: merak.constant dense<0.11428571{{[0-9]*}}> : tensor<3xf32>
// CHECK: merak.set_param @bn.running_var
// CHECK: merak.set_param @bn.num_batches_tracked
// CHECK-NOT: merak.batch_norm
module attributes {merak.mesh = #merak.mesh<dp = 2, tp = 1, pp = 1>} {
  merak.param @bn.running_mean : tensor<3xf32> = dense<0.0> : tensor<3xf32>
  merak.param @bn.running_var : tensor<3xf32> = dense<1.0> : tensor<3xf32>
  func.func @forward(%x: tensor<2x3x2xf32>, %s: tensor<3xf32>) -> tensor<2x3x2xf32> {
    %m = merak.get_param @bn.running_mean : tensor<3xf32>
    %v = merak.get_param @bn.running_var : tensor<3xf32>
    %y = merak.batch_norm %x, %s, %s, %m, %v epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
    return %y : tensor<2x3x2xf32>
  }
}

// -----

// dp = 1 (or no mesh): nothing to synchronise; inference-mode
// normalisations are never touched.
// CHECK-LABEL: func.func @forward
// CHECK: merak.batch_norm {{.*}} {momentum = 9.000000e-01 : f64, training}
// CHECK: merak.batch_norm {{.*}} epsilon
module {
  func.func @forward(%x: tensor<2x3x2xf32>, %s: tensor<3xf32>) -> tensor<2x3x2xf32> {
    %y = merak.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
    %z = merak.batch_norm %y, %s, %s, %s, %s epsilon = 1.0e-5 : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
    return %z : tensor<2x3x2xf32>
  }
}

// -----

// Statistics that are not parameters: a warning, the normalisation still
// synchronised, no update.
// CHECK-LABEL: func.func @forward
// CHECK: merak.all_reduce
// CHECK-NOT: merak.set_param
module attributes {merak.mesh = #merak.mesh<dp = 4, tp = 1, pp = 1>} {
  func.func @forward(%x: tensor<4x3xf32>, %s: tensor<3xf32>) -> tensor<4x3xf32> {
    // expected-warning @+1 {{merak-sync-batch-norm: the running statistics are not two parameters (initializers), so training does not update them}}
    %y = merak.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}
