// RUN: merak-opt %s -split-input-file -merak-expert-parallel=ep=2 | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 dispatcher=allgather" | FileCheck %s --check-prefix=AG
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 shadow=1" | FileCheck %s --check-prefix=SH
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 shadow=2 shadow-min-rows=3" | FileCheck %s --check-prefix=SH3
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 hierarchical=true" | FileCheck %s --check-prefix=HI
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 rebalance-every=3 shadow=1" | FileCheck %s --check-prefix=RB
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 chunks=2" | FileCheck %s --check-prefix=CH
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 tp=2" | FileCheck %s --check-prefix=TP
// RUN: merak-opt %s -split-input-file -merak-expert-parallel="ep=2 tp=2 rebalance-every=3" | FileCheck %s --check-prefix=TPRB
// RUN: not merak-opt %s -split-input-file -merak-expert-parallel="ep=2 chunks=3" 2>&1 | FileCheck %s --check-prefix=CH3
// RUN: not merak-opt %s -split-input-file -merak-expert-parallel="ep=2 chunks=2 shadow=1" 2>&1 | FileCheck %s --check-prefix=CHSH

// A Mixture-of-Experts MLP under expert parallelism: both expert weights
// hold this rank's 2 of 4 experts (merak.shard axis 0 over "ep"); the ids
// are all-gathered once, the first expert is group_rank("ep") * 2, the
// input is dispatched once for the gate/up GEMM (merak.all_to_all), and
// each GEMM's rows go back by a combine.
// CHECK-DAG: merak.param @gate_up : tensor<2x24x8xf32> = dense<5.000000e-01> : tensor<4x24x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2, group = "ep">}
// CHECK-DAG: merak.param @down : tensor<2x8x12xf32> = dense<5.000000e-01> : tensor<4x8x12xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2, group = "ep">}
// CHECK-LABEL: func.func @forward
// CHECK: %[[R:.*]] = merak.group_rank group = "ep" : tensor<i64>
// CHECK: %[[N:.*]] = merak.constant dense<2> : tensor<i64>
// CHECK: %[[FIRST:.*]] = merak.mul %[[R]], %[[N]]
// CHECK: %[[EG:.*]] = merak.all_gather %{{.*}} group = "ep" : tensor<16xi64> -> tensor<32xi64>
// CHECK: %[[XR:.*]] = merak.all_to_all %{{.*}} routed %[[EG]] group = "ep" experts_per_rank = 2 : tensor<16x8xf32>, tensor<32xi64> -> tensor<32x8xf32>
// CHECK: %[[H:.*]] = merak.expert_matmul %[[XR]], %{{.*}}[%[[EG]] first %[[FIRST]] : tensor<i64>] {total_experts = 4 : i64} : tensor<32x8xf32>, tensor<2x24x8xf32>, tensor<32xi64> -> tensor<32x24xf32>
// CHECK: merak.all_to_all %[[H]] routed %[[EG]] group = "ep" combine experts_per_rank = 2 : tensor<32x24xf32>, tensor<32xi64> -> tensor<16x24xf32>
// CHECK: %[[MR:.*]] = merak.all_to_all %{{.*}} routed %[[EG]] group = "ep" experts_per_rank = 2 : tensor<16x12xf32>, tensor<32xi64> -> tensor<32x12xf32>
// CHECK: %[[D:.*]] = merak.expert_matmul %[[MR]], %{{.*}}[%[[EG]] first %[[FIRST]] : tensor<i64>]
// CHECK: merak.all_to_all %[[D]] routed %[[EG]] group = "ep" combine experts_per_rank = 2 : tensor<32x8xf32>, tensor<32xi64> -> tensor<16x8xf32>
// CHECK-NOT: merak.all_to_all

