// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the matmul rule: 2-D, batched with
// broadcasting batch dimensions, and numpy's rank-1 operands on either
// side (also with a batched other operand, and both rank 1: a dot product).

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: gradcheck: all 5 cases passed

// [2x3] x [3x4], non-square so that a transposition mistake is a shape
// error or a wrong value.
merak.param @a : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
merak.param @b : tensor<3x4xf64> = dense<[[0.25, -0.6, 1.1, 0.8], [-1.3, 0.45, 0.1, -0.2], [0.35, 0.5, -0.75, 1.25]]> : tensor<3x4xf64>
func.func @forward(%w: tensor<2x4xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x3xf64>
  %b = merak.get_param @b : tensor<3x4xf64>
  %0 = merak.matmul %a, %b : tensor<2x3xf64>, tensor<3x4xf64> -> tensor<2x4xf64>
  %1 = merak.mul %0, %0 : tensor<2x4xf64>, tensor<2x4xf64>
  %2 = merak.mul %1, %w : tensor<2x4xf64>, tensor<2x4xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Batched: [2x1x2x2] x [3x2x2] -> [2x3x2x2]; the lhs is broadcast over
// dimension 1, the rhs over the missing leading dimension.
merak.param @a : tensor<2x1x2x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5]]], [[[-0.4, 0.9], [0.25, -0.6]]]]> : tensor<2x1x2x2xf64>
merak.param @b : tensor<3x2x2xf64> = dense<[[[1.1, 0.8], [-1.3, 0.45]], [[0.1, -0.2], [0.35, 0.5]], [[-0.75, 1.25], [0.6, -0.9]]]> : tensor<3x2x2xf64>
func.func @forward(%w: tensor<2x3x2x2xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x1x2x2xf64>
  %b = merak.get_param @b : tensor<3x2x2xf64>
  %0 = merak.matmul %a, %b : tensor<2x1x2x2xf64>, tensor<3x2x2xf64> -> tensor<2x3x2x2xf64>
  %1 = merak.mul %0, %0 : tensor<2x3x2x2xf64>, tensor<2x3x2x2xf64>
  %2 = merak.mul %1, %w : tensor<2x3x2x2xf64>, tensor<2x3x2x2xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1, 2, 3] : tensor<2x3x2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Rank-1 operands: [3] x [3x2] -> [2], [2x3] x [3] -> [2], [3] x [3] -> [].
