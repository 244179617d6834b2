// RUN: not merak-opt %s -merak-data-parallel="dp=2 zero=2" 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: error: merak-data-parallel: zero must be 0 or 1, got 2
// (ZeRO of a tensor-parallel shard: merak-optimizer-zero-tp.mlir.)

func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32> {merak.name = "loss"}, tensor<2x3xf32> {merak.name = "grad:t"}) {
  %l = merak.reduce_sum %x axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<2x3xf32>
}
