// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([[[1, 2, 3]], [[-4, 5, 0.5]]], np.float32); \
// RUN:   y = np.array([[10], [20], [30], [40]], np.float32); \
// RUN:   np.save('%t/x.npy', x); np.save('%t/y.npy', y); \
// RUN:   np.save('%t/sum.npy', (x + y).astype(np.float32)); \
// RUN:   np.save('%t/a.npy', np.array([-7, 7, -7, 9], np.int32)); \
// RUN:   np.save('%t/b.npy', np.array([2, 2, -2, 3], np.int32)); \
// RUN:   np.save('%t/quot.npy', np.array([-3, 3, 3, 3], np.int32))"
// RUN: merak-run %s --input %t/x.npy --input %t/y.npy --input %t/a.npy --input %t/b.npy \
// RUN:   --expect %t/sum.npy --expect %t/quot.npy | FileCheck %s

// Numpy broadcasting of a 2x1x3 and a 4x1 operand to 2x4x3; integer
// division truncates toward zero (numpy's // would floor -7/2 to -4).

// CHECK: output 0 '#0' matches (24 elements
// CHECK: output 1 '#1' matches (4 elements
func.func @forward(%x: tensor<2x1x3xf32>, %y: tensor<4x1xf32>, %a: tensor<4xi32>, %b: tensor<4xi32>)
    -> (tensor<2x4x3xf32>, tensor<4xi32>) {
  %0 = merak.add %x, %y : tensor<2x1x3xf32>, tensor<4x1xf32>
  %1 = merak.div %a, %b : tensor<4xi32>, tensor<4xi32>
  return %0, %1 : tensor<2x4x3xf32>, tensor<4xi32>
}
