// RUN: merak-opt %s -split-input-file -verify-diagnostics | merak-opt | FileCheck %s

// Started collectives and merak.wait round-trip; the wait yields the
// blocking collective's result types.
// CHECK-LABEL: func.func @started
// CHECK: %[[A:.*]] = merak.all_reduce_start %arg0, %arg1 group = "dp" reduction = "mean" : tensor<8xf32>, tensor<4x3xf32>
// CHECK: %[[S:.*]] = merak.reduce_scatter_start %arg0 group = "dp" reduction = "sum" parts = 2 : tensor<8xf32>
// CHECK: %[[G:.*]] = merak.all_gather_start %arg1 group = "tp" parts = 2 : tensor<4x3xf32>
// CHECK: %{{.*}}:2 = merak.wait %[[A]] : tensor<8xf32>, tensor<4x3xf32>
// CHECK: merak.wait %[[S]] : tensor<4xf32>
// CHECK: merak.wait %[[G]] : tensor<8x3xf32>
func.func @started(%a: tensor<8xf32>, %b: tensor<4x3xf32>)
    -> (tensor<8xf32>, tensor<4x3xf32>, tensor<4xf32>, tensor<8x3xf32>) {
  %ra = merak.all_reduce_start %a, %b group = "dp" reduction = "mean" : tensor<8xf32>, tensor<4x3xf32>
  %rs = merak.reduce_scatter_start %a group = "dp" reduction = "sum" parts = 2 : tensor<8xf32>
  %rg = merak.all_gather_start %b group = "tp" parts = 2 : tensor<4x3xf32>
  %x:2 = merak.wait %ra : tensor<8xf32>, tensor<4x3xf32>
  %y = merak.wait %rs : tensor<4xf32>
  %z = merak.wait %rg : tensor<8x3xf32>
  return %x#0, %x#1, %y, %z : tensor<8xf32>, tensor<4x3xf32>, tensor<4xf32>, tensor<8x3xf32>
}
