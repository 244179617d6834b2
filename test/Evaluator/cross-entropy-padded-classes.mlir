// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   l = np.array([[1, 2, 3, 9, 9], [0.5, -1, 2, 7, -7]], np.float32); t = np.array([2, 0], np.int64); \
// RUN:   np.save('%t/l.npy', l); np.save('%t/t.npy', t); L = l[:, :3].astype(np.float64); \
// RUN:   p = np.exp(L) / np.exp(L).sum(axis=1, keepdims=True); lse = np.log(np.exp(L).sum(axis=1)); \
// RUN:   np.save('%t/loss.npy', np.array((lse - L[[0, 1], [2, 0]]).mean(), np.float32)); \
// RUN:   g = p.copy(); g[[0, 1], [2, 0]] -= 1; g /= 2; \
// RUN:   np.save('%t/grad.npy', np.concatenate([g, np.zeros((2, 2))], axis=1).astype(np.float32))"
// RUN: merak-run %s --input %t/l.npy --input %t/t.npy --expect %t/loss.npy --expect %t/grad.npy | FileCheck %s

// Vocabulary padding: 5 columns of which the last 2 are padding (classes =
// 3); on one rank (the reference evaluator) the loss is the cross-entropy
// over the first 3 columns only, whatever the padding logits hold, and the
// padding columns get a zero gradient.
// CHECK: output 0 '#0' matches
// CHECK: output 1 '#1' matches
func.func @forward(%l: tensor<2x5xf32>, %t: tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>) {
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" {classes = 3 : i64, group = "tp"} : tensor<2x5xf32>, tensor<2xi64> -> tensor<f32>
  %one = merak.constant dense<1.0> : tensor<f32>
  %1 = merak.cross_entropy_grad %l, %t, %one axis = 1 reduction = "mean" {classes = 3 : i64, group = "tp"} : tensor<2x5xf32>, tensor<2xi64>, tensor<f32> -> tensor<2x5xf32>
  return %0, %1 : tensor<f32>, tensor<2x5xf32>
}
