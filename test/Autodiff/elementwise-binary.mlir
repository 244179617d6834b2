// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the binary elementwise rules (add sub mul div
// pow max min where), with numpy broadcasting between parameters of
// different shapes, so that the gradients must be reduced back over the
// broadcast dimensions. Every loss weights its output with the random
// argument %w, so that each element gets a different upstream gradient.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: case 5: PASS
// CHECK: case 6: PASS
// CHECK: gradcheck: all 7 cases passed

// add and sub: [2x3] + [3], [2x1] - [2x3], [2x3] - [3], [] - [2x3].
merak.param @a : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
merak.param @b : tensor<3xf64> = dense<[0.25, -0.6, 1.1]> : tensor<3xf64>
merak.param @c : tensor<2x1xf64> = dense<[[0.8], [-1.3]]> : tensor<2x1xf64>
merak.param @s : tensor<f64> = dense<0.45> : tensor<f64>
func.func @forward(%w: tensor<2x3xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %c = merak.get_param @c : tensor<2x1xf64>
  %s = merak.get_param @s : tensor<f64>
  %0 = merak.add %a, %b : tensor<2x3xf64>, tensor<3xf64>
  %1 = merak.sub %c, %0 : tensor<2x1xf64>, tensor<2x3xf64>
  %2 = merak.sub %1, %b : tensor<2x3xf64>, tensor<3xf64>
  %3 = merak.sub %s, %2 : tensor<f64>, tensor<2x3xf64>
  %4 = merak.mul %3, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %4 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// mul and div: [2x3] * [3], [2x1] / [2x3], [3] / [2x1], [2x3] * [] .
merak.param @a : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
merak.param @b : tensor<3xf64> = dense<[0.25, -0.6, 1.1]> : tensor<3xf64>
merak.param @c : tensor<2x1xf64> = dense<[[0.8], [-1.3]]> : tensor<2x1xf64>
merak.param @s : tensor<f64> = dense<-0.7> : tensor<f64>
func.func @forward(%w: tensor<2x3xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %c = merak.get_param @c : tensor<2x1xf64>
  %s = merak.get_param @s : tensor<f64>
  %0 = merak.mul %a, %b : tensor<2x3xf64>, tensor<3xf64>
  %1 = merak.div %c, %a : tensor<2x1xf64>, tensor<2x3xf64>
  %2 = merak.div %b, %c : tensor<3xf64>, tensor<2x1xf64>
  %3 = merak.add %0, %1 : tensor<2x3xf64>, tensor<2x3xf64>
  %4 = merak.mul %3, %s : tensor<2x3xf64>, tensor<f64>
  %5 = merak.add %4, %2 : tensor<2x3xf64>, tensor<2x3xf64>
  %6 = merak.mul %5, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %6 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// pow: a positive [2x3] base to a [3] exponent, and a [3] base to a scalar
// exponent (both operands differentiated).
merak.param @x : tensor<2x3xf64> = dense<[[0.3, 1.2, 0.7], [1.5, 0.4, 2.1]]> : tensor<2x3xf64>
merak.param @y : tensor<3xf64> = dense<[2.5, -0.6, 1.3]> : tensor<3xf64>
merak.param @z : tensor<f64> = dense<1.7> : tensor<f64>
func.func @forward(%w: tensor<2x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3xf64>
  %y = merak.get_param @y : tensor<3xf64>
  %z = merak.get_param @z : tensor<f64>
  %b = merak.constant dense<[0.9, 1.4, 0.6]> : tensor<3xf64>
  %0 = merak.pow %x, %y : tensor<2x3xf64>, tensor<3xf64>
  %1 = merak.pow %b, %z : tensor<3xf64>, tensor<f64>
  %2 = merak.add %0, %1 : tensor<2x3xf64>, tensor<3xf64>
  %3 = merak.mul %2, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %3 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// max and min with broadcasting, no ties; each operand wins somewhere.
merak.param @a : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
merak.param @b : tensor<3xf64> = dense<[0.25, -0.6, 1.1]> : tensor<3xf64>
merak.param @c : tensor<2x1xf64> = dense<[[0.1], [-0.5]]> : tensor<2x1xf64>
func.func @forward(%w: tensor<2x3xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %c = merak.get_param @c : tensor<2x1xf64>
  %0 = merak.max %a, %b : tensor<2x3xf64>, tensor<3xf64>
  %1 = merak.min %c, %0 : tensor<2x1xf64>, tensor<2x3xf64>
  %2 = merak.max %b, %c : tensor<3xf64>, tensor<2x1xf64>
  %3 = merak.min %a, %2 : tensor<2x3xf64>, tensor<2x3xf64>
  %4 = merak.add %1, %3 : tensor<2x3xf64>, tensor<2x3xf64>
  %5 = merak.mul %4, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %5 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// where: a [2x3] condition picking between [2x3] and [3]; a [2x1]
// condition (an argument) picking between [3] and [2x1] branches.
// gradcheck-arg: %m = [[True], [False]]
merak.param @a : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
merak.param @b : tensor<3xf64> = dense<[0.25, -0.6, 1.1]> : tensor<3xf64>
merak.param @c : tensor<2x1xf64> = dense<[[0.8], [-1.3]]> : tensor<2x1xf64>
func.func @forward(%w: tensor<2x3xf64>, %m: tensor<2x1xi1>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<2x3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %c = merak.get_param @c : tensor<2x1xf64>
  %zero = merak.constant dense<0.0> : tensor<f64>
  %pos = merak.gt %a, %zero : tensor<2x3xf64>, tensor<f64>
  %sq = merak.mul %b, %b : tensor<3xf64>, tensor<3xf64>
  %0 = merak.where %pos, %a, %sq : tensor<2x3xi1>, tensor<2x3xf64>, tensor<3xf64>
  %cube = merak.mul %c, %sq : tensor<2x1xf64>, tensor<3xf64>
  %1 = merak.where %m, %b, %cube : tensor<2x1xi1>, tensor<3xf64>, tensor<2x3xf64>
  %2 = merak.add %0, %1 : tensor<2x3xf64>, tensor<2x3xf64>
  %3 = merak.mul %2, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %3 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Broadcasting of a [1x3] and a [2x1] operand into [4x2x3]: both are
// reduced over a leading dimension and over a size-1 dimension.
merak.param @r : tensor<1x3xf64> = dense<[[0.5, -0.75, 1.25]]> : tensor<1x3xf64>
merak.param @c : tensor<2x1xf64> = dense<[[0.6], [-1.1]]> : tensor<2x1xf64>
func.func @forward(%w: tensor<4x2x3xf64>) -> tensor<f64> {
  %r = merak.get_param @r : tensor<1x3xf64>
  %c = merak.get_param @c : tensor<2x1xf64>
  %0 = merak.mul %w, %r : tensor<4x2x3xf64>, tensor<1x3xf64>
  %1 = merak.sub %0, %c : tensor<4x2x3xf64>, tensor<2x1xf64>
  %2 = merak.mul %1, %1 : tensor<4x2x3xf64>, tensor<4x2x3xf64>
  %l = merak.reduce_sum %2 axes = [0, 1, 2] : tensor<4x2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// pow with a constant integer exponent and a negative base (x^3, x^-2):
// only the base is differentiated, so log(x) < 0 never reaches a gradient.
merak.param @x : tensor<4xf64> = dense<[-1.3, 0.6, -0.45, 1.2]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>, %v: tensor<4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<4xf64>
  %three = merak.constant dense<3.0> : tensor<f64>
  %m2 = merak.constant dense<-2.0> : tensor<f64>
  %0 = merak.pow %x, %three : tensor<4xf64>, tensor<f64>
  %1 = merak.mul %0, %w : tensor<4xf64>, tensor<4xf64>
  %2 = merak.pow %x, %m2 : tensor<4xf64>, tensor<f64>
  %3 = merak.mul %2, %v : tensor<4xf64>, tensor<4xf64>
  %4 = merak.add %1, %3 : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %4 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
