// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of merak.attention's rule (merak.attention_grad,
// which recomputes the probabilities from the saved log-sum-exp): causal
// self-attention over (batch, head) slices, and unmasked attention with more
// keys than queries and a value width different from the head dim. The
// upstream gradient is random (the %w argument). Case 2: seq_major
// ([B, T, H, D] operands: 2 heads of a 3-token sequence), causal. Case 3:
// a sliding window of 2 keys over 4 tokens. Case 4: soft-capped scores
// (softcap 0.5, small enough that the tanh bends), causal. Case 5: a
// trainable bias broadcast over the batch ([1, H, T, S], T5's relative
// positions) with causal soft-capped scores. Case 6: a bias per batch and
// head under seq_major, 2 keys for 3 queries (the bias stays heads-first).
// Case 7: probability dropout 0.3, causal (the step-0 mask, drawn again by
// attention_grad: about a third of the 48 probabilities dropped). Case 8:
// a trainable bias per key ([1, H, 1, S], ALiBi's form, the same for every
// query row: its gradient summed over the rows), unmasked. Case 9: a band
// of 2 keys on both sides (|r - c| < 2, window without causal: ModernBERT's
// local layers) over 5 tokens. Case 10: attention sinks as
// merak-fuse-attention writes them (the result times sigmoid(lse - sink),
// a trainable sink per head), causal: the lse's gradient reaches q and k
// through attention_grad's lse_grad. Case 11: only the lse is read (the
// result's gradient is zero), with a trainable bias and soft-capping.

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

merak.param @q : tensor<2x1x3x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]]], [[[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]]]> : tensor<2x1x3x2xf64>
merak.param @k : tensor<2x1x3x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1]]], [[[1.2, 0.35], [-0.7, 0.6], [0.15, -0.95]]]]> : tensor<2x1x3x2xf64>
merak.param @v : tensor<2x1x3x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3]]], [[[-0.45, 0.75], [0.05, -1.1], [0.9, 0.4]]]]> : tensor<2x1x3x2xf64>
func.func @forward(%w: tensor<2x1x3x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<2x1x3x2xf64>
  %k = merak.get_param @k : tensor<2x1x3x2xf64>
  %v = merak.get_param @v : tensor<2x1x3x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 0.7 causal : tensor<2x1x3x2xf64>, tensor<2x1x3x2xf64>, tensor<2x1x3x2xf64> -> tensor<2x1x3x2xf64>, tensor<2x1x3xf64>
  %1 = merak.mul %o, %w : tensor<2x1x3x2xf64>, tensor<2x1x3x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<2x1x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<2x2x3xf64> = dense<[[[0.3, -1.2, 0.5], [0.7, 1.5, -0.2]], [[-0.4, 0.9, 0.1], [0.25, -0.6, 0.8]]]> : tensor<2x2x3xf64>
merak.param @k : tensor<2x4x3xf64> = dense<[[[-0.5, 0.2, 0.3], [0.9, -0.3, 0.6], [0.4, 1.1, -0.7], [0.2, 0.1, 0.05]], [[1.2, 0.35, -0.4], [-0.7, 0.6, 0.9], [0.15, -0.95, 0.3], [0.5, 0.5, -0.5]]]> : tensor<2x4x3xf64>
merak.param @v : tensor<2x4x2xf64> = dense<[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3], [1.0, -1.0]], [[-0.45, 0.75], [0.05, -1.1], [0.9, 0.4], [0.3, 0.2]]]> : tensor<2x4x2xf64>
func.func @forward(%w: tensor<2x2x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<2x2x3xf64>
  %k = merak.get_param @k : tensor<2x4x3xf64>
  %v = merak.get_param @v : tensor<2x4x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 1.3 : tensor<2x2x3xf64>, tensor<2x4x3xf64>, tensor<2x4x2xf64> -> tensor<2x2x2xf64>, tensor<2x2xf64>
  %1 = merak.mul %o, %w : tensor<2x2x2xf64>, tensor<2x2x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2] : tensor<2x2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<1x3x2x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5]], [[-0.4, 0.9], [0.25, -0.6]], [[1.1, 0.8], [-1.3, 0.45]]]]> : tensor<1x3x2x2xf64>
