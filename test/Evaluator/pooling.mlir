// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = (np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5) - 100); np.save('%t/x.npy', x); \
// RUN:   X = x[0, 0].astype(np.float64); \
// RUN:   np.save('%t/max_ceil.npy', np.array([[[[-94, -92, -91], [-84, -82, -81]]]], np.float32)); \
// RUN:   ninf = np.pad(X, 1, constant_values=-np.inf); \
// RUN:   np.save('%t/max_pad.npy', np.array([[[[ninf[2 * i:2 * i + 3, 2 * j:2 * j + 3].max() for j in range(3)] for i in range(2)]]], np.float32)); \
// RUN:   zp = np.pad(X, 1); ones = np.pad(np.ones_like(X), 1); \
// RUN:   s = np.array([[zp[2 * i:2 * i + 3, 2 * j:2 * j + 3].sum() for j in range(3)] for i in range(2)]); \
// RUN:   n = np.array([[ones[2 * i:2 * i + 3, 2 * j:2 * j + 3].sum() for j in range(3)] for i in range(2)]); \
// RUN:   np.save('%t/avg_incl.npy', (s / 9)[None, None].astype(np.float32)); \
// RUN:   np.save('%t/avg_excl.npy', (s / n)[None, None].astype(np.float32)); \
// RUN:   s2 = np.array([[zp[2 * i:2 * i + 2, 2 * j:2 * j + 2].sum() for j in range(3)] for i in range(3)]); \
// RUN:   np.save('%t/avg_ceil.npy', (s2 / 4)[None, None].astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --expect %t/max_ceil.npy --expect %t/max_pad.npy \
// RUN:   --expect %t/avg_incl.npy --expect %t/avg_excl.npy --expect %t/avg_ceil.npy | FileCheck %s

// The input is all negative, so padding must never win a max.
// 0: 2x2 max, stride 2, ceil_mode: the last column of windows holds only
//    input column 4.
// 1: 3x3 max, stride 2, padding 1.
// 2, 3: 3x3 average, stride 2, padding 1, dividing by 9 with
//    count_include_pad, else by the number of input elements in the window.
// 4: 2x2 average, stride 2, padding 1, ceil_mode, count_include_pad: the
//    last row of windows covers input row 3 and the bottom padding row, and
//    still divides by 4.

// CHECK: output 0 '#0' matches (6 elements
// CHECK: output 1 '#1' matches (6 elements
// CHECK: output 2 '#2' matches (6 elements
// CHECK: output 3 '#3' matches (6 elements
// CHECK: output 4 '#4' matches (9 elements
func.func @forward(%x: tensor<1x1x4x5xf32>)
    -> (tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>, tensor<1x1x3x3xf32>) {
  %0 = merak.max_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] {ceil_mode}
       : tensor<1x1x4x5xf32> -> tensor<1x1x2x3xf32>
  %1 = merak.max_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] dilations = [1, 1]
       : tensor<1x1x4x5xf32> -> tensor<1x1x2x3xf32>
  %2 = merak.avg_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] {count_include_pad}
       : tensor<1x1x4x5xf32> -> tensor<1x1x2x3xf32>
  %3 = merak.avg_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1]
       : tensor<1x1x4x5xf32> -> tensor<1x1x2x3xf32>
  %4 = merak.avg_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [1, 1, 1, 1] {ceil_mode, count_include_pad}
       : tensor<1x1x4x5xf32> -> tensor<1x1x3x3xf32>
  return %0, %1, %2, %3, %4 : tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>, tensor<1x1x3x3xf32>
}
