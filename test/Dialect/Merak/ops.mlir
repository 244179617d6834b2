// RUN: merak-opt %s | merak-opt | FileCheck %s
// RUN: merak-opt %s --mlir-print-op-generic | merak-opt | FileCheck %s

// Round trip of every merak op: the custom form parses, prints, and parses
// again; the generic form of the same module reads back to the same text.

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

// CHECK: merak.param @h.0.attn.weight : tensor<2x2xf32> = dense_resource<attn_w> : tensor<2x2xf32>
merak.param @"h.0.attn.weight" : tensor<2x2xf32> = dense_resource<attn_w> : tensor<2x2xf32>
// CHECK: merak.param @steps : tensor<3xi64> = dense<[1, 2, 3]> : tensor<3xi64>
merak.param @steps : tensor<3xi64> = dense<[1, 2, 3]> : tensor<3xi64>
// CHECK: merak.param @half : tensor<2xf16> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf16>
merak.param @half : tensor<2xf16> = dense<[1.0, 2.0]> : tensor<2xf16>

// CHECK-LABEL: func.func @params
func.func @params() -> (tensor<2x2xf32>, tensor<3xi64>, tensor<2xf16>) {
  // CHECK: %[[W:.*]] = merak.get_param @h.0.attn.weight : tensor<2x2xf32>
  %w = merak.get_param @"h.0.attn.weight" : tensor<2x2xf32>
  // CHECK: %[[S:.*]] = merak.get_param @steps : tensor<3xi64>
  %s = merak.get_param @steps : tensor<3xi64>
  // CHECK: %[[H:.*]] = merak.get_param @half : tensor<2xf16>
  %h = merak.get_param @half : tensor<2xf16>
  // CHECK: return %[[W]], %[[S]], %[[H]]
  return %w, %s, %h : tensor<2x2xf32>, tensor<3xi64>, tensor<2xf16>
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<2xf32>, tensor<2x2xf16>, tensor<bf16>, tensor<3xf64>, tensor<2xi64>, tensor<2xi32>, tensor<3xi1>) {
  // CHECK: merak.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf32>
  %0 = merak.constant dense<[1.5, -2.0]> : tensor<2xf32>
  // CHECK: merak.constant dense<5.000000e-01> : tensor<2x2xf16>
  %1 = merak.constant dense<0.5> : tensor<2x2xf16>
  // CHECK: merak.constant dense<3.000000e+00> : tensor<bf16>
  %2 = merak.constant dense<3.0> : tensor<bf16>
  // CHECK: merak.constant dense<[1.000000e+00, 2.500000e-01, -8.000000e+00]> : tensor<3xf64>
  %3 = merak.constant dense<[1.0, 0.25, -8.0]> : tensor<3xf64>
  // CHECK: merak.constant dense<[-1, 9223372036854775807]> : tensor<2xi64>
  %4 = merak.constant dense<[-1, 9223372036854775807]> : tensor<2xi64>
  // CHECK: merak.constant dense<[7, -7]> : tensor<2xi32>
  %5 = merak.constant dense<[7, -7]> : tensor<2xi32>
  // CHECK: merak.constant dense<[true, false, true]> : tensor<3xi1>
  %6 = merak.constant dense<[true, false, true]> : tensor<3xi1>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2xf32>, tensor<2x2xf16>, tensor<bf16>, tensor<3xf64>, tensor<2xi64>, tensor<2xi32>, tensor<3xi1>
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @arith
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<4x1xi64>, %[[J:.*]]: tensor<5xi64>, %[[K:.*]]: tensor<2xi32>, %[[D:.*]]: tensor<f64>, %[[E:.*]]: tensor<2xbf16>)
func.func @arith(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<4x1xi64>, %j: tensor<5xi64>,
                 %k: tensor<2xi32>, %d: tensor<f64>, %e: tensor<2xbf16>) {
  // CHECK: merak.add %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32>
  %0 = merak.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: merak.sub %[[I]], %[[J]] : tensor<4x1xi64>, tensor<5xi64>
  %1 = merak.sub %i, %j : tensor<4x1xi64>, tensor<5xi64>
  // CHECK: merak.mul %[[K]], %[[K]] : tensor<2xi32>, tensor<2xi32>
  %2 = merak.mul %k, %k : tensor<2xi32>, tensor<2xi32>
  // CHECK: merak.div %[[D]], %[[D]] : tensor<f64>, tensor<f64>
  %3 = merak.div %d, %d : tensor<f64>, tensor<f64>
  // CHECK: merak.pow %[[E]], %[[E]] : tensor<2xbf16>, tensor<2xbf16>
  %4 = merak.pow %e, %e : tensor<2xbf16>, tensor<2xbf16>
  // CHECK: merak.max %[[B]], %[[A]] : tensor<3xf32>, tensor<2x3xf32>
  %5 = merak.max %b, %a : tensor<3xf32>, tensor<2x3xf32>
  // CHECK: merak.min %[[J]], %[[I]] : tensor<5xi64>, tensor<4x1xi64>
  %6 = merak.min %j, %i : tensor<5xi64>, tensor<4x1xi64>
  return
}

