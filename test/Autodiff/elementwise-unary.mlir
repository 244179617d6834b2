// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the unary elementwise rules. Every loss
// weights its output with the random argument %w. Values stay away from the
// kinks of relu, leaky_relu, clamp and abs and from the jumps of floor,
// ceil and sign, where finite differences are meaningless.

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
// CHECK: case 11: PASS
// CHECK: gradcheck: all 12 cases passed

// exp, log, sqrt, rsqrt on one positive parameter each.
merak.param @e : tensor<4xf64> = dense<[-1.3, 0.2, 0.75, 1.6]> : tensor<4xf64>
merak.param @l : tensor<4xf64> = dense<[0.3, 1.2, 2.5, 0.8]> : tensor<4xf64>
merak.param @s : tensor<4xf64> = dense<[0.4, 1.7, 3.1, 0.9]> : tensor<4xf64>
merak.param @r : tensor<4xf64> = dense<[0.6, 2.2, 1.3, 0.35]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>) -> tensor<f64> {
  %e = merak.get_param @e : tensor<4xf64>
  %l = merak.get_param @l : tensor<4xf64>
  %s = merak.get_param @s : tensor<4xf64>
  %r = merak.get_param @r : tensor<4xf64>
  %0 = merak.exp %e : tensor<4xf64>
  %1 = merak.log %l : tensor<4xf64>
  %2 = merak.sqrt %s : tensor<4xf64>
  %3 = merak.rsqrt %r : tensor<4xf64>
  %4 = merak.mul %0, %1 : tensor<4xf64>, tensor<4xf64>
  %5 = merak.add %2, %3 : tensor<4xf64>, tensor<4xf64>
  %6 = merak.add %4, %5 : tensor<4xf64>, tensor<4xf64>
  %7 = merak.mul %6, %w : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %7 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// tanh, erf, sigmoid, reciprocal.
merak.param @t : tensor<2x2xf64> = dense<[[-1.3, 0.2], [0.75, 1.6]]> : tensor<2x2xf64>
merak.param @e : tensor<2x2xf64> = dense<[[-0.9, 0.35], [1.2, -0.1]]> : tensor<2x2xf64>
merak.param @g : tensor<2x2xf64> = dense<[[2.1, -0.6], [0.45, -1.8]]> : tensor<2x2xf64>
merak.param @r : tensor<2x2xf64> = dense<[[0.7, -1.4], [2.3, -0.5]]> : tensor<2x2xf64>
func.func @forward(%w: tensor<2x2xf64>) -> tensor<f64> {
  %t = merak.get_param @t : tensor<2x2xf64>
  %e = merak.get_param @e : tensor<2x2xf64>
  %g = merak.get_param @g : tensor<2x2xf64>
  %r = merak.get_param @r : tensor<2x2xf64>
  %0 = merak.tanh %t : tensor<2x2xf64>
  %1 = merak.erf %e : tensor<2x2xf64>
  %2 = merak.sigmoid %g : tensor<2x2xf64>
  %3 = merak.reciprocal %r : tensor<2x2xf64>
  %4 = merak.mul %0, %1 : tensor<2x2xf64>, tensor<2x2xf64>
  %5 = merak.add %2, %3 : tensor<2x2xf64>, tensor<2x2xf64>
  %6 = merak.add %4, %5 : tensor<2x2xf64>, tensor<2x2xf64>
  %7 = merak.mul %6, %w : tensor<2x2xf64>, tensor<2x2xf64>
  %loss = merak.reduce_sum %7 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// sin, cos, neg, abs (no element at 0).
merak.param @s : tensor<3xf64> = dense<[-2.3, 0.4, 1.9]> : tensor<3xf64>
merak.param @c : tensor<3xf64> = dense<[0.8, -1.7, 2.6]> : tensor<3xf64>
merak.param @n : tensor<3xf64> = dense<[0.5, -0.25, 1.5]> : tensor<3xf64>
merak.param @a : tensor<3xf64> = dense<[-0.7, 1.1, -2.4]> : tensor<3xf64>
func.func @forward(%w: tensor<3xf64>) -> tensor<f64> {
  %s = merak.get_param @s : tensor<3xf64>
  %c = merak.get_param @c : tensor<3xf64>
  %n = merak.get_param @n : tensor<3xf64>
  %a = merak.get_param @a : tensor<3xf64>
  %0 = merak.sin %s : tensor<3xf64>
  %1 = merak.cos %c : tensor<3xf64>
  %2 = merak.neg %n : tensor<3xf64>
  %3 = merak.abs %a : tensor<3xf64>
  %4 = merak.mul %0, %1 : tensor<3xf64>, tensor<3xf64>
  %5 = merak.mul %2, %3 : tensor<3xf64>, tensor<3xf64>
  %6 = merak.add %4, %5 : tensor<3xf64>, tensor<3xf64>
  %7 = merak.mul %6, %w : tensor<3xf64>, tensor<3xf64>
  %loss = merak.reduce_sum %7 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// floor, ceil and sign are piecewise constant: their inputs get exactly
// zero gradients, while @k (multiplying them) gets a non-zero one.
// gradcheck-zero: f c s
merak.param @f : tensor<3xf64> = dense<[-1.3, 0.4, 2.7]> : tensor<3xf64>
merak.param @c : tensor<3xf64> = dense<[-0.6, 1.2, 3.5]> : tensor<3xf64>
merak.param @s : tensor<3xf64> = dense<[-0.8, 0.3, 1.9]> : tensor<3xf64>
merak.param @k : tensor<3xf64> = dense<[0.9, -1.1, 0.35]> : tensor<3xf64>
func.func @forward(%w: tensor<3xf64>) -> tensor<f64> {
  %f = merak.get_param @f : tensor<3xf64>
  %c = merak.get_param @c : tensor<3xf64>
  %s = merak.get_param @s : tensor<3xf64>
  %k = merak.get_param @k : tensor<3xf64>
  %0 = merak.floor %f : tensor<3xf64>
  %1 = merak.ceil %c : tensor<3xf64>
  %2 = merak.sign %s : tensor<3xf64>
  %3 = merak.add %0, %1 : tensor<3xf64>, tensor<3xf64>
  %4 = merak.add %3, %2 : tensor<3xf64>, tensor<3xf64>
  %5 = merak.mul %4, %k : tensor<3xf64>, tensor<3xf64>
  %6 = merak.mul %5, %w : tensor<3xf64>, tensor<3xf64>
  %loss = merak.reduce_sum %6 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// relu and leaky_relu on both sides of 0 (leaky with alpha 0.1, so that
// the negative side has a non-zero slope).
merak.param @r : tensor<4xf64> = dense<[-1.3, 0.2, -0.75, 1.6]> : tensor<4xf64>
merak.param @k : tensor<4xf64> = dense<[-0.9, 0.35, 1.2, -2.1]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>) -> tensor<f64> {
  %r = merak.get_param @r : tensor<4xf64>
  %k = merak.get_param @k : tensor<4xf64>
  %0 = merak.relu %r : tensor<4xf64>
  %1 = merak.leaky_relu %k {alpha = 0.1 : f64} : tensor<4xf64>
  %2 = merak.mul %0, %r : tensor<4xf64>, tensor<4xf64>
  %3 = merak.add %2, %1 : tensor<4xf64>, tensor<4xf64>
  %4 = merak.mul %3, %w : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %4 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// clamp with both bounds, only a lower and only an upper bound; elements
// below, inside and above the range.
merak.param @b : tensor<4xf64> = dense<[-1.3, 0.2, -0.25, 1.6]> : tensor<4xf64>
merak.param @lo : tensor<4xf64> = dense<[-0.9, 0.35, 1.2, -2.1]> : tensor<4xf64>
merak.param @hi : tensor<4xf64> = dense<[0.7, -1.4, 2.3, 0.1]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>) -> tensor<f64> {
  %b = merak.get_param @b : tensor<4xf64>
  %lo = merak.get_param @lo : tensor<4xf64>
  %hi = merak.get_param @hi : tensor<4xf64>
  %0 = merak.clamp %b {min = -0.5 : f64, max = 0.5 : f64} : tensor<4xf64>
  %1 = merak.clamp %lo {min = 0.0 : f64} : tensor<4xf64>
  %2 = merak.clamp %hi {max = 0.5 : f64} : tensor<4xf64>
  %3 = merak.mul %0, %b : tensor<4xf64>, tensor<4xf64>
  %4 = merak.mul %1, %lo : tensor<4xf64>, tensor<4xf64>
  %5 = merak.mul %2, %hi : tensor<4xf64>, tensor<4xf64>
  %6 = merak.add %3, %4 : tensor<4xf64>, tensor<4xf64>
  %7 = merak.add %6, %5 : tensor<4xf64>, tensor<4xf64>
  %8 = merak.mul %7, %w : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %8 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// gelu, exact (erf) form.
merak.param @x : tensor<6xf64> = dense<[-2.4, -1.1, -0.3, 0.2, 0.9, 2.2]> : tensor<6xf64>
func.func @forward(%w: tensor<6xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<6xf64>
  %0 = merak.gelu %x : tensor<6xf64>
  %1 = merak.mul %0, %w : tensor<6xf64>, tensor<6xf64>
  %loss = merak.reduce_sum %1 axes = [0] : tensor<6xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// gelu, tanh approximation.
merak.param @x : tensor<6xf64> = dense<[-2.4, -1.1, -0.3, 0.2, 0.9, 2.2]> : tensor<6xf64>
func.func @forward(%w: tensor<6xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<6xf64>
  %0 = merak.gelu %x {approximate_tanh} : tensor<6xf64>
  %1 = merak.mul %0, %w : tensor<6xf64>, tensor<6xf64>
  %loss = merak.reduce_sum %1 axes = [0] : tensor<6xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// A chain of unary ops on one parameter (the rules compose).
merak.param @x : tensor<5xf64> = dense<[-1.4, -0.6, 0.3, 0.8, 1.7]> : tensor<5xf64>
func.func @forward(%w: tensor<5xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<5xf64>
  %0 = merak.sin %x : tensor<5xf64>
  %1 = merak.tanh %0 : tensor<5xf64>
  %2 = merak.exp %1 : tensor<5xf64>
  %3 = merak.sigmoid %2 : tensor<5xf64>
  %4 = merak.log %3 : tensor<5xf64>
  %5 = merak.gelu %4 : tensor<5xf64>
  %6 = merak.mul %5, %w : tensor<5xf64>, tensor<5xf64>
  %loss = merak.reduce_sum %6 axes = [0] : tensor<5xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// softplus (its gradient is sigmoid), on both sides of 0 and far out where
// the overflow-free form matters.
merak.param @x : tensor<6xf64> = dense<[-30.0, -2.4, -0.3, 0.2, 1.9, 25.0]> : tensor<6xf64>
func.func @forward(%w: tensor<6xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<6xf64>
  %0 = merak.softplus %x : tensor<6xf64>
  %1 = merak.mul %0, %w : tensor<6xf64>, tensor<6xf64>
  %loss = merak.reduce_sum %1 axes = [0] : tensor<6xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// asin, acos (inside (-1, 1)) and atan.
merak.param @s : tensor<3xf64> = dense<[-0.8, 0.15, 0.6]> : tensor<3xf64>
merak.param @c : tensor<3xf64> = dense<[0.7, -0.45, 0.05]> : tensor<3xf64>
merak.param @t : tensor<3xf64> = dense<[-2.5, 0.3, 1.4]> : tensor<3xf64>
func.func @forward(%w: tensor<3xf64>) -> tensor<f64> {
  %s = merak.get_param @s : tensor<3xf64>
  %c = merak.get_param @c : tensor<3xf64>
  %t = merak.get_param @t : tensor<3xf64>
  %0 = merak.asin %s : tensor<3xf64>
  %1 = merak.acos %c : tensor<3xf64>
  %2 = merak.atan %t : tensor<3xf64>
  %3 = merak.mul %0, %1 : tensor<3xf64>, tensor<3xf64>
  %4 = merak.add %3, %2 : tensor<3xf64>, tensor<3xf64>
  %5 = merak.mul %4, %w : tensor<3xf64>, tensor<3xf64>
  %loss = merak.reduce_sum %5 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// expm1 (its gradient is e^x) and log1p (1 / (1 + x)), near 0 and away.
merak.param @e : tensor<4xf64> = dense<[-3.0, -1.0e-3, 2.0e-4, 1.5]> : tensor<4xf64>
merak.param @l : tensor<4xf64> = dense<[-0.7, -1.0e-3, 2.0e-4, 3.5]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>) -> tensor<f64> {
  %e = merak.get_param @e : tensor<4xf64>
  %l = merak.get_param @l : tensor<4xf64>
  %0 = merak.expm1 %e : tensor<4xf64>
  %1 = merak.log1p %l : tensor<4xf64>
  %2 = merak.add %0, %1 : tensor<4xf64>, tensor<4xf64>
  %3 = merak.mul %2, %w : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %3 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
