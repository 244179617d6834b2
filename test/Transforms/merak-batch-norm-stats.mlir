// RUN: merak-opt %s -split-input-file -merak-batch-norm-stats -verify-diagnostics | FileCheck %s

// A training-mode normalisation with `momentum` (the importer's torch-style
// BatchNorm) updates its running statistics right after it (PyTorch's
// update: merak.batch_norm_stats); the parameters become buffers; the
// attribute is consumed.
// CHECK-DAG: merak.param @rm : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32> {merak.kind = "buffer"}
// CHECK-DAG: merak.param @rv : tensor<3xf32> = dense<1.000000e+00> : tensor<3xf32> {merak.kind = "buffer"}
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = merak.batch_norm %[[X:[^,]*]], %{{.*}} {training} :
// CHECK-NEXT: %[[RM:.*]] = merak.get_param @rm
// CHECK-NEXT: %[[RV:.*]] = merak.get_param @rv
// CHECK-NEXT: %[[NM:.*]], %[[NV:.*]] = merak.batch_norm_stats %[[X]], %[[RM]], %[[RV]] momentum = 9.000000e-01 : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
// CHECK-NEXT: merak.set_param @rm, %[[NM]]
// CHECK-NEXT: merak.set_param @rv, %[[NV]]
// CHECK-NOT: momentum

merak.param @w : tensor<3xf32> = dense<1.0> : tensor<3xf32>
merak.param @rm : tensor<3xf32> = dense<0.0> : tensor<3xf32>
merak.param @rv : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @forward(%x: tensor<2x3x2xf32>) -> tensor<f32> {
  %w = merak.get_param @w : tensor<3xf32>
  %m = merak.get_param @rm : tensor<3xf32>
  %v = merak.get_param @rv : tensor<3xf32>
  %y = merak.batch_norm %x, %w, %w, %m, %v epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
  %t = merak.tanh %y : tensor<2x3x2xf32>
  %l = merak.reduce_mean %t axes = [0, 1, 2] : tensor<2x3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// One value per channel (a batch of one row, no spatial dims): no unbiased
// variance; the error names the running mean.
merak.param @rm : tensor<3xf32> = dense<0.0> : tensor<3xf32>
merak.param @rv : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @forward(%x: tensor<1x3xf32>, %s: tensor<3xf32>) -> tensor<1x3xf32> {
  %m = merak.get_param @rm : tensor<3xf32>
  %v = merak.get_param @rv : tensor<3xf32>
  // expected-error @+1 {{merak-batch-norm-stats: the batch normalisation of 'rm' trains over 1 value per channel (this part's 1 row(s) x the spatial size)}}
  %y = merak.batch_norm %x, %s, %s, %m, %v epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<1x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// Statistics that are not parameters (graph inputs here): a warning, no
// update, the attribute consumed.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: set_param
// CHECK: merak.batch_norm {{.*}} {training} :
// CHECK-NOT: set_param
func.func @forward(%x: tensor<4x3xf32>, %s: tensor<3xf32>) -> tensor<4x3xf32> {
  // expected-warning @+1 {{merak-batch-norm-stats: the running statistics are not two parameters (initializers), so training does not update them}}
  %y = merak.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// Momentum 0 (how torch exports momentum=None as well as 1.0): one warning
// for all such normalisations, on the first; the update is still made.
// CHECK-LABEL: func.func @forward
// CHECK: merak.batch_norm_stats {{.*}} momentum = 0.000000e+00
// CHECK: merak.batch_norm_stats {{.*}} momentum = 0.000000e+00
merak.param @rm : tensor<3xf32> = dense<0.0> : tensor<3xf32>
merak.param @rv : tensor<3xf32> = dense<1.0> : tensor<3xf32>
merak.param @rm2 : tensor<3xf32> = dense<0.0> : tensor<3xf32>
merak.param @rv2 : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @forward(%x: tensor<4x3xf32>, %s: tensor<3xf32>) -> tensor<4x3xf32> {
  %m = merak.get_param @rm : tensor<3xf32>
  %v = merak.get_param @rv : tensor<3xf32>
  %m2 = merak.get_param @rm2 : tensor<3xf32>
  %v2 = merak.get_param @rv2 : tensor<3xf32>
  // expected-warning @+1 {{merak-batch-norm-stats: 2 batch normalisation(s) (the first: 'rm') have momentum 0 in the file, so each training batch replaces their running statistics (nn.BatchNorm*(momentum=1.0)); torch's exporter writes momentum=None (a cumulative average of the batches) the same way}}
  %y = merak.batch_norm %x, %s, %s, %m, %v epsilon = 1.0e-5 {training, momentum = 0.0 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %z = merak.batch_norm %y, %s, %s, %m2, %v2 epsilon = 1.0e-5 {training, momentum = 0.0 : f64} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %z : tensor<4x3xf32>
}
