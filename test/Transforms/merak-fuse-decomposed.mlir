// RUN: merak-opt %s -merak-fuse-decomposed -canonicalize -split-input-file | FileCheck %s

// torch's opset-13 LayerNorm, with the affine parameters.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[R:.*]] = merak.layer_norm %[[X]] scale %[[W]] bias %[[B]] axis = 2 epsilon = 9.9999997473787516E-6 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @layer_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = merak.constant dense<2.0> : tensor<f32>
  %eps = merak.constant dense<9.99999974E-6> : tensor<f32>
  %m = merak.reduce_mean %x axes = [2] {keepdims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %d = merak.sub %x, %m : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %p = merak.pow %d, %two : tensor<2x4x8xf32>, tensor<f32>
  %v = merak.reduce_mean %p axes = [2] {keepdims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %a = merak.add %v, %eps : tensor<2x4x1xf32>, tensor<f32>
  %s = merak.sqrt %a : tensor<2x4x1xf32>
  %n = merak.div %d, %s : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %y = merak.mul %n, %w : tensor<2x4x8xf32>, tensor<8xf32>
  %z = merak.add %y, %b : tensor<2x4x8xf32>, tensor<8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// Normalising over two trailing axes, squaring by a multiplication, eps on
// the left, no affine part.
// CHECK-LABEL: func.func @layer_norm_two_axes
// CHECK-NEXT: merak.layer_norm %{{.*}} axis = 1 epsilon = 0.10000000149011612 :
// CHECK-NEXT: return
func.func @layer_norm_two_axes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %eps = merak.constant dense<0.1> : tensor<f32>
  %m = merak.reduce_mean %x axes = [1, 2] {keepdims} : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
  %d = merak.sub %x, %m : tensor<2x3x4xf32>, tensor<2x1x1xf32>
  %p = merak.mul %d, %d : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %v = merak.reduce_mean %p axes = [1, 2] {keepdims} : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
  %a = merak.add %eps, %v : tensor<f32>, tensor<2x1x1xf32>
  %s = merak.sqrt %a : tensor<2x1x1xf32>
  %n = merak.div %d, %s : tensor<2x3x4xf32>, tensor<2x1x1xf32>
  return %n : tensor<2x3x4xf32>
}

// -----

// Not a LayerNorm: the normalised axis is not trailing.
// CHECK-LABEL: func.func @not_trailing
// CHECK-NOT: merak.layer_norm
// CHECK: merak.div
func.func @not_trailing(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = merak.constant dense<2.0> : tensor<f32>
  %eps = merak.constant dense<1.0e-5> : tensor<f32>
  %m = merak.reduce_mean %x axes = [0] {keepdims} : tensor<2x4xf32> -> tensor<1x4xf32>
  %d = merak.sub %x, %m : tensor<2x4xf32>, tensor<1x4xf32>
  %p = merak.pow %d, %two : tensor<2x4xf32>, tensor<f32>
  %v = merak.reduce_mean %p axes = [0] {keepdims} : tensor<2x4xf32> -> tensor<1x4xf32>
  %a = merak.add %v, %eps : tensor<1x4xf32>, tensor<f32>
  %s = merak.sqrt %a : tensor<1x4xf32>
  %n = merak.div %d, %s : tensor<2x4xf32>, tensor<1x4xf32>
  return %n : tensor<2x4xf32>
}

// -----

// Not a LayerNorm: the centred value has another user, and the exponent is
// not 2.
// CHECK-LABEL: func.func @not_layer_norm
// CHECK-NOT: merak.layer_norm
// CHECK: return
func.func @not_layer_norm(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %two = merak.constant dense<2.0> : tensor<f32>
  %three = merak.constant dense<3.0> : tensor<f32>
  %eps = merak.constant dense<1.0e-5> : tensor<f32>
  %m = merak.reduce_mean %x axes = [1] {keepdims} : tensor<2x4xf32> -> tensor<2x1xf32>
  %d = merak.sub %x, %m : tensor<2x4xf32>, tensor<2x1xf32>
  %p = merak.pow %d, %two : tensor<2x4xf32>, tensor<f32>
  %v = merak.reduce_mean %p axes = [1] {keepdims} : tensor<2x4xf32> -> tensor<2x1xf32>
  %a = merak.add %v, %eps : tensor<2x1xf32>, tensor<f32>
  %s = merak.sqrt %a : tensor<2x1xf32>
  %n = merak.div %d, %s : tensor<2x4xf32>, tensor<2x1xf32>
  %d2 = merak.sub %x, %m : tensor<2x4xf32>, tensor<2x1xf32>
  %p2 = merak.pow %d2, %three : tensor<2x4xf32>, tensor<f32>
  %v2 = merak.reduce_mean %p2 axes = [1] {keepdims} : tensor<2x4xf32> -> tensor<2x1xf32>
  %a2 = merak.add %v2, %eps : tensor<2x1xf32>, tensor<f32>
  %s2 = merak.sqrt %a2 : tensor<2x1xf32>
  %n2 = merak.div %d2, %s2 : tensor<2x4xf32>, tensor<2x1xf32>
  return %n, %d, %n2 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// torch's exact GELU: x * (erf(x / sqrt 2) + 1) * 0.5, and the 1/sqrt(2)
// multiplication form with commuted operands.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[G1:.*]] = merak.gelu %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[G2:.*]] = merak.gelu %[[X]] : tensor<4xf32>
// CHECK-NEXT: return %[[G1]], %[[G2]]
func.func @gelu(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %sqrt2 = merak.constant dense<1.41421354> : tensor<f32>
  %isqrt2 = merak.constant dense<0.707106769> : tensor<f32>
  %one = merak.constant dense<1.0> : tensor<f32>
  %half = merak.constant dense<0.5> : tensor<f32>
  %d = merak.div %x, %sqrt2 : tensor<4xf32>, tensor<f32>
  %e = merak.erf %d : tensor<4xf32>
  %a = merak.add %e, %one : tensor<4xf32>, tensor<f32>
  %m = merak.mul %x, %a : tensor<4xf32>, tensor<4xf32>
  %g = merak.mul %m, %half : tensor<4xf32>, tensor<f32>
  %d2 = merak.mul %isqrt2, %x : tensor<f32>, tensor<4xf32>
  %e2 = merak.erf %d2 : tensor<4xf32>
  %a2 = merak.add %one, %e2 : tensor<f32>, tensor<4xf32>
  %m2 = merak.mul %a2, %x : tensor<4xf32>, tensor<4xf32>
  %g2 = merak.mul %half, %m2 : tensor<f32>, tensor<4xf32>
  return %g, %g2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Not GELU: a different constant, and x differs between the two uses.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: merak.gelu
// CHECK: return
func.func @not_gelu(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %two = merak.constant dense<2.0> : tensor<f32>
  %sqrt2 = merak.constant dense<1.41421354> : tensor<f32>
  %one = merak.constant dense<1.0> : tensor<f32>
  %half = merak.constant dense<0.5> : tensor<f32>
  %d = merak.div %x, %two : tensor<4xf32>, tensor<f32>
  %e = merak.erf %d : tensor<4xf32>
  %a = merak.add %e, %one : tensor<4xf32>, tensor<f32>
  %m = merak.mul %x, %a : tensor<4xf32>, tensor<4xf32>
  %g = merak.mul %m, %half : tensor<4xf32>, tensor<f32>
  %d2 = merak.div %y, %sqrt2 : tensor<4xf32>, tensor<f32>
  %e2 = merak.erf %d2 : tensor<4xf32>
  %a2 = merak.add %e2, %one : tensor<4xf32>, tensor<f32>
  %m2 = merak.mul %x, %a2 : tensor<4xf32>, tensor<4xf32>
  %g2 = merak.mul %m2, %half : tensor<4xf32>, tensor<f32>
  return %g, %g2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// T5's RMSNorm as TorchScript exports it: pow(x, 2), mean, + eps, sqrt,
// div(1, .), times x, then the weight.
// CHECK-LABEL: func.func @rms_norm_t5
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[R:.*]] = merak.rms_norm %[[X]] scale %[[W]] axis = 2 epsilon = 9.9999999747524271E-7 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @rms_norm_t5(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %one = merak.constant dense<1.0> : tensor<f32>
  %two = merak.constant dense<2.0> : tensor<f32>
  %eps = merak.constant dense<9.99999997E-7> : tensor<f32>
  %p = merak.pow %x, %two : tensor<2x4x8xf32>, tensor<f32>
  %v = merak.reduce_mean %p axes = [2] {keepdims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %a = merak.add %v, %eps : tensor<2x4x1xf32>, tensor<f32>
  %s = merak.sqrt %a : tensor<2x4x1xf32>
  %r = merak.div %one, %s : tensor<f32>, tensor<2x4x1xf32>
  %n = merak.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  %y = merak.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// The dynamo spelling: reciprocal(sqrt(.)) on the left of the product,
// x * x for the square, eps on the left; Gemma's scale (1 + w).
// CHECK-LABEL: func.func @rms_norm_gemma
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK: %[[S:.*]] = merak.add %{{.*}}, %[[W]]
// CHECK-NEXT: %[[R:.*]] = merak.rms_norm %[[X]] scale %[[S]] axis = 2 epsilon = 9.9999999747524271E-7
// CHECK-NEXT: return %[[R]]
func.func @rms_norm_gemma(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %one = merak.constant dense<1.0> : tensor<f32>
  %eps = merak.constant dense<9.99999997E-7> : tensor<f32>
  %p = merak.mul %x, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %v = merak.reduce_mean %p axes = [2] {keepdims} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %a = merak.add %eps, %v : tensor<f32>, tensor<2x4x1xf32>
  %s = merak.sqrt %a : tensor<2x4x1xf32>
  %r = merak.reciprocal %s : tensor<2x4x1xf32>
  %n = merak.mul %r, %x : tensor<2x4x1xf32>, tensor<2x4x8xf32>
  %w1 = merak.add %one, %w : tensor<f32>, tensor<8xf32>
  %y = merak.mul %n, %w1 : tensor<2x4x8xf32>, tensor<8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// rsqrt, and x divided by the square root: both without a weight.
// CHECK-LABEL: func.func @rms_norm_rsqrt_div
// CHECK-SAME: (%[[X:.*]]: tensor<3x8xf32>)
// CHECK-NEXT: %[[A:.*]] = merak.rms_norm %[[X]] axis = 1 epsilon = 0.10000000149011612
// CHECK-NEXT: %[[B:.*]] = merak.rms_norm %[[X]] axis = 1 epsilon = 0.10000000149011612
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @rms_norm_rsqrt_div(%x: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>) {
  %two = merak.constant dense<2.0> : tensor<f32>
  %eps = merak.constant dense<0.1> : tensor<f32>
  %p = merak.pow %x, %two : tensor<3x8xf32>, tensor<f32>
  %v = merak.reduce_mean %p axes = [1] {keepdims} : tensor<3x8xf32> -> tensor<3x1xf32>
  %a = merak.add %v, %eps : tensor<3x1xf32>, tensor<f32>
  %r = merak.rsqrt %a : tensor<3x1xf32>
  %n = merak.mul %x, %r : tensor<3x8xf32>, tensor<3x1xf32>
  %s = merak.sqrt %a : tensor<3x1xf32>
  %d = merak.div %x, %s : tensor<3x8xf32>, tensor<3x1xf32>
  return %n, %d : tensor<3x8xf32>, tensor<3x8xf32>
}

// -----

// Not an RMSNorm: the mean over a leading axis, and the square of another
// value than the one normalised.
// CHECK-LABEL: func.func @not_rms_norm
// CHECK-NOT: merak.rms_norm
// CHECK: return
func.func @not_rms_norm(%x: tensor<3x8xf32>, %z: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>) {
  %two = merak.constant dense<2.0> : tensor<f32>
  %eps = merak.constant dense<0.1> : tensor<f32>
  %p = merak.pow %x, %two : tensor<3x8xf32>, tensor<f32>
  %v = merak.reduce_mean %p axes = [0] {keepdims} : tensor<3x8xf32> -> tensor<1x8xf32>
  %a = merak.add %v, %eps : tensor<1x8xf32>, tensor<f32>
  %r = merak.rsqrt %a : tensor<1x8xf32>
  %n = merak.mul %x, %r : tensor<3x8xf32>, tensor<1x8xf32>
  %q = merak.pow %z, %two : tensor<3x8xf32>, tensor<f32>
  %u = merak.reduce_mean %q axes = [1] {keepdims} : tensor<3x8xf32> -> tensor<3x1xf32>
  %b = merak.add %u, %eps : tensor<3x1xf32>, tensor<f32>
  %t = merak.rsqrt %b : tensor<3x1xf32>
  %m = merak.mul %x, %t : tensor<3x8xf32>, tensor<3x1xf32>
  return %n, %m : tensor<3x8xf32>, tensor<3x8xf32>
}

// -----

// torch.expm1 and torch.log1p as both exporters write them: exp(x) - 1 and
// log(x + 1) (either order) become the exact-near-0 ops.
// CHECK-LABEL: func.func @expm1_log1p
// CHECK-SAME: (%[[X:.*]]: tensor<3x8xf32>)
// CHECK-DAG: %[[E:.*]] = merak.expm1 %[[X]] : tensor<3x8xf32>
// CHECK-DAG: %[[L:.*]] = merak.log1p %[[X]] : tensor<3x8xf32>
// CHECK-DAG: %[[M:.*]] = merak.log1p %[[X]] : tensor<3x8xf32>
// CHECK-NOT: merak.exp
// CHECK-NOT: merak.log
// CHECK: return %[[E]], %[[L]], %[[M]]
func.func @expm1_log1p(%x: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) {
  %one = merak.constant dense<1.0> : tensor<f32>
  %e = merak.exp %x : tensor<3x8xf32>
  %em = merak.sub %e, %one : tensor<3x8xf32>, tensor<f32>
  %a = merak.add %x, %one : tensor<3x8xf32>, tensor<f32>
  %l = merak.log %a : tensor<3x8xf32>
  %b = merak.add %one, %x : tensor<f32>, tensor<3x8xf32>
  %m = merak.log %b : tensor<3x8xf32>
  return %em, %l, %m : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>
}

// -----

// Not expm1 or log1p: a constant other than 1, 1 - exp(x), an exp read
// elsewhere too, and a sum broadcast wider than x.
// CHECK-LABEL: func.func @not_expm1_log1p
// CHECK-NOT: merak.expm1
// CHECK-NOT: merak.log1p
// CHECK: return
func.func @not_expm1_log1p(%x: tensor<3x8xf32>, %r: tensor<3x1xf32>)
    -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>,
        tensor<3x8xf32>) {
  %one = merak.constant dense<1.0> : tensor<f32>
  %two = merak.constant dense<2.0> : tensor<f32>
  %ones = merak.constant dense<1.0> : tensor<3x8xf32>
  %e = merak.exp %x : tensor<3x8xf32>
  %a = merak.sub %e, %two : tensor<3x8xf32>, tensor<f32>
  %b = merak.sub %one, %e : tensor<f32>, tensor<3x8xf32>
  %f = merak.sub %e, %one : tensor<3x8xf32>, tensor<f32>
  %s = merak.add %r, %ones : tensor<3x1xf32>, tensor<3x8xf32>
  %c = merak.log %s : tensor<3x8xf32>
  %t = merak.add %x, %two : tensor<3x8xf32>, tensor<f32>
  %d = merak.log %t : tensor<3x8xf32>
  return %e, %a, %b, %c, %d, %f : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>,
      tensor<3x8xf32>, tensor<3x8xf32>
}
