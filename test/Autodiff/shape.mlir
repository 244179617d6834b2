// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the shape rules: reshape, broadcast,
// transpose, slice (strides 1 and -1; other strides: slice-strided.mlir),
// concat, split, gather, cumsum, linear_scan, selective_scan. The
// upstream gradients are random (the argument %w), so a wrong permutation,
// offset or direction shows.

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
// CHECK: case 10: PASS
// CHECK: gradcheck: all 11 cases passed

// reshape [6] -> [2x3], broadcast [3x1] -> [2x3x4] and [] -> [2x3], and a
// transpose with a non-involutive permutation ([1, 2, 0]: its inverse is
// [2, 0, 1]).
merak.param @r : tensor<6xf64> = dense<[0.3, -1.2, 0.7, 1.5, -0.4, 0.9]> : tensor<6xf64>
merak.param @b : tensor<3x1xf64> = dense<[[0.8], [-1.3], [0.45]]> : tensor<3x1xf64>
merak.param @s : tensor<f64> = dense<1.35> : tensor<f64>
merak.param @t : tensor<2x3x2xf64> = dense<[[[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]], [[0.7, -0.8], [0.9, 1.0], [-1.1, 1.2]]]> : tensor<2x3x2xf64>
func.func @forward(%w: tensor<2x3x4xf64>, %v: tensor<3x2x2xf64>) -> tensor<f64> {
  %r = merak.get_param @r : tensor<6xf64>
  %b = merak.get_param @b : tensor<3x1xf64>
  %s = merak.get_param @s : tensor<f64>
  %t = merak.get_param @t : tensor<2x3x2xf64>
  %0 = merak.reshape %r : tensor<6xf64> to tensor<2x3xf64>
  %1 = merak.reshape %0 : tensor<2x3xf64> to tensor<2x3x1xf64>
  %2 = merak.broadcast %b : tensor<3x1xf64> to tensor<2x3x4xf64>
  %3 = merak.mul %1, %2 : tensor<2x3x1xf64>, tensor<2x3x4xf64>
  %4 = merak.broadcast %s : tensor<f64> to tensor<2x3xf64>
  %5 = merak.reshape %4 : tensor<2x3xf64> to tensor<2x3x1xf64>
  %6 = merak.mul %3, %5 : tensor<2x3x4xf64>, tensor<2x3x1xf64>
  %7 = merak.mul %6, %w : tensor<2x3x4xf64>, tensor<2x3x4xf64>
  %8 = merak.reduce_sum %7 axes = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  %9 = merak.transpose %t perm = [1, 2, 0] : tensor<2x3x2xf64> to tensor<3x2x2xf64>
  %10 = merak.mul %9, %9 : tensor<3x2x2xf64>, tensor<3x2x2xf64>
  %11 = merak.mul %10, %v : tensor<3x2x2xf64>, tensor<3x2x2xf64>
  %12 = merak.reduce_sum %11 axes = [0, 1, 2] : tensor<3x2x2xf64> -> tensor<f64>
  %loss = merak.add %8, %12 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// slice with stride 1 (an interior window of both dimensions), stride -1
// on both dimensions (the whole first dimension reversed, an interior
// window of the second), and mixed strides 1 / -1 reaching element 0
// (limit -1).
merak.param @x : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%w1: tensor<2x2xf64>, %w2: tensor<3x2xf64>, %w3: tensor<2x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x4xf64>
  %0 = merak.slice %x starts = [1, 1] limits = [3, 3] strides = [1, 1] : tensor<3x4xf64> to tensor<2x2xf64>
  %1 = merak.slice %x starts = [2, 3] limits = [-1, 1] strides = [-1, -1] : tensor<3x4xf64> to tensor<3x2xf64>
  %2 = merak.slice %x starts = [0, 2] limits = [2, -1] strides = [1, -1] : tensor<3x4xf64> to tensor<2x3xf64>
  %3 = merak.mul %0, %w1 : tensor<2x2xf64>, tensor<2x2xf64>
  %4 = merak.mul %1, %1 : tensor<3x2xf64>, tensor<3x2xf64>
  %5 = merak.mul %4, %w2 : tensor<3x2xf64>, tensor<3x2xf64>
  %6 = merak.mul %2, %w3 : tensor<2x3xf64>, tensor<2x3xf64>
  %7 = merak.reduce_sum %3 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  %8 = merak.reduce_sum %5 axes = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  %9 = merak.reduce_sum %6 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  %10 = merak.add %7, %8 : tensor<f64>, tensor<f64>
  %loss = merak.add %10, %9 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// A stride -1 slice of a 1-D parameter that reverses all of it, one
// that keeps a single element, and a stride 1 slice of one element.
merak.param @x : tensor<5xf64> = dense<[0.3, -1.2, 0.7, 1.5, -0.4]> : tensor<5xf64>
func.func @forward(%w: tensor<5xf64>, %u: tensor<1xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<5xf64>
  %0 = merak.slice %x starts = [4] limits = [-1] strides = [-1] : tensor<5xf64> to tensor<5xf64>
  %1 = merak.slice %x starts = [3] limits = [2] strides = [-1] : tensor<5xf64> to tensor<1xf64>
  %2 = merak.slice %x starts = [0] limits = [1] strides = [1] : tensor<5xf64> to tensor<1xf64>
  %3 = merak.mul %0, %w : tensor<5xf64>, tensor<5xf64>
  %4 = merak.mul %1, %2 : tensor<1xf64>, tensor<1xf64>
  %5 = merak.mul %4, %u : tensor<1xf64>, tensor<1xf64>
  %6 = merak.reduce_sum %3 axes = [0] : tensor<5xf64> -> tensor<f64>
  %7 = merak.reduce_sum %5 axes = [0] : tensor<1xf64> -> tensor<f64>
  %loss = merak.add %6, %7 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// concat along axis 0 and axis 1, with one parameter used in both.
merak.param @a : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
merak.param @b : tensor<1x3xf64> = dense<[[0.25, -0.6, 1.1]]> : tensor<1x3xf64>
merak.param @c : tensor<2x2xf64> = dense<[[0.8, -1.3], [0.45, 0.6]]> : tensor<2x2xf64>
func.func @forward(%w: tensor<3x3xf64>, %v: tensor<2x5xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x3xf64>
  %b = merak.get_param @b : tensor<1x3xf64>
  %c = merak.get_param @c : tensor<2x2xf64>
  %0 = merak.concat %b, %a axis = 0 : tensor<1x3xf64>, tensor<2x3xf64> -> tensor<3x3xf64>
  %1 = merak.mul %0, %0 : tensor<3x3xf64>, tensor<3x3xf64>
  %2 = merak.mul %1, %w : tensor<3x3xf64>, tensor<3x3xf64>
  %3 = merak.concat %c, %a axis = 1 : tensor<2x2xf64>, tensor<2x3xf64> -> tensor<2x5xf64>
  %4 = merak.mul %3, %v : tensor<2x5xf64>, tensor<2x5xf64>
  %5 = merak.reduce_sum %2 axes = [0, 1] : tensor<3x3xf64> -> tensor<f64>
  %6 = merak.reduce_sum %4 axes = [0, 1] : tensor<2x5xf64> -> tensor<f64>
  %loss = merak.add %5, %6 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// split with an unused middle piece (its rows must get zeros) and a split
// along axis 1 whose first piece is unused.
merak.param @x : tensor<4x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9], [0.25, -0.6, 1.1], [0.8, -1.3, 0.45]]> : tensor<4x3xf64>
merak.param @y : tensor<2x5xf64> = dense<[[0.1, -0.2, 0.3, 0.4, -0.5], [0.6, 0.7, -0.8, 0.9, 1.0]]> : tensor<2x5xf64>
func.func @forward(%w0: tensor<1x3xf64>, %w2: tensor<1x3xf64>, %v: tensor<2x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<4x3xf64>
  %y = merak.get_param @y : tensor<2x5xf64>
  %p:3 = merak.split %x axis = 0 sizes = [1, 2, 1] : tensor<4x3xf64> -> tensor<1x3xf64>, tensor<2x3xf64>, tensor<1x3xf64>
  %0 = merak.mul %p#0, %w0 : tensor<1x3xf64>, tensor<1x3xf64>
  %1 = merak.mul %p#2, %p#2 : tensor<1x3xf64>, tensor<1x3xf64>
  %2 = merak.mul %1, %w2 : tensor<1x3xf64>, tensor<1x3xf64>
  %3 = merak.add %0, %2 : tensor<1x3xf64>, tensor<1x3xf64>
  %4 = merak.reduce_sum %3 axes = [0, 1] : tensor<1x3xf64> -> tensor<f64>
  %q:2 = merak.split %y axis = 1 sizes = [2, 3] : tensor<2x5xf64> -> tensor<2x2xf64>, tensor<2x3xf64>
  %5 = merak.mul %q#1, %v : tensor<2x3xf64>, tensor<2x3xf64>
  %6 = merak.reduce_sum %5 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  %loss = merak.add %4, %6 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// gather as an embedding lookup: row 2 is read three times (its gradient
// accumulates), row 1 never (zero gradient).
// gradcheck-arg: %i = [2, 0, 2, 3, 2]
merak.param @e : tensor<4x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9], [0.25, -0.6, 1.1], [0.8, -1.3, 0.45]]> : tensor<4x3xf64>
func.func @forward(%i: tensor<5xi64>, %w: tensor<5x3xf64>) -> tensor<f64> {
  %e = merak.get_param @e : tensor<4x3xf64>
  %0 = merak.gather %e[%i] axis = 0 : tensor<4x3xf64>, tensor<5xi64> -> tensor<5x3xf64>
  %1 = merak.mul %0, %0 : tensor<5x3xf64>, tensor<5x3xf64>
  %2 = merak.mul %1, %w : tensor<5x3xf64>, tensor<5x3xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1] : tensor<5x3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// gather along axis 1 with 2-D indices (repeated, and negative ones, which
