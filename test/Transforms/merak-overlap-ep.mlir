// RUN: merak-opt %s -merak-overlap="ep-overlap=true" | FileCheck %s
// RUN: merak-opt %s -merak-overlap | FileCheck %s --check-prefix=OFF

// merak-expert-parallel's chunks=2 form of one expert GEMM (the ids gathered
// and sliced per chunk, both dispatches first): with ep-overlap both
// dispatches start at once, chunk 1's is waited for only before its GEMM,
// so it travels while chunk 0's GEMM runs, and chunk 0's combine travels
// under chunk 1's GEMM. The two-level all-to-all stays blocking; the ids'
// all-gather too (integers).
// CHECK-LABEL: func.func @chunks
// CHECK: merak.all_gather %{{.*}} group = "ep" : tensor<16xi64>
// CHECK: %[[R0:.*]] = merak.all_to_all_start %{{.*}} routed %[[E0:.*]] group = "ep" experts_per_rank = 2 parts = 2 : tensor<8x8xf32>, tensor<16xi64>
// CHECK: %[[R1:.*]] = merak.all_to_all_start %{{.*}} routed %[[E1:.*]] group = "ep" experts_per_rank = 2 parts = 2 : tensor<8x8xf32>, tensor<16xi64>
// CHECK: %[[D0:.*]] = merak.wait %[[R0]] : tensor<16x8xf32>
// CHECK: %[[Y0:.*]] = merak.expert_matmul %[[D0]]
// CHECK: %[[C0:.*]] = merak.all_to_all_start %[[Y0]] routed %[[E0]] group = "ep" combine experts_per_rank = 2 parts = 2 : tensor<16x24xf32>, tensor<16xi64>
// CHECK: %[[D1:.*]] = merak.wait %[[R1]] : tensor<16x8xf32>
// CHECK: %[[Y1:.*]] = merak.expert_matmul %[[D1]]
// CHECK: %[[C1:.*]] = merak.all_to_all_start %[[Y1]] routed %[[E1]] group = "ep" combine
// CHECK: %[[M0:.*]] = merak.wait %[[C0]] : tensor<8x24xf32>
// CHECK: %[[M1:.*]] = merak.wait %[[C1]] : tensor<8x24xf32>
// CHECK: %[[H:.*]] = merak.concat %[[M0]], %[[M1]] axis = 0
// CHECK: merak.all_to_all %[[H]] routed %{{.*}} group = "ep" experts_per_rank = 2 hierarchical
// OFF-LABEL: func.func @chunks
// OFF-NOT: merak.all_to_all_start
func.func @chunks(%x: tensor<16x8xf32>, %e: tensor<16xi64>, %w: tensor<2x24x8xf32>,
                  %first: tensor<i64>) -> tensor<32x24xf32> {
  %eg = merak.all_gather %e group = "ep" : tensor<16xi64> -> tensor<32xi64>
  %eb = merak.reshape %eg : tensor<32xi64> to tensor<2x16xi64>
  %s0 = merak.slice %eb starts = [0, 0] limits = [2, 8] strides = [1, 1] : tensor<2x16xi64> to tensor<2x8xi64>
  %e0 = merak.reshape %s0 : tensor<2x8xi64> to tensor<16xi64>
  %s1 = merak.slice %eb starts = [0, 8] limits = [2, 16] strides = [1, 1] : tensor<2x16xi64> to tensor<2x8xi64>
  %e1 = merak.reshape %s1 : tensor<2x8xi64> to tensor<16xi64>
  %x0 = merak.slice %x starts = [0, 0] limits = [8, 8] strides = [1, 1] : tensor<16x8xf32> to tensor<8x8xf32>
  %d0 = merak.all_to_all %x0 routed %e0 group = "ep" experts_per_rank = 2 : tensor<8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  %x1 = merak.slice %x starts = [8, 0] limits = [16, 8] strides = [1, 1] : tensor<16x8xf32> to tensor<8x8xf32>
  %d1 = merak.all_to_all %x1 routed %e1 group = "ep" experts_per_rank = 2 : tensor<8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  %y0 = merak.expert_matmul %d0, %w[%e0 first %first : tensor<i64>] {total_experts = 4 : i64} : tensor<16x8xf32>, tensor<2x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %m0 = merak.all_to_all %y0 routed %e0 group = "ep" combine experts_per_rank = 2 : tensor<16x24xf32>, tensor<16xi64> -> tensor<8x24xf32>
  %y1 = merak.expert_matmul %d1, %w[%e1 first %first : tensor<i64>] {total_experts = 4 : i64} : tensor<16x8xf32>, tensor<2x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %m1 = merak.all_to_all %y1 routed %e1 group = "ep" combine experts_per_rank = 2 : tensor<16x24xf32>, tensor<16xi64> -> tensor<8x24xf32>
  %h = merak.concat %m0, %m1 axis = 0 : tensor<8x24xf32>, tensor<8x24xf32> -> tensor<16x24xf32>
  %z = merak.all_to_all %h routed %eg group = "ep" experts_per_rank = 2 hierarchical : tensor<16x24xf32>, tensor<32xi64> -> tensor<32x24xf32>
  return %z : tensor<32x24xf32>
}
