// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   a = (np.arange(24).reshape(2, 1, 3, 4) / 8 - 1).astype(np.float32); \
// RUN:   b = (np.arange(40).reshape(5, 4, 2) / 10 - 2).astype(np.float32); \
// RUN:   v = np.array([1, -2, 0.5, 3], np.float32); \
// RUN:   i = np.array([[1, 2, 3], [-4, 5, 6]], np.int64); \
// RUN:   j = np.array([[7, -1], [0, 2], [3, 1]], np.int64); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('a', a), ('b', b), ('v', v), ('i', i), ('j', j)]]; \
// RUN:   np.save('%t/ab.npy', np.matmul(a.astype(np.float64), b).astype(np.float32)); \
// RUN:   np.save('%t/vb.npy', np.matmul(v.astype(np.float64), b).astype(np.float32)); \
// RUN:   np.save('%t/av.npy', np.matmul(a.astype(np.float64), v).astype(np.float32)); \
// RUN:   np.save('%t/ij.npy', np.array([[16, 6], [-10, 20]], np.int64))"
// RUN: merak-run %s --input %t/a.npy --input %t/b.npy --input %t/v.npy --input %t/i.npy --input %t/j.npy \
// RUN:   --expect %t/ab.npy --expect %t/vb.npy --expect %t/av.npy --expect %t/ij.npy | FileCheck %s

// numpy.matmul semantics: batch dimensions 2x1 and 5 broadcast to 2x5; a
// 1-D lhs or rhs gains and then loses a unit dimension; integers are exact.

// CHECK: output 0 '#0' matches (60 elements
// CHECK: output 1 '#1' matches (10 elements
// CHECK: output 2 '#2' matches (6 elements
// CHECK: output 3 '#3' matches (4 elements
func.func @forward(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x2xf32>, %v: tensor<4xf32>,
                   %i: tensor<2x3xi64>, %j: tensor<3x2xi64>)
    -> (tensor<2x5x3x2xf32>, tensor<5x2xf32>, tensor<2x1x3xf32>, tensor<2x2xi64>) {
  %0 = merak.matmul %a, %b : tensor<2x1x3x4xf32>, tensor<5x4x2xf32> -> tensor<2x5x3x2xf32>
  %1 = merak.matmul %v, %b : tensor<4xf32>, tensor<5x4x2xf32> -> tensor<5x2xf32>
  %2 = merak.matmul %a, %v : tensor<2x1x3x4xf32>, tensor<4xf32> -> tensor<2x1x3xf32>
  %3 = merak.matmul %i, %j : tensor<2x3xi64>, tensor<3x2xi64> -> tensor<2x2xi64>
  return %0, %1, %2, %3 : tensor<2x5x3x2xf32>, tensor<5x2xf32>, tensor<2x1x3xf32>, tensor<2x2xi64>
}
