// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = (np.mod(np.arange(24).reshape(2, 3, 2, 2) * 5, 9) - 3).astype(np.float32); x[:, 2] = 7; \
// RUN:   g = np.array([1, 2, -1], np.float32); b = np.array([0, 0.5, 3], np.float32); \
// RUN:   m = np.array([1, -1, 2], np.float32); v = np.array([4, 0.25, 1], np.float32); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('x', x), ('g', g), ('b', b), ('m', m), ('v', v)]]; \
// RUN:   x = x.astype(np.float64); c = lambda t: t[None, :, None, None]; \
// RUN:   np.save('%t/infer.npy', ((x - c(m)) / np.sqrt(c(v) + 1e-5) * c(g) + c(b)).astype(np.float32)); \
// RUN:   bm = x.mean(axis=(0, 2, 3)); bv = ((x - c(bm)) ** 2).mean(axis=(0, 2, 3)); \
// RUN:   np.save('%t/train.npy', ((x - c(bm)) / np.sqrt(c(bv) + 1e-5) * c(g) + c(b)).astype(np.float32)); \
// RUN:   np.save('%t/new_mean.npy', (0.7 * m + 0.3 * bm).astype(np.float32)); \
// RUN:   np.save('%t/new_var.npy', (0.7 * v + 0.3 * x.var(axis=(0, 2, 3), ddof=1)).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --input %t/g.npy --input %t/b.npy --input %t/m.npy --input %t/v.npy \
// RUN:   --expect %t/infer.npy --expect %t/train.npy --expect %t/new_mean.npy --expect %t/new_var.npy \
// RUN:   --atol 1e-5 | FileCheck %s

// Inference uses the given running statistics; training ignores them and
// uses the biased batch statistics over N, H, W (channel 2 is constant, so
// it normalises to exactly its bias, 3). batch_norm_stats is torch's
// running-statistics update with momentum 0.3 (ONNX's 0.7): numpy's
// unbiased variance (ddof=1) over the 8 values per channel.

// CHECK: output 0 '#0' matches (24 elements
// CHECK: output 1 '#1' matches (24 elements
// CHECK: output 2 '#2' matches (3 elements
// CHECK: output 3 '#3' matches (3 elements
func.func @forward(%x: tensor<2x3x2x2xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>)
    -> (tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0 = merak.batch_norm %x, %g, %b, %m, %v epsilon = 1.0e-5
       : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2x2xf32>
  %1 = merak.batch_norm %x, %g, %b, %m, %v epsilon = 1.0e-5 {training}
       : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2x2xf32>
  %nm, %nv = merak.batch_norm_stats %x, %m, %v momentum = 0.7
       : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %0, %1, %nm, %nv : tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>
}