// CHECK-LABEL: func.func @compare
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<4xi64>, %[[P:.*]]: tensor<4xi1>, %[[H:.*]]: tensor<1x4xf16>)
func.func @compare(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<4xi64>, %p: tensor<4xi1>,
                   %h: tensor<1x4xf16>) {
  // CHECK: merak.eq %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32>
  %0 = merak.eq %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: merak.ne %[[P]], %[[P]] : tensor<4xi1>, tensor<4xi1>
  %1 = merak.ne %p, %p : tensor<4xi1>, tensor<4xi1>
  // CHECK: merak.lt %[[I]], %[[I]] : tensor<4xi64>, tensor<4xi64>
  %2 = merak.lt %i, %i : tensor<4xi64>, tensor<4xi64>
  // CHECK: merak.le %[[H]], %[[H]] : tensor<1x4xf16>, tensor<1x4xf16>
  %3 = merak.le %h, %h : tensor<1x4xf16>, tensor<1x4xf16>
  // CHECK: merak.gt %[[B]], %[[A]] : tensor<3xf32>, tensor<2x3xf32>
  %4 = merak.gt %b, %a : tensor<3xf32>, tensor<2x3xf32>
  // CHECK: merak.ge %[[I]], %[[I]] : tensor<4xi64>, tensor<4xi64>
  %5 = merak.ge %i, %i : tensor<4xi64>, tensor<4xi64>
  return
}

// CHECK-LABEL: func.func @logical
// CHECK-SAME: (%[[P:.*]]: tensor<2x4xi1>, %[[Q:.*]]: tensor<4xi1>)
func.func @logical(%p: tensor<2x4xi1>, %q: tensor<4xi1>) -> (tensor<2x4xi1>, tensor<2x4xi1>, tensor<2x4xi1>) {
  // CHECK: %[[AND:.*]] = merak.and %[[P]], %[[Q]] : tensor<2x4xi1>, tensor<4xi1>
  %0 = merak.and %p, %q : tensor<2x4xi1>, tensor<4xi1>
  // CHECK: %[[OR:.*]] = merak.or %[[Q]], %[[P]] : tensor<4xi1>, tensor<2x4xi1>
  %1 = merak.or %q, %p : tensor<4xi1>, tensor<2x4xi1>
  // CHECK: %[[XOR:.*]] = merak.xor %[[AND]], %[[OR]] : tensor<2x4xi1>, tensor<2x4xi1>
  %2 = merak.xor %0, %1 : tensor<2x4xi1>, tensor<2x4xi1>
  // CHECK: return %[[AND]], %[[OR]], %[[XOR]]
  return %0, %1, %2 : tensor<2x4xi1>, tensor<2x4xi1>, tensor<2x4xi1>
}

