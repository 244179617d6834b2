// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of tensor parallelism's collectives in the
// evaluator, where a process is a group of one rank: merak.all_reduce (tp,
// sum; VJP: the identity) and merak.tp_identity (VJP: all_reduce over tp,
// here the identity) must both have the identity's derivative; so must
// expert parallelism's merak.all_gather and merak.reduce_scatter over "ep"
// (each other's VJP), with an i64 operand (the expert ids) that gets none,
// and merak.all_to_all's dispatch and combine, and dynamic shadowing
// (merak.expert_shadow's broadcast, whose VJP is its reduce); and
// merak.all_reduce over "dp" (sum; VJP: the all-reduce again, over one
// rank the identity), a bucket of which one result goes unread; and
// sequence parallelism's merak.reduce_scatter, merak.local_shard and
// merak.all_gather over "tp" (VJPs: all-gather, all-gather, local_shard).

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: case 4: PASS
// CHECK: case 5: PASS
// CHECK: case 6: PASS
// CHECK: case 7: PASS
// CHECK: gradcheck: all 8 cases passed

merak.param @x : tensor<2x3xf64> = dense<[[0.5, -1.25, 2.0], [0.75, 1.5, -0.25]]> : tensor<2x3xf64>
func.func @forward(%w: tensor<2x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3xf64>
  %s = merak.all_reduce %x group = "tp" reduction = "sum" : tensor<2x3xf64> -> tensor<2x3xf64>
  %e = merak.exp %s : tensor<2x3xf64>
  %m = merak.mul %e, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// A bucket of two operands.
merak.param @a : tensor<3xf64> = dense<[0.5, -1.0, 1.5]> : tensor<3xf64>
merak.param @b : tensor<3xf64> = dense<[2.0, 0.25, -0.5]> : tensor<3xf64>
func.func @forward(%w: tensor<3xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %ra, %rb = merak.all_reduce %a, %b group = "tp" reduction = "sum" : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>, tensor<3xf64>
  %t = merak.tanh %ra : tensor<3xf64>
  %u = merak.mul %t, %rb : tensor<3xf64>, tensor<3xf64>
  %m = merak.mul %u, %w : tensor<3xf64>, tensor<3xf64>
  %l = merak.reduce_sum %m axes = [0] : tensor<3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Megatron's f in front of a matmul, read twice.
merak.param @x : tensor<2x3xf64> = dense<[[0.5, -1.25, 2.0], [0.75, 1.5, -0.25]]> : tensor<2x3xf64>
merak.param @k : tensor<3x2xf64> = dense<[[0.3, -0.7], [1.1, 0.2], [-0.4, 0.9]]> : tensor<3x2xf64>
func.func @forward(%w: tensor<2x2xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x3xf64>
  %k = merak.get_param @k : tensor<3x2xf64>
  %f = merak.tp_identity %x : tensor<2x3xf64>
  %y = merak.matmul %f, %k : tensor<2x3xf64>, tensor<3x2xf64> -> tensor<2x2xf64>
  %s = merak.sin %f : tensor<2x3xf64>
  %z = merak.matmul %s, %k : tensor<2x3xf64>, tensor<3x2xf64> -> tensor<2x2xf64>
  %yz = merak.add %y, %z : tensor<2x2xf64>, tensor<2x2xf64>
  %m = merak.mul %yz, %w : tensor<2x2xf64>, tensor<2x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Expert parallelism's dispatch and combine around an expert GEMM holding
// experts [first, first + 2) = [0, 2) of the ids' global range: row 1 is
// another rank's (id 3), a zero row with no gradient.
merak.param @x : tensor<3x2xf64> = dense<[[0.5, -1.25], [0.75, 1.5], [-0.3, 0.8]]> : tensor<3x2xf64>
merak.param @k : tensor<2x2x2xf64> = dense<[[[0.3, -0.7], [1.1, 0.2]], [[-0.4, 0.9], [0.6, -0.5]]]> : tensor<2x2x2xf64>
func.func @forward(%w: tensor<3x2xf64>) -> tensor<f64> {
  %e = merak.constant dense<[1, 3, 0]> : tensor<3xi64>
  %first = merak.constant dense<0> : tensor<i64>
  %x = merak.get_param @x : tensor<3x2xf64>
  %k = merak.get_param @k : tensor<2x2x2xf64>
  %xg = merak.all_gather %x group = "ep" : tensor<3x2xf64> -> tensor<3x2xf64>
  %eg = merak.all_gather %e group = "ep" : tensor<3xi64> -> tensor<3xi64>
  %yl = merak.expert_matmul %xg, %k[%eg first %first : tensor<i64>] : tensor<3x2xf64>, tensor<2x2x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %y = merak.reduce_scatter %yl group = "ep" reduction = "sum" : tensor<3x2xf64> -> tensor<3x2xf64>
  %t = merak.tanh %y : tensor<3x2xf64>
  %m = merak.mul %t, %w : tensor<3x2xf64>, tensor<3x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// The all-to-all dispatcher: dispatch, the expert GEMM, combine.
merak.param @x : tensor<3x2xf64> = dense<[[0.5, -1.25], [0.75, 1.5], [-0.3, 0.8]]> : tensor<3x2xf64>
merak.param @k : tensor<2x2x2xf64> = dense<[[[0.3, -0.7], [1.1, 0.2]], [[-0.4, 0.9], [0.6, -0.5]]]> : tensor<2x2x2xf64>
func.func @forward(%w: tensor<3x2xf64>) -> tensor<f64> {
  %e = merak.constant dense<[1, 0, 1]> : tensor<3xi64>
  %first = merak.constant dense<0> : tensor<i64>
  %x = merak.get_param @x : tensor<3x2xf64>
  %k = merak.get_param @k : tensor<2x2x2xf64>
  %xr = merak.all_to_all %x routed %e group = "ep" experts_per_rank = 2 : tensor<3x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %yl = merak.expert_matmul %xr, %k[%e first %first : tensor<i64>] : tensor<3x2xf64>, tensor<2x2x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %y = merak.all_to_all %yl routed %e group = "ep" combine experts_per_rank = 2 : tensor<3x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %t = merak.tanh %y : tensor<3x2xf64>
  %m = merak.mul %t, %w : tensor<3x2xf64>, tensor<3x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Shadowing with one rank (2 experts, 1 slot): expert 1 is shadowed, so
// rows 0 and 2 are renamed to its copy (id 2 = E + 0 * M + slot 0) and
// multiplied by the broadcast slot; expert 1's gradient comes back through
// the reduce.
merak.param @x : tensor<3x2xf64> = dense<[[0.5, -1.25], [0.75, 1.5], [-0.3, 0.8]]> : tensor<3x2xf64>
merak.param @k : tensor<2x2x2xf64> = dense<[[[0.3, -0.7], [1.1, 0.2]], [[-0.4, 0.9], [0.6, -0.5]]]> : tensor<2x2x2xf64>
func.func @forward(%w: tensor<3x2xf64>) -> tensor<f64> {
  %r = merak.constant dense<[2, 0, 2]> : tensor<3xi64>
  %slots = merak.constant dense<[1]> : tensor<1xi64>
  %first = merak.constant dense<0> : tensor<i64>
  %copies = merak.constant dense<2> : tensor<i64>
  %x = merak.get_param @x : tensor<3x2xf64>
  %k = merak.get_param @k : tensor<2x2x2xf64>
  %ks = merak.expert_shadow %k, %slots group = "ep" parts = 1 : tensor<2x2x2xf64>, tensor<1xi64> -> tensor<1x2x2xf64>
  %xr = merak.all_to_all %x routed %r group = "ep" experts_per_rank = 2 shadow_slots = 1 : tensor<3x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %yl = merak.expert_matmul %xr, %k[%r first %first : tensor<i64>] shadow %ks[first %copies : tensor<i64>] : tensor<1x2x2xf64> {total_experts = 2 : i64} : tensor<3x2xf64>, tensor<2x2x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %y = merak.all_to_all %yl routed %r group = "ep" combine experts_per_rank = 2 shadow_slots = 1 : tensor<3x2xf64>, tensor<3xi64> -> tensor<3x2xf64>
  %t = merak.tanh %y : tensor<3x2xf64>
  %m = merak.mul %t, %w : tensor<3x2xf64>, tensor<3x2xf64>
  %l = merak.reduce_sum %m axes = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// merak-sync-batch-norm's dp sums: a bucket, its second result unread.
// gradcheck-zero: b
merak.param @a : tensor<3xf64> = dense<[0.5, -1.0, 1.5]> : tensor<3xf64>
merak.param @b : tensor<3xf64> = dense<[2.0, 0.25, -0.5]> : tensor<3xf64>
func.func @forward(%w: tensor<3xf64>) -> tensor<f64> {
  %a = merak.get_param @a : tensor<3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %ra, %rb = merak.all_reduce %a, %b group = "dp" reduction = "sum" : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>, tensor<3xf64>
  %t = merak.tanh %ra : tensor<3xf64>
  %m = merak.mul %t, %w : tensor<3xf64>, tensor<3xf64>
  %l = merak.reduce_sum %m axes = [0] : tensor<3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Sequence parallelism over one rank: a region's end as a reduce-scatter of
// the rows, a replicated residual cut with local_shard, a norm on the rows
// (its scale through tp_identity), and the all-gather back.
merak.param @p : tensor<4x1x3xf64> = dense<[[[0.5, -1.25, 2.0]], [[0.75, 1.5, -0.25]], [[0.1, 0.2, -0.3]], [[1.0, -0.5, 0.25]]]> : tensor<4x1x3xf64>
merak.param @h : tensor<4x1x3xf64> = dense<[[[0.3, 0.7, -1.1]], [[0.2, -0.4, 0.9]], [[-0.6, 0.5, 1.2]], [[0.8, 0.1, -0.2]]]> : tensor<4x1x3xf64>
merak.param @g : tensor<3xf64> = dense<[1.5, 0.5, -0.75]> : tensor<3xf64>
func.func @forward(%w: tensor<4x1x3xf64>) -> tensor<f64> {
  %p = merak.get_param @p : tensor<4x1x3xf64>
  %h = merak.get_param @h : tensor<4x1x3xf64>
  %g = merak.get_param @g : tensor<3xf64>
  %y = merak.reduce_scatter %p group = "tp" reduction = "sum" : tensor<4x1x3xf64> -> tensor<4x1x3xf64>
  %hs = merak.local_shard %h group = "tp" : tensor<4x1x3xf64> -> tensor<4x1x3xf64>
  %r = merak.add %hs, %y : tensor<4x1x3xf64>, tensor<4x1x3xf64>
  %gi = merak.tp_identity %g : tensor<3xf64>
  %n = merak.layer_norm %r scale %gi axis = 2 epsilon = 1.0e-05 : (tensor<4x1x3xf64>, tensor<3xf64>) -> tensor<4x1x3xf64>
  %a = merak.all_gather %n group = "tp" : tensor<4x1x3xf64> -> tensor<4x1x3xf64>
  %m = merak.mul %a, %w : tensor<4x1x3xf64>, tensor<4x1x3xf64>
  %l = merak.reduce_sum %m axes = [0, 1, 2] : tensor<4x1x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}
