// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   c = np.array([[True], [False]]); x = np.array([1, 2, 3], np.float32); y = np.array([[-1, -2, -3], [-4, -5, -6]], np.float32); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('c', c), ('x', x), ('y', y)]]; \
// RUN:   np.save('%t/w.npy', np.array([[1, 2, 3], [-4, -5, -6]], np.float32)); \
// RUN:   np.save('%t/m.npy', np.array([[1, 0, 3], [0, 0, 0]], np.float32))"
// RUN: merak-run %s --input %t/c.npy --input %t/x.npy --input %t/y.npy --expect %t/w.npy --expect %t/m.npy | FileCheck %s

// where broadcasts all three operands; the second output masks with a
// computed condition (x is odd, from an i64 comparison) and a scalar.

// CHECK: output 0 '#0' matches (6 elements
// CHECK: output 1 '#1' matches (6 elements
func.func @forward(%c: tensor<2x1xi1>, %x: tensor<3xf32>, %y: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = merak.where %c, %x, %y : tensor<2x1xi1>, tensor<3xf32>, tensor<2x3xf32>
  %xi = merak.cast %x : tensor<3xf32> to tensor<3xi64>
  %two = merak.constant dense<2> : tensor<i64>
  %half = merak.div %xi, %two : tensor<3xi64>, tensor<i64>
  %even = merak.mul %half, %two : tensor<3xi64>, tensor<i64>
  %odd = merak.ne %even, %xi : tensor<3xi64>, tensor<3xi64>
  %both = merak.and %odd, %c : tensor<3xi1>, tensor<2x1xi1>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %1 = merak.where %both, %x, %zero : tensor<2x3xi1>, tensor<3xf32>, tensor<f32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}