// CHECK-LABEL: func.func @where
// CHECK-SAME: (%[[C:.*]]: tensor<2x1xi1>, %[[X:.*]]: tensor<3xi32>, %[[Y:.*]]: tensor<1xi32>)
func.func @where(%c: tensor<2x1xi1>, %x: tensor<3xi32>, %y: tensor<1xi32>) -> tensor<2x3xi32> {
  // CHECK: merak.where %[[C]], %[[X]], %[[Y]] : tensor<2x1xi1>, tensor<3xi32>, tensor<1xi32>
  %0 = merak.where %c, %x, %y : tensor<2x1xi1>, tensor<3xi32>, tensor<1xi32>
  return %0 : tensor<2x3xi32>
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @unary_float
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[H:.*]]: tensor<2x2xf16>, %[[B:.*]]: tensor<3xbf16>, %[[D:.*]]: tensor<f64>)
func.func @unary_float(%x: tensor<4xf32>, %h: tensor<2x2xf16>, %b: tensor<3xbf16>, %d: tensor<f64>) {
  // CHECK: merak.exp %[[X]] : tensor<4xf32>
  %0 = merak.exp %x : tensor<4xf32>
  // CHECK: merak.log %[[H]] : tensor<2x2xf16>
  %1 = merak.log %h : tensor<2x2xf16>
  // CHECK: merak.sqrt %[[B]] : tensor<3xbf16>
  %2 = merak.sqrt %b : tensor<3xbf16>
  // CHECK: merak.rsqrt %[[D]] : tensor<f64>
  %3 = merak.rsqrt %d : tensor<f64>
  // CHECK: merak.tanh %[[X]] : tensor<4xf32>
  %4 = merak.tanh %x : tensor<4xf32>
  // CHECK: merak.erf %[[X]] : tensor<4xf32>
  %5 = merak.erf %x : tensor<4xf32>
  // CHECK: merak.sigmoid %[[H]] : tensor<2x2xf16>
  %6 = merak.sigmoid %h : tensor<2x2xf16>
  // CHECK: merak.reciprocal %[[D]] : tensor<f64>
  %7 = merak.reciprocal %d : tensor<f64>
  // CHECK: merak.sin %[[X]] : tensor<4xf32>
  %8 = merak.sin %x : tensor<4xf32>
  // CHECK: merak.cos %[[X]] : tensor<4xf32>
  %9 = merak.cos %x : tensor<4xf32>
  // CHECK: merak.floor %[[B]] : tensor<3xbf16>
  %10 = merak.floor %b : tensor<3xbf16>
  // CHECK: merak.ceil %[[B]] : tensor<3xbf16>
  %11 = merak.ceil %b : tensor<3xbf16>
  // CHECK: merak.asin %[[X]] : tensor<4xf32>
  %12 = merak.asin %x : tensor<4xf32>
  // CHECK: merak.acos %[[D]] : tensor<f64>
  %13 = merak.acos %d : tensor<f64>
  // CHECK: merak.atan %[[H]] : tensor<2x2xf16>
  %14 = merak.atan %h : tensor<2x2xf16>
  return
}

// CHECK-LABEL: func.func @unary_numeric
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi64>, %[[J:.*]]: tensor<2xi32>, %[[P:.*]]: tensor<4xi1>)
func.func @unary_numeric(%x: tensor<4xf32>, %i: tensor<4xi64>, %j: tensor<2xi32>, %p: tensor<4xi1>) {
  // CHECK: merak.relu %[[X]] : tensor<4xf32>
  %0 = merak.relu %x : tensor<4xf32>
  // CHECK: merak.relu %[[I]] : tensor<4xi64>
  %1 = merak.relu %i : tensor<4xi64>
  // CHECK: merak.neg %[[J]] : tensor<2xi32>
  %2 = merak.neg %j : tensor<2xi32>
  // CHECK: merak.abs %[[X]] : tensor<4xf32>
  %3 = merak.abs %x : tensor<4xf32>
  // CHECK: merak.sign %[[I]] : tensor<4xi64>
  %4 = merak.sign %i : tensor<4xi64>
  // CHECK: merak.not %[[P]] : tensor<4xi1>
  %5 = merak.not %p : tensor<4xi1>
  return
}

// CHECK-LABEL: func.func @activations
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi64>)
func.func @activations(%x: tensor<4xf32>, %i: tensor<4xi64>) {
  // CHECK: merak.gelu %[[X]] : tensor<4xf32>
  %0 = merak.gelu %x : tensor<4xf32>
  // CHECK: merak.gelu %[[X]] {approximate_tanh} : tensor<4xf32>
  %1 = merak.gelu %x {approximate_tanh} : tensor<4xf32>
  // CHECK: merak.leaky_relu %[[X]] {alpha = 1.000000e-02 : f64} : tensor<4xf32>
  %2 = merak.leaky_relu %x {alpha = 0.01 : f64} : tensor<4xf32>
  // CHECK: merak.clamp %[[X]] {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4xf32>
  %3 = merak.clamp %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4xf32>
  // CHECK: merak.clamp %[[X]] {min = -1.000000e+00 : f64} : tensor<4xf32>
  %4 = merak.clamp %x {min = -1.0 : f64} : tensor<4xf32>
  // CHECK: merak.clamp %[[I]] {max = 3.000000e+00 : f64} : tensor<4xi64>
  %5 = merak.clamp %i {max = 3.0 : f64} : tensor<4xi64>
  // CHECK: merak.clamp %[[X]] : tensor<4xf32>
  %6 = merak.clamp %x : tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[I:.*]]: tensor<2xi64>, %[[P:.*]]: tensor<2xi1>)