// With tp 2 each tp rank takes half of every GEMM's rows and their ids
// (merak.local_shard over "tp", once per value), reads the weights through
// merak.tp_identity (their gradients summed over tp) and all-gathers the
// combined rows over "tp"; the dispatches move 8 rows, not 16, and the
// activation between the GEMMs runs on the rank's 8 combined rows (no
// all-gather and cut around it).
// TP-LABEL: func.func @forward
// TP: %[[EL:.*]] = merak.local_shard %arg1 group = "tp" : tensor<16xi64> -> tensor<8xi64>
// TP: %[[EG:.*]] = merak.all_gather %[[EL]] group = "ep" : tensor<8xi64> -> tensor<16xi64>
// TP: %[[XL:.*]] = merak.local_shard %arg0 group = "tp" : tensor<16x8xf32> -> tensor<8x8xf32>
// TP: %[[W:.*]] = merak.get_param @gate_up : tensor<2x24x8xf32>
// TP: %[[WT:.*]] = merak.tp_identity %[[W]] : tensor<2x24x8xf32>
// TP: %[[XR:.*]] = merak.all_to_all %[[XL]] routed %[[EG]] group = "ep" experts_per_rank = 2 : tensor<8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
// TP: %[[H:.*]] = merak.expert_matmul %[[XR]], %[[WT]][%[[EG]] first
// TP: %[[HC:.*]] = merak.all_to_all %[[H]] routed %[[EG]] group = "ep" combine experts_per_rank = 2 : tensor<16x24xf32>, tensor<16xi64> -> tensor<8x24xf32>
// TP: %[[G:.*]] = merak.slice %[[HC]] starts = [0, 0] limits = [8, 12] strides = [1, 1] : tensor<8x24xf32> to tensor<8x12xf32>
// TP: %[[M:.*]] = merak.mul %[[G]], %{{.*}} : tensor<8x12xf32>, tensor<8x12xf32>
// TP: merak.all_to_all %[[M]] routed %[[EG]] group = "ep" experts_per_rank = 2 : tensor<8x12xf32>
// TP: merak.all_gather %{{.*}} group = "tp" : tensor<8x8xf32> -> tensor<16x8xf32>
// With rebalancing the rows stay whole on every tp rank.
// TPRB-LABEL: func.func @forward
// TPRB-NOT: group = "tp"
// TPRB: return

// The all-gather dispatcher: the input all-gathered, the rows reduce-scattered.
// AG-LABEL: func.func @forward
// AG-DAG: %[[EG:.*]] = merak.all_gather %{{.*}} group = "ep" : tensor<16xi64> -> tensor<32xi64>
// AG-DAG: %[[XG:.*]] = merak.all_gather %{{.*}} group = "ep" : tensor<16x8xf32> -> tensor<32x8xf32>
// AG: %[[H:.*]] = merak.expert_matmul %[[XG]], %{{.*}}[%[[EG]] first %{{.*}} : tensor<i64>]
// AG: merak.reduce_scatter %[[H]] group = "ep" reduction = "sum" : tensor<32x24xf32> -> tensor<16x24xf32>
// AG-NOT: merak.all_to_all

