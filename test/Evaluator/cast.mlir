// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.array([-2.7, -0.5, -0.0, 0.0, 0.1, 0.5, 2.7, 3.0, np.nan], np.float32); \
// RUN:   i = np.array([0, 5, -1, 2 ** 40], np.int64); \
// RUN:   np.save('%t/x.npy', x); np.save('%t/i.npy', i); \
// RUN:   np.save('%t/x_i64.npy', np.array([-2, 0, 0, 0, 0, 0, 2, 3], np.int64)); \
// RUN:   np.save('%t/x_i32.npy', np.array([-2, 0, 0, 0, 0, 0, 2, 3], np.int32)); \
// RUN:   np.save('%t/x_i1.npy', np.array([True, True, False, False, True, True, True, True, True])); \
// RUN:   np.save('%t/i_i1.npy', np.array([False, True, True, True])); \
// RUN:   np.save('%t/i1_f32.npy', np.array([0, 1, 1, 1], np.float32)); \
// RUN:   np.save('%t/x_f16.npy', x.astype(np.float16)); \
// RUN:   np.save('%t/i_f64.npy', i.astype(np.float64))"
// RUN: merak-run %s --input %t/x.npy --input %t/i.npy --expect %t/x_i64.npy --expect %t/x_i32.npy \
// RUN:   --expect %t/x_i1.npy --expect %t/i_i1.npy --expect %t/i1_f32.npy --expect %t/x_f16.npy \
// RUN:   --expect %t/i_f64.npy --rtol 0 --atol 0 | FileCheck %s

// Float to integer truncates toward zero (-2.7 -> -2, 2.7 -> 2); anything to
// i1 is x != 0 (-0.0 is false, NaN and 0.1 are true); i1 to float is 0 or
// 1; float narrowing rounds to nearest even, like numpy's astype.

// CHECK: output 0 '#0' matches (8 elements
// CHECK: output 1 '#1' matches (8 elements
// CHECK: output 2 '#2' matches (9 elements
// CHECK: output 3 '#3' matches (4 elements
// CHECK: output 4 '#4' matches (4 elements
// CHECK: output 5 '#5' matches (9 elements
// CHECK: output 6 '#6' matches (4 elements
func.func @forward(%x: tensor<9xf32>, %i: tensor<4xi64>)
    -> (tensor<8xi64>, tensor<8xi32>, tensor<9xi1>, tensor<4xi1>, tensor<4xf32>, tensor<9xf16>, tensor<4xf64>) {
  %finite = merak.slice %x starts = [0] limits = [8] strides = [1] : tensor<9xf32> to tensor<8xf32>
  %0 = merak.cast %finite : tensor<8xf32> to tensor<8xi64>
  %1 = merak.cast %finite : tensor<8xf32> to tensor<8xi32>
  %2 = merak.cast %x : tensor<9xf32> to tensor<9xi1>
  %3 = merak.cast %i : tensor<4xi64> to tensor<4xi1>
  %4 = merak.cast %3 : tensor<4xi1> to tensor<4xf32>
  %5 = merak.cast %x : tensor<9xf32> to tensor<9xf16>
  %6 = merak.cast %i : tensor<4xi64> to tensor<4xf64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<8xi64>, tensor<8xi32>, tensor<9xi1>, tensor<4xi1>, tensor<4xf32>, tensor<9xf16>, tensor<4xf64>
}
