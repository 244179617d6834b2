// RUN: merak-opt --merak-autodiff -split-input-file -verify-diagnostics %s | FileCheck %s
// RUN: merak-opt --merak-autodiff=entry=train %S/Inputs/entry.mlir | FileCheck %S/Inputs/entry.mlir --check-prefix=ENTRY

// Structure of the function merak-autodiff adds, and its diagnostics.
// (Gradient values are checked by the gradcheck tests in this directory.)

// @forward stays as it was; @forward_grad has the same arguments and
// returns the loss and one gradient per merak.param, in module order,
// named "grad:<param>" (a quoted name too). A parameter the loss does not
// depend on (@q: only the second result reads it; @"h.0.w": nobody does)
// gets zeros; the integer buffer @pos gets integer zeros.
// Ops that are not on a parameter -> loss path are not differentiated: the
// sin of the argument (its rule would emit a cos), the cos of @q (its rule
// would emit a sin), and the conv2d of the arguments (it has no rule, so
// differentiating it would be an error).

// CHECK-LABEL: func.func @forward(%arg0: tensor<3xf64>, %arg1: tensor<1x1x3x3xf32>, %arg2: tensor<1x1x2x2xf32>)
// CHECK-SAME: -> (tensor<f64>, tensor<3xf64>, tensor<1x1x2x2xf32>)
// CHECK-NOT: merak.constant
// CHECK: return
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<3xf64>, %arg1: tensor<1x1x3x3xf32>, %arg2: tensor<1x1x2x2xf32>)
// CHECK-SAME: -> (tensor<f64> {merak.name = "loss"}, tensor<3xf64> {merak.name = "grad:p"}, tensor<3xf64> {merak.name = "grad:q"}, tensor<2x2xf64> {merak.name = "grad:h.0.w"}, tensor<3xi64> {merak.name = "grad:pos"}) {
// CHECK: %[[P:.*]] = merak.get_param @p
// CHECK: %[[Q:.*]] = merak.get_param @q
// CHECK: %[[SIN:.*]] = merak.sin %arg0
// CHECK: merak.mul %[[SIN]], %[[P]]
// CHECK: merak.cos %[[Q]]
// CHECK: %[[LOSS:.*]] = merak.reduce_sum
// CHECK: merak.conv2d
// CHECK-NOT: merak.sin
// CHECK-NOT: merak.cos
// CHECK: %[[ONE:.*]] = merak.constant dense<1.000000e+00> : tensor<f64>
// CHECK-NOT: merak.sin
// CHECK-NOT: merak.cos
// CHECK: %[[GP:.*]] = merak.mul %{{.*}}, %[[SIN]]
// CHECK-NOT: merak.sin
// CHECK-NOT: merak.cos
// CHECK-DAG: %[[GQ:.*]] = merak.constant dense<0.000000e+00> : tensor<3xf64>
// CHECK-DAG: %[[GH:.*]] = merak.constant dense<0.000000e+00> : tensor<2x2xf64>
// CHECK-DAG: %[[GPOS:.*]] = merak.constant dense<0> : tensor<3xi64>
// CHECK: return %[[LOSS]], %[[GP]], %[[GQ]], %[[GH]], %[[GPOS]] : tensor<f64>, tensor<3xf64>, tensor<3xf64>, tensor<2x2xf64>, tensor<3xi64>
// CHECK-NEXT: }
merak.param @p : tensor<3xf64> = dense<[0.5, -1.0, 1.5]> : tensor<3xf64>
merak.param @q : tensor<3xf64> = dense<[0.25, 0.75, -0.5]> : tensor<3xf64>
merak.param @"h.0.w" : tensor<2x2xf64> = dense<1.0> : tensor<2x2xf64>
merak.param @pos : tensor<3xi64> = dense<[0, 1, 2]> : tensor<3xi64>
func.func @forward(%x: tensor<3xf64>, %img: tensor<1x1x3x3xf32>, %k: tensor<1x1x2x2xf32>)
    -> (tensor<f64>, tensor<3xf64>, tensor<1x1x2x2xf32>) {
  %p = merak.get_param @p : tensor<3xf64>
  %q = merak.get_param @q : tensor<3xf64>
  %a = merak.sin %x : tensor<3xf64>
  %b = merak.mul %a, %p : tensor<3xf64>, tensor<3xf64>
  %c = merak.cos %q : tensor<3xf64>
  %l = merak.reduce_sum %b axes = [0] : tensor<3xf64> -> tensor<f64>
  %conv = merak.conv2d %img, %k strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %l, %c, %conv : tensor<f64>, tensor<3xf64>, tensor<1x1x2x2xf32>
}

