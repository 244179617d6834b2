// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   l = np.array([[1, 2, 3, 4, 5], [0, 0, 0, 0, 0], [-1, 0.5, 2, 0, 1], [3, -3, 0, 1, 1]], np.float32); \
// RUN:   t = np.array([1, -100, 4, 0], np.int64); \
// RUN:   u = (np.mod(np.arange(12).reshape(2, 3, 2) * 7, 5) - 2).astype(np.float64); k = np.array([[0, 2], [1, 1]], np.int32); \
// RUN:   [np.save('%t/' + n + '.npy', a) for n, a in [('l', l), ('t', t), ('u', u), ('k', k)]]; \
// RUN:   L = l.astype(np.float64); lse = np.log(np.exp(L).sum(axis=1)); \
// RUN:   per = np.array([lse[0] - L[0, 1], lse[2] - L[2, 4], lse[3] - L[3, 0]]); \
// RUN:   np.save('%t/mean.npy', np.array(per.mean(), np.float32)); \
// RUN:   np.save('%t/sum.npy', np.array((lse - L[[0, 1, 2, 3], [1, 0, 4, 0]]).sum(), np.float32)); \
// RUN:   lse3 = np.log(np.exp(u).sum(axis=1)); \
// RUN:   np.save('%t/none.npy', np.array([[lse3[n, j] - u[n, k[n, j], j] for j in range(2)] for n in range(2)]))"
// RUN: merak-run %s --input %t/l.npy --input %t/t.npy --input %t/u.npy --input %t/k.npy \
// RUN:   --expect %t/mean.npy --expect %t/sum.npy --expect %t/none.npy | FileCheck %s

// Softmax cross-entropy with class labels.
// 0: mean over the three labels that are not ignore_index (-100).
// 1: sum without ignore_index, over the labels with -100 replaced by 0.
// 2: class axis 1 of N x C x D logits (f64), i32 labels, no reduction.

// CHECK: output 0 '#0' matches (1 elements
// CHECK: output 1 '#1' matches (1 elements
// CHECK: output 2 '#2' matches (4 elements
func.func @forward(%l: tensor<4x5xf32>, %t: tensor<4xi64>, %u: tensor<2x3x2xf64>, %k: tensor<2x2xi32>)
    -> (tensor<f32>, tensor<f32>, tensor<2x2xf64>) {
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" {ignore_index = -100 : i64}
       : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  %zero = merak.constant dense<0> : tensor<i64>
  %neg = merak.lt %t, %zero : tensor<4xi64>, tensor<i64>
  %t0 = merak.where %neg, %zero, %t : tensor<4xi1>, tensor<i64>, tensor<4xi64>
  %1 = merak.cross_entropy %l, %t0 axis = 1 reduction = "sum" : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  %2 = merak.cross_entropy %u, %k axis = 1 reduction = "none" : tensor<2x3x2xf64>, tensor<2x2xi32> -> tensor<2x2xf64>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<2x2xf64>
}
