// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   a = np.arange(6, dtype=np.int32).reshape(2, 3); b = np.array([[100], [200]], np.int32); \
// RUN:   c = -np.arange(4, dtype=np.int32).reshape(2, 2) - 1; \
// RUN:   [np.save('%t/' + n + '.npy', t) for n, t in [('a', a), ('b', b), ('c', c)]]; \
// RUN:   cat = np.concatenate([a, b, c], axis=1); np.save('%t/cat.npy', cat); \
// RUN:   np.save('%t/s0.npy', cat[:, :4]); np.save('%t/s1.npy', cat[:, 4:]); \
// RUN:   np.save('%t/rows.npy', np.concatenate([a, a[::-1]], axis=0))"
// RUN: merak-run %s --input %t/a.npy --input %t/b.npy --input %t/c.npy --expect %t/cat.npy \
// RUN:   --expect %t/s0.npy --expect %t/s1.npy --expect %t/rows.npy | FileCheck %s

// concat of three pieces along axis 1, split back into different pieces,
// and concat along axis 0.

// CHECK: output 0 '#0' matches (12 elements
// CHECK: output 1 '#1' matches (8 elements
// CHECK: output 2 '#2' matches (4 elements
// CHECK: output 3 '#3' matches (12 elements
func.func @forward(%a: tensor<2x3xi32>, %b: tensor<2x1xi32>, %c: tensor<2x2xi32>)
    -> (tensor<2x6xi32>, tensor<2x4xi32>, tensor<2x2xi32>, tensor<4x3xi32>) {
  %0 = merak.concat %a, %b, %c axis = 1 : tensor<2x3xi32>, tensor<2x1xi32>, tensor<2x2xi32> -> tensor<2x6xi32>
  %1:2 = merak.split %0 axis = 1 sizes = [4, 2] : tensor<2x6xi32> -> tensor<2x4xi32>, tensor<2x2xi32>
  %r:2 = merak.split %a axis = 0 sizes = [1, 1] : tensor<2x3xi32> -> tensor<1x3xi32>, tensor<1x3xi32>
  %2 = merak.concat %a, %r#1, %r#0 axis = 0 : tensor<2x3xi32>, tensor<1x3xi32>, tensor<1x3xi32> -> tensor<4x3xi32>
  return %0, %1#0, %1#1, %2 : tensor<2x6xi32>, tensor<2x4xi32>, tensor<2x2xi32>, tensor<4x3xi32>
}
