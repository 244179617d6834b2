// RUN: rm -rf %t && mkdir -p %t && %python %S/Inputs/linear_scan.py %t
// RUN: merak-run %s --input %t/in0.npy --input %t/in1.npy --input %t/in2.npy --input %t/in3.npy \
// RUN:   --input %t/in4.npy --input %t/in5.npy \
// RUN:   --expect %t/out0.npy --expect %t/out1.npy --expect %t/out2.npy --expect %t/out3.npy \
// RUN:   --expect %t/out4.npy --expect %t/out5.npy --rtol 1e-5 --atol 1e-6 | FileCheck %s

// merak.linear_scan and merak.linear_scan_grad against PyTorch
// (Inputs/linear_scan.py: the recurrence as a loop of torch ops, its
// gradients by autograd), in float64 along a middle axis and in float32
// along the first.

// CHECK: output 0 '#0' matches (30 elements
// CHECK: output 1 '#1' matches (30 elements
// CHECK: output 2 '#2' matches (30 elements
// CHECK: output 3 '#3' matches (12 elements
// CHECK: output 4 '#4' matches (12 elements
// CHECK: output 5 '#5' matches (12 elements
func.func @forward(%a: tensor<2x5x3xf64>, %b: tensor<2x5x3xf64>, %w: tensor<2x5x3xf64>,
                   %c: tensor<4x3xf32>, %d: tensor<4x3xf32>, %v: tensor<4x3xf32>)
    -> (tensor<2x5x3xf64>, tensor<2x5x3xf64>, tensor<2x5x3xf64>,
        tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %h = merak.linear_scan %a, %b axis = 1 : tensor<2x5x3xf64>
  %g:2 = merak.linear_scan_grad %a, %h, %w axis = 1 : tensor<2x5x3xf64>
  %k = merak.linear_scan %c, %d axis = 0 : tensor<4x3xf32>
  %l:2 = merak.linear_scan_grad %c, %k, %v axis = 0 : tensor<4x3xf32>
  return %h, %g#0, %g#1, %k, %l#0, %l#1 : tensor<2x5x3xf64>, tensor<2x5x3xf64>, tensor<2x5x3xf64>,
      tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}
