// RUN: merak-opt %s -split-input-file -merak-grad-reduce-precision="precision=bf16" | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-grad-reduce-precision | FileCheck %s --check-prefix=FP32
// RUN: not merak-opt %s -split-input-file -merak-grad-reduce-precision="precision=fp16" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: merak-grad-reduce-precision: precision 'fp16': expected fp32 or bf16

// A blocking bucket: both gradients narrowed, reduced in bf16 and widened
// back; the scalar loss's all-reduce, the "sum" (a clipping norm) and the
// "tp" all-reduce stay f32.
// CHECK-LABEL: func.func @blocking
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[L:.*]]: tensor<f32>, %[[S:.*]]: tensor<3xf32>)
// CHECK: %[[AH:.*]] = merak.cast %[[A]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: %[[BH:.*]] = merak.cast %[[B]] : tensor<8xf32> to tensor<8xbf16>
// CHECK: %[[R:.*]]:2 = merak.all_reduce %[[AH]], %[[BH]] group = "dp" reduction = "mean" : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>, tensor<8xbf16>
// CHECK: %[[AF:.*]] = merak.cast %[[R]]#0 : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: %[[BF:.*]] = merak.cast %[[R]]#1 : tensor<8xbf16> to tensor<8xf32>
// CHECK: %[[LR:.*]] = merak.all_reduce %[[L]] group = "dp" reduction = "mean" : tensor<f32> -> tensor<f32>
// CHECK: %[[SR:.*]] = merak.all_reduce %[[S]] group = "dp" reduction = "sum" : tensor<3xf32> -> tensor<3xf32>
// CHECK: %[[TR:.*]] = merak.all_reduce %[[S]] group = "tp" reduction = "mean" : tensor<3xf32> -> tensor<3xf32>
// CHECK: return %[[AF]], %[[BF]], %[[LR]], %[[SR]], %[[TR]]
// FP32-LABEL: func.func @blocking
// FP32-NOT: bf16
func.func @blocking(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %l: tensor<f32>, %s: tensor<3xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>, tensor<3xf32>, tensor<3xf32>) {
  %r:2 = merak.all_reduce %a, %b group = "dp" reduction = "mean"
      : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>
  %lr = merak.all_reduce %l group = "dp" reduction = "mean" : tensor<f32> -> tensor<f32>
  %sr = merak.all_reduce %s group = "dp" reduction = "sum" : tensor<3xf32> -> tensor<3xf32>
  %tr = merak.all_reduce %s group = "tp" reduction = "mean" : tensor<3xf32> -> tensor<3xf32>
  return %r#0, %r#1, %lr, %sr, %tr : tensor<4x8xf32>, tensor<8xf32>, tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Started collectives (merak-overlap's): the narrowing right before the
// start, the computation in between untouched, the wait yields bf16 and
// the widening follows it. ZeRO's reduce-scatter keeps its parts.
// CHECK-LABEL: func.func @started
// CHECK: %[[GH:.*]] = merak.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// CHECK-NEXT: %[[R:.*]] = merak.reduce_scatter_start %[[GH]] group = "dp" reduction = "mean" parts = 2 : tensor<8xbf16>
// CHECK-NEXT: %[[M:.*]] = merak.mul
// CHECK-NEXT: %[[HH:.*]] = merak.cast %[[M]] : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK-NEXT: %[[Q:.*]] = merak.all_reduce_start %[[HH]] group = "dp" reduction = "mean" : tensor<2x3xbf16>
// CHECK-NEXT: merak.exp
// CHECK-NEXT: %[[W:.*]] = merak.wait %[[R]] : tensor<4xbf16>
// CHECK-NEXT: %[[WF:.*]] = merak.cast %[[W]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[V:.*]] = merak.wait %[[Q]] : tensor<2x3xbf16>
// CHECK-NEXT: %[[VF:.*]] = merak.cast %[[V]] : tensor<2x3xbf16> to tensor<2x3xf32>
// CHECK-NEXT: return %[[WF]], %[[VF]]
// FP32-LABEL: func.func @started
// FP32-NOT: bf16
func.func @started(%g: tensor<8xf32>, %h: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<2x3xf32>) {
  %r = merak.reduce_scatter_start %g group = "dp" reduction = "mean" parts = 2 : tensor<8xf32>
  %m = merak.mul %h, %h : tensor<2x3xf32>, tensor<2x3xf32>
  %q = merak.all_reduce_start %m group = "dp" reduction = "mean" : tensor<2x3xf32>
  %e = merak.exp %h : tensor<2x3xf32>
  %w = merak.wait %r : tensor<4xf32>
  %v = merak.wait %q : tensor<2x3xf32>
  return %w, %v : tensor<4xf32>, tensor<2x3xf32>
}

// -----

// A blocking ZeRO reduce-scatter; an f64 bucket is not narrowed.
// CHECK-LABEL: func.func @zero
// CHECK: merak.reduce_scatter %{{.*}} group = "dp" reduction = "mean" : tensor<8xbf16> -> tensor<4xbf16>
// CHECK: merak.cast %{{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "dp" reduction = "mean" : tensor<8xf64> -> tensor<8xf64>
func.func @zero(%g: tensor<8xf32>, %d: tensor<8xf64>) -> (tensor<4xf32>, tensor<8xf64>) {
  %p = merak.reduce_scatter %g group = "dp" reduction = "mean" : tensor<8xf32> -> tensor<4xf32>
  %q = merak.all_reduce %d group = "dp" reduction = "mean" : tensor<8xf64> -> tensor<8xf64>
  return %p, %q : tensor<4xf32>, tensor<8xf64>
}
