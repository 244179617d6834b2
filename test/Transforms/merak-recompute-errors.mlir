// RUN: merak-opt %s -verify-diagnostics -merak-attach-loss=loss=model-output \
// RUN:   -merak-pipeline="pp=2 microbatches=2" -merak-recompute="mode=stage-aware memory-per-device=1050"
// RUN: not merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=2 microbatches=2" \
// RUN:   -merak-recompute="mode=sometimes" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=2 microbatches=2" \
// RUN:   -merak-recompute="mode=stage-aware" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not merak-opt %s -merak-recompute="mode=none" 2>&1 | FileCheck %s --check-prefix=ORDER

// Two residual blocks h = h + tanh(h w) (x [2, 8] data; w [8, 8]: 256
// bytes) on 2 stages, 1F1B with m = 2: stage 0 holds 2 micro-batches,
// stage 1 one. Parameters, accumulators and AdamW's moments: 4 * 256 =
// 1024 bytes a stage. Stage 0 fits with full recomputation (its input x is
// data: 0 stashed bytes, 1024 in all; none would stash tanh's output:
// 2 * 64 + 1024 = 1152); stage 1 needs 1 x 64 bytes (its input
// h) + 1024 = 1088 bytes even with full recomputation, over 1050.
// expected-error @below {{merak-recompute: stage 1 needs 1088 bytes even with full recomputation (1 micro-batches in flight x 64 bytes of stage inputs + 1024 bytes of parameters, gradients and optimizer state), more than memory-per-device = 1050 bytes}}
module {
merak.param @w0 : tensor<8x8xf32> = dense<0.1> : tensor<8x8xf32>
merak.param @w1 : tensor<8x8xf32> = dense<0.2> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x8xf32> {merak.name = "x"}) -> tensor<f32> {
  %w0 = merak.get_param @w0 : tensor<8x8xf32>
  %w1 = merak.get_param @w1 : tensor<8x8xf32>
  %a0 = merak.matmul %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %t0 = merak.tanh %a0 : tensor<2x8xf32>
  %h0 = merak.add %x, %t0 : tensor<2x8xf32>, tensor<2x8xf32>
  %a1 = merak.matmul %h0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %t1 = merak.tanh %a1 : tensor<2x8xf32>
  %h1 = merak.add %h0, %t1 : tensor<2x8xf32>, tensor<2x8xf32>
  %l = merak.reduce_mean %h1 axes = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
}

// MODE: merak-recompute: unknown mode 'sometimes' (expected none, full, selective or stage-aware)
// BUDGET: merak-recompute: mode stage-aware needs memory-per-device
// ORDER: merak-recompute: no merak.pipeline (run merak-pipeline first)
