// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/experts_ref.py %t
// RUN: merak-run %s --input %t/x.npy --input %t/w.npy --input %t/e.npy --input %t/g.npy \
// RUN:   --expect %t/y.npy --expect %t/dw.npy --expect %t/yt.npy --expect %t/wdw.npy | FileCheck %s
// RUN: not merak-run %s --input %t/x.npy --input %t/w.npy --input %t/bad.npy --input %t/g.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANGE

// expert_matmul (weight [E, O, K], and read as [E, K, O] with
// transpose_weight) and expert_matmul_grad_weight against numpy
// (Inputs/experts_ref.py: per row x[s] @ w[e_s]^T, per expert the sum of
// g[s] x[s]^T over its rows; expert 3 has no rows, its gradient is zero),
// and the weight gradient added into an accumulator (here w: expert 3
// keeps its values).

// CHECK: output 0 '#0' matches (48 elements
// CHECK: output 1 '#1' matches (120 elements
// CHECK: output 2 '#2' matches (40 elements
// CHECK: output 3 '#3' matches (120 elements
// RANGE: error: expert index 4 of row 2 out of range [0, 4)
func.func @forward(%x: tensor<8x5xf32>, %w: tensor<4x6x5xf32>, %e: tensor<8xi64>, %g: tensor<8x6xf32>)
    -> (tensor<8x6xf32>, tensor<4x6x5xf32>, tensor<8x5xf32>, tensor<4x6x5xf32>) {
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x5xf32>, tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x6xf32>
  %dw = merak.expert_matmul_grad_weight %x, %g[%e] : tensor<8x5xf32>, tensor<8x6xf32>, tensor<8xi64> -> tensor<4x6x5xf32>
  %yt = merak.expert_matmul %g, %w[%e] transpose_weight : tensor<8x6xf32>, tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x5xf32>
  %da = merak.expert_matmul_grad_weight %x, %g[%e] acc %w : tensor<8x5xf32>, tensor<8x6xf32>, tensor<8xi64>, tensor<4x6x5xf32> -> tensor<4x6x5xf32>
  return %y, %dw, %yt, %da : tensor<8x6xf32>, tensor<4x6x5xf32>, tensor<8x5xf32>, tensor<4x6x5xf32>
}
