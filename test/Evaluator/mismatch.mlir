// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   np.save('%t/x.npy', np.array([1, 2, 3], np.float32)); \
// RUN:   np.save('%t/good.npy', np.array([2, 4, 6], np.float32)); \
// RUN:   np.save('%t/wrong.npy', np.array([2, 5, 6], np.float32)); \
// RUN:   np.save('%t/near.npy', np.array([2, 4.01, 6], np.float32)); \
// RUN:   np.save('%t/short.npy', np.array([2, 4], np.float32)); \
// RUN:   np.save('%t/f64.npy', np.array([2, 4, 6], np.float64)); \
// RUN:   np.save('%t/count.npy', np.array([3], np.int64)); \
// RUN:   np.save('%t/count_wrong.npy', np.array([4], np.int64))"

// A wrong value: exit status 1 and a MISMATCH line naming the first bad
// element.
// RUN: not merak-run %s --input %t/x.npy --expect %t/wrong.npy 2>&1 | FileCheck %s --check-prefix=VALUE
// VALUE: merak-run: MISMATCH output 0 '#0': 1 of 3 elements differ (rtol 1.000000e-03, atol 1.000000e-07); first at [1]: got 4.000000e+00, expected 5.000000e+00; max abs err 1.000000e+00

// A wrong shape or element type is reported as such.
// RUN: not merak-run %s --input %t/x.npy --expect %t/short.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: merak-run: MISMATCH output 0 '#0': got tensor<3xf32>, expected tensor<2xf32>
// RUN: not merak-run %s --input %t/x.npy --expect %t/f64.npy 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: merak-run: MISMATCH output 0 '#0': got tensor<3xf32>, expected tensor<3xf64>

// Tolerances: |4 - 4.01| = 0.01 fails the default rtol 1e-3 but passes
// rtol 1e-2, or atol 0.02 with rtol 0.
// RUN: not merak-run %s --input %t/x.npy --expect %t/near.npy 2>&1 | FileCheck %s --check-prefix=NEAR
// RUN: merak-run %s --input %t/x.npy --expect %t/near.npy --rtol 1e-2 | FileCheck %s
// RUN: merak-run %s --input %t/x.npy --expect %t/near.npy --rtol 0 --atol 0.02 | FileCheck %s
// NEAR: MISMATCH output 0 '#0': 1 of 3 elements differ
// CHECK: merak-run: output 0 '#0' matches (3 elements

// One good and one bad output: both are reported, and the run fails.
// RUN: not merak-run %s --input %t/x.npy --expect %t/good.npy --expect %t/count_wrong.npy > %t/both.out 2> %t/both.err
// RUN: FileCheck %s --input-file %t/both.out
// RUN: FileCheck %s --check-prefix=BOTH --input-file %t/both.err
// BOTH: MISMATCH output 1 '#1': 1 of 1 elements differ
// RUN: merak-run %s --input %t/x.npy --expect %t/good.npy --expect %t/count.npy | FileCheck %s --check-prefix=ALL
// ALL: output 0 '#0' matches
// ALL: output 1 '#1' matches

func.func @forward(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<1xi64>) {
  %0 = merak.add %x, %x : tensor<3xf32>, tensor<3xf32>
  %n = merak.constant dense<3> : tensor<1xi64>
  return %0, %n : tensor<3xf32>, tensor<1xi64>
}
