// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of softmax, log_softmax, layer_norm (without
// affine parameters, with scale only, with bias only, with both, with a
// scale broadcast over the normalised shape) and rms_norm (with and
// without scale). Upstream gradients are random, since a uniform one is
// orthogonal to the softmax/normalisation Jacobians and would hide errors.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: case 5: PASS
// CHECK: case 6: PASS
// CHECK: gradcheck: all 7 cases passed

// softmax along the last axis and along the first axis.
merak.param @x : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%w: tensor<3x4xf64>, %v: tensor<3x4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x4xf64>
  %0 = merak.softmax %x axis = 1 : tensor<3x4xf64>
  %1 = merak.mul %0, %w : tensor<3x4xf64>, tensor<3x4xf64>
  %2 = merak.softmax %x axis = 0 : tensor<3x4xf64>
  %3 = merak.mul %2, %2 : tensor<3x4xf64>, tensor<3x4xf64>
  %4 = merak.mul %3, %v : tensor<3x4xf64>, tensor<3x4xf64>
  %5 = merak.add %1, %4 : tensor<3x4xf64>, tensor<3x4xf64>
  %loss = merak.reduce_sum %5 axes = [0, 1] : tensor<3x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// log_softmax along the middle axis of a 3-D tensor, and along the last.
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
func.func @forward(%w: tensor<2x3x2xf64>, %v: tensor<2x3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %0 = merak.log_softmax %x axis = 1 : tensor<2x3x2xf64>
  %1 = merak.mul %0, %w : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %2 = merak.log_softmax %x axis = 2 : tensor<2x3x2xf64>
  %3 = merak.mul %2, %2 : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %4 = merak.mul %3, %v : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %5 = merak.add %1, %4 : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %loss = merak.reduce_sum %5 axes = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// layer_norm without scale and bias, over the last axis and over the last
// two axes (epsilon 1e-5 and 0.1, so that epsilon matters).
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
func.func @forward(%w: tensor<2x3x2xf64>, %v: tensor<2x3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %0 = merak.layer_norm %x axis = 2 epsilon = 1.0e-5 : (tensor<2x3x2xf64>) -> tensor<2x3x2xf64>
  %1 = merak.mul %0, %w : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %2 = merak.layer_norm %x axis = 1 epsilon = 0.1 : (tensor<2x3x2xf64>) -> tensor<2x3x2xf64>
  %3 = merak.mul %2, %v : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %4 = merak.add %1, %3 : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %loss = merak.reduce_sum %4 axes = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// layer_norm with scale and bias; with scale only; with bias only.
merak.param @x : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
merak.param @g : tensor<4xf64> = dense<[1.2, 0.7, -0.4, 0.95]> : tensor<4xf64>
merak.param @b : tensor<4xf64> = dense<[0.1, -0.3, 0.25, 0.6]> : tensor<4xf64>
func.func @forward(%w: tensor<3x4xf64>, %v: tensor<3x4xf64>, %u: tensor<3x4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x4xf64>
  %g = merak.get_param @g : tensor<4xf64>
  %b = merak.get_param @b : tensor<4xf64>
  %0 = merak.layer_norm %x scale %g bias %b axis = 1 epsilon = 1.0e-5 : (tensor<3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<3x4xf64>
  %1 = merak.mul %0, %0 : tensor<3x4xf64>, tensor<3x4xf64>
  %2 = merak.mul %1, %w : tensor<3x4xf64>, tensor<3x4xf64>
  %3 = merak.layer_norm %x scale %g axis = 1 epsilon = 1.0e-5 : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>
  %4 = merak.mul %3, %v : tensor<3x4xf64>, tensor<3x4xf64>
  %5 = merak.layer_norm %x bias %b axis = 1 epsilon = 1.0e-5 : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>
  %6 = merak.mul %5, %5 : tensor<3x4xf64>, tensor<3x4xf64>
  %7 = merak.mul %6, %u : tensor<3x4xf64>, tensor<3x4xf64>
  %8 = merak.add %2, %4 : tensor<3x4xf64>, tensor<3x4xf64>
  %9 = merak.add %8, %7 : tensor<3x4xf64>, tensor<3x4xf64>
  %loss = merak.reduce_sum %9 axes = [0, 1] : tensor<3x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// layer_norm over the last two axes with a scale [3x1] and a bias [2]
// that broadcast to the normalised shape [3x2] (their gradients must be
// reduced over the batch and the broadcast dimensions).
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
merak.param @g : tensor<3x1xf64> = dense<[[1.2], [0.7], [-0.4]]> : tensor<3x1xf64>
merak.param @b : tensor<2xf64> = dense<[0.1, -0.3]> : tensor<2xf64>
func.func @forward(%w: tensor<2x3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %g = merak.get_param @g : tensor<3x1xf64>
  %b = merak.get_param @b : tensor<2xf64>
  %0 = merak.layer_norm %x scale %g bias %b axis = 1 epsilon = 1.0e-5 : (tensor<2x3x2xf64>, tensor<3x1xf64>, tensor<2xf64>) -> tensor<2x3x2xf64>
  %1 = merak.mul %0, %0 : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %2 = merak.mul %1, %w : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// rms_norm with scale (over the last axis) and without (over the last two).
merak.param @x : tensor<2x3x2xf64> = dense<[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]> : tensor<2x3x2xf64>
merak.param @g : tensor<2xf64> = dense<[1.2, -0.7]> : tensor<2xf64>
func.func @forward(%w: tensor<2x3x2xf64>, %v: tensor<2x3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3x2xf64>
  %g = merak.get_param @g : tensor<2xf64>
  %0 = merak.rms_norm %x scale %g axis = 2 epsilon = 1.0e-5 : (tensor<2x3x2xf64>, tensor<2xf64>) -> tensor<2x3x2xf64>
  %1 = merak.mul %0, %0 : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %2 = merak.mul %1, %w : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %3 = merak.rms_norm %x axis = 1 epsilon = 0.1 : (tensor<2x3x2xf64>) -> tensor<2x3x2xf64>
  %4 = merak.mul %3, %v : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %5 = merak.add %2, %4 : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %loss = merak.reduce_sum %5 axes = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// The rules composed: rms_norm, softmax of its result, a residual add of
// the parameter, log_softmax.
merak.param @x : tensor<2x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6]]> : tensor<2x4xf64>
merak.param @g : tensor<4xf64> = dense<[1.2, 0.7, -0.4, 0.95]> : tensor<4xf64>
func.func @forward(%w: tensor<2x4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x4xf64>
  %g = merak.get_param @g : tensor<4xf64>
  %0 = merak.rms_norm %x scale %g axis = 1 epsilon = 1.0e-6 : (tensor<2x4xf64>, tensor<4xf64>) -> tensor<2x4xf64>
  %1 = merak.softmax %0 axis = 1 : tensor<2x4xf64>
  %2 = merak.add %1, %x : tensor<2x4xf64>, tensor<2x4xf64>
  %3 = merak.log_softmax %2 axis = 1 : tensor<2x4xf64>
  %4 = merak.mul %3, %w : tensor<2x4xf64>, tensor<2x4xf64>
  %loss = merak.reduce_sum %4 axes = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
