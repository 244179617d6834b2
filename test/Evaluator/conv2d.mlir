// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   x = (np.mod(np.arange(100).reshape(1, 4, 5, 5) * 7, 11) - 5).astype(np.float32); \
// RUN:   w = (np.mod(np.arange(108).reshape(6, 2, 3, 3) * 5, 7) - 3).astype(np.float32) / 4; \
// RUN:   b = np.array([1, -1, 0.5, 0, 2, -2], np.float32); \
// RUN:   v = (np.mod(np.arange(32).reshape(2, 4, 2, 2) * 3, 5) - 2).astype(np.float32); \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('x', x), ('w', w), ('b', b), ('v', v)]]; \
// RUN:   x = x.astype(np.float64); \
// RUN:   xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 2))); \
// RUN:   P = np.array([[xp[:, :, 2 * i:2 * i + 3, j:j + 3] for j in range(5)] for i in range(3)]); \
// RUN:   y = np.concatenate([np.einsum('ijnckl,ockl->noij', P[:, :, :, 2 * g:2 * g + 2], w[3 * g:3 * g + 3]) for g in range(2)], axis=1); \
// RUN:   np.save('%t/y.npy', (y + b[None, :, None, None]).astype(np.float32)); \
// RUN:   Q = np.array([[x[:, :, i:i + 3:2, j:j + 2] for j in range(4)] for i in range(3)]); \
// RUN:   np.save('%t/z.npy', np.einsum('ijnckl,ockl->noij', Q, v).astype(np.float32))"
// RUN: merak-run %s --input %t/x.npy --input %t/w.npy --input %t/b.npy --input %t/v.npy \
// RUN:   --expect %t/y.npy --expect %t/z.npy --atol 1e-5 | FileCheck %s

// NCHW / OIHW convolution. First: 2 groups (input channels 0-1 feed output
// channels 0-2, channels 2-3 feed 3-5), stride [2, 1], asymmetric padding
// [top 1, left 0, bottom 1, right 2], bias. Second: dilation [2, 1], no
// padding, no bias.

// CHECK: output 0 '#0' matches (90 elements
// CHECK: output 1 '#1' matches (24 elements
func.func @forward(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>, %v: tensor<2x4x2x2xf32>)
    -> (tensor<1x6x3x5xf32>, tensor<1x2x3x4xf32>) {
  %0 = merak.conv2d %x, %w bias %b strides = [2, 1] padding = [1, 0, 1, 2] dilations = [1, 1] groups = 2
       : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x3x5xf32>
  %1 = merak.conv2d %x, %v strides = [1, 1] padding = [0, 0, 0, 0] dilations = [2, 1] groups = 1
       : (tensor<1x4x5x5xf32>, tensor<2x4x2x2xf32>) -> tensor<1x2x3x4xf32>
  return %0, %1 : tensor<1x6x3x5xf32>, tensor<1x2x3x4xf32>
}
