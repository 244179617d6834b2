// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = (np.arange(24).reshape(2, 3, 4) * 1.5 - 10).astype(np.float32); x[1, 2, 0] = 100; x[0, 0, 1] = x[0, 2, 1]; \
// RUN:   i = np.array([[1, 2], [3, 4], [-5, 7]], np.int64); \
// RUN:   np.save('%t/x.npy', x); np.save('%t/i.npy', i); x = x.astype(np.float64); \
// RUN:   np.save('%t/sum.npy', x.sum(axis=(0, 2), keepdims=True).astype(np.float32)); \
// RUN:   np.save('%t/mean.npy', x.mean(axis=1).astype(np.float32)); \
// RUN:   np.save('%t/max.npy', x.max(axis=(1, 2), keepdims=True).astype(np.float32)); \
// RUN:   np.save('%t/min.npy', x.min(axis=0).astype(np.float32)); \
// RUN:   np.save('%t/prod.npy', np.array([2, 12, -35], np.int64)); \
// RUN:   np.save('%t/imean.npy', np.array([[1], [3], [1]], np.int64)); \
// RUN:   np.save('%t/argmax.npy', np.array([[2, 0, 2, 2], [2, 2, 2, 2]], np.int64)); \
// RUN:   np.save('%t/argmax_last.npy', np.array([[1], [1], [1]], np.int64))"
// RUN: merak-run %s --input %t/x.npy --input %t/i.npy --expect %t/sum.npy --expect %t/mean.npy \
// RUN:   --expect %t/max.npy --expect %t/min.npy --expect %t/prod.npy --expect %t/imean.npy \
// RUN:   --expect %t/argmax.npy --expect %t/argmax_last.npy | FileCheck %s

// Reductions over several axes, with and without keepdims; integer mean
// truncates toward zero ((-5 + 7) / 2 = 1, (3 + 4) / 2 = 3); argmax takes the
// first maximum (x[0, 0, 1] ties with x[0, 2, 1]), or the last with
// select_last_index.

// CHECK: output 0 '#0' matches (3 elements
// CHECK: output 1 '#1' matches (8 elements
// CHECK: output 2 '#2' matches (2 elements
// CHECK: output 3 '#3' matches (12 elements
// CHECK: output 4 '#4' matches (3 elements
// CHECK: output 5 '#5' matches (3 elements
// CHECK: output 6 '#6' matches (8 elements
// CHECK: output 7 '#7' matches (3 elements
func.func @forward(%x: tensor<2x3x4xf32>, %i: tensor<3x2xi64>)
    -> (tensor<1x3x1xf32>, tensor<2x4xf32>, tensor<2x1x1xf32>, tensor<3x4xf32>,
        tensor<3xi64>, tensor<3x1xi64>, tensor<2x4xi64>, tensor<3x1xi64>) {
  %0 = merak.reduce_sum %x axes = [0, 2] {keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %1 = merak.reduce_mean %x axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %2 = merak.reduce_max %x axes = [1, 2] {keepdims} : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
  %3 = merak.reduce_min %x axes = [0] : tensor<2x3x4xf32> -> tensor<3x4xf32>
  %4 = merak.reduce_prod %i axes = [1] : tensor<3x2xi64> -> tensor<3xi64>
  %5 = merak.reduce_mean %i axes = [1] {keepdims} : tensor<3x2xi64> -> tensor<3x1xi64>
  %6 = merak.argmax %x axis = 1 : tensor<2x3x4xf32> -> tensor<2x4xi64>
  %c = merak.constant dense<[[4, 4], [0, 0], [-1, -1]]> : tensor<3x2xi64>
  %7 = merak.argmax %c axis = 1 {keepdims, select_last_index} : tensor<3x2xi64> -> tensor<3x1xi64>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<1x3x1xf32>, tensor<2x4xf32>, tensor<2x1x1xf32>, tensor<3x4xf32>,
      tensor<3xi64>, tensor<3x1xi64>, tensor<2x4xi64>, tensor<3x1xi64>
}