func.func @cast(%x: tensor<2x3xf32>, %i: tensor<2xi64>, %p: tensor<2xi1>) {
  // CHECK: merak.cast %[[X]] : tensor<2x3xf32> to tensor<2x3xbf16>
  %0 = merak.cast %x : tensor<2x3xf32> to tensor<2x3xbf16>
  // CHECK: merak.cast %[[X]] : tensor<2x3xf32> to tensor<2x3xi32>
  %1 = merak.cast %x : tensor<2x3xf32> to tensor<2x3xi32>
  // CHECK: merak.cast %[[I]] : tensor<2xi64> to tensor<2xf64>
  %2 = merak.cast %i : tensor<2xi64> to tensor<2xf64>
  // CHECK: merak.cast %[[I]] : tensor<2xi64> to tensor<2xi1>
  %3 = merak.cast %i : tensor<2xi64> to tensor<2xi1>
  // CHECK: merak.cast %[[P]] : tensor<2xi1> to tensor<2xf16>
  %4 = merak.cast %p : tensor<2xi1> to tensor<2xf16>
  return
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[Y:.*]]: tensor<3x1xi64>)
func.func @reshape_broadcast(%x: tensor<2x3xf32>, %y: tensor<3x1xi64>) {
  // CHECK: merak.reshape %[[X]] : tensor<2x3xf32> to tensor<6xf32>
  %0 = merak.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  // CHECK: merak.reshape %[[X]] : tensor<2x3xf32> to tensor<3x1x2xf32>
  %1 = merak.reshape %x : tensor<2x3xf32> to tensor<3x1x2xf32>
  // CHECK: merak.broadcast %[[Y]] : tensor<3x1xi64> to tensor<2x3x4xi64>
  %2 = merak.broadcast %y : tensor<3x1xi64> to tensor<2x3x4xi64>
  return
}

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  // CHECK: merak.transpose %[[X]] perm = [2, 0, 1] : tensor<2x3x4xf32> to tensor<4x2x3xf32>
  %0 = merak.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> to tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>)
func.func @slice(%x: tensor<4x6xf32>) {
  // CHECK: merak.slice %[[X]] starts = [1, 0] limits = [3, 6] strides = [1, 2] : tensor<4x6xf32> to tensor<2x3xf32>
  %0 = merak.slice %x starts = [1, 0] limits = [3, 6] strides = [1, 2] : tensor<4x6xf32> to tensor<2x3xf32>
  // CHECK: merak.slice %[[X]] starts = [3, 5] limits = [-1, 0] strides = [-1, -2] : tensor<4x6xf32> to tensor<4x3xf32>
  %1 = merak.slice %x starts = [3, 5] limits = [-1, 0] strides = [-1, -2] : tensor<4x6xf32> to tensor<4x3xf32>
  // CHECK: merak.slice %[[X]] starts = [2, 0] limits = [2, 6] strides = [1, 1] : tensor<4x6xf32> to tensor<0x6xf32>
  %2 = merak.slice %x starts = [2, 0] limits = [2, 6] strides = [1, 1] : tensor<4x6xf32> to tensor<0x6xf32>
  return
}