merak.param @k : tensor<1x3x2x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3]], [[0.4, 1.1], [1.2, 0.35]], [[-0.7, 0.6], [0.15, -0.95]]]]> : tensor<1x3x2x2xf64>
merak.param @v : tensor<1x3x2x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5]], [[0.2, 0.3], [-0.45, 0.75]], [[0.05, -1.1], [0.9, 0.4]]]]> : tensor<1x3x2x2xf64>
func.func @forward(%w: tensor<1x3x2x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<1x3x2x2xf64>
  %k = merak.get_param @k : tensor<1x3x2x2xf64>
  %v = merak.get_param @v : tensor<1x3x2x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 0.9 causal seq_major : tensor<1x3x2x2xf64>, tensor<1x3x2x2xf64>, tensor<1x3x2x2xf64> -> tensor<1x3x2x2xf64>, tensor<1x2x3xf64>
  %1 = merak.mul %o, %w : tensor<1x3x2x2xf64>, tensor<1x3x2x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<1x3x2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<1x1x4x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9], [1.1, 0.2]]]]> : tensor<1x1x4x2xf64>
merak.param @k : tensor<1x1x4x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1], [-0.8, 0.6]]]]> : tensor<1x1x4x2xf64>
merak.param @v : tensor<1x1x4x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3], [0.35, -0.9]]]]> : tensor<1x1x4x2xf64>
func.func @forward(%w: tensor<1x1x4x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<1x1x4x2xf64>
  %k = merak.get_param @k : tensor<1x1x4x2xf64>
  %v = merak.get_param @v : tensor<1x1x4x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 0.8 causal window = 2 : tensor<1x1x4x2xf64>, tensor<1x1x4x2xf64>, tensor<1x1x4x2xf64> -> tensor<1x1x4x2xf64>, tensor<1x1x4xf64>
  %1 = merak.mul %o, %w : tensor<1x1x4x2xf64>, tensor<1x1x4x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<1x1x4x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<1x1x3x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]]]]> : tensor<1x1x3x2xf64>
merak.param @k : tensor<1x1x3x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1]]]]> : tensor<1x1x3x2xf64>
merak.param @v : tensor<1x1x3x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3]]]]> : tensor<1x1x3x2xf64>
func.func @forward(%w: tensor<1x1x3x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<1x1x3x2xf64>
  %k = merak.get_param @k : tensor<1x1x3x2xf64>
  %v = merak.get_param @v : tensor<1x1x3x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 1.3 causal softcap = 0.5 : tensor<1x1x3x2xf64>, tensor<1x1x3x2xf64>, tensor<1x1x3x2xf64> -> tensor<1x1x3x2xf64>, tensor<1x1x3xf64>
  %1 = merak.mul %o, %w : tensor<1x1x3x2xf64>, tensor<1x1x3x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<1x1x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<2x2x3x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]], [[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1]], [[1.2, 0.35], [-0.7, 0.6], [0.15, -0.95]]]]> : tensor<2x2x3x2xf64>