// -----

// Tied weights: the gradients of the two reads of @w are added; an f32
// model gets an f32 seed and f32 gradients. A conv2d of a parameter whose
// result does not reach the loss (only the second result) is no error.
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<2xf32>, %arg1: tensor<1x1x3x3xf32>)
// CHECK-SAME: -> (tensor<f32> {merak.name = "loss"}, tensor<2xf32> {merak.name = "grad:w"}, tensor<1x1x2x2xf32> {merak.name = "grad:k"})
// CHECK: merak.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SUM:.*]] = merak.add %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xf32>
// CHECK: %[[ZK:.*]] = merak.constant dense<0.000000e+00> : tensor<1x1x2x2xf32>
// CHECK: return %{{.*}}, %[[SUM]], %[[ZK]] :
merak.param @w : tensor<2xf32> = dense<[0.5, -1.0]> : tensor<2xf32>
merak.param @k : tensor<1x1x2x2xf32> = dense<0.25> : tensor<1x1x2x2xf32>
func.func @forward(%x: tensor<2xf32>, %img: tensor<1x1x3x3xf32>) -> (tensor<f32>, tensor<1x1x2x2xf32>) {
  %w0 = merak.get_param @w : tensor<2xf32>
  %w1 = merak.get_param @w : tensor<2xf32>
  %k = merak.get_param @k : tensor<1x1x2x2xf32>
  %0 = merak.mul %x, %w0 : tensor<2xf32>, tensor<2xf32>
  %1 = merak.mul %0, %w1 : tensor<2xf32>, tensor<2xf32>
  %l = merak.reduce_sum %1 axes = [0] : tensor<2xf32> -> tensor<f32>
  %conv = merak.conv2d %img, %k strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %l, %conv : tensor<f32>, tensor<1x1x2x2xf32>
}

// -----

