// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([[3, 4, 0, 0], [1, -1, 1, -1], [0, 0, 0, 2]], np.float32); \
// RUN:   s = np.array([1, 2, 3, 4], np.float32); \
// RUN:   np.save('%t/x.npy', x); np.save('%t/s.npy', s); \
// RUN:   r = np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-5); \
// RUN:   np.save('%t/y.npy', (x / r * s).astype(np.float32)); \
// RUN:   np.save('%t/z.npy', (x / np.sqrt((x.astype(np.float64) ** 2).mean() + 1e-5)).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --input %t/s.npy --expect %t/y.npy --expect %t/z.npy | FileCheck %s

// rms_norm divides by the root mean square without subtracting the mean:
// the row [3, 4, 0, 0] has rms 2.5. Axis 0 normalises the whole tensor.

// CHECK: output 0 '#0' matches (12 elements
// CHECK: output 1 '#1' matches (12 elements
func.func @forward(%x: tensor<3x4xf32>, %s: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = merak.rms_norm %x scale %s axis = 1 epsilon = 1.0e-5 : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %1 = merak.rms_norm %x axis = 0 epsilon = 1.0e-5 : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>
}
