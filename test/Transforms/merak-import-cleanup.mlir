// RUN: merak-opt %s -split-input-file -merak-import-cleanup | FileCheck %s

// The pipeline merak-compile runs after import: merak-fold-constants,
// canonicalize, cse, merak-drop-unused-params.

// A typical exported block: a reshape whose target shape is computed from
// constants, a duplicated bias add, a transpose pair that cancels, and an
// initializer read only by dead code.
// CHECK-LABEL: module
// CHECK-NOT: merak.param @shape_only
// CHECK: merak.param @w : tensor<2x3xf32>
// CHECK-NOT: merak.param @shape_only
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[W:.*]] = merak.get_param @w : tensor<2x3xf32>
// CHECK-NEXT: %[[A:.*]] = merak.add %[[X]], %[[W]] : tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = merak.reshape %[[A]] : tensor<2x3xf32> to tensor<3x2xf32>
// CHECK-NEXT: %[[M:.*]] = merak.mul %[[R]], %[[R]] : tensor<3x2xf32>, tensor<3x2xf32>
// CHECK-NEXT: return %[[M]], %[[A]]
merak.param @w : tensor<2x3xf32> = dense<1.0> : tensor<2x3xf32>
merak.param @shape_only : tensor<2xi64> = dense<[3, 2]> : tensor<2xi64>

func.func @forward(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<2x3xf32>) {
  %unused = merak.get_param @shape_only : tensor<2xi64>
  %dead = merak.add %unused, %unused : tensor<2xi64>, tensor<2xi64>
  %w = merak.get_param @w : tensor<2x3xf32>
  %a = merak.add %x, %w : tensor<2x3xf32>, tensor<2x3xf32>
  %a2 = merak.add %x, %w : tensor<2x3xf32>, tensor<2x3xf32>
  // Shape arithmetic: [2, 3] -> gather [1, 0] -> [3, 2], numel 6.
  %shape = merak.constant dense<[2, 3]> : tensor<2xi64>
  %perm = merak.constant dense<[1, 0]> : tensor<2xi64>
  %target = merak.gather %shape[%perm] axis = 0 : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  %numel = merak.reduce_prod %target axes = [0] : tensor<2xi64> -> tensor<i64>
  %flat = merak.reshape %a : tensor<2x3xf32> to tensor<6xf32>
  %r = merak.reshape %flat : tensor<6xf32> to tensor<3x2xf32>
  %t0 = merak.transpose %r perm = [1, 0] : tensor<3x2xf32> to tensor<2x3xf32>
  %t1 = merak.transpose %t0 perm = [1, 0] : tensor<2x3xf32> to tensor<3x2xf32>
  %m = merak.mul %t1, %r : tensor<3x2xf32>, tensor<3x2xf32>
  return %m, %a2 : tensor<3x2xf32>, tensor<2x3xf32>
}

// -----

// Constant subgraphs fold to one constant; equal constants are shared and
// dead ones removed.
// CHECK-LABEL: func.func @shapes
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<[4, 8]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]], %[[C]]
func.func @shapes() -> (tensor<2xi64>, tensor<2xi64>) {
  %a = merak.constant dense<[2, 4]> : tensor<2xi64>
  %two = merak.constant dense<2> : tensor<i64>
  %0 = merak.mul %a, %two : tensor<2xi64>, tensor<i64>
  %b = merak.constant dense<[4, 8]> : tensor<2xi64>
  %1 = merak.max %b, %a : tensor<2xi64>, tensor<2xi64>
  return %0, %1 : tensor<2xi64>, tensor<2xi64>
}

// -----

// A parameter-dependent value is never folded, and its parameter stays.
// CHECK-LABEL: module
// CHECK: merak.param @gamma
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = merak.get_param @gamma
// CHECK: %[[C:.*]] = merak.cast %[[G]] : tensor<4xf32> to tensor<4xf16>
// CHECK: return %[[C]]
merak.param @gamma : tensor<4xf32> = dense<1.0> : tensor<4xf32>

func.func @forward() -> tensor<4xf16> {
  %g = merak.get_param @gamma : tensor<4xf32>
  %0 = merak.cast %g : tensor<4xf32> to tensor<4xf16>
  return %0 : tensor<4xf16>
}