// Dynamic shadowing with one slot: one plan for the layer (its ids), whose
// min_rows is where an expert's weights (24 * 8 + 8 * 12 = 288 elements)
// cost what its rows do on the all-to-all (8 + 24 dispatched and combined
// by the first GEMM, 12 + 8 by the second: 52 per row), ceil(288 / 52) = 6;
// each GEMM also multiplies by its weight's slot copies, whose ids start at
// E + group_rank * M = 4 + rank; dispatch and combine route by the plan.
// SH-LABEL: func.func @forward
// SH-DAG: %[[R:.*]] = merak.group_rank group = "ep" : tensor<i64>
// SH-DAG: %[[ONE:.*]] = merak.constant dense<1> : tensor<i64>
// SH-DAG: %[[FOUR:.*]] = merak.constant dense<4> : tensor<i64>
// SH-DAG: %[[RM:.*]] = merak.mul %[[R]], %[[ONE]]
// SH-DAG: %[[COPIES:.*]] = merak.add %[[RM]], %[[FOUR]]
// SH: %[[EG:.*]] = merak.all_gather %{{.*}} group = "ep" : tensor<16xi64> -> tensor<32xi64>
// SH: %[[RT:.*]], %[[SL:.*]] = merak.expert_shadow_plan %[[EG]] experts_per_rank = 2 parts = 2 min_rows = 6 : tensor<32xi64> -> tensor<32xi64>, tensor<1xi64>
// SH: %[[XR:.*]] = merak.all_to_all %{{.*}} routed %[[RT]] group = "ep" experts_per_rank = 2 shadow_slots = 1
// SH: %[[WS:.*]] = merak.expert_shadow %[[WU:.*]], %[[SL]] group = "ep" parts = 2 : tensor<2x24x8xf32>, tensor<1xi64> -> tensor<1x24x8xf32>
// SH: %[[H:.*]] = merak.expert_matmul %[[XR]], %[[WU]][%[[RT]] first %{{.*}} : tensor<i64>] shadow %[[WS]][first %[[COPIES]] : tensor<i64>] : tensor<1x24x8xf32> {total_experts = 4 : i64}
// SH: merak.all_to_all %[[H]] routed %[[RT]] group = "ep" combine experts_per_rank = 2 shadow_slots = 1
// SH: merak.expert_shadow %{{.*}}, %[[SL]] group = "ep" parts = 2 : tensor<2x8x12xf32>, tensor<1xi64> -> tensor<1x8x12xf32>
// SH-NOT: merak.expert_shadow_plan
// The two-level all-to-all: every dispatch and combine marked.
// HI-COUNT-4: merak.all_to_all {{.*}} experts_per_rank = 2 hierarchical
// HI-NOT: merak.all_to_all
// Dynamic placement: one table for the layer, an i64 identity parameter
// ("frozen": no gradient) named on both weights' shard; the gathered ids go
// through it before the shadowing plan, which every GEMM and all-to-all then
// reads. weight_rows is the shadowing's cost of one expert's weights, 6.
// RB-DAG: merak.param @gate_up : tensor<2x24x8xf32> {{.*}}#merak.shard<axis = 0, blocks = 1, parts = 2, group = "ep", placement = 0>
// RB-DAG: merak.param @down : tensor<2x8x12xf32> {{.*}}#merak.shard<axis = 0, blocks = 1, parts = 2, group = "ep", placement = 0>
// RB-DAG: merak.param @moe.placement.0 : tensor<4xi64> = dense<[0, 1, 2, 3]> : tensor<4xi64> {merak.kind = "frozen"}
// RB-LABEL: func.func @forward
// RB: %[[EG:.*]] = merak.all_gather %{{.*}} group = "ep" : tensor<16xi64> -> tensor<32xi64>
// RB: %[[T:.*]] = merak.get_param @moe.placement.0 : tensor<4xi64>
// RB: %[[P:.*]] = merak.expert_place %[[EG]], %[[T]] table = 0 weight_rows = 6 rebalance_every = 3
// RB: merak.expert_shadow_plan %[[P]] experts_per_rank = 2 parts = 2 min_rows = 6
// RB-NOT: merak.expert_place
// Two chunks: the gathered ids [2 x 16] cut into each rank's rows 0-7 and
// 8-15, both chunks dispatched before the first chunk's GEMM, each chunk
// combined after its GEMM, the halves concatenated.
// CH-LABEL: func.func @forward
// CH: %[[EG:.*]] = merak.all_gather %{{.*}} group = "ep" : tensor<16xi64> -> tensor<32xi64>
// CH: merak.slice %{{.*}} starts = [0, 0] limits = [2, 8]
// CH: %[[E0:.*]] = merak.reshape %{{.*}} : tensor<2x8xi64> to tensor<16xi64>
// CH: merak.slice %{{.*}} starts = [0, 8] limits = [2, 16]
// CH: %[[E1:.*]] = merak.reshape %{{.*}} : tensor<2x8xi64> to tensor<16xi64>
// CH: %[[D0:.*]] = merak.all_to_all %{{.*}} routed %[[E0]] group = "ep" experts_per_rank = 2 : tensor<8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
// CH: %[[D1:.*]] = merak.all_to_all %{{.*}} routed %[[E1]] group = "ep" experts_per_rank = 2 : tensor<8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
// CH: %[[Y0:.*]] = merak.expert_matmul %[[D0]], %{{.*}}[%[[E0]] first
// CH: %[[M0:.*]] = merak.all_to_all %[[Y0]] routed %[[E0]] group = "ep" combine experts_per_rank = 2 : tensor<16x24xf32>, tensor<16xi64> -> tensor<8x24xf32>
// CH: %[[Y1:.*]] = merak.expert_matmul %[[D1]], %{{.*}}[%[[E1]] first
// CH: %[[M1:.*]] = merak.all_to_all %[[Y1]] routed %[[E1]] group = "ep" combine
// CH: merak.concat %[[M0]], %[[M1]] axis = 0 : tensor<8x24xf32>, tensor<8x24xf32> -> tensor<16x24xf32>
// CH3: error: merak-expert-parallel: 16 rows do not split into 3 chunks
// CHSH: merak-expert-parallel: chunks must be at least 1, and more than 1 needs the alltoall dispatcher without shadowing
// SH3: merak.expert_shadow_plan %{{.*}} experts_per_rank = 2 parts = 2 min_rows = 3 : tensor<32xi64> -> tensor<32xi64>, tensor<2xi64>
merak.param @gate_up : tensor<4x24x8xf32> = dense<0.5> : tensor<4x24x8xf32>
merak.param @down : tensor<4x8x12xf32> = dense<0.5> : tensor<4x8x12xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x8xf32> {
  %wu = merak.get_param @gate_up : tensor<4x24x8xf32>
  %wd = merak.get_param @down : tensor<4x8x12xf32>
  %h = merak.expert_matmul %x, %wu[%e] : tensor<16x8xf32>, tensor<4x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %g = merak.slice %h starts = [0, 0] limits = [16, 12] strides = [1, 1] : tensor<16x24xf32> to tensor<16x12xf32>
  %u = merak.slice %h starts = [0, 12] limits = [16, 24] strides = [1, 1] : tensor<16x24xf32> to tensor<16x12xf32>
  %m = merak.mul %g, %u : tensor<16x12xf32>, tensor<16x12xf32>
  %y = merak.expert_matmul %m, %wd[%e] : tensor<16x12xf32>, tensor<4x8x12xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
