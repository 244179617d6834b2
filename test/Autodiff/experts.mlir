// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of expert_matmul's rule (the grouped GEMM of a
// Mixture-of-Experts layer): gradients of the input and of every expert's
// weight, with experts chosen by several rows, by one, and by none (its
// gradient is zero); the expert indices get none. Upstream gradients are
// random (%w arguments).

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: gradcheck: all 2 cases passed

// weight [E, O, K] = [3, 2, 3] (torch.nn.Linear's layout per expert);
// rows 0 and 3 choose expert 2, rows 1 and 4 expert 0, nobody expert 1.
merak.param @x : tensor<5x3xf64> = dense<[[0.1, -0.2, 0.3], [0.5, 0.4, -0.6], [0.7, -0.9, 0.2], [-0.3, 0.8, 0.6], [0.2, 0.1, -0.4]]> : tensor<5x3xf64>
merak.param @w : tensor<3x2x3xf64> = dense<[[[0.5, -0.4, 0.3], [0.2, -0.1, 0.6]], [[0.7, -0.8, 0.9], [0.1, -0.2, 0.3]], [[0.4, -0.5, 0.6], [0.7, 0.8, -0.9]]]> : tensor<3x2x3xf64>
func.func @forward(%w: tensor<5x2xf64>) -> tensor<f64> {
  %e = merak.constant dense<[2, 0, 0, 2, 0]> : tensor<5xi64>
  %x = merak.get_param @x : tensor<5x3xf64>
  %k = merak.get_param @w : tensor<3x2x3xf64>
  %y = merak.expert_matmul %x, %k[%e] : tensor<5x3xf64>, tensor<3x2x3xf64>, tensor<5xi64> -> tensor<5x2xf64>
  %m = merak.mul %y, %w : tensor<5x2xf64>, tensor<5x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<5x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// transpose_weight: weight [E, K, O] = [2, 3, 4], i32 expert indices.
merak.param @x : tensor<4x3xf64> = dense<[[0.3, -0.1, 0.2], [-0.5, 0.6, 0.4], [0.9, 0.2, -0.7], [0.1, -0.8, 0.5]]> : tensor<4x3xf64>
merak.param @w : tensor<2x3x4xf64> = dense<[[[0.1, 0.2, -0.3, 0.4], [0.5, -0.6, 0.7, 0.8], [-0.9, 0.1, 0.2, 0.3]], [[0.4, -0.5, 0.6, 0.7], [0.8, 0.9, -0.1, 0.2], [0.3, 0.4, 0.5, -0.6]]]> : tensor<2x3x4xf64>
func.func @forward(%w: tensor<4x4xf64>) -> tensor<f64> {
  %e = merak.constant dense<[1, 0, 1, 1]> : tensor<4xi32>
  %x = merak.get_param @x : tensor<4x3xf64>
  %k = merak.get_param @w : tensor<2x3x4xf64>
  %y = merak.expert_matmul %x, %k[%e] transpose_weight : tensor<4x3xf64>, tensor<2x3x4xf64>, tensor<4xi32> -> tensor<4x4xf64>
  %m = merak.mul %y, %w : tensor<4x4xf64>, tensor<4x4xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<4x4xf64> -> tensor<f64>
  return %l : tensor<f64>
}
