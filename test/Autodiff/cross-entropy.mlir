// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of cross_entropy w.r.t. the logits, with the
// reductions mean, sum and none (reduced to a scalar with a random weighted
// sum) and with ignore_index (an ignored element contributes neither to the
// loss nor to the count of the mean).

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: case 5: PASS
// CHECK: case 6: PASS
// CHECK: gradcheck: all 7 cases passed

// mean, class axis 1.
// gradcheck-arg: %t = [1, 3, 0]
merak.param @l : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%t: tensor<3xi64>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<3x4xf64>
  %loss = merak.cross_entropy %l, %t axis = 1 reduction = "mean" : tensor<3x4xf64>, tensor<3xi64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// sum, class axis 1, i32 labels; the loss is scaled by a parameter too.
// gradcheck-arg: %t = [2, 2, 0]
merak.param @l : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
merak.param @s : tensor<f64> = dense<1.75> : tensor<f64>
func.func @forward(%t: tensor<3xi32>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<3x4xf64>
  %s = merak.get_param @s : tensor<f64>
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "sum" : tensor<3x4xf64>, tensor<3xi32> -> tensor<f64>
  %loss = merak.mul %0, %s : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// none, reduced with a random weighted sum.
// gradcheck-arg: %t = [3, 0, 1]
merak.param @l : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%t: tensor<3xi64>, %w: tensor<3xf64>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<3x4xf64>
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "none" : tensor<3x4xf64>, tensor<3xi64> -> tensor<3xf64>
  %1 = merak.mul %0, %w : tensor<3xf64>, tensor<3xf64>
  %loss = merak.reduce_sum %1 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// mean with ignore_index -100 on the second row: the mean is over 2
// elements and that row's logits get zero gradient.
// gradcheck-arg: %t = [1, -100, 3]
merak.param @l : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%t: tensor<3xi64>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<3x4xf64>
  %loss = merak.cross_entropy %l, %t axis = 1 reduction = "mean" {ignore_index = -100 : i64} : tensor<3x4xf64>, tensor<3xi64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// sum with ignore_index 2, a class that occurs (the rows labelled 2 are
// ignored).
// gradcheck-arg: %t = [2, 0, 3]
merak.param @l : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%t: tensor<3xi64>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<3x4xf64>
  %loss = merak.cross_entropy %l, %t axis = 1 reduction = "sum" {ignore_index = 2 : i64} : tensor<3x4xf64>, tensor<3xi64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// none with ignore_index, class axis 1 of N x C x D logits, i32 labels.
// gradcheck-arg: %t = [[0, 2], [-1, 1]]
merak.param @l : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
func.func @forward(%t: tensor<2x2xi32>, %w: tensor<2x2xf64>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<2x3x2xf64>
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "none" {ignore_index = -1 : i64} : tensor<2x3x2xf64>, tensor<2x2xi32> -> tensor<2x2xf64>
  %1 = merak.mul %0, %w : tensor<2x2xf64>, tensor<2x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// mean over N x D elements with the class axis in the middle, logits
// computed from two parameters (a linear layer with a bias).
// gradcheck-arg: %t = [[0, 2], [1, 1]]
merak.param @w : tensor<3x2xf64> = dense<[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]]> : tensor<3x2xf64>
merak.param @b : tensor<3x1xf64> = dense<[[0.1], [-0.2], [0.3]]> : tensor<3x1xf64>
func.func @forward(%t: tensor<2x2xi64>, %x: tensor<2x3x2xf64>) -> tensor<f64> {
  %w = merak.get_param @w : tensor<3x2xf64>
  %b = merak.get_param @b : tensor<3x1xf64>
  %0 = merak.mul %x, %w : tensor<2x3x2xf64>, tensor<3x2xf64>
  %1 = merak.add %0, %b : tensor<2x3x2xf64>, tensor<3x1xf64>
  %loss = merak.cross_entropy %1, %t axis = 1 reduction = "mean" : tensor<2x3x2xf64>, tensor<2x2xi64> -> tensor<f64>
  return %loss : tensor<f64>
}
