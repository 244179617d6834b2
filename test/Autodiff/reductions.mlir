// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of reduce_sum, reduce_mean, reduce_max and
// reduce_min, with and without keepdims, over inner, outer, several and
// all dimensions. The values have no ties, so the max/min gradient goes to
// one element.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: gradcheck: all 5 cases passed

// reduce_sum: axis 1 without keepdims, axes [0, 2] with keepdims, all
// axes; reduce_sum over no axes is the identity.
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
func.func @forward(%w: tensor<2x2xf64>, %v: tensor<1x3x1xf64>, %u: tensor<2x3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %sq = merak.mul %x, %x : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %0 = merak.reduce_sum %sq axes = [1] : tensor<2x3x2xf64> -> tensor<2x2xf64>
  %1 = merak.mul %0, %w : tensor<2x2xf64>, tensor<2x2xf64>
  %2 = merak.reduce_sum %1 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  %3 = merak.reduce_sum %x axes = [0, 2] {keepdims} : tensor<2x3x2xf64> -> tensor<1x3x1xf64>
  %4 = merak.mul %3, %3 : tensor<1x3x1xf64>, tensor<1x3x1xf64>
  %5 = merak.mul %4, %v : tensor<1x3x1xf64>, tensor<1x3x1xf64>
  %6 = merak.reduce_sum %5 axes = [0, 1, 2] {keepdims} : tensor<1x3x1xf64> -> tensor<1x1x1xf64>
  %7 = merak.reshape %6 : tensor<1x1x1xf64> to tensor<f64>
  %8 = merak.reduce_sum %x axes = [] : tensor<2x3x2xf64> -> tensor<2x3x2xf64>
  %9 = merak.mul %8, %u : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %10 = merak.reduce_sum %9 axes = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  %11 = merak.add %2, %7 : tensor<f64>, tensor<f64>
  %loss = merak.add %11, %10 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// reduce_mean: axis 2 without keepdims, axes [0, 1] with keepdims, all axes.
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
func.func @forward(%w: tensor<2x3xf64>, %v: tensor<1x1x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %0 = merak.reduce_mean %x axes = [2] : tensor<2x3x2xf64> -> tensor<2x3xf64>
  %1 = merak.mul %0, %0 : tensor<2x3xf64>, tensor<2x3xf64>
  %2 = merak.mul %1, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %3 = merak.reduce_sum %2 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  %4 = merak.reduce_mean %x axes = [0, 1] {keepdims} : tensor<2x3x2xf64> -> tensor<1x1x2xf64>
  %5 = merak.mul %4, %v : tensor<1x1x2xf64>, tensor<1x1x2xf64>
  %6 = merak.reduce_sum %5 axes = [0, 1, 2] : tensor<1x1x2xf64> -> tensor<f64>
  %sq = merak.mul %x, %x : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %7 = merak.reduce_mean %sq axes = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  %8 = merak.add %3, %6 : tensor<f64>, tensor<f64>
  %loss = merak.add %8, %7 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// reduce_max: axis 1 without keepdims, axis 0 with keepdims, all axes.
merak.param @x : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%w: tensor<3xf64>, %v: tensor<1x4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x4xf64>
  %0 = merak.reduce_max %x axes = [1] : tensor<3x4xf64> -> tensor<3xf64>
  %1 = merak.mul %0, %w : tensor<3xf64>, tensor<3xf64>
  %2 = merak.reduce_sum %1 axes = [0] : tensor<3xf64> -> tensor<f64>
  %3 = merak.reduce_max %x axes = [0] {keepdims} : tensor<3x4xf64> -> tensor<1x4xf64>
  %4 = merak.mul %3, %3 : tensor<1x4xf64>, tensor<1x4xf64>
  %5 = merak.mul %4, %v : tensor<1x4xf64>, tensor<1x4xf64>
  %6 = merak.reduce_sum %5 axes = [0, 1] : tensor<1x4xf64> -> tensor<f64>
  %7 = merak.reduce_max %x axes = [0, 1] : tensor<3x4xf64> -> tensor<f64>
  %8 = merak.add %2, %6 : tensor<f64>, tensor<f64>
  %loss = merak.add %8, %7 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// reduce_min: axis 1 with keepdims, axis 0 without, all axes with keepdims.
merak.param @x : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%w: tensor<3x1xf64>, %v: tensor<4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x4xf64>
  %0 = merak.reduce_min %x axes = [1] {keepdims} : tensor<3x4xf64> -> tensor<3x1xf64>
  %1 = merak.mul %0, %w : tensor<3x1xf64>, tensor<3x1xf64>
  %2 = merak.reduce_sum %1 axes = [0, 1] : tensor<3x1xf64> -> tensor<f64>
  %3 = merak.reduce_min %x axes = [0] : tensor<3x4xf64> -> tensor<4xf64>
  %4 = merak.mul %3, %3 : tensor<4xf64>, tensor<4xf64>
  %5 = merak.mul %4, %v : tensor<4xf64>, tensor<4xf64>
  %6 = merak.reduce_sum %5 axes = [0] : tensor<4xf64> -> tensor<f64>
  %7 = merak.reduce_min %x axes = [0, 1] {keepdims} : tensor<3x4xf64> -> tensor<1x1xf64>
  %8 = merak.reshape %7 : tensor<1x1xf64> to tensor<f64>
  %9 = merak.add %2, %6 : tensor<f64>, tensor<f64>
  %loss = merak.add %9, %8 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// A max-pool-like pattern: reduce_max over the middle axis of a 3-D tensor
// (neither the first nor the last dimension).
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
func.func @forward(%w: tensor<2x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %e = merak.exp %x : tensor<2x3x2xf64>
  %0 = merak.reduce_max %e axes = [1] : tensor<2x3x2xf64> -> tensor<2x2xf64>
  %1 = merak.mul %0, %w : tensor<2x2xf64>, tensor<2x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
