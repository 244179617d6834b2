// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.linspace(-3, 3, 4096).astype(np.float32).reshape(64, 64); np.save('%t/x.npy', x); \
// RUN:   np.save('%t/mask.npy', np.ones((64, 64), bool))"

// Ratio 0 is the identity and keeps everything.
// RUN: merak-run %s --input %t/x.npy --expect %t/x.npy --expect %t/mask.npy --rtol 0 --atol 0 | FileCheck %s
// CHECK: output 0 '#0' matches (4096 elements
// CHECK: output 1 '#1' matches (4096 elements

// Ratio 0.5: about half the mask is true, kept values are doubled and
// dropped ones are 0; the mask depends only on the seed (and the element),
// so the same seed gives the same mask and another seed another one.
// RUN: merak-run %s --input %t/x.npy --output-dir %t/out --output-format=npy
// RUN: %python -c "import numpy as np; \
// RUN:   x = np.load('%t/x.npy'); o = [np.load('%t/out/output_' + str(k) + '.npy') for k in range(8)]; \
// RUN:   y, m = o[2], o[3]; \
// RUN:   assert m.dtype == np.bool_ and m.shape == (64, 64), (m.dtype, m.shape); \
// RUN:   assert 0.45 < m.mean() < 0.55, m.mean(); \
// RUN:   assert np.array_equal(y, np.where(m, 2 * x, 0).astype(np.float32)); \
// RUN:   assert np.array_equal(o[5], m) and np.array_equal(o[4], y); \
// RUN:   assert 0.45 < o[7].mean() < 0.55 and not np.array_equal(o[7], m); \
// RUN:   assert 0.2 < (o[7] == m).mean() < 0.8; \
// RUN:   print('dropout ok')" | FileCheck %s --check-prefix=HALF
// HALF: dropout ok

func.func @forward(%x: tensor<64x64xf32>)
    -> (tensor<64x64xf32>, tensor<64x64xi1>, tensor<64x64xf32>, tensor<64x64xi1>,
        tensor<64x64xf32>, tensor<64x64xi1>, tensor<64x64xf32>, tensor<64x64xi1>) {
  %y0, %m0 = merak.dropout %x ratio = 0.0 seed = 3 : tensor<64x64xf32> -> tensor<64x64xf32>, tensor<64x64xi1>
  %y1, %m1 = merak.dropout %x ratio = 0.5 seed = 7 : tensor<64x64xf32> -> tensor<64x64xf32>, tensor<64x64xi1>
  %y2, %m2 = merak.dropout %x ratio = 0.5 seed = 7 : tensor<64x64xf32> -> tensor<64x64xf32>, tensor<64x64xi1>
  %y3, %m3 = merak.dropout %x ratio = 0.5 seed = 8 : tensor<64x64xf32> -> tensor<64x64xf32>, tensor<64x64xi1>
  return %y0, %m0, %y1, %m1, %y2, %m2, %y3, %m3
      : tensor<64x64xf32>, tensor<64x64xi1>, tensor<64x64xf32>, tensor<64x64xi1>,
        tensor<64x64xf32>, tensor<64x64xi1>, tensor<64x64xf32>, tensor<64x64xi1>
}