// CHECK-LABEL: func.func @concat_split
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[Y:.*]]: tensor<2x1xf32>)
func.func @concat_split(%x: tensor<2x3xf32>, %y: tensor<2x1xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x1xf32>) {
  // CHECK: %[[C:.*]] = merak.concat %[[X]], %[[Y]], %[[X]] axis = 1 : tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x3xf32> -> tensor<2x7xf32>
  %0 = merak.concat %x, %y, %x axis = 1 : tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x3xf32> -> tensor<2x7xf32>
  // CHECK: %[[S:.*]]:3 = merak.split %[[C]] axis = 1 sizes = [1, 2, 4] : tensor<2x7xf32> -> tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x4xf32>
  %1:3 = merak.split %0 axis = 1 sizes = [1, 2, 4] : tensor<2x7xf32> -> tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x4xf32>
  // CHECK: merak.split %[[X]] axis = 0 sizes = [2] : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = merak.split %x axis = 0 sizes = [2] : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: return %[[S]]#0, %[[S]]#1, %[[Y]]
  return %1#0, %1#1, %y : tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x1xf32>
}

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[E:.*]]: tensor<10x4xf32>, %[[T:.*]]: tensor<2x3xi64>, %[[D:.*]]: tensor<3x5xi32>, %[[I:.*]]: tensor<3x2xi32>)
func.func @gather(%e: tensor<10x4xf32>, %t: tensor<2x3xi64>, %d: tensor<3x5xi32>, %i: tensor<3x2xi32>) {
  // CHECK: merak.gather %[[E]][%[[T]]] axis = 0 : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %0 = merak.gather %e[%t] axis = 0 : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  // CHECK: merak.gather %[[D]][%[[I]]] axis = 1 : tensor<3x5xi32>, tensor<3x2xi32> -> tensor<3x3x2xi32>
  %1 = merak.gather %d[%i] axis = 1 : tensor<3x5xi32>, tensor<3x2xi32> -> tensor<3x3x2xi32>
  // CHECK: merak.gather_elements %[[D]][%[[I]]] axis = 1 : tensor<3x5xi32>, tensor<3x2xi32> -> tensor<3x2xi32>
  %2 = merak.gather_elements %d[%i] axis = 1 : tensor<3x5xi32>, tensor<3x2xi32> -> tensor<3x2xi32>
  return
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[I:.*]]: tensor<5xi64>)
func.func @reductions(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>) {
  // CHECK: merak.reduce_sum %[[X]] axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %0 = merak.reduce_sum %x axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  // CHECK: merak.reduce_mean %[[X]] axes = [0, 2] {keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %1 = merak.reduce_mean %x axes = [0, 2] {keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  // CHECK: merak.reduce_max %[[I]] axes = [0] : tensor<5xi64> -> tensor<i64>
  %2 = merak.reduce_max %i axes = [0] : tensor<5xi64> -> tensor<i64>
  // CHECK: merak.reduce_min %[[X]] axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  %3 = merak.reduce_min %x axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  // CHECK: merak.reduce_prod %[[X]] axes = [] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %4 = merak.reduce_prod %x axes = [] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  // CHECK: merak.argmax %[[X]] axis = 2 : tensor<2x3x4xf32> -> tensor<2x3xi64>
  %5 = merak.argmax %x axis = 2 : tensor<2x3x4xf32> -> tensor<2x3xi64>
  // CHECK: merak.argmax %[[I]] axis = 0 {keepdims, select_last_index} : tensor<5xi64> -> tensor<1xi64>
  %6 = merak.argmax %i axis = 0 {keepdims, select_last_index} : tensor<5xi64> -> tensor<1xi64>
  // CHECK: merak.argmin %[[X]] axis = 1 {keepdims} : tensor<2x3x4xf32> -> tensor<2x1x4xi64>
  %7 = merak.argmin %x axis = 1 {keepdims} : tensor<2x3x4xf32> -> tensor<2x1x4xi64>
  // CHECK: merak.cumsum %[[X]] axis = 2 {exclusive, reverse} : tensor<2x3x4xf32>
  %8 = merak.cumsum %x axis = 2 {exclusive, reverse} : tensor<2x3x4xf32>
  // CHECK: merak.argsort %[[X]] axis = 1 : tensor<2x3x4xf32> -> tensor<2x3x4xi64>
  %9 = merak.argsort %x axis = 1 : tensor<2x3x4xf32> -> tensor<2x3x4xi64>
  // CHECK: merak.argsort %[[I]] axis = 0 {descending} : tensor<5xi64> -> tensor<5xi64>
  %10 = merak.argsort %i axis = 0 {descending} : tensor<5xi64> -> tensor<5xi64>
  return
}

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<2x5xf32>, %[[H:.*]]: tensor<3xf16>)
func.func @softmax(%x: tensor<2x5xf32>, %h: tensor<3xf16>) {
  // CHECK: merak.softmax %[[X]] axis = 1 : tensor<2x5xf32>
  %0 = merak.softmax %x axis = 1 : tensor<2x5xf32>
  // CHECK: merak.log_softmax %[[H]] axis = 0 : tensor<3xf16>
  %1 = merak.log_softmax %h axis = 0 : tensor<3xf16>
  return
}

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[S:.*]]: tensor<3x4xf32>, %[[B:.*]]: tensor<4xf32>)
func.func @layer_norm(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // CHECK: merak.layer_norm %[[X]] axis = 2 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %0 = merak.layer_norm %x axis = 2 epsilon = 1.0e-5 : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: merak.layer_norm %[[X]] scale %[[S]] axis = 1 epsilon = 0.000000e+00 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %1 = merak.layer_norm %x scale %s axis = 1 epsilon = 0.0 : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: merak.layer_norm %[[X]] bias %[[B]] axis = 2 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %2 = merak.layer_norm %x bias %b axis = 2 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: merak.layer_norm %[[X]] scale %[[B]] bias %[[B]] axis = 2 epsilon = 1.000000e-05 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %3 = merak.layer_norm %x scale %b bias %b axis = 2 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xbf16>, %[[S:.*]]: tensor<4xbf16>)
func.func @rms_norm(%x: tensor<2x4xbf16>, %s: tensor<4xbf16>) {
  // CHECK: merak.rms_norm %[[X]] axis = 1 epsilon = 1.000000e-05 : (tensor<2x4xbf16>) -> tensor<2x4xbf16>
  %0 = merak.rms_norm %x axis = 1 epsilon = 1.0e-5 : (tensor<2x4xbf16>) -> tensor<2x4xbf16>
  // CHECK: merak.rms_norm %[[X]] scale %[[S]] axis = 1 epsilon = 1.000000e-05 : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %1 = merak.rms_norm %x scale %s axis = 1 epsilon = 1.0e-5 : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  return
}

// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x4xf32>, %[[C:.*]]: tensor<3xf32>)
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) {
  // CHECK: merak.batch_norm %[[X]], %[[C]], %[[C]], %[[C]], %[[C]] epsilon = 1.000000e-05 : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %0 = merak.batch_norm %x, %c, %c, %c, %c epsilon = 1.0e-5 : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: merak.batch_norm %[[X]], %[[C]], %[[C]], %[[C]], %[[C]] epsilon = 1.000000e-05 {training} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %1 = merak.batch_norm %x, %c, %c, %c, %c epsilon = 1.0e-5 {training} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Contraction, convolution, pooling
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: tensor<2x1x3x4xf32>, %[[B:.*]]: tensor<5x4x6xf32>, %[[V:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[J:.*]]: tensor<3x2xi64>)
func.func @matmul(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x6xf32>, %v: tensor<4xf32>,
                  %i: tensor<2x3xi64>, %j: tensor<3x2xi64>) {
  // CHECK: merak.matmul %[[A]], %[[B]] : tensor<2x1x3x4xf32>, tensor<5x4x6xf32> -> tensor<2x5x3x6xf32>
  %0 = merak.matmul %a, %b : tensor<2x1x3x4xf32>, tensor<5x4x6xf32> -> tensor<2x5x3x6xf32>
  // CHECK: merak.matmul %[[V]], %[[B]] : tensor<4xf32>, tensor<5x4x6xf32> -> tensor<5x6xf32>
  %1 = merak.matmul %v, %b : tensor<4xf32>, tensor<5x4x6xf32> -> tensor<5x6xf32>
  // CHECK: merak.matmul %[[A]], %[[V]] : tensor<2x1x3x4xf32>, tensor<4xf32> -> tensor<2x1x3xf32>
  %2 = merak.matmul %a, %v : tensor<2x1x3x4xf32>, tensor<4xf32> -> tensor<2x1x3xf32>
  // CHECK: merak.matmul %[[V]], %[[V]] : tensor<4xf32>, tensor<4xf32> -> tensor<f32>
  %3 = merak.matmul %v, %v : tensor<4xf32>, tensor<4xf32> -> tensor<f32>
  // CHECK: merak.matmul %[[I]], %[[J]] : tensor<2x3xi64>, tensor<3x2xi64> -> tensor<2x2xi64>
  %4 = merak.matmul %i, %j : tensor<2x3xi64>, tensor<3x2xi64> -> tensor<2x2xi64>
  return
}

// A widening GEMM: bf16 operands, the float32 accumulation as the result.
// CHECK-LABEL: func.func @matmul_widening
func.func @matmul_widening(%a: tensor<3x4xbf16>, %b: tensor<4x2xbf16>, %c: tensor<2x4xbf16>) {
  // CHECK: merak.matmul %{{.*}}, %{{.*}} : tensor<3x4xbf16>, tensor<4x2xbf16> -> tensor<3x2xf32>
  %0 = merak.matmul %a, %b : tensor<3x4xbf16>, tensor<4x2xbf16> -> tensor<3x2xf32>
  // CHECK: merak.matmul_t %{{.*}}, %{{.*}} {transpose_rhs} : tensor<3x4xbf16>, tensor<2x4xbf16> -> tensor<3x2xf32>
  %1 = merak.matmul_t %a, %c {transpose_rhs} : tensor<3x4xbf16>, tensor<2x4xbf16> -> tensor<3x2xf32>
  // CHECK: merak.matmul_t %{{.*}}, %{{.*}} acc %{{.*}} {transpose_rhs} : tensor<3x4xbf16>, tensor<2x4xbf16>, tensor<3x2xf32> -> tensor<3x2xf32>
  %2 = merak.matmul_t %a, %c acc %1 {transpose_rhs} : tensor<3x4xbf16>, tensor<2x4xbf16>, tensor<3x2xf32> -> tensor<3x2xf32>
  return
}

// CHECK-LABEL: func.func @conv2d
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x8x8xf32>, %[[W:.*]]: tensor<6x2x3x3xf32>, %[[B:.*]]: tensor<6xf32>)
func.func @conv2d(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) {
  // CHECK: merak.conv2d %[[X]], %[[W]] strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
  // CHECK: merak.conv2d %[[X]], %[[W]] bias %[[B]] strides = [2, 1] padding = [0, 1, 0, 0] dilations = [1, 2] groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x3x5xf32>
  %1 = merak.conv2d %x, %w bias %b strides = [2, 1] padding = [0, 1, 0, 0] dilations = [1, 2] groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x3x5xf32>
  return
}

