// RUN: merak-opt %s -split-input-file --merak-cache-param-casts | FileCheck %s

// A micro-batch fragment's cast of a weight reads the bf16 copy that the
// stage's prepare fragment writes once a step. A parameter the forward
// writes (@s: BatchNorm's running statistics are such) changes within the
// step, so its cast stays; the update keeps its own casts.
// CHECK: merak.param @w : tensor<4x4xf32>
// CHECK-NEXT: merak.param @pipeline.cast.bf16.w : tensor<4x4xbf16> = dense<0.000000e+00> : tensor<4x4xbf16> {merak.kind = "scratch"}
// CHECK-NOT: pipeline.cast.bf16.s
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-NEXT: %[[W:.+]] = merak.get_param @pipeline.cast.bf16.w : tensor<4x4xbf16>
// CHECK-NEXT: merak.matmul %{{.+}}, %[[W]]
// CHECK: %[[S:.+]] = merak.get_param @s : tensor<4xf32>
// CHECK-NEXT: merak.cast %[[S]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-LABEL: func.func @stage0_update(
// CHECK-NEXT: %[[U:.+]] = merak.get_param @w : tensor<4x4xf32>
// CHECK-NEXT: merak.cast %[[U]] : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK-LABEL: func.func @stage0_prepare() attributes {merak.fragment = {kind = "prepare", stage = 0 : i64}} {
// CHECK-NEXT: %[[P:.+]] = merak.get_param @w : tensor<4x4xf32>
// CHECK-NEXT: %[[C:.+]] = merak.cast %[[P]] : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK-NEXT: merak.set_param @pipeline.cast.bf16.w, %[[C]] : tensor<4x4xbf16>
// CHECK-NEXT: return
module attributes {merak.pipeline = #merak.pipeline_plan<stages = 1, microbatches = 2, cut_points = 1, cuts = [], costs = [1], owners = [["w", "s"]]>} {
  merak.param @w : tensor<4x4xf32> = dense<1.0> : tensor<4x4xf32>
  merak.param @s : tensor<4xf32> = dense<0.0> : tensor<4xf32>
  func.func @stage0_forward(%x: tensor<4x4xbf16>) -> tensor<4x4xf32> attributes {merak.fragment = {kind = "forward", stage = 0 : i64}} {
    %w = merak.get_param @w : tensor<4x4xf32>
    %c = merak.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
    %y = merak.matmul %x, %c : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xf32>
    %s = merak.get_param @s : tensor<4xf32>
    %sc = merak.cast %s : tensor<4xf32> to tensor<4xbf16>
    %s2 = merak.cast %sc : tensor<4xbf16> to tensor<4xf32>
    merak.set_param @s, %s2 : tensor<4xf32>
    return %y : tensor<4x4xf32>
  }
  func.func @stage0_update() attributes {merak.fragment = {kind = "update", stage = 0 : i64}} {
    %w = merak.get_param @w : tensor<4x4xf32>
    %c = merak.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
    %d = merak.cast %c : tensor<4x4xbf16> to tensor<4x4xf32>
    merak.set_param @w, %d : tensor<4x4xf32>
    return
  }
}

// -----

// Not a pipelined module (no merak.pipeline): nothing changes.
// CHECK-LABEL: func.func @train_step(
// CHECK-NEXT: merak.get_param @v : tensor<4xf32>
// CHECK-NEXT: merak.cast
// CHECK-NOT: pipeline.cast
module {
  merak.param @v : tensor<4xf32> = dense<1.0> : tensor<4xf32>
  func.func @train_step() -> tensor<4xbf16> {
    %v = merak.get_param @v : tensor<4xf32>
    %c = merak.cast %v : tensor<4xf32> to tensor<4xbf16>
    return %c : tensor<4xbf16>
  }
}