merak.param @k : tensor<2x2x3x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3]], [[-0.45, 0.75], [0.05, -1.1], [0.9, 0.4]]], [[[0.5, 0.7], [-0.2, 0.1], [0.8, -0.6]], [[0.3, 0.3], [-0.9, 0.2], [0.1, 1.0]]]]> : tensor<2x2x3x2xf64>
merak.param @v : tensor<2x2x3x2xf64> = dense<[[[[1.0, -0.5], [0.2, 0.8], [-0.7, 0.4]], [[0.6, 0.1], [-0.3, -0.9], [0.5, 0.5]]], [[[0.2, -0.4], [0.9, 0.3], [-0.1, 0.7]], [[-0.6, 0.2], [0.4, -0.8], [0.3, 0.9]]]]> : tensor<2x2x3x2xf64>
merak.param @b : tensor<1x2x3x3xf64> = dense<[[[[0.4, -0.3, 0.9], [-0.7, 0.2, 0.5], [0.1, 0.6, -0.4]], [[-0.2, 0.8, 0.3], [0.5, -0.6, 0.7], [0.9, -0.1, 0.2]]]]> : tensor<1x2x3x3xf64>
func.func @forward(%w: tensor<2x2x3x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<2x2x3x2xf64>
  %k = merak.get_param @k : tensor<2x2x3x2xf64>
  %v = merak.get_param @v : tensor<2x2x3x2xf64>
  %b = merak.get_param @b : tensor<1x2x3x3xf64>
  %o, %lse = merak.attention %q, %k, %v bias %b scale = 1.1 causal softcap = 0.9 : tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>, tensor<1x2x3x3xf64> -> tensor<2x2x3x2xf64>, tensor<2x2x3xf64>
  %1 = merak.mul %o, %w : tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<2x2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<1x3x2x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5]], [[-0.4, 0.9], [0.25, -0.6]], [[1.1, 0.8], [-1.3, 0.45]]]]> : tensor<1x3x2x2xf64>
merak.param @k : tensor<1x2x2x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3]], [[0.4, 1.1], [1.2, 0.35]]]]> : tensor<1x2x2x2xf64>
merak.param @v : tensor<1x2x2x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5]], [[0.2, 0.3], [-0.45, 0.75]]]]> : tensor<1x2x2x2xf64>
merak.param @b : tensor<1x2x3x2xf64> = dense<[[[[0.4, -0.3], [-0.7, 0.2], [0.1, 0.6]], [[-0.2, 0.8], [0.5, -0.6], [0.9, -0.1]]]]> : tensor<1x2x3x2xf64>
func.func @forward(%w: tensor<1x3x2x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<1x3x2x2xf64>
  %k = merak.get_param @k : tensor<1x2x2x2xf64>
  %v = merak.get_param @v : tensor<1x2x2x2xf64>
  %b = merak.get_param @b : tensor<1x2x3x2xf64>
  %o, %lse = merak.attention %q, %k, %v bias %b scale = 0.7 seq_major : tensor<1x3x2x2xf64>, tensor<1x2x2x2xf64>, tensor<1x2x2x2xf64>, tensor<1x2x3x2xf64> -> tensor<1x3x2x2xf64>, tensor<1x2x3xf64>
  %1 = merak.mul %o, %w : tensor<1x3x2x2xf64>, tensor<1x3x2x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<1x3x2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<2x2x4x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9], [0.2, 0.1]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45], [0.6, -0.3]]], [[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1], [-0.8, 0.7]], [[1.2, 0.35], [-0.7, 0.6], [0.15, -0.95], [0.05, 0.5]]]]> : tensor<2x2x4x2xf64>
merak.param @k : tensor<2x2x4x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3], [0.4, -0.9]], [[-0.45, 0.75], [0.05, -1.1], [0.9, 0.4], [-0.2, 0.3]]], [[[0.1, 0.2], [0.3, -0.4], [-0.5, 0.6], [0.7, 0.8]], [[-0.9, 1.0], [0.15, -0.25], [0.35, 0.45], [-0.55, 0.65]]]]> : tensor<2x2x4x2xf64>
merak.param @v : tensor<2x2x4x2xf64> = dense<[[[[0.5, -0.7], [0.2, 0.9], [-0.3, 0.4], [0.8, 0.1]], [[-0.6, 0.3], [0.7, -0.2], [0.1, 0.5], [-0.4, -0.8]]], [[[0.9, 0.6], [-0.1, -0.3], [0.35, 0.25], [-0.65, 0.15]], [[0.45, -0.55], [0.05, 0.95], [-0.75, 0.2], [0.3, -0.1]]]]> : tensor<2x2x4x2xf64>
func.func @forward(%w: tensor<2x2x4x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<2x2x4x2xf64>
  %k = merak.get_param @k : tensor<2x2x4x2xf64>
  %v = merak.get_param @v : tensor<2x2x4x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 0.8 causal dropout = 0.3 seed = 11 : tensor<2x2x4x2xf64>, tensor<2x2x4x2xf64>, tensor<2x2x4x2xf64> -> tensor<2x2x4x2xf64>, tensor<2x2x4xf64>
  %1 = merak.mul %o, %w : tensor<2x2x4x2xf64>, tensor<2x2x4x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<2x2x4x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<2x2x3x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]]], [[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1]], [[1.2, 0.35], [-0.7, 0.6], [0.15, -0.95]]]]> : tensor<2x2x3x2xf64>