// count from the end: -1 is column 3, -4 column 0).
// gradcheck-arg: %i = [[3, -1], [0, -4]]
merak.param @d : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%i: tensor<2x2xi64>, %w: tensor<3x2x2xf64>) -> tensor<f64> {
  %d = merak.get_param @d : tensor<3x4xf64>
  %0 = merak.gather %d[%i] axis = 1 : tensor<3x4xf64>, tensor<2x2xi64> -> tensor<3x2x2xf64>
  %1 = merak.mul %0, %0 : tensor<3x2x2xf64>, tensor<3x2x2xf64>
  %2 = merak.mul %1, %w : tensor<3x2x2xf64>, tensor<3x2x2xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1, 2] : tensor<3x2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// cumsum along axis 1: inclusive, exclusive, reverse, exclusive + reverse.
merak.param @x : tensor<2x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6]]> : tensor<2x4xf64>
func.func @forward(%w0: tensor<2x4xf64>, %w1: tensor<2x4xf64>, %w2: tensor<2x4xf64>, %w3: tensor<2x4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x4xf64>
  %0 = merak.cumsum %x axis = 1 : tensor<2x4xf64>
  %1 = merak.cumsum %x axis = 1 {exclusive} : tensor<2x4xf64>
  %2 = merak.cumsum %x axis = 1 {reverse} : tensor<2x4xf64>
  %3 = merak.cumsum %x axis = 1 {exclusive, reverse} : tensor<2x4xf64>
  %4 = merak.mul %0, %w0 : tensor<2x4xf64>, tensor<2x4xf64>
  %5 = merak.mul %1, %w1 : tensor<2x4xf64>, tensor<2x4xf64>
  %6 = merak.mul %2, %w2 : tensor<2x4xf64>, tensor<2x4xf64>
  %7 = merak.mul %3, %3 : tensor<2x4xf64>, tensor<2x4xf64>
  %8 = merak.mul %7, %w3 : tensor<2x4xf64>, tensor<2x4xf64>
  %9 = merak.add %4, %5 : tensor<2x4xf64>, tensor<2x4xf64>
  %10 = merak.add %6, %8 : tensor<2x4xf64>, tensor<2x4xf64>
  %11 = merak.add %9, %10 : tensor<2x4xf64>, tensor<2x4xf64>
  %loss = merak.reduce_sum %11 axes = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// cumsum along axis 0 (the outer dimension), exclusive only.
merak.param @x : tensor<3x2xf64> = dense<[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]]> : tensor<3x2xf64>
func.func @forward(%w: tensor<3x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x2xf64>
  %0 = merak.cumsum %x axis = 0 {exclusive} : tensor<3x2xf64>
  %1 = merak.mul %0, %0 : tensor<3x2xf64>, tensor<3x2xf64>
  %2 = merak.mul %1, %w : tensor<3x2xf64>, tensor<3x2xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// linear_scan along the middle axis, both its decay and its input trained,
// the states squared (so the gradient reaches every state through h[t - 1]).
merak.param @a : tensor<2x4x3xf64> = dense<[[[0.9, -0.5, 1.1], [0.3, 0.8, -1.2], [1.05, 0.2, 0.6], [-0.7, 0.95, 0.4]], [[0.5, 0.25, -0.9], [1.2, -0.3, 0.7], [0.1, 0.85, -0.6], [0.75, -1.0, 0.3]]]> : tensor<2x4x3xf64>
merak.param @b : tensor<2x4x3xf64> = dense<[[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9], [0.25, -0.6, 1.1], [-0.8, 0.45, 0.2]], [[0.6, 0.1, -0.3], [-1.1, 0.8, 0.35], [0.9, -0.2, 0.55], [0.15, 0.7, -0.95]]]> : tensor<2x4x3xf64>
func.func @forward(%w: tensor<2x4x3xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x4x3xf64>
  %b = merak.get_param @b : tensor<2x4x3xf64>
  %h = merak.linear_scan %a, %b axis = 1 : tensor<2x4x3xf64>
  %0 = merak.mul %h, %h : tensor<2x4x3xf64>, tensor<2x4x3xf64>
  %1 = merak.mul %0, %w : tensor<2x4x3xf64>, tensor<2x4x3xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2] : tensor<2x4x3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// selective_scan with every operand trained (u and delta [2, 3, 4], a
