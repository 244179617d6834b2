// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   r = np.random.default_rng(3); \
// RUN:   q, k, v = (r.standard_normal((2, 5, 3, 4)) for _ in range(3)); \
// RUN:   [np.save('%t/' + n + '.npy', t.astype(np.float32)) for n, t in [('q', q), ('k', k), ('v', v)]]; \
// RUN:   q, k, v = (np.load('%t/' + n + '.npy').astype(np.float64).transpose(0, 2, 1, 3) for n in 'qkv'); \
// RUN:   s = q @ k.transpose(0, 1, 3, 2) * 0.5; s[..., np.triu(np.ones((5, 5), bool), 1)] = -np.inf; \
// RUN:   m = s.max(-1, keepdims=True); p = np.exp(s - m); l = p.sum(-1, keepdims=True); \
// RUN:   np.save('%t/o.npy', (p / l @ v).transpose(0, 2, 1, 3).astype(np.float32)); \
// RUN:   np.save('%t/lse.npy', (m + np.log(l))[..., 0].astype(np.float32))"
// RUN: merak-run %s --input %t/q.npy --input %t/k.npy --input %t/v.npy \
// RUN:   --expect %t/o.npy --expect %t/lse.npy --atol 1e-6 | FileCheck %s

// seq_major attention ([B, T, H, D] operands and result, lse [B, H, T])
// against numpy's causal attention over the heads-first transposes.

// CHECK: output 0 '#0' matches (120 elements
// CHECK: output 1 '#1' matches (30 elements
func.func @forward(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>)
    -> (tensor<2x5x3x4xf32>, tensor<2x3x5xf32>) {
  %o, %lse = merak.attention %q, %k, %v scale = 0.5 causal seq_major : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32> -> tensor<2x5x3x4xf32>, tensor<2x3x5xf32>
  return %o, %lse : tensor<2x5x3x4xf32>, tensor<2x3x5xf32>
}
