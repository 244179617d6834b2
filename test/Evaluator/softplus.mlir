// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([-100, -20, -3, -0.5, 0, 0.25, 1, 4, 20, 100], np.float32); np.save('%t/x.npy', x); \
// RUN:   X = x.astype(np.float64); \
// RUN:   np.save('%t/sp.npy', np.logaddexp(0.0, X).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --expect %t/sp.npy --rtol 1e-6 --atol 1e-30 | FileCheck %s

// softplus(x) = log(1 + e^x) against numpy's logaddexp(0, x): exact far
// into both tails (e^-100 at x = -100, x itself at x = 100), where a naive
// log(1 + exp(x)) in float32 gives 0 and inf.
// CHECK: output 0 '#0' matches (10 elements
func.func @forward(%x: tensor<10xf32>) -> tensor<10xf32> {
  %0 = merak.softplus %x : tensor<10xf32>
  return %0 : tensor<10xf32>
}
