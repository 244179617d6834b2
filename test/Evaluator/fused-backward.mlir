// RUN: rm -rf %t && mkdir -p %t && %python %S/Inputs/fused_backward.py %t
// RUN: merak-run %s --input %t/in0.npy --input %t/in1.npy --input %t/in2.npy --input %t/in3.npy \
// RUN:   --input %t/in4.npy --input %t/in5.npy --input %t/in6.npy --input %t/in7.npy --input %t/in8.npy \
// RUN:   --input %t/in9.npy --input %t/in10.npy --input %t/in11.npy --input %t/in12.npy \
// RUN:   --expect %t/out0.npy --expect %t/out1.npy --expect %t/out2.npy --expect %t/out3.npy \
// RUN:   --expect %t/out4.npy --expect %t/out5.npy --expect %t/out6.npy --expect %t/out7.npy \
// RUN:   --expect %t/out8.npy --expect %t/out9.npy --rtol 1e-5 --atol 1e-6 | FileCheck %s

// The fused backward ops against numpy (Inputs/fused_backward.py): gelu_grad
// exact and tanh; softmax_grad along axis 0 and log_softmax_grad along
// axis 1; layer_norm_grad with a scale over the last axis and rms over the
// last two (f64); cross_entropy_grad with mean over non-ignored labels and
// with no reduction (class axis 1 of N x C x D, i32 labels, f64).

// CHECK: output 0 '#0' matches (12 elements
// CHECK: output 1 '#1' matches (12 elements
// CHECK: output 2 '#2' matches (12 elements
// CHECK: output 3 '#3' matches (12 elements
// CHECK: output 4 '#4' matches (24 elements
// CHECK: output 5 '#5' matches (24 elements
// CHECK: output 6 '#6' matches (24 elements
// CHECK: output 7 '#7' matches (24 elements
// CHECK: output 8 '#8' matches (20 elements
// CHECK: output 9 '#9' matches (12 elements
func.func @forward(%x: tensor<3x4xf32>, %g: tensor<3x4xf32>, %y0: tensor<3x4xf32>, %y1: tensor<3x4xf32>,
                   %n: tensor<2x3x4xf64>, %ng: tensor<2x3x4xf64>, %w: tensor<4xf64>,
                   %l: tensor<4x5xf32>, %t: tensor<4xi64>, %s: tensor<f32>,
                   %u: tensor<2x3x2xf64>, %k: tensor<2x2xi32>, %ug: tensor<2x2xf64>)
    -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>,
        tensor<2x3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>,
        tensor<4x5xf32>, tensor<2x3x2xf64>) {
  %0 = merak.gelu_grad %x, %g : tensor<3x4xf32>
  %1 = merak.gelu_grad %x, %g {approximate_tanh} : tensor<3x4xf32>
  %2 = merak.softmax_grad %y0, %g axis = 0 : tensor<3x4xf32>
  %3 = merak.log_softmax_grad %y1, %g axis = 1 : tensor<3x4xf32>
  %4:2 = merak.layer_norm_grad %n, %ng scale %w axis = 2 epsilon = 1.0e-5
       : (tensor<2x3x4xf64>, tensor<2x3x4xf64>, tensor<4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3x4xf64>)
  %5:2 = merak.layer_norm_grad %n, %ng axis = 1 epsilon = 0.1 {rms}
       : (tensor<2x3x4xf64>, tensor<2x3x4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3x4xf64>)
  %6 = merak.cross_entropy_grad %l, %t, %s axis = 1 reduction = "mean" {ignore_index = -100 : i64}
       : tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
  %7 = merak.cross_entropy_grad %u, %k, %ug axis = 1 reduction = "none"
       : tensor<2x3x2xf64>, tensor<2x2xi32>, tensor<2x2xf64> -> tensor<2x3x2xf64>
  return %0, %1, %2, %3, %4#0, %4#1, %5#0, %5#1, %6, %7
      : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>,
        tensor<2x3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>,
        tensor<4x5xf32>, tensor<2x3x2xf64>
}
