// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   np.save('%t/d.npy', np.arange(8, dtype=np.float32).reshape(4, 2)); \
// RUN:   np.save('%t/ok.npy', np.array([1, -4], np.int64)); \
// RUN:   np.save('%t/high.npy', np.array([1, 4], np.int64)); \
// RUN:   np.save('%t/low.npy', np.array([-5, 0], np.int64)); \
// RUN:   np.save('%t/ok_out.npy', np.array([[2, 3], [0, 1]], np.float32))"

// Gather indices must lie in [-4, 4) for a dimension of size 4: -4 is row
// 0, but 4 and -5 are run-time errors at the gather, and the exit status
// is 1 (not a crash).
// RUN: merak-run %s --input %t/d.npy --input %t/ok.npy --expect %t/ok_out.npy | FileCheck %s
// CHECK: output 0 '#0' matches (4 elements
// RUN: not merak-run %s --input %t/d.npy --input %t/high.npy 2>&1 | FileCheck %s --check-prefix=HIGH
// HIGH: runtime-errors.mlir:[[@LINE+8]]:8: error: gather index 4 out of range [-4, 4)
// RUN: not merak-run %s --input %t/d.npy --input %t/low.npy 2>&1 | FileCheck %s --check-prefix=LOW
// LOW: error: gather index -5 out of range [-4, 4)
// RUN: %python -c "import subprocess, sys; \
// RUN:   r = subprocess.run(['merak-run', '%s', '--input', '%t/d.npy', '--input', '%t/high.npy'], capture_output=True); \
// RUN:   sys.exit(0 if r.returncode == 1 else 'exit status ' + str(r.returncode))"

func.func @forward(%d: tensor<4x2xf32>, %i: tensor<2xi64>) -> tensor<2x2xf32> {
  %0 = merak.gather %d[%i] axis = 0 : tensor<4x2xf32>, tensor<2xi64> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}