// CHECK-LABEL: func.func @pooling
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x5x5xf32>)
func.func @pooling(%x: tensor<1x2x5x5xf32>) {
  // CHECK: merak.max_pool2d %[[X]] kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<1x2x5x5xf32> -> tensor<1x2x2x2xf32>
  %0 = merak.max_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<1x2x5x5xf32> -> tensor<1x2x2x2xf32>
  // CHECK: merak.max_pool2d %[[X]] kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] {ceil_mode} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %1 = merak.max_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] {ceil_mode} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  // CHECK: merak.avg_pool2d %[[X]] kernel = [3, 3] strides = [1, 1] padding = [1, 1, 1, 1] : tensor<1x2x5x5xf32> -> tensor<1x2x5x5xf32>
  %2 = merak.avg_pool2d %x kernel = [3, 3] strides = [1, 1] padding = [1, 1, 1, 1] : tensor<1x2x5x5xf32> -> tensor<1x2x5x5xf32>
  // CHECK: merak.avg_pool2d %[[X]] kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] {ceil_mode, count_include_pad} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %3 = merak.avg_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] {count_include_pad, ceil_mode} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf16>)
func.func @dropout(%x: tensor<4x4xf16>) -> (tensor<4x4xf16>, tensor<4x4xi1>) {
  // CHECK: %[[Y:.*]], %[[M:.*]] = merak.dropout %[[X]] ratio = 1.000000e-01 seed = 1234 : tensor<4x4xf16> -> tensor<4x4xf16>, tensor<4x4xi1>
  %y, %m = merak.dropout %x ratio = 0.1 seed = 1234 : tensor<4x4xf16> -> tensor<4x4xf16>, tensor<4x4xi1>
  // CHECK: return %[[Y]], %[[M]]
  return %y, %m : tensor<4x4xf16>, tensor<4x4xi1>
}

// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[L:.*]]: tensor<4x10xf32>, %[[T:.*]]: tensor<4xi64>, %[[S:.*]]: tensor<2x5x3xf64>, %[[U:.*]]: tensor<2x3xi32>)
func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %s: tensor<2x5x3xf64>, %u: tensor<2x3xi32>) {
  // CHECK: merak.cross_entropy %[[L]], %[[T]] axis = 1 reduction = "mean" : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: merak.cross_entropy %[[L]], %[[T]] axis = 1 reduction = "sum" {ignore_index = -100 : i64} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %1 = merak.cross_entropy %l, %t axis = 1 reduction = "sum" {ignore_index = -100 : i64} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  // CHECK: merak.cross_entropy %[[S]], %[[U]] axis = 1 reduction = "none" : tensor<2x5x3xf64>, tensor<2x3xi32> -> tensor<2x3xf64>
  %2 = merak.cross_entropy %s, %u axis = 1 reduction = "none" : tensor<2x5x3xf64>, tensor<2x3xi32> -> tensor<2x3xf64>
  return
}

