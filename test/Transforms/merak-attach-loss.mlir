// RUN: merak-opt %s -split-input-file -merak-attach-loss -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-attach-loss="labels=targets" -verify-diagnostics 2>&1 | FileCheck %s --check-prefix=NAMED

// Next-token cross-entropy: @loss takes the labels as a new last argument
// shaped like the logits without the class axis; @forward is kept.
// CHECK-LABEL: func.func @forward
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x4xi64> {merak.name = "input_ids"}, %[[T:.*]]: tensor<2x4xi64> {merak.name = "targets"}, %[[L:.*]]: tensor<2x4xi64> {merak.ignore_index = -100 : i64, merak.index_limit = 5 : i64, merak.name = "labels"}) -> (tensor<f32> {merak.name = "loss"})
// CHECK: %[[CE:.*]] = merak.cross_entropy %{{.*}}, %[[L]] axis = 2 reduction = "mean" {ignore_index = -100 : i64} : tensor<2x4x5xf32>, tensor<2x4xi64> -> tensor<f32>
// CHECK: return %[[CE]] : tensor<f32>
// NAMED-LABEL: func.func @loss
// NAMED-SAME: (%{{.*}}: tensor<2x4xi64> {merak.name = "input_ids"}, %[[T:.*]]: tensor<2x4xi64> {merak.ignore_index = -100 : i64, merak.index_limit = 5 : i64, merak.name = "targets"}) -> (tensor<f32> {merak.name = "loss"})
// NAMED: merak.cross_entropy %{{.*}}, %[[T]] axis = 2
merak.param @emb : tensor<5x5xf32> = dense<1.0> : tensor<5x5xf32>
func.func @forward(%ids: tensor<2x4xi64> {merak.name = "input_ids"}, %t: tensor<2x4xi64> {merak.name = "targets"}) -> (tensor<2x4x5xf32> {merak.name = "logits"}) {
  %w = merak.get_param @emb : tensor<5x5xf32>
  %x = merak.gather %w[%ids] axis = 0 : tensor<5x5xf32>, tensor<2x4xi64> -> tensor<2x4x5xf32>
  return %x : tensor<2x4x5xf32>
}

// -----

// Logits must have a class axis.
// expected-error @+1 {{merak-attach-loss: logits must be a floating-point tensor of rank >= 2, got 'tensor<4xf32>'}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{merak-attach-loss: no func.func @forward}}
module {
  func.func @other() {
    return
  }
}
