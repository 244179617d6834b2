// RUN: merak-opt %s -merak-expert-parallel="ep=2 rebalance-every=2" -verify-diagnostics

// One expert weight read by two layers (two routings): no single placement
// table can order its experts.
merak.param @w : tensor<4x8x8xf32> = dense<0.5> : tensor<4x8x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e1: tensor<16xi64>, %e2: tensor<16xi64>) -> tensor<16x8xf32> {
  %w = merak.get_param @w : tensor<4x8x8xf32>
  %h = merak.expert_matmul %x, %w[%e1] : tensor<16x8xf32>, tensor<4x8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  // expected-error @+1 {{the expert weight @w is read by two Mixture-of-Experts layers, so one placement table (--moe-rebalance-every) cannot order it}}
  %y = merak.expert_matmul %h, %w[%e2] : tensor<16x8xf32>, tensor<4x8x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
