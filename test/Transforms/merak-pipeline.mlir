// RUN: merak-opt %s -merak-pipeline="pp=2 microbatches=4" -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -merak-pipeline="pp=3 boundaries=3,5" | FileCheck %s --check-prefix=PP3
// RUN: merak-opt %s -merak-pipeline="pp=2 dp=2" | FileCheck %s --check-prefix=DP

// Three residual layers h' = h + tanh(h w_i), a mask computed after the
// first layer and used after the last (a value crossing every later cut),
// and @w0 read by the first layer and the head (tied). Cut points are the
// positions where one activation of 32 bytes crosses (the input x is data,
// not an activation): after p0, t0, h1, the mask, h2, h3 and the select
// (indices 0..6; not after the head, which would leave a stage without
// parameters); balanced FLOPs put the 2-stage cut after h2 (index 4: 168
// against 184 FLOPs).
// CHECK: merak.pipeline = #merak.pipeline_plan<stages = 2, microbatches = 4, cut_points = 7, cuts = [4], costs = [168, 184], owners = {{\[}}["w0", "w1"], ["w0", "w2"]]
// CHECK-DAG: merak.param @pipeline.grad.w0 : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {merak.kind = "scratch"}
// CHECK-DAG: merak.param @pipeline.grad.w2 : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {merak.kind = "scratch"}
//
// Stage 0 sends h2 and the mask (a skip value of its first layer).
// CHECK-LABEL: func.func @stage0_forward
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32> {merak.name = "x"})
// CHECK-SAME: -> (tensor<2x4xi1> {merak.name = "act:0"}, tensor<2x4xf32> {merak.name = "act:1"})
// CHECK-SAME: merak.fragment = {kind = "forward", stage = 0 : i64}
// CHECK: merak.get_param @w0
// CHECK: merak.get_param @w1
// CHECK-NOT: merak.get_param
// CHECK: return
//
// Its backward takes the cotangent of h2 only (the mask has none), returns
// nothing and accumulates both gradients.
// CHECK-LABEL: func.func @stage0_backward
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32> {merak.name = "x"}, %{{.*}}: tensor<2x4xf32> {merak.name = "cot:1"})
// CHECK-SAME: merak.fragment = {kind = "backward", stage = 0 : i64}
// CHECK-DAG: merak.set_param @pipeline.grad.w0
// CHECK-DAG: merak.set_param @pipeline.grad.w1
// CHECK: return
// CHECK-NOT: tensor
//
// CHECK-LABEL: func.func @stage0_grads
// CHECK-SAME: -> (tensor<f32> {merak.name = "loss"}, tensor<4x4xf32> {merak.name = "grad:w0"}, tensor<4x4xf32> {merak.name = "grad:w1"})
// CHECK-SAME: merak.norm_group = "pp", merak.update = "stage0_update"
// CHECK-NOT: merak.all_reduce
//
// The last stage: data and activations in, the loss out; its backward
// seeds the loss with 1/4 (four micro-batches) and returns the cotangent of h2.
// CHECK-LABEL: func.func @stage1_forward
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32> {merak.name = "x"}, %{{.*}}: tensor<2x4xi1> {merak.name = "act:0"}, %{{.*}}: tensor<2x4xf32> {merak.name = "act:1"})
// CHECK-SAME: -> (tensor<f32> {merak.name = "loss"})
// CHECK-LABEL: func.func @stage1_backward
// CHECK-SAME: -> (tensor<2x4xf32> {merak.name = "cot:1"})
// CHECK: merak.constant dense<2.500000e-01> : tensor<f32>
// CHECK-LABEL: func.func @stage1_grads
// CHECK-SAME: {merak.name = "grad:w0"}
// CHECK-SAME: {merak.name = "grad:w2"}
// CHECK-SAME: merak.norm_group = "pp", merak.norm_skip = ["w0"]
//
// Three stages at cut points 3 (after the mask) and 5 (after h3): the
// middle stage receives h1 and the mask and forwards the mask with h3.
// PP3: cuts = [3, 5]
// PP3-LABEL: func.func @stage1_forward
// PP3-SAME: (%{{.*}}: tensor<2x4xf32> {merak.name = "act:0"}, %{{.*}}: tensor<2x4xi1> {merak.name = "act:1"})
// PP3-SAME: -> (tensor<2x4xi1> {merak.name = "act:0"}, tensor<2x4xf32> {merak.name = "act:1"})
// PP3-LABEL: func.func @stage1_backward
// PP3-SAME: -> (tensor<2x4xf32> {merak.name = "cot:0"})
//
// dp > 1 averages the accumulated gradients.
// DP-LABEL: func.func @stage0_grads
// DP: merak.all_reduce
// DP-SAME: group = "dp"
merak.param @w0 : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
merak.param @w1 : tensor<4x4xf32> = dense<0.25> : tensor<4x4xf32>
merak.param @w2 : tensor<4x4xf32> = dense<0.125> : tensor<4x4xf32>
func.func @loss(%x: tensor<2x4xf32> {merak.name = "x"}) -> (tensor<f32> {merak.name = "loss"}) {
  %w0 = merak.get_param @w0 : tensor<4x4xf32>
  %p0 = merak.matmul %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %t0 = merak.tanh %p0 : tensor<2x4xf32>
  %h1 = merak.add %x, %t0 : tensor<2x4xf32>, tensor<2x4xf32>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %m = merak.gt %h1, %zero : tensor<2x4xf32>, tensor<f32>
  %w1 = merak.get_param @w1 : tensor<4x4xf32>
  %p1 = merak.matmul %h1, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %t1 = merak.tanh %p1 : tensor<2x4xf32>
  %h2 = merak.add %h1, %t1 : tensor<2x4xf32>, tensor<2x4xf32>
  %w2 = merak.get_param @w2 : tensor<4x4xf32>
  %p2 = merak.matmul %h2, %w2 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %t2 = merak.tanh %p2 : tensor<2x4xf32>
  %h3 = merak.add %h2, %t2 : tensor<2x4xf32>, tensor<2x4xf32>
  %y = merak.where %m, %h3, %x : tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>
  %w0t = merak.transpose %w0 perm = [1, 0] : tensor<4x4xf32> to tensor<4x4xf32>
  %o = merak.matmul %y, %w0t : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %o2 = merak.concat %o, %o axis = 1 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  %l = merak.reduce_sum %o2 axes = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