// [3, 2], b and c [2, 4, 2]), the read-out squared so the gradient reaches
// every state through the recurrence.
merak.param @u : tensor<2x3x4xf64> = dense<[[[-0.99, -0.63, 0.72, 0.20], [-0.97, -0.16, -0.05, -0.82], [0.56, -0.93, -0.26, 0.04]], [[-0.17, 0.21, 0.57, 1.10], [-0.52, 0.36, 0.47, -0.50], [-1.20, 1.14, -0.48, -0.45]]]> : tensor<2x3x4xf64>
merak.param @dt : tensor<2x3x4xf64> = dense<[[[0.90, 0.63, 0.52, 0.80], [0.13, 0.74, 0.44, 0.18], [0.69, 0.94, 0.29, 0.67]], [[0.37, 0.77, 0.75, 0.30], [0.85, 0.69, 0.71, 0.84], [0.49, 0.78, 0.89, 0.19]]]> : tensor<2x3x4xf64>
merak.param @a : tensor<3x2xf64> = dense<[[-1.32, -0.77], [-0.88, -0.48], [-1.14, -0.65]]> : tensor<3x2xf64>
merak.param @b : tensor<2x4x2xf64> = dense<[[[0.74, -0.45], [0.12, -0.20], [0.23, -0.61], [-0.64, 0.49]], [[0.50, 0.13], [0.84, -0.59], [0.70, -0.66], [0.93, 0.25]]]> : tensor<2x4x2xf64>
merak.param @c : tensor<2x4x2xf64> = dense<[[[0.21, 0.94], [0.57, 0.58], [-0.89, -0.26], [-0.83, -0.61]], [[-0.57, 0.72], [-0.75, -0.41], [-0.01, 0.70], [0.93, 0.42]]]> : tensor<2x4x2xf64>
func.func @forward(%w: tensor<2x3x4xf64>) -> tensor<f64> {
  %u = merak.get_param @u : tensor<2x3x4xf64>
  %dt = merak.get_param @dt : tensor<2x3x4xf64>
  %a = merak.get_param @a : tensor<3x2xf64>
  %b = merak.get_param @b : tensor<2x4x2xf64>
  %c = merak.get_param @c : tensor<2x4x2xf64>
  %y = merak.selective_scan %u, %dt, %a, %b, %c : tensor<2x3x4xf64>, tensor<3x2xf64>, tensor<2x4x2xf64>
  %0 = merak.mul %y, %y : tensor<2x3x4xf64>, tensor<2x3x4xf64>
  %1 = merak.mul %0, %w : tensor<2x3x4xf64>, tensor<2x3x4xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
