// RUN: merak-opt %s -split-input-file -merak-expert-parallel=ep=2 | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 chunks=2" | FileCheck %s --check-prefix=CH
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 shadow=1" | FileCheck %s --check-prefix=SH
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 dispatcher=allgather" | FileCheck %s --check-prefix=AG
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 tp=2" | FileCheck %s --check-prefix=TP

// Compact rows: with an expert capacity of 3 rows (per rank's 16 rows), a
// rank's 2 of 4 experts get at most 2 x 2 x 3 = 12 of the group's 32 rows,
// so the exchanges carry 12 compact rows (merak.expert_compact lists their
// ids) instead of 32 positional ones; the GEMMs' group_rows keeps the cost
// model's count; the activation between the GEMMs runs on the 12 compact
// rows. Per chunk of 16 rows, 12 also. Shadowing and the allgather
// dispatcher stay positional.
// CHECK-LABEL: func.func @forward
// CHECK: %[[K:.*]] = merak.expert_capacity
// CHECK: %[[EG:.*]] = merak.all_gather %[[K]] group = "ep" : tensor<16xi64> -> tensor<32xi64>
// CHECK: %[[C:.*]] = merak.expert_compact %[[EG]], %[[FIRST:.*]] experts_per_rank = 2 : tensor<32xi64>, tensor<i64> -> tensor<12xi64>
// CHECK: %[[XR:.*]] = merak.all_to_all %{{.*}} routed %[[EG]] group = "ep" experts_per_rank = 2 compact = 12 : tensor<16x8xf32>, tensor<32xi64> -> tensor<12x8xf32>
// CHECK: %[[H:.*]] = merak.expert_matmul %[[XR]], %{{.*}}[%[[C]] first %[[FIRST]] : tensor<i64>] {group_rows = 32 : i64, total_experts = 4 : i64} : tensor<12x8xf32>, tensor<2x24x8xf32>, tensor<12xi64> -> tensor<12x24xf32>
// CHECK: merak.slice %[[H]] starts = [0, 0] limits = [12, 12] strides = [1, 1] : tensor<12x24xf32> to tensor<12x12xf32>
// CHECK: %[[D:.*]] = merak.expert_matmul %{{.*}}[%[[C]] first %[[FIRST]] : tensor<i64>] {group_rows = 32 : i64, total_experts = 4 : i64} : tensor<12x12xf32>
// CHECK: merak.all_to_all %[[D]] routed %[[EG]] group = "ep" combine experts_per_rank = 2 compact = 12 : tensor<12x8xf32>, tensor<32xi64> -> tensor<16x8xf32>
// CHECK-NOT: merak.expert_compact
// CH-COUNT-2: merak.expert_compact %{{.*}} experts_per_rank = 2 : tensor<16xi64>, tensor<i64> -> tensor<12xi64>
// CH: merak.all_to_all %{{.*}} compact = 12 : tensor<8x8xf32>, tensor<16xi64> -> tensor<12x8xf32>
// CH: merak.expert_matmul {{.*}} {group_rows = 16 : i64, total_experts = 4 : i64} : tensor<12x8xf32>
// SH-NOT: compact
// AG-NOT: compact
merak.param @gate_up : tensor<4x24x8xf32> = dense<0.5> : tensor<4x24x8xf32>
merak.param @down : tensor<4x8x12xf32> = dense<0.5> : tensor<4x8x12xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>, %p: tensor<16xf32>) -> tensor<16x8xf32> {
  %wu = merak.get_param @gate_up : tensor<4x24x8xf32>
  %wd = merak.get_param @down : tensor<4x8x12xf32>
  %k = merak.expert_capacity %e, %p experts = 4 capacity = 3 policy = "probs" : tensor<16xi64>, tensor<16xf32> -> tensor<16xi64>
  %h = merak.expert_matmul %x, %wu[%k] : tensor<16x8xf32>, tensor<4x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %g = merak.slice %h starts = [0, 0] limits = [16, 12] strides = [1, 1] : tensor<16x24xf32> to tensor<16x12xf32>
  %u = merak.slice %h starts = [0, 12] limits = [16, 24] strides = [1, 1] : tensor<16x24xf32> to tensor<16x12xf32>
  %m = merak.mul %g, %u : tensor<16x12xf32>, tensor<16x12xf32>
  %y = merak.expert_matmul %m, %wd[%k] : tensor<16x12xf32>, tensor<4x8x12xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// A capacity of 8 rows: 2 x 2 x 8 = 32, no fewer than the positional rows.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: compact
merak.param @w : tensor<4x8x8xf32> = dense<0.5> : tensor<4x8x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>, %p: tensor<16xf32>) -> tensor<16x8xf32> {
  %w = merak.get_param @w : tensor<4x8x8xf32>
  %k = merak.expert_capacity %e, %p experts = 4 capacity = 8 policy = "probs" : tensor<16xi64>, tensor<16xf32> -> tensor<16xi64>
  %y = merak.expert_matmul %x, %w[%k] : tensor<16x8xf32>, tensor<4x8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// SwiGLU through a split (two results) and a sigmoid, and with tp 2 (each
// tp rank's 8 rows; the activation still folds through the tp all-gather
// and cut): one dispatch, the activation on the 12 compact rows, one
// combine. A routing weight read between the GEMMs (a value with rows that
// is not the combine's) keeps both exchanges.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = merak.expert_matmul
// CHECK-NEXT: %[[S:.*]]:2 = merak.split %[[H]] axis = 1 sizes = [12, 12] : tensor<12x24xf32> -> tensor<12x12xf32>, tensor<12x12xf32>
// CHECK-NEXT: %[[SG:.*]] = merak.sigmoid %[[S]]#0 : tensor<12x12xf32>
// CHECK-NEXT: %[[A:.*]] = merak.mul %[[S]]#0, %[[SG]]
// CHECK-NEXT: %[[M:.*]] = merak.mul %[[A]], %[[S]]#1
// CHECK-NEXT: %[[D:.*]] = merak.expert_matmul %[[M]]
// CHECK-NEXT: merak.all_to_all %[[D]] {{.*}} combine
// CHECK-NEXT: return
// TP-LABEL: func.func @forward
// TP: merak.local_shard %{{.*}} group = "tp" : tensor<16x8xf32> -> tensor<8x8xf32>
// TP: merak.split %{{.*}} axis = 1 sizes = [12, 12] : tensor<12x24xf32>
// TP-NOT: merak.local_shard
// TP: merak.all_gather %{{.*}} group = "tp" : tensor<8x8xf32> -> tensor<16x8xf32>
merak.param @gate_up : tensor<4x24x8xf32> = dense<0.5> : tensor<4x24x8xf32>
merak.param @down : tensor<4x8x12xf32> = dense<0.5> : tensor<4x8x12xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>, %p: tensor<16xf32>) -> tensor<16x8xf32> {
  %wu = merak.get_param @gate_up : tensor<4x24x8xf32>
  %wd = merak.get_param @down : tensor<4x8x12xf32>
  %k = merak.expert_capacity %e, %p experts = 4 capacity = 3 policy = "probs" : tensor<16xi64>, tensor<16xf32> -> tensor<16xi64>
  %h = merak.expert_matmul %x, %wu[%k] : tensor<16x8xf32>, tensor<4x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %s:2 = merak.split %h axis = 1 sizes = [12, 12] : tensor<16x24xf32> -> tensor<16x12xf32>, tensor<16x12xf32>
  %sg = merak.sigmoid %s#0 : tensor<16x12xf32>
  %a = merak.mul %s#0, %sg : tensor<16x12xf32>, tensor<16x12xf32>
  %m = merak.mul %a, %s#1 : tensor<16x12xf32>, tensor<16x12xf32>
  %y = merak.expert_matmul %m, %wd[%k] : tensor<16x12xf32>, tensor<4x8x12xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: merak.all_to_all {{.*}} combine
merak.param @gate_up : tensor<4x24x8xf32> = dense<0.5> : tensor<4x24x8xf32>
merak.param @down : tensor<4x8x24xf32> = dense<0.5> : tensor<4x8x24xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>, %p: tensor<16xf32>, %r: tensor<16x1xf32>) -> tensor<16x8xf32> {
  %wu = merak.get_param @gate_up : tensor<4x24x8xf32>
  %wd = merak.get_param @down : tensor<4x8x24xf32>
  %k = merak.expert_capacity %e, %p experts = 4 capacity = 3 policy = "probs" : tensor<16xi64>, tensor<16xf32> -> tensor<16xi64>
  %h = merak.expert_matmul %x, %wu[%k] : tensor<16x8xf32>, tensor<4x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %m = merak.mul %h, %r : tensor<16x24xf32>, tensor<16x1xf32>
  %y = merak.expert_matmul %m, %wd[%k] : tensor<16x24xf32>, tensor<4x8x24xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