merak.param @k : tensor<2x2x3x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3]], [[-0.45, 0.75], [0.05, -1.1], [0.9, 0.4]]], [[[0.5, 0.7], [-0.2, 0.1], [0.8, -0.6]], [[0.3, 0.3], [-0.9, 0.2], [0.1, 1.0]]]]> : tensor<2x2x3x2xf64>
merak.param @v : tensor<2x2x3x2xf64> = dense<[[[[1.0, -0.5], [0.2, 0.8], [-0.7, 0.4]], [[0.6, 0.1], [-0.3, -0.9], [0.5, 0.5]]], [[[0.2, -0.4], [0.9, 0.3], [-0.1, 0.7]], [[-0.6, 0.2], [0.4, -0.8], [0.3, 0.9]]]]> : tensor<2x2x3x2xf64>
merak.param @b : tensor<1x2x1x3xf64> = dense<[[[[0.4, -0.3, 0.9]], [[-0.2, 0.8, 0.3]]]]> : tensor<1x2x1x3xf64>
func.func @forward(%w: tensor<2x2x3x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<2x2x3x2xf64>
  %k = merak.get_param @k : tensor<2x2x3x2xf64>
  %v = merak.get_param @v : tensor<2x2x3x2xf64>
  %b = merak.get_param @b : tensor<1x2x1x3xf64>
  %o, %lse = merak.attention %q, %k, %v bias %b scale = 1.1 : tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>, tensor<1x2x1x3xf64> -> tensor<2x2x3x2xf64>, tensor<2x2x3xf64>
  %1 = merak.mul %o, %w : tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<2x2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<1x1x5x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9], [1.1, 0.2], [-0.6, -0.3]]]]> : tensor<1x1x5x2xf64>
merak.param @k : tensor<1x1x5x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1], [-0.8, 0.6], [0.15, 0.7]]]]> : tensor<1x1x5x2xf64>
merak.param @v : tensor<1x1x5x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3], [0.35, -0.9], [1.2, 0.4]]]]> : tensor<1x1x5x2xf64>
func.func @forward(%w: tensor<1x1x5x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<1x1x5x2xf64>
  %k = merak.get_param @k : tensor<1x1x5x2xf64>
  %v = merak.get_param @v : tensor<1x1x5x2xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 0.8 window = 2 : tensor<1x1x5x2xf64>, tensor<1x1x5x2xf64>, tensor<1x1x5x2xf64> -> tensor<1x1x5x2xf64>, tensor<1x1x5xf64>
  %1 = merak.mul %o, %w : tensor<1x1x5x2xf64>, tensor<1x1x5x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<1x1x5x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @q : tensor<2x2x3x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[1.1, 0.2], [-0.6, -0.3], [0.5, 0.8]]], [[[0.25, -0.6], [1.1, 0.8], [-1.3, 0.45]], [[0.9, -0.7], [0.2, 0.6], [-0.5, 1.3]]]]> : tensor<2x2x3x2xf64>
