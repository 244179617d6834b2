// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   np.save('%t/k.npy', np.array([-1, 1, 0, 2, 1, -1, -1, 0, 2], np.int64)); \
// RUN:   np.save('%t/q.npy', np.array([0, 1, 0, 2, 1, -1, 2, -1, -1], np.int64)); \
// RUN:   np.save('%t/y.npy', np.array([[0, 0], [1, 2], [3, 4], [0, 0]], np.float32)); \
// RUN:   np.save('%t/a.npy', np.array([[0, 0], [1, 2], [3, 4], [0, 0]], np.float32)); \
// RUN:   np.save('%t/c.npy', np.array([0, 1, -1], np.int64)); \
// RUN:   np.save('%t/ac.npy', np.array([[1, 2], [3, 4], [0, 0]], np.float32))"
// RUN: merak-run %s --expect %t/k.npy --expect %t/q.npy --expect %t/y.npy --expect %t/a.npy \
// RUN:   --expect %t/c.npy --expect %t/ac.npy --expect %t/a.npy | FileCheck %s

// merak.expert_capacity by hand: 3 experts of capacity 2 over 9 rows.
// Expert 0 has rows 0, 2, 5, 7 (probs .1 .9 .5 .9: by probs rows 2 and 7,
// the tie to the lower row; by position rows 0 and 2), expert 1 rows 1
// and 4 (both kept), expert 2 rows 3, 6, 8 (probs .3 .2 .4: by probs 8
// and 3; by position 3 and 6). A dropped row (-1) is a zero row of
// merak.expert_matmul and merak.all_to_all (not sent). Compact rows
// (merak.expert_compact, all_to_all compact = 3): the kept rows 1 and 2 in
// order, then a zero row; the combine puts them back.

// CHECK: output 0 '#0' matches (9 elements
// CHECK: output 1 '#1' matches (9 elements
// CHECK: output 2 '#2' matches (8 elements
// CHECK: output 3 '#3' matches (8 elements
// CHECK: output 4 '#4' matches (3 elements
// CHECK: output 5 '#5' matches (6 elements
// CHECK: output 6 '#6' matches (8 elements
func.func @forward() -> (tensor<9xi64>, tensor<9xi64>, tensor<4x2xf32>, tensor<4x2xf32>,
                         tensor<3xi64>, tensor<3x2xf32>, tensor<4x2xf32>) {
  %e = merak.constant dense<[0, 1, 0, 2, 1, 0, 2, 0, 2]> : tensor<9xi64>
  %p = merak.constant dense<[0.1, 0.8, 0.9, 0.3, 0.7, 0.5, 0.2, 0.9, 0.4]> : tensor<9xf32>
  %k = merak.expert_capacity %e, %p experts = 3 capacity = 2 policy = "probs" : tensor<9xi64>, tensor<9xf32> -> tensor<9xi64>
  %q = merak.expert_capacity %e, %p experts = 3 capacity = 2 policy = "position" : tensor<9xi64>, tensor<9xf32> -> tensor<9xi64>
  // Rows 0 and 3 dropped; the identity weights of experts 0 and 1.
  %x = merak.constant dense<[[5.0, 6.0], [1.0, 2.0], [3.0, 4.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %w = merak.constant dense<[[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]> : tensor<2x2x2xf32>
  %ids = merak.constant dense<[-1, 0, 1, -1]> : tensor<4xi64>
  %y = merak.expert_matmul %x, %w[%ids] : tensor<4x2xf32>, tensor<2x2x2xf32>, tensor<4xi64> -> tensor<4x2xf32>
  %a = merak.all_to_all %x routed %ids group = "ep" experts_per_rank = 2 : tensor<4x2xf32>, tensor<4xi64> -> tensor<4x2xf32>
  %first = merak.constant dense<0> : tensor<i64>
  %c = merak.expert_compact %ids, %first experts_per_rank = 2 : tensor<4xi64>, tensor<i64> -> tensor<3xi64>
  %ac = merak.all_to_all %x routed %ids group = "ep" experts_per_rank = 2 compact = 3 : tensor<4x2xf32>, tensor<4xi64> -> tensor<3x2xf32>
  %cb = merak.all_to_all %ac routed %ids group = "ep" combine experts_per_rank = 2 compact = 3 : tensor<3x2xf32>, tensor<4xi64> -> tensor<4x2xf32>
  return %k, %q, %y, %a, %c, %ac, %cb : tensor<9xi64>, tensor<9xi64>, tensor<4x2xf32>, tensor<4x2xf32>,
      tensor<3xi64>, tensor<3x2xf32>, tensor<4x2xf32>
}
