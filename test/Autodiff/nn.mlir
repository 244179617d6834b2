// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the convolution, pooling, batch norm and
// gather_elements rules, and of the scatter-adds (gather_grad,
// gather_elements_grad) that imported ScatterND/ScatterElements use forward,
// and of conv2d_backward_data forward (ConvTranspose). Upstream gradients are random (%w arguments).

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: case 5: PASS
// CHECK: case 6: PASS
// CHECK: case 7: PASS
// CHECK: case 8: PASS
// CHECK: case 9: PASS
// CHECK: gradcheck: all 10 cases passed

// conv2d with stride 2, asymmetric padding, dilation and 2 groups, and a
// bias; the input is a parameter too, so both backward ops are checked.
merak.param @x : tensor<1x4x5x5xf64> = dense<[[[[0.1, -0.2, 0.3, 0.5, -0.7], [0.2, 0.4, -0.6, 0.8, 0.1], [-0.3, 0.5, 0.7, -0.9, 0.2], [0.6, -0.1, 0.2, 0.3, -0.4], [0.9, 0.8, -0.7, 0.6, 0.5]], [[-0.5, 0.4, 0.3, -0.2, 0.1], [0.7, -0.6, 0.5, 0.4, -0.3], [0.2, 0.1, -0.9, 0.8, 0.7], [-0.4, 0.3, 0.2, -0.1, 0.6], [0.5, -0.8, 0.9, 0.1, 0.2]], [[0.3, 0.6, -0.9, 0.2, 0.5], [-0.8, 0.1, 0.4, 0.7, -0.2], [0.5, -0.3, 0.6, 0.9, 0.1], [0.4, 0.7, -0.1, 0.3, -0.6], [-0.2, 0.5, 0.8, -0.4, 0.9]], [[0.9, -0.1, 0.2, -0.3, 0.4], [0.5, 0.6, -0.7, 0.8, -0.9], [0.1, 0.2, 0.3, -0.4, 0.5], [-0.6, 0.7, 0.8, 0.9, -0.1], [0.2, -0.3, 0.4, 0.5, 0.6]]]]> : tensor<1x4x5x5xf64>
merak.param @k : tensor<2x2x2x2xf64> = dense<[[[[0.5, -0.4], [0.3, 0.2]], [[-0.1, 0.6], [0.7, -0.8]]], [[[0.9, 0.1], [-0.2, 0.3]], [[0.4, -0.5], [0.6, 0.7]]]]> : tensor<2x2x2x2xf64>
merak.param @bias : tensor<2xf64> = dense<[0.25, -0.75]> : tensor<2xf64>
func.func @forward(%w: tensor<1x2x3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<1x4x5x5xf64>
  %k = merak.get_param @k : tensor<2x2x2x2xf64>
  %b = merak.get_param @bias : tensor<2xf64>
  %y = merak.conv2d %x, %k bias %b strides = [2, 2] padding = [1, 0, 1, 0] dilations = [2, 2] groups = 2 : (tensor<1x4x5x5xf64>, tensor<2x2x2x2xf64>, tensor<2xf64>) -> tensor<1x2x3x2xf64>
  %m = merak.mul %y, %w : tensor<1x2x3x2xf64>, tensor<1x2x3x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1, 2, 3] : tensor<1x2x3x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// max_pool2d with overlapping windows, padding and ceil mode (distinct