// A loss that depends on no parameter: every gradient is zero, and no
// backward op is emitted for the ops on the argument.
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<3xf64>) -> (tensor<f64> {merak.name = "loss"}, tensor<3xf64> {merak.name = "grad:unused"})
// CHECK: %[[E:.*]] = merak.exp %arg0
// CHECK: %[[L:.*]] = merak.reduce_sum %[[E]]
// CHECK-NOT: merak.mul
// CHECK: %[[Z:.*]] = merak.constant dense<0.000000e+00> : tensor<3xf64>
// CHECK-NOT: merak.mul
// CHECK: return %[[L]], %[[Z]]
merak.param @unused : tensor<3xf64> = dense<2.0> : tensor<3xf64>
func.func @forward(%x: tensor<3xf64>) -> tensor<f64> {
  %e = merak.exp %x : tensor<3xf64>
  %l = merak.reduce_sum %e axes = [0] : tensor<3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// A module without parameters: @forward_grad returns just the loss.
// CHECK-LABEL: func.func @forward_grad(%arg0: tensor<f64>) -> (tensor<f64> {merak.name = "loss"})
// CHECK: return %{{.*}} : tensor<f64>
func.func @forward(%x: tensor<f64>) -> tensor<f64> {
  %0 = merak.mul %x, %x : tensor<f64>, tensor<f64>
  return %0 : tensor<f64>
}

// -----

// No function named by the entry option.
// expected-error @+1 {{merak-autodiff: no func.func @forward}}
module {
  func.func @train(%x: tensor<f64>) -> tensor<f64> {
    return %x : tensor<f64>
  }
}

// -----

// The first result must be a scalar float: not a vector...
merak.param @p : tensor<3xf64> = dense<1.0> : tensor<3xf64>
// expected-error @+1 {{merak-autodiff: the first result of @forward must be a scalar floating-point loss}}
func.func @forward() -> tensor<3xf64> {
  %p = merak.get_param @p : tensor<3xf64>
  return %p : tensor<3xf64>
}

// -----

// ... nor a rank-1 tensor of one element...
merak.param @p : tensor<1xf64> = dense<1.0> : tensor<1xf64>
// expected-error @+1 {{merak-autodiff: the first result of @forward must be a scalar floating-point loss}}
func.func @forward() -> (tensor<1xf64>, tensor<f64>) {
  %p = merak.get_param @p : tensor<1xf64>
  %s = merak.reduce_sum %p axes = [0] : tensor<1xf64> -> tensor<f64>
  return %p, %s : tensor<1xf64>, tensor<f64>
}

// -----

// ... nor an integer scalar...
// expected-error @+1 {{merak-autodiff: the first result of @forward must be a scalar floating-point loss}}
func.func @forward(%x: tensor<i64>) -> tensor<i64> {
  return %x : tensor<i64>
}

// -----

// ... and there must be a result.
// expected-error @+1 {{merak-autodiff: the first result of @forward must be a scalar floating-point loss}}
func.func @forward() {
  return
}

// -----

// An op without a derivative rule on a parameter -> loss path: rem.
merak.param @k : tensor<3xf64> = dense<0.25> : tensor<3xf64>
func.func @forward(%x: tensor<3xf64>) -> tensor<f64> {
  %k = merak.get_param @k : tensor<3xf64>
  // expected-error @+2 {{merak-autodiff: no derivative rule for 1 op kind(s) on the path to the loss: 'merak.rem' (1x)}}
  // expected-note @+1 {{first 'merak.rem' here}}
  %0 = merak.rem %x, %k : tensor<3xf64>, tensor<3xf64>
  %l = merak.reduce_sum %0 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// reduce_prod, after ops that do have rules.
merak.param @p : tensor<3xf64> = dense<[1.0, 2.0, 3.0]> : tensor<3xf64>
func.func @forward() -> tensor<f64> {
  %p = merak.get_param @p : tensor<3xf64>
  %0 = merak.exp %p : tensor<3xf64>
  // expected-error @+2 {{merak-autodiff: no derivative rule for 1 op kind(s) on the path to the loss: 'merak.reduce_prod' (1x)}}
  // expected-note @+1 {{first 'merak.reduce_prod' here}}
  %1 = merak.reduce_prod %0 axes = [0] : tensor<3xf64> -> tensor<f64>
  %2 = merak.log %1 : tensor<f64>
  return %2 : tensor<f64>
}

// -----

// Every op kind without a rule is listed at once, with its count: rem
// twice, then reduce_prod.
merak.param @q : tensor<3xf64> = dense<[1.0, 2.0, 3.0]> : tensor<3xf64>
func.func @forward(%x: tensor<3xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<3xf64>
  // expected-error @+2 {{merak-autodiff: no derivative rule for 2 op kind(s) on the path to the loss: 'merak.rem' (2x) 'merak.reduce_prod' (1x)}}
  // expected-note @+1 {{first 'merak.rem' here}}
  %0 = merak.rem %x, %q : tensor<3xf64>, tensor<3xf64>
  %1 = merak.rem %0, %q : tensor<3xf64>, tensor<3xf64>
  // expected-note @+1 {{first 'merak.reduce_prod' here}}
  %2 = merak.reduce_prod %1 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %2 : tensor<f64>
}
