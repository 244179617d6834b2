// RUN: merak-opt %s -split-input-file -merak-pipeline="pp=3" -verify-diagnostics
// RUN: not merak-opt %s -merak-pipeline="pp=2 boundaries=1" 2>&1 | FileCheck %s --check-prefix=BOUNDARY
// BOUNDARY: error: merak-pipeline: stage boundary 1 is not a cut point (the model has 1, numbered from 0)

// Errors: more stages than cut points; a boundary that is no cut point.
merak.param @w : tensor<2xf32> = dense<1.0> : tensor<2xf32>
// expected-error @+1 {{merak-pipeline: the model has 1 cut points (positions where only 1 activation(s) cross), too few for 3 stages}}
func.func @loss(%x: tensor<2xf32> {merak.name = "x"}) -> (tensor<f32> {merak.name = "loss"}) {
  %w = merak.get_param @w : tensor<2xf32>
  %a = merak.mul %x, %w : tensor<2xf32>, tensor<2xf32>
  %l = merak.reduce_sum %a axes = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
