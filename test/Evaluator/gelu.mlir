// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np, math; \
// RUN:   x = np.array([-4, -2.5, -1, -0.25, 0, 0.1, 0.5, 1, 1.7, 3, 6], np.float32); np.save('%t/x.npy', x); \
// RUN:   X = x.astype(np.float64); erf = np.vectorize(math.erf); \
// RUN:   np.save('%t/erf.npy', (0.5 * X * (1 + erf(X / math.sqrt(2)))).astype(np.float32)); \
// RUN:   np.save('%t/tanh.npy', (0.5 * X * (1 + np.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X ** 3)))).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --expect %t/erf.npy --expect %t/tanh.npy --rtol 1e-5 --atol 1e-6 | FileCheck %s

// The exact (erf) GELU and its tanh approximation; they differ by up to
// about 4e-4 (at x = -2.5 and x = 3 here), so a mix-up fails at rtol 1e-5.
// RUN: not merak-run %s --input %t/x.npy --expect %t/tanh.npy --rtol 1e-5 --atol 1e-6 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SWAPPED

// CHECK: output 0 '#0' matches (11 elements
// CHECK: output 1 '#1' matches (11 elements
// SWAPPED: MISMATCH output 0 '#0'
func.func @forward(%x: tensor<11xf32>) -> (tensor<11xf32>, tensor<11xf32>) {
  %0 = merak.gelu %x : tensor<11xf32>
  %1 = merak.gelu %x {approximate_tanh} : tensor<11xf32>
  return %0, %1 : tensor<11xf32>, tensor<11xf32>
}