// values, so no ties).
merak.param @x : tensor<1x1x4x5xf64> = dense<[[[[0.11, -0.52, 0.33, 0.94, -0.75], [0.26, 0.47, -0.68, 0.89, 0.15], [-0.31, 0.58, 0.72, -0.93, 0.24], [0.65, -0.16, 0.27, 0.38, -0.49]]]]> : tensor<1x1x4x5xf64>
func.func @forward(%w: tensor<1x1x3x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<1x1x4x5xf64>
  %y = merak.max_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [1, 0, 0, 0] dilations = [1, 1] {ceil_mode} : tensor<1x1x4x5xf64> -> tensor<1x1x3x3xf64>
  %m = merak.mul %y, %w : tensor<1x1x3x3xf64>, tensor<1x1x3x3xf64>
  %l = merak.reduce_sum %m axes = [0, 1, 2, 3] : tensor<1x1x3x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// avg_pool2d with padding, counting the padding and not.
merak.param @x : tensor<1x2x3x3xf64> = dense<[[[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]], [[-0.1, 0.3, -0.5], [0.7, -0.9, 0.2], [0.4, -0.6, 0.8]]]]> : tensor<1x2x3x3xf64>
func.func @forward(%w: tensor<1x2x2x2xf64>, %v: tensor<1x2x2x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<1x2x3x3xf64>
  %a = merak.avg_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [1, 1, 0, 0] : tensor<1x2x3x3xf64> -> tensor<1x2x2x2xf64>
  %b = merak.avg_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [1, 1, 0, 0] {count_include_pad} : tensor<1x2x3x3xf64> -> tensor<1x2x2x2xf64>
  %ma = merak.mul %a, %w : tensor<1x2x2x2xf64>, tensor<1x2x2x2xf64>
  %mb = merak.mul %b, %v : tensor<1x2x2x2xf64>, tensor<1x2x2x2xf64>
  %s = merak.add %ma, %mb : tensor<1x2x2x2xf64>, tensor<1x2x2x2xf64>
  %l = merak.reduce_sum %s axes = [0, 1, 2, 3] : tensor<1x2x2x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// batch_norm with batch statistics (training): x, scale and bias.
merak.param @x : tensor<2x2x2x1xf64> = dense<[[[[0.3], [-0.7]], [[1.1], [0.4]]], [[[-0.2], [0.9]], [[0.6], [-1.3]]]]> : tensor<2x2x2x1xf64>
merak.param @scale : tensor<2xf64> = dense<[0.8, 1.3]> : tensor<2xf64>
merak.param @bias : tensor<2xf64> = dense<[0.1, -0.2]> : tensor<2xf64>
func.func @forward(%w: tensor<2x2x2x1xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x2x2x1xf64>
  %s = merak.get_param @scale : tensor<2xf64>
  %b = merak.get_param @bias : tensor<2xf64>
  %m = merak.constant dense<[5.0, 5.0]> : tensor<2xf64>
  %v = merak.constant dense<[9.0, 9.0]> : tensor<2xf64>
  %y = merak.batch_norm %x, %s, %b, %m, %v epsilon = 1.0e-5 {training} : (tensor<2x2x2x1xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>) -> tensor<2x2x2x1xf64>
  %p = merak.mul %y, %w : tensor<2x2x2x1xf64>, tensor<2x2x2x1xf64>
  %l = merak.reduce_sum %p axes = [0, 1, 2, 3] : tensor<2x2x2x1xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// batch_norm with running statistics (inference).
merak.param @x : tensor<2x2x3xf64> = dense<[[[0.3, -0.7, 0.2], [1.1, 0.4, -0.5]], [[-0.2, 0.9, 0.6], [0.6, -1.3, 0.8]]]> : tensor<2x2x3xf64>
merak.param @scale : tensor<2xf64> = dense<[0.8, 1.3]> : tensor<2xf64>
merak.param @bias : tensor<2xf64> = dense<[0.1, -0.2]> : tensor<2xf64>
func.func @forward(%w: tensor<2x2x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x2x3xf64>
  %s = merak.get_param @scale : tensor<2xf64>
  %b = merak.get_param @bias : tensor<2xf64>
  %m = merak.constant dense<[0.2, -0.1]> : tensor<2xf64>
  %v = merak.constant dense<[1.5, 0.5]> : tensor<2xf64>
  %y = merak.batch_norm %x, %s, %b, %m, %v epsilon = 1.0e-3 : (tensor<2x2x3xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>) -> tensor<2x2x3xf64>
  %p = merak.mul %y, %w : tensor<2x2x3xf64>, tensor<2x2x3xf64>
  %l = merak.reduce_sum %p axes = [0, 1, 2] : tensor<2x2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// gather_elements along axis 1 with a repeated and a negative index (the
// gradient accumulates), indices smaller than the data on axis 0.
// gradcheck-arg: %i = [[0, 2, 0], [-1, 1, 1]]
merak.param @d : tensor<3x3xf64> = dense<[[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [0.7, -0.8, 0.9]]> : tensor<3x3xf64>
func.func @forward(%i: tensor<2x3xi64>, %w: tensor<2x3xf64>) -> tensor<f64> {
  %d = merak.get_param @d : tensor<3x3xf64>
  %g = merak.gather_elements %d[%i] axis = 1 : tensor<3x3xf64>, tensor<2x3xi64> -> tensor<2x3xf64>
  %m = merak.mul %g, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// gather_grad forward (ScatterND with reduction add): rows 1 and 3 of a
// 4x2 table receive two and one update rows (index 1 twice, and -1).
// gradcheck-arg: %i = [1, -1, 1]
merak.param @u : tensor<3x2xf64> = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf64>
func.func @forward(%i: tensor<3xi64>, %w: tensor<4x2xf64>) -> tensor<f64> {
  %u = merak.get_param @u : tensor<3x2xf64>
  %s = merak.gather_grad %u[%i] axis = 0 : tensor<3x2xf64>, tensor<3xi64> -> tensor<4x2xf64>
  %t = merak.tanh %s : tensor<4x2xf64>
  %m = merak.mul %t, %w : tensor<4x2xf64>, tensor<4x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<4x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// gather_elements_grad forward (ScatterElements with reduction add) along
// axis 1, a repeated index in row 0.
// gradcheck-arg: %i = [[2, 2], [0, 1]]
merak.param @u : tensor<2x2xf64> = dense<[[0.7, -0.3], [0.2, 0.9]]> : tensor<2x2xf64>
func.func @forward(%i: tensor<2x2xi64>, %w: tensor<2x3xf64>) -> tensor<f64> {
  %u = merak.get_param @u : tensor<2x2xf64>
  %s = merak.gather_elements_grad %u[%i] axis = 1 : tensor<2x2xf64>, tensor<2x2xi64> -> tensor<2x3xf64>
  %t = merak.tanh %s : tensor<2x3xf64>
  %m = merak.mul %t, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// conv2d_backward_data forward (ONNX ConvTranspose): stride 2, padding,
// dilation, 2 groups, an output one row/column larger than the minimal
// (output_padding); both the input and the weight are parameters.
merak.param @x : tensor<1x4x2x2xf64> = dense<[[[[0.1, -0.2], [0.3, 0.5]], [[-0.7, 0.2], [0.4, -0.6]], [[0.8, 0.1], [-0.3, 0.5]], [[0.7, -0.2], [0.1, 0.9]]]]> : tensor<1x4x2x2xf64>
merak.param @k : tensor<4x1x2x2xf64> = dense<[[[[0.5, -0.4], [0.3, 0.2]]], [[[-0.1, 0.6], [0.7, -0.8]]], [[[0.9, 0.1], [-0.2, 0.3]]], [[[0.4, -0.5], [0.6, 0.7]]]]> : tensor<4x1x2x2xf64>
func.func @forward(%w: tensor<1x2x6x5xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<1x4x2x2xf64>
  %k = merak.get_param @k : tensor<4x1x2x2xf64>
  %y = merak.conv2d_backward_data %x, %k strides = [2, 2] padding = [0, 1, 0, 0] dilations = [2, 2] groups = 2 : (tensor<1x4x2x2xf64>, tensor<4x1x2x2xf64>) -> tensor<1x2x6x5xf64>
  %t = merak.tanh %y : tensor<1x2x6x5xf64>
  %m = merak.mul %t, %w : tensor<1x2x6x5xf64>, tensor<1x2x6x5xf64>
  %l = merak.reduce_sum %m axes = [0, 1, 2, 3] : tensor<1x2x6x5xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// gather_grad with an accumulator (merak-fuse-grad-accumulation's form):
// the scatter added into @a; @a's gradient is the upstream one.
// gradcheck-arg: %i = [1, -1, 1]
merak.param @v : tensor<3x2xf64> = dense<[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]> : tensor<3x2xf64>
merak.param @a : tensor<4x2xf64> = dense<[[0.2, 0.1], [-0.3, 0.5], [0.7, -0.4], [0.0, 0.3]]> : tensor<4x2xf64>
func.func @forward(%i: tensor<3xi64>, %w: tensor<4x2xf64>) -> tensor<f64> {
  %v = merak.get_param @v : tensor<3x2xf64>
  %a = merak.get_param @a : tensor<4x2xf64>
  %s = merak.gather_grad %v[%i] axis = 0 acc %a : tensor<3x2xf64>, tensor<3xi64>, tensor<4x2xf64> -> tensor<4x2xf64>
  %t = merak.tanh %s : tensor<4x2xf64>
  %m = merak.mul %t, %w : tensor<4x2xf64>, tensor<4x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<4x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}
