// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([[1, 2, 3, 4], [0, 0, 0, 0], [1000, 1001, 1002, -1000]], np.float32); \
// RUN:   np.save('%t/x.npy', x); x = x.astype(np.float64); \
// RUN:   m0 = x.max(axis=0, keepdims=True); e0 = np.exp(x - m0); \
// RUN:   np.save('%t/softmax0.npy', (e0 / e0.sum(axis=0, keepdims=True)).astype(np.float32)); \
// RUN:   m1 = x.max(axis=1, keepdims=True); \
// RUN:   lse1 = m1 + np.log(np.exp(x - m1).sum(axis=1, keepdims=True)); \
// RUN:   np.save('%t/logsoftmax1.npy', (x - lse1).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --expect %t/softmax0.npy --expect %t/logsoftmax1.npy --atol 1e-6 | FileCheck %s

// softmax along axis 0 and log_softmax along axis 1; the row with values
// around 1000 overflows exp unless the maximum is subtracted first.

// CHECK: output 0 '#0' matches (12 elements
// CHECK: output 1 '#1' matches (12 elements
func.func @forward(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = merak.softmax %x axis = 0 : tensor<3x4xf32>
  %1 = merak.log_softmax %x axis = 1 : tensor<3x4xf32>
  return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>
}
