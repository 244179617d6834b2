// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=2 microbatches=2" \
// RUN:   -merak-recompute="mode=full" -merak-split-backward="schedule=zb-h1" | FileCheck %s --check-prefix=ZB
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=3 microbatches=2" \
// RUN:   -merak-recompute="mode=full" -merak-split-backward="schedule=shifted-critical-path" \
// RUN:   | FileCheck %s --check-prefix=SCP
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=2 microbatches=2" \
// RUN:   -merak-recompute="mode=full" -merak-split-backward="schedule=1f1b" | FileCheck %s --check-prefix=NONE

// loss = mean(tanh(tanh(x w0) w1)). Two stages cut after tanh(x w0); three
// stages after x w0 and after its tanh.

// Zero bubble: stage 0 has no input gradient to compute (its input is
// data), so its B is empty and W recomputes the forward and accumulates
// d w0 = x^T (d h1 * (1 - h1^2)).
// ZB-LABEL: func.func @stage0_backward(%{{.*}}: tensor<2x4xf32> {merak.name = "cot:0"})
// ZB-SAME: kind = "backward", stage = 0
// ZB-NEXT: return
// ZB-LABEL: func.func @stage0_backward_weight
// ZB-SAME: {merak.name = "x"}, %{{.*}}: tensor<2x4xf32> {merak.name = "cot:0"})
// ZB-SAME: kind = "backward_weight", stage = 0
// ZB: merak.matmul
// ZB: merak.tanh
// ZB: merak.set_param @pipeline.grad.w0
// Stage 1: B computes the input gradient d h1 = g w1^T (g = d loss *
// (1 - h2^2)) and hands g to W (wstash:0); the recomputed loss, which
// nothing reads, is gone; W computes h1^T g from its own input, act:0.
// ZB-LABEL: func.func @stage1_backward(%{{.*}}: tensor<2x4xf32> {merak.name = "act:0"})
// ZB-SAME: -> (tensor<2x4xf32> {merak.name = "cot:0"}, tensor<2x4xf32> {merak.name = "wstash:0"})
// ZB-NOT: merak.reduce_mean
// ZB-NOT: set_param
// ZB: %[[WT:.*]] = merak.transpose %{{.*}} perm = [1, 0] : tensor<4x4xf32>
// ZB: %[[DX:.*]] = merak.matmul %[[G:.*]], %[[WT]]
// ZB: return %[[DX]], %[[G]]
// ZB-LABEL: func.func @stage1_backward_weight
// ZB-SAME: (%[[A:.*]]: tensor<2x4xf32> {merak.name = "act:0"}, %[[W:.*]]: tensor<2x4xf32> {merak.name = "wstash:0"})
// ZB: %[[AT:.*]] = merak.transpose %[[A]]
// ZB: %[[DW:.*]] = merak.matmul %[[AT]], %[[W]]
// ZB: merak.get_param @pipeline.grad.w1
// ZB: merak.set_param @pipeline.grad.w1
// ZB-NEXT: return

// Shifted critical path: stages 0 and 1 split their backward; R takes no
// cotangent, the rest reads R's values as rstash; the forward_keep returns
// what R returns. The last stage is left whole.
// SCP-LABEL: func.func @stage0_forward_keep
// SCP-SAME: (%[[X:.*]]: tensor<2x4xf32> {merak.name = "x"})
// SCP-SAME: -> (tensor<2x4xf32> {merak.name = "act:0"}, tensor<4x2xf32> {merak.name = "rstash:0"})
// SCP-SAME: kind = "forward_keep", stage = 0
// SCP: %[[XT:.*]] = merak.transpose %[[X]]
// SCP: return %{{.*}}, %[[XT]]
// SCP-LABEL: func.func @stage0_backward
// SCP-SAME: (%[[C:.*]]: tensor<2x4xf32> {merak.name = "cot:0"}, %[[R:.*]]: tensor<4x2xf32> {merak.name = "rstash:0"})
// SCP: merak.matmul %[[R]], %[[C]]
// SCP: merak.set_param @pipeline.grad.w0
// SCP-LABEL: func.func @stage0_recompute(%{{.*}}: tensor<2x4xf32> {merak.name = "x"}) -> (tensor<4x2xf32> {merak.name = "rstash:0"})
// SCP-SAME: kind = "recompute", stage = 0
// A middle stage's input and output are both named "act:0": R's copy in
// the forward_keep reads the input, not the forward's output.
// SCP-LABEL: func.func @stage1_forward_keep
// SCP-SAME: (%[[A:.*]]: tensor<2x4xf32> {merak.name = "act:0"})
// SCP: merak.tanh %[[A]]
// SCP: merak.tanh %[[A]]
// SCP-LABEL: func.func @stage1_backward(%{{.*}}: tensor<2x4xf32> {merak.name = "cot:0"}, %{{.*}}: tensor<2x4xf32> {merak.name = "rstash:0"}) -> (tensor<2x4xf32> {merak.name = "cot:0"})
// SCP-NOT: merak.tanh
// SCP: return
// SCP-LABEL: func.func @stage1_recompute(%{{.*}}: tensor<2x4xf32> {merak.name = "act:0"})
// SCP: merak.tanh
// SCP: merak.sub
// SCP-NOT: func.func @stage2_recompute
// SCP-NOT: func.func @stage2_forward_keep
// SCP-LABEL: func.func @stage2_backward(%{{.*}}: tensor<2x4xf32> {merak.name = "act:0"}) -> (tensor<2x4xf32> {merak.name = "cot:0"})
// SCP: merak.set_param @pipeline.grad.w1

// Other schedules: nothing split.
// NONE-NOT: backward_weight
// NONE-NOT: _recompute
// NONE-NOT: forward_keep

merak.param @w0 : tensor<4x4xf32> = dense<0.1> : tensor<4x4xf32>
merak.param @w1 : tensor<4x4xf32> = dense<0.2> : tensor<4x4xf32>
func.func @forward(%x: tensor<2x4xf32> {merak.name = "x"}) -> tensor<f32> {
  %w0 = merak.get_param @w0 : tensor<4x4xf32>
  %p0 = merak.matmul %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h1 = merak.tanh %p0 : tensor<2x4xf32>
  %w1 = merak.get_param @w1 : tensor<4x4xf32>
  %p1 = merak.matmul %h1, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h2 = merak.tanh %p1 : tensor<2x4xf32>
  %l = merak.reduce_mean %h2 axes = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