merak.param @k : tensor<2x2x3x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1]], [[0.3, 0.7], [-1.0, 0.4], [0.6, -0.2]]], [[[1.2, 0.35], [-0.7, 0.6], [0.15, -0.95]], [[-0.4, 0.1], [0.8, 0.9], [0.35, -0.6]]]]> : tensor<2x2x3x2xf64>
merak.param @v : tensor<2x2x3x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3]], [[0.45, 0.9], [-0.3, -0.7], [1.0, 0.15]]], [[[-0.45, 0.75], [0.05, -1.1], [0.9, 0.4]], [[0.7, -0.25], [-0.6, 0.3], [0.2, 0.95]]]]> : tensor<2x2x3x2xf64>
merak.param @sink : tensor<1x2x1x1xf64> = dense<[[[[0.4]], [[-0.7]]]]> : tensor<1x2x1x1xf64>
func.func @forward(%w: tensor<2x2x3x2xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<2x2x3x2xf64>
  %k = merak.get_param @k : tensor<2x2x3x2xf64>
  %v = merak.get_param @v : tensor<2x2x3x2xf64>
  %s = merak.get_param @sink : tensor<1x2x1x1xf64>
  %o, %lse = merak.attention %q, %k, %v scale = 0.9 causal : tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64> -> tensor<2x2x3x2xf64>, tensor<2x2x3xf64>
  %l = merak.reshape %lse : tensor<2x2x3xf64> to tensor<2x2x3x1xf64>
  %d = merak.sub %l, %s : tensor<2x2x3x1xf64>, tensor<1x2x1x1xf64>
  %share = merak.sigmoid %d : tensor<2x2x3x1xf64>
  %r = merak.mul %o, %share : tensor<2x2x3x2xf64>, tensor<2x2x3x1xf64>
  %1 = merak.mul %r, %w : tensor<2x2x3x2xf64>, tensor<2x2x3x2xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2, 3] : tensor<2x2x3x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// gradcheck-zero: v
merak.param @q : tensor<1x2x3x2xf64> = dense<[[[[0.3, -1.2], [0.7, 1.5], [-0.4, 0.9]], [[1.1, 0.2], [-0.6, -0.3], [0.5, 0.8]]]]> : tensor<1x2x3x2xf64>
merak.param @k : tensor<1x2x3x2xf64> = dense<[[[[-0.5, 0.2], [0.9, -0.3], [0.4, 1.1]], [[0.3, 0.7], [-1.0, 0.4], [0.6, -0.2]]]]> : tensor<1x2x3x2xf64>
merak.param @v : tensor<1x2x3x2xf64> = dense<[[[[0.6, -0.1], [-0.8, 0.5], [0.2, 0.3]], [[0.45, 0.9], [-0.3, -0.7], [1.0, 0.15]]]]> : tensor<1x2x3x2xf64>
merak.param @b : tensor<1x2x3x3xf64> = dense<[[[[0.4, -0.3, 0.9], [0.1, 0.2, -0.5], [-0.6, 0.7, 0.05]], [[-0.2, 0.8, 0.3], [0.5, -0.4, 0.6], [0.35, 0.15, -0.9]]]]> : tensor<1x2x3x3xf64>
func.func @forward(%w: tensor<1x2x3xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<1x2x3x2xf64>
  %k = merak.get_param @k : tensor<1x2x3x2xf64>
  %v = merak.get_param @v : tensor<1x2x3x2xf64>
  %b = merak.get_param @b : tensor<1x2x3x3xf64>
  %o, %lse = merak.attention %q, %k, %v bias %b scale = 1.2 softcap = 0.8 : tensor<1x2x3x2xf64>, tensor<1x2x3x2xf64>, tensor<1x2x3x2xf64>, tensor<1x2x3x3xf64> -> tensor<1x2x3x2xf64>, tensor<1x2x3xf64>
  %1 = merak.mul %lse, %w : tensor<1x2x3xf64>, tensor<1x2x3xf64>
  %loss = merak.reduce_sum %1 axes = [0, 1, 2] : tensor<1x2x3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
