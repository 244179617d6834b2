// RUN: merak-opt %s -split-input-file -verify-diagnostics | merak-opt | FileCheck %s

// ZeRO's collectives round-trip; one op may carry a bucket of tensors.
// CHECK-LABEL: func.func @zero_collectives
// CHECK: %[[RS:.*]]:2 = merak.reduce_scatter %arg0, %arg1 group = "dp" reduction = "mean" : tensor<8xf32>, tensor<4x3xf32> -> tensor<4xf32>, tensor<2x3xf32>
// CHECK: %[[LS:.*]] = merak.local_shard %arg0 group = "dp" : tensor<8xf32> -> tensor<4xf32>
// CHECK: merak.all_gather %[[RS]]#0, %[[LS]] group = "dp" : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>, tensor<8xf32>
func.func @zero_collectives(%a: tensor<8xf32>, %b: tensor<4x3xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<2x3xf32>) {
  %r:2 = merak.reduce_scatter %a, %b group = "dp" reduction = "mean" : tensor<8xf32>, tensor<4x3xf32> -> tensor<4xf32>, tensor<2x3xf32>
  %l = merak.local_shard %a group = "dp" : tensor<8xf32> -> tensor<4xf32>
  %g:2 = merak.all_gather %r#0, %l group = "dp" : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>, tensor<8xf32>
  return %g#0, %g#1, %r#1 : tensor<8xf32>, tensor<8xf32>, tensor<2x3xf32>
}

// -----

// A ZeRO part of optimizer state: tensor<ceil(N / parts)>, local zeros.
// CHECK: merak.param @s : tensor<2xf32> = dense<0.000000e+00> : tensor<2xf32> {merak.zero = #merak.zero<parts = 4, shape = [2, 3]>}
merak.param @s : tensor<2xf32> = dense<0.0> : tensor<2xf32> {merak.zero = #merak.zero<parts = 4, shape = [2, 3]>}