merak.param @v : tensor<3xf64> = dense<[0.3, -1.2, 0.7]> : tensor<3xf64>
merak.param @m : tensor<3x2xf64> = dense<[[1.5, -0.4], [0.9, 0.25], [-0.6, 1.1]]> : tensor<3x2xf64>
merak.param @n : tensor<2x3xf64> = dense<[[0.8, -1.3, 0.45], [0.1, -0.2, 0.35]]> : tensor<2x3xf64>
merak.param @u : tensor<3xf64> = dense<[0.5, -0.75, 1.25]> : tensor<3xf64>
func.func @forward(%w: tensor<2xf64>, %z: tensor<2xf64>) -> tensor<f64> {
  %v = merak.get_param @v : tensor<3xf64>
  %m = merak.get_param @m : tensor<3x2xf64>
  %n = merak.get_param @n : tensor<2x3xf64>
  %u = merak.get_param @u : tensor<3xf64>
  %0 = merak.matmul %v, %m : tensor<3xf64>, tensor<3x2xf64> -> tensor<2xf64>
  %1 = merak.mul %0, %w : tensor<2xf64>, tensor<2xf64>
  %2 = merak.matmul %n, %u : tensor<2x3xf64>, tensor<3xf64> -> tensor<2xf64>
  %3 = merak.mul %2, %2 : tensor<2xf64>, tensor<2xf64>
  %4 = merak.mul %3, %z : tensor<2xf64>, tensor<2xf64>
  %5 = merak.add %1, %4 : tensor<2xf64>, tensor<2xf64>
  %6 = merak.reduce_sum %5 axes = [0] : tensor<2xf64> -> tensor<f64>
  %7 = merak.matmul %v, %u : tensor<3xf64>, tensor<3xf64> -> tensor<f64>
  %8 = merak.mul %7, %7 : tensor<f64>, tensor<f64>
  %loss = merak.add %6, %8 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Rank-1 lhs with a batched rhs: [2] x [3x2x2] -> [3x2]; batched lhs with
// a rank-1 rhs: [2x2x3] x [3] -> [2x2].
merak.param @v : tensor<2xf64> = dense<[0.3, -1.2]> : tensor<2xf64>
merak.param @b : tensor<3x2x2xf64> = dense<[[[1.1, 0.8], [-1.3, 0.45]], [[0.1, -0.2], [0.35, 0.5]], [[-0.75, 1.25], [0.6, -0.9]]]> : tensor<3x2x2xf64>
merak.param @a : tensor<2x2x3xf64> = dense<[[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]], [[0.25, -0.6, 1.1], [0.8, -1.3, 0.45]]]> : tensor<2x2x3xf64>
merak.param @u : tensor<3xf64> = dense<[0.5, -0.75, 1.25]> : tensor<3xf64>
func.func @forward(%w: tensor<3x2xf64>, %z: tensor<2x2xf64>) -> tensor<f64> {
  %v = merak.get_param @v : tensor<2xf64>
  %b = merak.get_param @b : tensor<3x2x2xf64>
  %a = merak.get_param @a : tensor<2x2x3xf64>
  %u = merak.get_param @u : tensor<3xf64>
  %0 = merak.matmul %v, %b : tensor<2xf64>, tensor<3x2x2xf64> -> tensor<3x2xf64>
  %1 = merak.mul %0, %0 : tensor<3x2xf64>, tensor<3x2xf64>
  %2 = merak.mul %1, %w : tensor<3x2xf64>, tensor<3x2xf64>
  %3 = merak.reduce_sum %2 axes = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  %4 = merak.matmul %a, %u : tensor<2x2x3xf64>, tensor<3xf64> -> tensor<2x2xf64>
  %5 = merak.mul %4, %z : tensor<2x2xf64>, tensor<2x2xf64>
  %6 = merak.reduce_sum %5 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  %loss = merak.add %3, %6 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// A two-layer MLP on an input batch: matmul, bias add, gelu, matmul,
// cross-entropy (everything composed).
// gradcheck-arg: %t = [2, 0, 1, 2]
merak.param @w1 : tensor<3x4xf64> = dense<[[0.25, -0.6, 1.1, 0.8], [-1.3, 0.45, 0.1, -0.2], [0.35, 0.5, -0.75, 1.25]]> : tensor<3x4xf64>
merak.param @b1 : tensor<4xf64> = dense<[0.1, -0.2, 0.05, 0.3]> : tensor<4xf64>
merak.param @w2 : tensor<4x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9], [0.25, -0.6, 1.1], [0.8, -1.3, 0.45]]> : tensor<4x3xf64>
func.func @forward(%x: tensor<4x3xf64>, %t: tensor<4xi64>) -> tensor<f64> {
  %w1 = merak.get_param @w1 : tensor<3x4xf64>
  %b1 = merak.get_param @b1 : tensor<4xf64>
  %w2 = merak.get_param @w2 : tensor<4x3xf64>
  %0 = merak.matmul %x, %w1 : tensor<4x3xf64>, tensor<3x4xf64> -> tensor<4x4xf64>
  %1 = merak.add %0, %b1 : tensor<4x4xf64>, tensor<4xf64>
  %2 = merak.gelu %1 : tensor<4x4xf64>
  %3 = merak.matmul %2, %w2 : tensor<4x4xf64>, tensor<4x3xf64> -> tensor<4x3xf64>
  %loss = merak.cross_entropy %3, %t axis = 1 reduction = "mean" : tensor<4x3xf64>, tensor<4xi64> -> tensor<f64>
  return %loss : tensor<f64>
}
