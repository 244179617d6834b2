// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   big = 2 ** 53; \
// RUN:   np.save('%t/x.npy', np.array([[big, 1], [big + 1, big]], np.int64)); \
// RUN:   np.save('%t/sum.npy', np.array([big + 1, 2 * big + 1], np.int64)); \
// RUN:   np.save('%t/max.npy', np.array([big + 1, big], np.int64)); \
// RUN:   np.save('%t/argmax.npy', np.array([1, 1], np.int64)); \
// RUN:   np.save('%t/clamp.npy', np.array([[big, 1], [big + 1, big]], np.int64))"
// RUN: merak-run %s --input %t/x.npy --expect %t/sum.npy --expect %t/max.npy --expect %t/argmax.npy \
// RUN:   --expect %t/clamp.npy | FileCheck %s

// i64 arithmetic is exact, also beyond 2^53 where doubles have gaps:
// 2^53 + 1 must not become 2^53 in a reduction, an argmax comparison or a
// clamp.

// CHECK: output 0 '#0' matches (2 elements
// CHECK: output 1 '#1' matches (2 elements
// CHECK: output 2 '#2' matches (2 elements
// CHECK: output 3 '#3' matches (4 elements
func.func @forward(%x: tensor<2x2xi64>) -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2x2xi64>) {
  %0 = merak.reduce_sum %x axes = [1] : tensor<2x2xi64> -> tensor<2xi64>
  %1 = merak.reduce_max %x axes = [0] : tensor<2x2xi64> -> tensor<2xi64>
  %2 = merak.argmax %x axis = 0 : tensor<2x2xi64> -> tensor<2xi64>
  %3 = merak.clamp %x {min = 0.0 : f64} : tensor<2x2xi64>
  return %0, %1, %2, %3 : tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2x2xi64>
}