// CHECK-LABEL: func.func @backward_ops
func.func @backward_ops(%x: tensor<1x2x5x5xf32>, %w: tensor<4x1x3x3xf32>, %g: tensor<1x4x3x3xf32>,
                        %pg: tensor<1x2x2x2xf32>, %d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %eg: tensor<2x4xf32>) {
  // CHECK: merak.conv2d_backward_data %{{.*}}, %{{.*}} strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x4x3x3xf32>, tensor<4x1x3x3xf32>) -> tensor<1x2x5x5xf32>
  %0 = merak.conv2d_backward_data %g, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x4x3x3xf32>, tensor<4x1x3x3xf32>) -> tensor<1x2x5x5xf32>
  // CHECK: merak.conv2d_backward_filter %{{.*}}, %{{.*}} strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x2x5x5xf32>, tensor<1x4x3x3xf32>) -> tensor<4x1x3x3xf32>
  %1 = merak.conv2d_backward_filter %x, %g strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x2x5x5xf32>, tensor<1x4x3x3xf32>) -> tensor<4x1x3x3xf32>
  // CHECK: merak.max_pool2d_grad %{{.*}}, %{{.*}} kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : (tensor<1x2x5x5xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x5x5xf32>
  %2 = merak.max_pool2d_grad %x, %pg kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : (tensor<1x2x5x5xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x5x5xf32>
  // CHECK: merak.avg_pool2d_grad %{{.*}} kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] {count_include_pad} : tensor<1x2x2x2xf32> -> tensor<1x2x5x5xf32>
  %3 = merak.avg_pool2d_grad %pg kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] {count_include_pad} : tensor<1x2x2x2xf32> -> tensor<1x2x5x5xf32>
  // CHECK: merak.gather_elements_grad %{{.*}}[%{{.*}}] axis = 0 : tensor<2x4xf32>, tensor<2x4xi64> -> tensor<3x4xf32>
  %4 = merak.gather_elements_grad %eg[%i] axis = 0 : tensor<2x4xf32>, tensor<2x4xi64> -> tensor<3x4xf32>
  // CHECK: merak.gather_grad %{{.*}}[%{{.*}}] axis = 0 : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<3x4xf32>
  %e = merak.reshape %eg : tensor<2x4xf32> to tensor<2x4x1xf32>
  %f = merak.broadcast %e : tensor<2x4x1xf32> to tensor<2x4x4xf32>
  %5 = merak.gather_grad %f[%i] axis = 0 : tensor<2x4x4xf32>, tensor<2x4xi64> -> tensor<3x4xf32>
  // CHECK: merak.gather_grad %{{.*}}[%{{.*}}] axis = 0 acc %{{.*}} : tensor<2x4x4xf32>, tensor<2x4xi64>, tensor<3x4xf32> -> tensor<3x4xf32>
  %6 = merak.gather_grad %f[%i] axis = 0 acc %d : tensor<2x4x4xf32>, tensor<2x4xi64>, tensor<3x4xf32> -> tensor<3x4xf32>
  return
}

