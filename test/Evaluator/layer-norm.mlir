// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([[[1, 2, 3, 4], [2, 4, 6, 8], [0, 0, 1, -1]], [[5, 5, 5, 5], [-1, 0, 1, 2], [3, 1, 4, 1]]], np.float32); \
// RUN:   s = np.array([1, 2, 0.5, -1], np.float32); \
// RUN:   b = np.array([[0, 1, 2, 3], [-1, -2, -3, -4], [0.5, 0.5, 0.5, 0.5]], np.float32); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('x', x), ('s', s), ('b', b)]]; \
// RUN:   x = x.astype(np.float64); \
// RUN:   mu = x.mean(axis=(1, 2), keepdims=True); var = ((x - mu) ** 2).mean(axis=(1, 2), keepdims=True); \
// RUN:   np.save('%t/y1.npy', ((x - mu) / np.sqrt(var + 1e-5) * s + b).astype(np.float32)); \
// RUN:   mu = x.mean(axis=2, keepdims=True); var = ((x - mu) ** 2).mean(axis=2, keepdims=True); \
// RUN:   np.save('%t/y2.npy', ((x - mu) / np.sqrt(var + 0.5)).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --input %t/s.npy --input %t/b.npy \
// RUN:   --expect %t/y1.npy --expect %t/y2.npy --atol 1e-6 | FileCheck %s

// layer_norm over dimensions [1, 3) with a scale that broadcasts over the
// normalised 3x4 shape and a full 3x4 bias; and over the last dimension
// without scale or bias, with a large epsilon (a constant row, [5, 5, 5, 5],
// normalises to 0).

// CHECK: output 0 '#0' matches (24 elements
// CHECK: output 1 '#1' matches (24 elements
func.func @forward(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %b: tensor<3x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = merak.layer_norm %x scale %s bias %b axis = 1 epsilon = 1.0e-5
       : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %1 = merak.layer_norm %x axis = 2 epsilon = 0.5 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
