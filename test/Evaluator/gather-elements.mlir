// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   d = np.arange(12, dtype=np.int64).reshape(3, 4) * 10; \
// RUN:   i = np.array([[3, 0], [-1, 1], [2, -4]], np.int64); k = np.array([[2, 0, 1, -1], [0, 0, -3, 2]], np.int32); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('d', d), ('i', i), ('k', k)]]; \
// RUN:   np.save('%t/along1.npy', np.array([[30, 0], [70, 50], [100, 80]], np.int64)); \
// RUN:   np.save('%t/along0.npy', np.array([[80, 10, 60, 110], [0, 10, 20, 110]], np.int64))"
// RUN: merak-run %s --input %t/d.npy --input %t/i.npy --input %t/k.npy --expect %t/along1.npy \
// RUN:   --expect %t/along0.npy | FileCheck %s

// torch.gather / take_along_axis: result[r][c] = d[r][i[r][c]] along axis 1
// and d[k[r][c]][c] along axis 0; indices may be smaller than the data
// outside the axis, and negative ones count from the end.

// CHECK: output 0 '#0' matches (6 elements
// CHECK: output 1 '#1' matches (8 elements
func.func @forward(%d: tensor<3x4xi64>, %i: tensor<3x2xi64>, %k: tensor<2x4xi32>) -> (tensor<3x2xi64>, tensor<2x4xi64>) {
  %0 = merak.gather_elements %d[%i] axis = 1 : tensor<3x4xi64>, tensor<3x2xi64> -> tensor<3x2xi64>
  %1 = merak.gather_elements %d[%k] axis = 0 : tensor<3x4xi64>, tensor<2x4xi32> -> tensor<2x4xi64>
  return %0, %1 : tensor<3x2xi64>, tensor<2x4xi64>
}
