// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.arange(24, dtype=np.int64).reshape(2, 3, 4); np.save('%t/x.npy', x); \
// RUN:   np.save('%t/y.npy', np.transpose(x, (2, 0, 1))); \
// RUN:   np.save('%t/z.npy', np.transpose(x, (1, 0, 2)).astype(np.float16))"
// RUN: merak-run %s --input %t/x.npy --expect %t/y.npy --expect %t/z.npy | FileCheck %s

// Result dimension i is input dimension perm[i].

// CHECK: output 0 '#0' matches (24 elements
// CHECK: output 1 '#1' matches (24 elements
func.func @forward(%x: tensor<2x3x4xi64>) -> (tensor<4x2x3xi64>, tensor<3x2x4xf16>) {
  %0 = merak.transpose %x perm = [2, 0, 1] : tensor<2x3x4xi64> to tensor<4x2x3xi64>
  %h = merak.cast %x : tensor<2x3x4xi64> to tensor<2x3x4xf16>
  %1 = merak.transpose %h perm = [1, 0, 2] : tensor<2x3x4xf16> to tensor<3x2x4xf16>
  return %0, %1 : tensor<4x2x3xi64>, tensor<3x2x4xf16>
}
