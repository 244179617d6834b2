// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   np.save('%t/l.npy', np.zeros((2, 3), np.float32)); \
// RUN:   np.save('%t/t.npy', np.array([-100, 3], np.int64))"
// RUN: not merak-run %s --input %t/l.npy --input %t/t.npy 2>&1 | FileCheck %s

// A label outside [0, classes) that is not ignore_index is a run-time error.

// CHECK: error: label 3 out of range [0, 3)
func.func @forward(%l: tensor<2x3xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" {ignore_index = -100 : i64}
       : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  return %0 : tensor<f32>
}
