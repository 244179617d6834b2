// RUN: merak-opt %s -split-input-file -merak-record-index-limits | FileCheck %s

// Token ids reach the embedding through a reshape and a slice: the limit is
// the table's rows. A second table with fewer rows sets the smaller limit;
// a float input and an input used only as data get none.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<2x4xi64> {merak.index_limit = 7 : i64, merak.name = "input_ids"}
// CHECK-SAME: %{{.*}}: tensor<2x4xi64> {merak.index_limit = 3 : i64, merak.name = "types"}
// CHECK-SAME: %{{.*}}: tensor<2x4xf32> {merak.name = "mask"}
// CHECK-SAME: %{{.*}}: tensor<2x4xi64> {merak.name = "plain"}
merak.param @wte : tensor<7x5xf32> = dense<1.0> : tensor<7x5xf32>
merak.param @tte : tensor<4x5xf32> = dense<1.0> : tensor<4x5xf32>
merak.param @ste : tensor<3x5xf32> = dense<1.0> : tensor<3x5xf32>
func.func @forward(%ids: tensor<2x4xi64> {merak.name = "input_ids"},
                   %types: tensor<2x4xi64> {merak.name = "types"},
                   %mask: tensor<2x4xf32> {merak.name = "mask"},
                   %plain: tensor<2x4xi64> {merak.name = "plain"}) -> tensor<8x5xf32> {
  %w = merak.get_param @wte : tensor<7x5xf32>
  %flat = merak.reshape %ids : tensor<2x4xi64> to tensor<8xi64>
  %x = merak.gather %w[%flat] axis = 0 : tensor<7x5xf32>, tensor<8xi64> -> tensor<8x5xf32>
  %t = merak.get_param @tte : tensor<4x5xf32>
  %tflat = merak.reshape %types : tensor<2x4xi64> to tensor<8xi64>
  %y = merak.gather %t[%tflat] axis = 0 : tensor<4x5xf32>, tensor<8xi64> -> tensor<8x5xf32>
  %s = merak.get_param @ste : tensor<3x5xf32>
  %z = merak.gather %s[%tflat] axis = 0 : tensor<3x5xf32>, tensor<8xi64> -> tensor<8x5xf32>
  %p = merak.reshape %plain : tensor<2x4xi64> to tensor<8xi64>
  %a = merak.add %x, %y : tensor<8x5xf32>, tensor<8x5xf32>
  %b = merak.add %a, %z : tensor<8x5xf32>, tensor<8x5xf32>
  return %b : tensor<8x5xf32>
}

// -----

// Labels read by a cross-entropy: the classes of the logits.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: {merak.index_limit = 6 : i64, merak.name = "targets"}
func.func @forward(%logits: tensor<2x6xf32> {merak.name = "logits"},
                   %t: tensor<2xi64> {merak.name = "targets"}) -> tensor<f32> {
  %l = merak.cross_entropy %logits, %t axis = 1 reduction = "mean" : tensor<2x6xf32>, tensor<2xi64> -> tensor<f32>
  return %l : tensor<f32>
}