// CHECK-LABEL: func.func @fused_backward_ops
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[L:.*]]: tensor<2x4xi64>, %[[S:.*]]: tensor<f32>, %[[N:.*]]: tensor<2x8xf32>)
func.func @fused_backward_ops(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>, %w: tensor<8xf32>,
                              %l: tensor<2x4xi64>, %s: tensor<f32>, %n: tensor<2x8xf32>) {
  // CHECK: merak.gelu_grad %[[X]], %[[G]] : tensor<2x4x8xf32>
  %0 = merak.gelu_grad %x, %g : tensor<2x4x8xf32>
  // CHECK: merak.gelu_grad %[[X]], %[[G]] {approximate_tanh} : tensor<2x4x8xf32>
  %1 = merak.gelu_grad %x, %g {approximate_tanh} : tensor<2x4x8xf32>
  // CHECK: merak.softmax_grad %[[X]], %[[G]] axis = 2 : tensor<2x4x8xf32>
  %2 = merak.softmax_grad %x, %g axis = 2 : tensor<2x4x8xf32>
  // CHECK: merak.log_softmax_grad %[[X]], %[[G]] axis = 0 : tensor<2x4x8xf32>
  %3 = merak.log_softmax_grad %x, %g axis = 0 : tensor<2x4x8xf32>
  // CHECK: merak.layer_norm_grad %[[X]], %[[G]] scale %[[W]] axis = 2 epsilon = 1.000000e-05 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %4:2 = merak.layer_norm_grad %x, %g scale %w axis = 2 epsilon = 1.0e-5 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  // CHECK: merak.layer_norm_grad %[[X]], %[[G]] axis = 1 epsilon = 0.000000e+00 {rms} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %5:2 = merak.layer_norm_grad %x, %g axis = 1 epsilon = 0.0 {rms} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  // CHECK: merak.cross_entropy_grad %[[X]], %[[L]], %[[S]] axis = 2 reduction = "mean" {ignore_index = -100 : i64} : tensor<2x4x8xf32>, tensor<2x4xi64>, tensor<f32> -> tensor<2x4x8xf32>
  %6 = merak.cross_entropy_grad %x, %l, %s axis = 2 reduction = "mean" {ignore_index = -100 : i64} : tensor<2x4x8xf32>, tensor<2x4xi64>, tensor<f32> -> tensor<2x4x8xf32>
  // CHECK: merak.cross_entropy_grad %[[X]], %{{.*}}, %[[N]] axis = 1 reduction = "none" : tensor<2x4x8xf32>, tensor<2x8xi32>, tensor<2x8xf32> -> tensor<2x4x8xf32>
  %k = merak.constant dense<1> : tensor<2x8xi32>
  %7 = merak.cross_entropy_grad %x, %k, %n axis = 1 reduction = "none" : tensor<2x4x8xf32>, tensor<2x8xi32>, tensor<2x8xf32> -> tensor<2x4x8xf32>
  return
}

// The resource blob: 4 bytes of alignment (4, little endian), then the
// four f32 values 1.0, 2.0, 3.0, 4.0.
// CHECK: dialect_resources
// CHECK: attn_w: "0x040000000000803F000000400000404000008040"
{-#
  dialect_resources: {
    builtin: {
      attn_w: "0x040000000000803F000000400000404000008040"
    }
  }
#-}

