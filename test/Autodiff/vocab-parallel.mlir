// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the ops merak-tensor-parallel's vocabulary
// parallelism builds, on one rank (the reference evaluator: group_rank is 0,
// the tp all-reduce is the identity, the vocab-parallel cross-entropy is the
// ordinary one): the masked embedding lookup and the split-logits loss of a
// tied embedding / LM head.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: gradcheck: all 2 cases passed

// The cross-entropy over split logits (group = "tp"), mean and sum.
// gradcheck-arg: %t = [1, 3, 0]
merak.param @l : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%t: tensor<3xi64>) -> tensor<f64> {
  %l = merak.get_param @l : tensor<3x4xf64>
  %a = merak.cross_entropy %l, %t axis = 1 reduction = "mean" {group = "tp"} : tensor<3x4xf64>, tensor<3xi64> -> tensor<f64>
  %b = merak.cross_entropy %l, %t axis = 1 reduction = "sum" {group = "tp", ignore_index = 3 : i64} : tensor<3x4xf64>, tensor<3xi64> -> tensor<f64>
  %loss = merak.add %a, %b : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Tied table W [V = 4, C = 2]: the masked lookup (ids shifted by
// -group_rank * 4, out-of-range rows zeroed, summed over tp) and the LM head
// matmul(f(h), W^T) into the vocab-parallel loss; W's gradient sums both.
// gradcheck-arg: %ids = [[2, 0, 3]]
// gradcheck-arg: %t = [[0, 3, 1]]
merak.param @w : tensor<4x2xf64> = dense<[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9], [0.25, -0.6]]> : tensor<4x2xf64>
func.func @forward(%ids: tensor<1x3xi64>, %t: tensor<1x3xi64>) -> tensor<f64> {
  %w = merak.get_param @w : tensor<4x2xf64>
  %r = merak.group_rank group = "tp" : tensor<i64>
  %n = merak.constant dense<4> : tensor<i64>
  %z = merak.constant dense<0> : tensor<i64>
  %fz = merak.constant dense<0.0> : tensor<f64>
  %off = merak.mul %r, %n : tensor<i64>, tensor<i64>
  %s = merak.sub %ids, %off : tensor<1x3xi64>, tensor<i64>
  %lo = merak.ge %s, %z : tensor<1x3xi64>, tensor<i64>
  %hi = merak.lt %s, %n : tensor<1x3xi64>, tensor<i64>
  %in = merak.and %lo, %hi : tensor<1x3xi1>, tensor<1x3xi1>
  %safe = merak.where %in, %s, %z : tensor<1x3xi1>, tensor<1x3xi64>, tensor<i64>
  %g = merak.gather %w[%safe] axis = 0 : tensor<4x2xf64>, tensor<1x3xi64> -> tensor<1x3x2xf64>
  %m = merak.reshape %in : tensor<1x3xi1> to tensor<1x3x1xi1>
  %p = merak.where %m, %g, %fz : tensor<1x3x1xi1>, tensor<1x3x2xf64>, tensor<f64>
  %h = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<1x3x2xf64> -> tensor<1x3x2xf64>
  %f = merak.tp_identity %h : tensor<1x3x2xf64>
  %wt = merak.transpose %w perm = [1, 0] : tensor<4x2xf64> to tensor<2x4xf64>
  %logits = merak.matmul %f, %wt : tensor<1x3x2xf64>, tensor<2x4xf64> -> tensor<1x3x4xf64>
  %loss = merak.cross_entropy %logits, %t axis = 2 reduction = "mean" {group = "tp"} : tensor<1x3x4xf64>, tensor<1x3xi64> -> tensor<f64>
  return %loss : tensor<f64>
}
