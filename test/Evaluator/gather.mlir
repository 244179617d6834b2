// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   d = (np.arange(15, dtype=np.float32).reshape(5, 3) - 7) / 2; \
// RUN:   i = np.array([[0, -1], [2, -5]], np.int64); j = np.array([2, -3, 1], np.int32); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('d', d), ('i', i), ('j', j)]]; \
// RUN:   np.save('%t/rows.npy', d[[[0, 4], [2, 0]]]); \
// RUN:   np.save('%t/cols.npy', np.ascontiguousarray(d[:, [2, 0, 1]]))"
// RUN: merak-run %s --input %t/d.npy --input %t/i.npy --input %t/j.npy --expect %t/rows.npy \
// RUN:   --expect %t/cols.npy | FileCheck %s

// ONNX Gather along axis 0 (an embedding lookup with 2-D indices) and
// axis 1; negative indices count from the end (-1 is row 4, -5 row 0).

// CHECK: output 0 '#0' matches (12 elements
// CHECK: output 1 '#1' matches (15 elements
func.func @forward(%d: tensor<5x3xf32>, %i: tensor<2x2xi64>, %j: tensor<3xi32>) -> (tensor<2x2x3xf32>, tensor<5x3xf32>) {
  %0 = merak.gather %d[%i] axis = 0 : tensor<5x3xf32>, tensor<2x2xi64> -> tensor<2x2x3xf32>
  %1 = merak.gather %d[%j] axis = 1 : tensor<5x3xf32>, tensor<3xi32> -> tensor<5x3xf32>
  return %0, %1 : tensor<2x2x3xf32>, tensor<5x3xf32>
}
