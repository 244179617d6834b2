// RUN: rm -rf %t && mkdir -p %t && %python %S/Inputs/selective_scan.py %t
// RUN: merak-run %s --input %t/in0.npy --input %t/in1.npy --input %t/in2.npy \
// RUN:   --input %t/in3.npy --input %t/in4.npy --input %t/in5.npy --input %t/in6.npy \
// RUN:   --input %t/in7.npy --input %t/in8.npy --input %t/in9.npy --input %t/in10.npy \
// RUN:   --input %t/in11.npy --expect %t/out0.npy --expect %t/out1.npy \
// RUN:   --expect %t/out2.npy --expect %t/out3.npy --expect %t/out4.npy \
// RUN:   --expect %t/out5.npy --expect %t/out6.npy --expect %t/out7.npy \
// RUN:   --expect %t/out8.npy --expect %t/out9.npy --expect %t/out10.npy \
// RUN:   --expect %t/out11.npy --rtol 1e-5 --atol 1e-6 | FileCheck %s

// merak.selective_scan and merak.selective_scan_grad against PyTorch
// (Inputs/selective_scan.py: transformers' reference form of Mamba's scan,
// a [B, D, T, N] discretisation and a loop over the tokens; gradients by
// autograd), in float64 and float32.

// CHECK: output 0 '#0' matches (40 elements
// CHECK: output 1 '#1' matches (40 elements
// CHECK: output 2 '#2' matches (40 elements
// CHECK: output 3 '#3' matches (15 elements
// CHECK: output 4 '#4' matches (24 elements
// CHECK: output 5 '#5' matches (24 elements
// CHECK: output 6 '#6' matches (18 elements
// CHECK: output 7 '#7' matches (18 elements
// CHECK: output 8 '#8' matches (18 elements
// CHECK: output 9 '#9' matches (6 elements
// CHECK: output 10 '#10' matches (12 elements
// CHECK: output 11 '#11' matches (12 elements
func.func @forward(%u: tensor<2x5x4xf64>, %d: tensor<2x5x4xf64>, %a: tensor<5x3xf64>,
                   %b: tensor<2x4x3xf64>, %c: tensor<2x4x3xf64>, %w: tensor<2x5x4xf64>,
                   %u2: tensor<1x3x6xf32>, %d2: tensor<1x3x6xf32>, %a2: tensor<3x2xf32>,
                   %b2: tensor<1x6x2xf32>, %c2: tensor<1x6x2xf32>, %w2: tensor<1x3x6xf32>)
    -> (tensor<2x5x4xf64>, tensor<2x5x4xf64>, tensor<2x5x4xf64>, tensor<5x3xf64>,
        tensor<2x4x3xf64>, tensor<2x4x3xf64>,
        tensor<1x3x6xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>, tensor<3x2xf32>,
        tensor<1x6x2xf32>, tensor<1x6x2xf32>) {
  %y = merak.selective_scan %u, %d, %a, %b, %c : tensor<2x5x4xf64>, tensor<5x3xf64>, tensor<2x4x3xf64>
  %g:5 = merak.selective_scan_grad %u, %d, %a, %b, %c, %w : tensor<2x5x4xf64>, tensor<5x3xf64>, tensor<2x4x3xf64>
  %y2 = merak.selective_scan %u2, %d2, %a2, %b2, %c2 : tensor<1x3x6xf32>, tensor<3x2xf32>, tensor<1x6x2xf32>
  %g2:5 = merak.selective_scan_grad %u2, %d2, %a2, %b2, %c2, %w2 : tensor<1x3x6xf32>, tensor<3x2xf32>, tensor<1x6x2xf32>
  return %y, %g#0, %g#1, %g#2, %g#3, %g#4, %y2, %g2#0, %g2#1, %g2#2, %g2#3, %g2#4
      : tensor<2x5x4xf64>, tensor<2x5x4xf64>, tensor<2x5x4xf64>, tensor<5x3xf64>,
        tensor<2x4x3xf64>, tensor<2x4x3xf64>,
        tensor<1x3x6xf32>, tensor<1x3x6xf32>, tensor<1x3x6xf32>, tensor<3x2xf32>,
        tensor<1x6x2xf32>, tensor<1x6x2xf32>
}
