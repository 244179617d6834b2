// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.arange(24, dtype=np.float32).reshape(4, 6); np.save('%t/x.npy', x); \
// RUN:   np.save('%t/fwd.npy', x[1:3, 0:6:2]); \
// RUN:   np.save('%t/rev.npy', x[3::-1, 5:0:-2]); \
// RUN:   np.save('%t/mixed.npy', x[2:0:-1, 1:6:3]); \
// RUN:   np.save('%t/empty.npy', x[2:2, :])"
// RUN: merak-run %s --input %t/x.npy --expect %t/fwd.npy --expect %t/rev.npy --expect %t/mixed.npy \
// RUN:   --expect %t/empty.npy | FileCheck %s

// Strided slices; with a negative stride the limit is exclusive and -1
// means "through index 0" (numpy's x[3::-1]).

// CHECK: output 0 '#0' matches (6 elements
// CHECK: output 1 '#1' matches (12 elements
// CHECK: output 2 '#2' matches (4 elements
// CHECK: output 3 '#3' matches (0 elements
func.func @forward(%x: tensor<4x6xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x2xf32>, tensor<0x6xf32>) {
  %0 = merak.slice %x starts = [1, 0] limits = [3, 6] strides = [1, 2] : tensor<4x6xf32> to tensor<2x3xf32>
  %1 = merak.slice %x starts = [3, 5] limits = [-1, 0] strides = [-1, -2] : tensor<4x6xf32> to tensor<4x3xf32>
  %2 = merak.slice %x starts = [2, 1] limits = [0, 6] strides = [-1, 3] : tensor<4x6xf32> to tensor<2x2xf32>
  %3 = merak.slice %x starts = [2, 0] limits = [2, 6] strides = [1, 1] : tensor<4x6xf32> to tensor<0x6xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x2xf32>, tensor<0x6xf32>
}
