// RUN: merak-opt %s -split-input-file -merak-moe-capacity="capacity-factor=1.5" | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-moe-capacity="capacity-factor=0.5 drop-policy=position" \
// RUN:   | FileCheck %s --check-prefix=POS

// A layer of two expert GEMMs over 8 rows (4 tokens x top-2) of 2 experts,
// weighted by the router as transformers' batched_mm writes it (the weight
// reshaped after the GEMMs): the reshape moves before the first GEMM, the
// GEMMs read the kept ids, and the dropped rows' weights become zero.
// capacity = ceil(8 x 1.5 / 2) = 6 (position, 0.5: 2).

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[W1:.*]]: tensor<2x6x4xf32>, %[[W2:.*]]: tensor<2x4x6xf32>, %[[E:.*]]: tensor<8xi64>, %[[P:.*]]: tensor<4x2xf32>)
// CHECK: %[[R:.*]] = merak.reshape %[[P]] : tensor<4x2xf32> to tensor<8x1xf32>
// CHECK: %[[PR:.*]] = merak.reshape %[[R]] : tensor<8x1xf32> to tensor<8xf32>
// CHECK: %[[K:.*]] = merak.expert_capacity %[[E]], %[[PR]] experts = 2 capacity = 6 policy = "probs"
// CHECK: %[[NONE:.*]] = merak.constant dense<-1> : tensor<i64>
// CHECK: %[[KEEP:.*]] = merak.ne %[[K]], %[[NONE]]
// CHECK: %[[M:.*]] = merak.cast %[[KEEP]] : tensor<8xi1> to tensor<8xf32>
// CHECK: %[[M2:.*]] = merak.reshape %[[M]] : tensor<8xf32> to tensor<8x1xf32>
// CHECK: %[[RW:.*]] = merak.mul %[[R]], %[[M2]]
// CHECK: merak.expert_matmul %[[X]], %[[W1]][%[[K]]]
// CHECK: %[[Y:.*]] = merak.expert_matmul %{{.*}}, %[[W2]][%[[K]]]
// CHECK: merak.mul %[[Y]], %[[RW]] : tensor<8x4xf32>, tensor<8x1xf32>
// POS: merak.expert_capacity %{{.*}} experts = 2 capacity = 2 policy = "position"
func.func @forward(%x: tensor<8x4xf32>, %w1: tensor<2x6x4xf32>, %w2: tensor<2x4x6xf32>,
                   %e: tensor<8xi64>, %p: tensor<4x2xf32>) -> tensor<4x4xf32> {
  %h = merak.expert_matmul %x, %w1[%e] : tensor<8x4xf32>, tensor<2x6x4xf32>, tensor<8xi64> -> tensor<8x6xf32>
  %a = merak.relu %h : tensor<8x6xf32>
  %y = merak.expert_matmul %a, %w2[%e] : tensor<8x6xf32>, tensor<2x4x6xf32>, tensor<8xi64> -> tensor<8x4xf32>
  %r = merak.reshape %p : tensor<4x2xf32> to tensor<8x1xf32>
  %m = merak.mul %y, %r : tensor<8x4xf32>, tensor<8x1xf32>
  %s = merak.reshape %m : tensor<8x4xf32> to tensor<4x2x4xf32>
  %o = merak.reduce_sum %s axes = [1] : tensor<4x2x4xf32> -> tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}
