// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([-0.75, -1e-3, -1e-7, 0, 3e-8, 2e-4, 0.5, 4], np.float32); np.save('%t/x.npy', x); \
// RUN:   X = x.astype(np.float64); \
// RUN:   np.save('%t/e.npy', np.expm1(X).astype(np.float32)); \
// RUN:   np.save('%t/l.npy', np.log1p(X).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --expect %t/e.npy --expect %t/l.npy --rtol 1e-6 --atol 1e-30 | FileCheck %s

// expm1 and log1p against numpy's, to float precision near 0 too (where
// exp(x) - 1 and log(1 + x) in float32 keep few digits or none: at 3e-8,
// 1 + x rounds to 1).
// CHECK: output 0 '#0' matches (8 elements
// CHECK: output 1 '#1' matches (8 elements
func.func @forward(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = merak.expm1 %x : tensor<8xf32>
  %1 = merak.log1p %x : tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}
