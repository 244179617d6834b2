// RUN: merak-opt %s -split-input-file -merak-data-parallel="dp=2 zero=1" -merak-optimizer -verify-diagnostics
// RUN: not merak-opt %s -split-input-file -merak-data-parallel="dp=2 zero=2" 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: error: merak-data-parallel: zero must be 0 or 1, got 2

// ZeRO of a tensor-parallel shard is not supported (merak-compile rejects
// --zero 1 with --tp).
// expected-error @+1 {{merak-optimizer: ZeRO of a tensor-parallel shard is not supported}}
merak.param @t : tensor<2x3xf32> = dense<1.0> : tensor<4x3xf32> {merak.shard = {axis = 0 : i64, blocks = 1 : i64, parts = 2 : i64}}
func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32> {merak.name = "loss"}, tensor<2x3xf32> {merak.name = "grad:t"}) {
  %l = merak.reduce_sum %x axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<2x3xf32>
}
