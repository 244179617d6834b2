// RUN: merak-opt %s -merak-fuse-experts -split-input-file | FileCheck %s

// transformers' batched_mm experts (TorchScript and dynamo exports): each
// of the S = 8 (token, choice) rows gathers its expert's [O, K] weight and
// multiplies it with the row as a column; the gather of the [8, 6, 5]
// weights goes.
// CHECK-LABEL: func.func @linear_layout
// CHECK-SAME: (%[[X:.*]]: tensor<8x5x1xf32>, %[[E:.*]]: tensor<8xi64>)
// CHECK: %[[W:.*]] = merak.get_param @w
// CHECK: %[[R:.*]] = merak.reshape %[[X]] : tensor<8x5x1xf32> to tensor<8x5xf32>
// CHECK: %[[Y:.*]] = merak.expert_matmul %[[R]], %[[W]][%[[E]]] : tensor<8x5xf32>, tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x6xf32>
// CHECK: %[[O:.*]] = merak.reshape %[[Y]] : tensor<8x6xf32> to tensor<8x6x1xf32>
// CHECK-NOT: merak.gather
// CHECK: return %[[O]]
merak.param @w : tensor<4x6x5xf32> = dense<0.5> : tensor<4x6x5xf32>
func.func @linear_layout(%x: tensor<8x5x1xf32>, %e: tensor<8xi64>) -> tensor<8x6x1xf32> {
  %w = merak.get_param @w : tensor<4x6x5xf32>
  %g = merak.gather %w[%e] axis = 0 : tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x6x5xf32>
  %y = merak.matmul %g, %x : tensor<8x6x5xf32>, tensor<8x5x1xf32> -> tensor<8x6x1xf32>
  return %y : tensor<8x6x1xf32>
}

// -----

// Transposed weights [E, K, O] (is_transposed experts): the row on the left.
// CHECK-LABEL: func.func @transposed_layout
// CHECK: %[[R:.*]] = merak.reshape %{{.*}} : tensor<8x1x5xf32> to tensor<8x5xf32>
// CHECK: merak.expert_matmul %[[R]], %{{.*}}[%{{.*}}] transpose_weight : tensor<8x5xf32>, tensor<4x5x6xf32>, tensor<8xi32> -> tensor<8x6xf32>
// CHECK: merak.reshape %{{.*}} : tensor<8x6xf32> to tensor<8x1x6xf32>
merak.param @w : tensor<4x5x6xf32> = dense<0.5> : tensor<4x5x6xf32>
func.func @transposed_layout(%x: tensor<8x1x5xf32>, %e: tensor<8xi32>) -> tensor<8x1x6xf32> {
  %w = merak.get_param @w : tensor<4x5x6xf32>
  %g = merak.gather %w[%e] axis = 0 : tensor<4x5x6xf32>, tensor<8xi32> -> tensor<8x5x6xf32>
  %y = merak.matmul %x, %g : tensor<8x1x5xf32>, tensor<8x5x6xf32> -> tensor<8x1x6xf32>
  return %y : tensor<8x1x6xf32>
}

// -----

// Not an expert GEMM: two columns per row (the rows would share nothing),
// a gather along another axis, and a gather whose copy is also returned
// (it stays; the GEMM is still fused).
// CHECK-LABEL: func.func @not_fused
// CHECK: merak.gather %{{.*}} axis = 0
// CHECK: merak.matmul %{{.*}} : tensor<8x6x5xf32>, tensor<8x5x2xf32>
// CHECK: merak.gather %{{.*}} axis = 1
// CHECK: merak.matmul %{{.*}} : tensor<4x8x5xf32>, tensor<4x5x1xf32>
merak.param @w : tensor<4x6x5xf32> = dense<0.5> : tensor<4x6x5xf32>
func.func @not_fused(%x: tensor<8x5x2xf32>, %e: tensor<8xi64>, %z: tensor<4x5x1xf32>) -> (tensor<8x6x2xf32>, tensor<4x8x1xf32>) {
  %w = merak.get_param @w : tensor<4x6x5xf32>
  %g = merak.gather %w[%e] axis = 0 : tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x6x5xf32>
  %y = merak.matmul %g, %x : tensor<8x6x5xf32>, tensor<8x5x2xf32> -> tensor<8x6x2xf32>
  %h = merak.gather %w[%e] axis = 1 : tensor<4x6x5xf32>, tensor<8xi64> -> tensor<4x8x5xf32>
  %v = merak.matmul %h, %z : tensor<4x8x5xf32>, tensor<4x5x1xf32> -> tensor<4x8x1xf32>
  return %y, %v : tensor<8x6x2xf32>, tensor<4x8x1xf32>
}

// -----

// CHECK-LABEL: func.func @gather_kept
// CHECK: %[[G:.*]] = merak.gather
// CHECK: merak.expert_matmul
// CHECK: return %{{.*}}, %[[G]]
merak.param @w : tensor<4x6x5xf32> = dense<0.5> : tensor<4x6x5xf32>
func.func @gather_kept(%x: tensor<8x5x1xf32>, %e: tensor<8xi64>) -> (tensor<8x6x1xf32>, tensor<8x6x5xf32>) {
  %w = merak.get_param @w : tensor<4x6x5xf32>
  %g = merak.gather %w[%e] axis = 0 : tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x6x5xf32>
  %y = merak.matmul %g, %x : tensor<8x6x5xf32>, tensor<8x5x1xf32> -> tensor<8x6x1xf32>
  return %y, %g : tensor<8x6x1xf32>, tensor<8x6x5xf32>
}
