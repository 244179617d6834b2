// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Gradient accumulation in the pass itself: tied weights (one parameter read
// by two merak.get_param), a value read twice by one op (mul %p, %p), a
// value read by many ops, and parameters whose gradient must be exactly
// zero (unused, used only by another result than the loss, used only
// through a comparison, or feeding only dead code).

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: gradcheck: all 5 cases passed

// Tied weights: @e is the input embedding (gather) and the output
// projection (matmul with its transpose), read by two get_param ops.
// gradcheck-arg: %i = [1, 3, 1]
// gradcheck-arg: %t = [0, 1, 3]
merak.param @e : tensor<4x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9], [0.25, -0.6, 1.1], [0.8, -1.3, 0.45]]> : tensor<4x3xf64>
merak.param @h : tensor<3x3xf64> = dense<[[0.5, 0.1, -0.2], [0.3, -0.7, 0.4], [-0.15, 0.6, 0.9]]> : tensor<3x3xf64>
func.func @forward(%i: tensor<3xi64>, %t: tensor<3xi64>) -> tensor<f64> {
  %e0 = merak.get_param @e : tensor<4x3xf64>
  %h = merak.get_param @h : tensor<3x3xf64>
  %0 = merak.gather %e0[%i] axis = 0 : tensor<4x3xf64>, tensor<3xi64> -> tensor<3x3xf64>
  %1 = merak.matmul %0, %h : tensor<3x3xf64>, tensor<3x3xf64> -> tensor<3x3xf64>
  %2 = merak.tanh %1 : tensor<3x3xf64>
  %e1 = merak.get_param @e : tensor<4x3xf64>
  %et = merak.transpose %e1 perm = [1, 0] : tensor<4x3xf64> to tensor<3x4xf64>
  %3 = merak.matmul %2, %et : tensor<3x3xf64>, tensor<3x4xf64> -> tensor<3x4xf64>
  %loss = merak.cross_entropy %3, %t axis = 1 reduction = "sum" : tensor<3x4xf64>, tensor<3xi64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// One op reading the same value twice (mul %p, %p and add %q, %q), and
// a value (%s) read by four ops.
merak.param @p : tensor<4xf64> = dense<[0.3, -1.2, 0.7, 1.5]> : tensor<4xf64>
merak.param @q : tensor<4xf64> = dense<[-0.4, 0.9, 0.25, -0.6]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>) -> tensor<f64> {
  %p = merak.get_param @p : tensor<4xf64>
  %q = merak.get_param @q : tensor<4xf64>
  %0 = merak.mul %p, %p : tensor<4xf64>, tensor<4xf64>
  %1 = merak.add %q, %q : tensor<4xf64>, tensor<4xf64>
  %s = merak.mul %0, %1 : tensor<4xf64>, tensor<4xf64>
  %2 = merak.sin %s : tensor<4xf64>
  %3 = merak.mul %s, %2 : tensor<4xf64>, tensor<4xf64>
  %4 = merak.sub %3, %s : tensor<4xf64>, tensor<4xf64>
  %5 = merak.mul %4, %s : tensor<4xf64>, tensor<4xf64>
  %6 = merak.mul %5, %w : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %6 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Tied weights read three times, once through each of two aliases and
// twice by one op.
merak.param @w : tensor<2x2xf64> = dense<[[0.3, -1.2], [0.7, 1.5]]> : tensor<2x2xf64>
func.func @forward(%x: tensor<2x2xf64>) -> tensor<f64> {
  %a = merak.get_param @w : tensor<2x2xf64>
  %b = merak.get_param @w : tensor<2x2xf64>
  %0 = merak.matmul %a, %b : tensor<2x2xf64>, tensor<2x2xf64> -> tensor<2x2xf64>
  %1 = merak.matmul %0, %a : tensor<2x2xf64>, tensor<2x2xf64> -> tensor<2x2xf64>
  %2 = merak.mul %1, %x : tensor<2x2xf64>, tensor<2x2xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Exactly-zero gradients: @unused is never read; @other feeds only the
// second result; @cond only a comparison (an i1 where condition); @dead
// only ops whose value is unused. @k is the one parameter that matters.
// gradcheck-zero: unused other cond dead
merak.param @unused : tensor<2xf64> = dense<[0.5, -0.5]> : tensor<2xf64>
merak.param @k : tensor<2xf64> = dense<[0.9, -1.1]> : tensor<2xf64>
merak.param @other : tensor<2xf64> = dense<[1.5, 2.5]> : tensor<2xf64>
merak.param @cond : tensor<2xf64> = dense<[-0.3, 0.4]> : tensor<2xf64>
merak.param @dead : tensor<2xf64> = dense<[0.7, 0.2]> : tensor<2xf64>
func.func @forward(%w: tensor<2xf64>) -> (tensor<f64>, tensor<2xf64>) {
  %k = merak.get_param @k : tensor<2xf64>
  %o = merak.get_param @other : tensor<2xf64>
  %c = merak.get_param @cond : tensor<2xf64>
  %d = merak.get_param @dead : tensor<2xf64>
  %zero = merak.constant dense<0.0> : tensor<f64>
  %pos = merak.gt %c, %zero : tensor<2xf64>, tensor<f64>
  %sq = merak.mul %k, %k : tensor<2xf64>, tensor<2xf64>
  %0 = merak.where %pos, %sq, %k : tensor<2xi1>, tensor<2xf64>, tensor<2xf64>
  %1 = merak.mul %0, %w : tensor<2xf64>, tensor<2xf64>
  %dd = merak.mul %d, %k : tensor<2xf64>, tensor<2xf64>
  %de = merak.exp %dd : tensor<2xf64>
  %loss = merak.reduce_sum %1 axes = [0] : tensor<2xf64> -> tensor<f64>
  %2 = merak.mul %o, %k : tensor<2xf64>, tensor<2xf64>
  return %loss, %2 : tensor<f64>, tensor<2xf64>
}

// -----

// The loss is a parameter itself (a scalar read directly), plus a second
// read of it: d loss / d s = 1 + 2 s.
merak.param @s : tensor<f64> = dense<0.35> : tensor<f64>
func.func @forward() -> tensor<f64> {
  %s = merak.get_param @s : tensor<f64>
  %t = merak.get_param @s : tensor<f64>
  %0 = merak.mul %t, %t : tensor<f64>, tensor<f64>
  %loss = merak.add %s, %0 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}
