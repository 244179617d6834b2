// RUN: merak-opt %s -split-input-file -verify-diagnostics

func.func @f16(%q: tensor<2x4x16xf16>) -> tensor<2x4x16xf16> {
  // expected-error @+1 {{query must be a float32, bf16 or float64 tensor}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 : tensor<2x4x16xf16>, tensor<2x4x16xf16>, tensor<2x4x16xf16> -> tensor<2x4x16xf16>, tensor<2x4xf16>
  return %o : tensor<2x4x16xf16>
}

// -----

// seq_major needs [..., T, H, D] operands.
func.func @seq_major_rank(%q: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{seq_major needs query, key and value of rank >= 3}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 seq_major : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>, tensor<4xf32>
  return %o : tensor<4x16xf32>
}

// -----

// seq_major: the result is [..., T, H, D] too and lse [..., H, T].
func.func @seq_major_result(%q: tensor<2x8x3x16xf32>) -> tensor<2x3x8x16xf32> {
  // expected-error @+1 {{result type 'tensor<2x3x8x16xf32>' must be 'tensor<2x8x3x16xf32>'}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 seq_major : tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32> -> tensor<2x3x8x16xf32>, tensor<2x3x8xf32>
  return %o : tensor<2x3x8x16xf32>
}

// -----

// bf16 attention keeps its lse in float32.
func.func @bf16_lse(%q: tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16> {
  // expected-error @+1 {{lse type 'tensor<2x4xbf16>' must be 'tensor<2x4xf32>'}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16> -> tensor<2x4x16xbf16>, tensor<2x4xbf16>
  return %o : tensor<2x4x16xbf16>
}

// -----

func.func @mixed(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf64>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{key and value must have query's element type 'f32'}}
  %o, %l = merak.attention %q, %k, %k scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf64>, tensor<2x4x16xf64> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @batch_mismatch(%q: tensor<2x4x16xf32>, %k: tensor<3x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{must have equal leading (batch, head) dimensions}}
  %o, %l = merak.attention %q, %k, %k scale = 1.0 : tensor<2x4x16xf32>, tensor<3x4x16xf32>, tensor<3x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @head_dim(%q: tensor<2x4x16xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{key's last dimension 8 must equal query's 16}}
  %o, %l = merak.attention %q, %k, %v scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @value_rows(%q: tensor<2x4x16xf32>, %k: tensor<2x6x16xf32>, %v: tensor<2x5x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{value has 5 rows but key has 6}}
  %o, %l = merak.attention %q, %k, %v scale = 1.0 : tensor<2x4x16xf32>, tensor<2x6x16xf32>, tensor<2x5x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @causal_lengths(%q: tensor<2x4x16xf32>, %k: tensor<2x6x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{causal attention needs as many keys as queries, got 6 keys for 4 queries}}
  %o, %l = merak.attention %q, %k, %k scale = 1.0 causal : tensor<2x4x16xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @lse_type(%q: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{lse type 'tensor<2x4x1xf32>' must be 'tensor<2x4xf32>'}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4x1xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @result_type(%q: tensor<2x4x16xf32>, %v: tensor<2x4x32xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{result type 'tensor<2x4x16xf32>' must be 'tensor<2x4x32xf32>'}}
  %o, %l = merak.attention %q, %q, %v scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x32xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @scale_inf(%q: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{scale must be finite}}
  %o, %l = merak.attention %q, %q, %q scale = 0x7FF0000000000000 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @grad_type(%q: tensor<2x4x16xf32>, %l: tensor<2x4xf32>, %g: tensor<2x4x32xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{grad type 'tensor<2x4x32xf32>' must equal the result type 'tensor<2x4x16xf32>'}}
  %dq, %dk, %dv = merak.attention_grad %q, %q, %q, %q, %l, %g scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x32xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %dq : tensor<2x4x16xf32>
}

// -----

func.func @grad_results(%q: tensor<2x4x16xf32>, %l: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{gradient types must equal query, key and value's}}
  %dq, %dk, %dv = merak.attention_grad %q, %q, %q, %q, %l, %q scale = 1.0 causal : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x8x16xf32>
  return %dq : tensor<2x4x16xf32>
}

// -----

func.func @band_needs_square(%q: tensor<2x4x16xf32>, %k: tensor<2x6x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{windowed attention needs as many keys as queries, got 6 keys for 4 queries}}
  %o, %l = merak.attention %q, %k, %k scale = 1.0 window = 3 : tensor<2x4x16xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

func.func @negative_window(%q: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{window -1 must be 0 (none) or positive}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 causal window = -1 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// A bias must not grow the scores: S last (T may be 1: a bias per key).
func.func @bias_rows(%q: tensor<2x4x16xf32>, %b: tensor<2x4x1xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{bias type 'tensor<2x4x1xf32>' must broadcast to the scores 'tensor<2x4x4xf32>'}}
  %o, %l = merak.attention %q, %q, %q bias %b scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x1xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// A bias has the query's element type.
func.func @bias_type(%q: tensor<2x4x16xf32>, %b: tensor<1x4x4xf64>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{bias type 'tensor<1x4x4xf64>' must broadcast to the scores}}
  %o, %l = merak.attention %q, %q, %q bias %b scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<1x4x4xf64> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// seq_major: the bias stays heads-first ([B, H, T, S]).
func.func @bias_seq_major(%q: tensor<2x8x3x16xf32>, %b: tensor<1x8x3x8xf32>) -> tensor<2x8x3x16xf32> {
  // expected-error @+1 {{must broadcast to the scores 'tensor<2x3x8x8xf32>'}}
  %o, %l = merak.attention %q, %q, %q bias %b scale = 1.0 seq_major : tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<1x8x3x8xf32> -> tensor<2x8x3x16xf32>, tensor<2x3x8xf32>
  return %o : tensor<2x8x3x16xf32>
}

// -----

// The gradient of a biased attention returns the scores' gradient.
func.func @bias_grad_missing(%q: tensor<2x4x16xf32>, %l: tensor<2x4xf32>, %b: tensor<1x4x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{has a bias_grad result exactly when it has a bias operand}}
  %dq, %dk, %dv = merak.attention_grad %q, %q, %q, %q, %l, %q bias %b scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x16xf32>, tensor<1x4x4xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %dq : tensor<2x4x16xf32>
}

// -----

// ... shaped like the scores, not like the bias.
func.func @bias_grad_shape(%q: tensor<2x4x16xf32>, %l: tensor<2x4xf32>, %b: tensor<1x4x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{bias_grad type 'tensor<1x4x4xf32>' must be the scores' 'tensor<2x4x4xf32>'}}
  %dq, %dk, %dv, %db = merak.attention_grad %q, %q, %q, %q, %l, %q bias %b scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x16xf32>, tensor<1x4x4xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<1x4x4xf32>
  return %dq : tensor<2x4x16xf32>
}

// -----

// Attention-probability dropout is a ratio in [0, 1).
func.func @dropout_ratio(%q: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{dropout must be in [0, 1), got 1.000000e+00}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 dropout = 1.0 seed = 3 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// Its splits lie on the probabilities' leading dims, never on [T, S].
func.func @dropout_split_dim(%q: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  // expected-error @+1 {{tp_split dimension 2 is out of range (the first 2 of rank 4 may be split)}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 dropout = 0.1 seed = 3 {tp_split = array<i64: 2, 1, 2>} : tensor<2x3x4x16xf32>, tensor<2x3x4x16xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// seq_major operands [B, T, H, D]: the probabilities are [B, H, T, S], whose
// heads (dim 1: 3 of them) hold no 2 blocks.
func.func @dropout_split_seq_major(%q: tensor<2x4x3x16xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{batch_split: dimension 1 (size 3) must hold 2 blocks}}
  %o, %l = merak.attention %q, %q, %q scale = 1.0 dropout = 0.1 seed = 3 seq_major {batch_split = array<i64: 1, 2, 2>} : tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32> -> tensor<2x4x3x16xf32>, tensor<2x3x4xf32>
  return %o : tensor<2x4x3x16xf32>
}

// -----

// No splits without dropout.
func.func @split_without_dropout(%q: tensor<2x4x16xf32>, %l: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{records dropout splits without dropout}}
  %dq, %dk, %dv = merak.attention_grad %q, %q, %q, %q, %l, %q scale = 1.0 {batch_split = array<i64: 0, 1, 2>} : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %dq : tensor<2x4x16xf32>
}

// -----

// The lse's gradient is shaped like lse.
func.func @lse_grad_shape(%q: tensor<2x4x16xf32>, %l: tensor<2x4xf32>, %gl: tensor<2x4x1xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{lse_grad type 'tensor<2x4x1xf32>' must equal the lse type 'tensor<2x4xf32>'}}
  %dq, %dk, %dv = merak.attention_grad %q, %q, %q, %q, %l, %q lse_grad %gl : tensor<2x4x1xf32> scale = 1.0 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %dq : tensor<2x4x16xf32>
}
