// RUN: merak-opt --merak-plan-memory --merak-to-emitc --split-input-file --verify-diagnostics %s | FileCheck %s

// One runtime call per op, pointers = region base + planned offset (made
// once, reused), shapes as Dims literals, an opMark before every kernel; the
// reshape is a view (no call), set_param copies into parameter storage, and a
// returned parameter is copied to its result slot.

// CHECK: emitc.include "merak_rt/ops.h"
// CHECK: emitc.func @merak_train_step(%arg0: !emitc.ptr<!emitc.opaque<"char">>, %arg1: !emitc.ptr<!emitc.opaque<"char">>, %arg2: !emitc.ptr<!emitc.opaque<"const char">>)
// CHECK-SAME: specifiers = ["extern \22C\22"]
// CHECK: call_opaque "opMark"() {args = [#emitc.opaque<"0">]}
// CHECK: %[[O64:.*]] = literal "64" : i64
// CHECK: %[[Y:.*]] = add %arg0, %[[O64]]
// CHECK: call_opaque "binary"(%arg0, %arg2, %[[Y]]) {args = [#emitc.opaque<"Binary::Add">, #emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{2, {2, 3}}">, 1 : index, #emitc.opaque<"Dims{1, {3}}">, 2 : index, #emitc.opaque<"Dims{2, {2, 3}}">]}
// CHECK: call_opaque "opMark"() {args = [#emitc.opaque<"1">]}
// CHECK: call_opaque "unary"(%[[Y]], %arg0) {args = [#emitc.opaque<"Unary::Clamp">, #emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"6">, #emitc.opaque<"0">, #emitc.opaque<"HUGE_VAL">]}
// CHECK: call_opaque "opMark"() {args = [#emitc.opaque<"2">]}
// CHECK: call_opaque "reduce"(%arg0, %[[Y]]) {args = [#emitc.opaque<"Reduce::Sum">, #emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{1, {6}}">, #emitc.opaque<"Dims{1, {0}}">, 1 : index]}
// CHECK: call_opaque "opMark"() {args = [#emitc.opaque<"3">]}
// CHECK: call_opaque "copyBytes"(%arg1, %arg0) {args = [0 : index, 1 : index, #emitc.opaque<"24">]}
// CHECK: call_opaque "copyBytes"(%arg0, %arg1) {args = [0 : index, 1 : index, #emitc.opaque<"24">]}
// CHECK: call_opaque "opMark"() {args = [#emitc.opaque<"-1">]}
// CHECK-NEXT: return
// CHECK-NOT: merak.
merak.param @w : tensor<2x3xf32> = dense<1.0> : tensor<2x3xf32>
func.func @train_step(%x: tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>) {
  %b = merak.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = merak.add %x, %b : tensor<2x3xf32>, tensor<3xf32>
  %z = merak.clamp %y {min = 0.0 : f64} : tensor<2x3xf32>
  %r = merak.reshape %z : tensor<2x3xf32> to tensor<6xf32>
  %s = merak.reduce_sum %r axes = [0] : tensor<6xf32> -> tensor<f32>
  merak.set_param @w, %z : tensor<2x3xf32>
  %w = merak.get_param @w : tensor<2x3xf32>
  return %s, %w : tensor<f32>, tensor<2x3xf32>
}

// -----

// Ops without a CPU kernel are named, all at once.
func.func private @helper(tensor<2xf32>) -> tensor<2xf32>
// expected-error @+1 {{merak-to-emitc: no CPU kernel for func.call}}
func.func @train_step(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = func.call @helper(%x) : (tensor<2xf32>) -> tensor<2xf32>
  %z = func.call @helper(%y) : (tensor<2xf32>) -> tensor<2xf32>
  return %z : tensor<2xf32>
}

// -----

// The fused backward ops: one runtime call each; a layer_norm_grad result
// nobody reads (dx of %3, xhat of %4) is passed as nullptr and not written.
// The first check matches the split marker in the output, ending the block
// above's CHECK-NOT.
// CHECK: {{^//.-{5}$}}
// CHECK: call_opaque "geluGrad"({{.*}}) {args = [#emitc.opaque<"DT::F32">, 0 : index, 1 : index, 2 : index, #emitc.opaque<"16">, #emitc.opaque<"true">]}
// CHECK: call_opaque "softmaxGrad"({{.*}}) {args = [#emitc.opaque<"false">, #emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"Dims{2, {2, 8}}">, #emitc.opaque<"1">, 2 : index]}
// CHECK: call_opaque "softmaxGrad"({{.*}}) {args = [#emitc.opaque<"true">, #emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"Dims{2, {2, 8}}">, #emitc.opaque<"0">, 2 : index]}
// CHECK: call_opaque "layerNormGrad"({{.*}}) {args = [#emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"Dims{2, {2, 8}}">, #emitc.opaque<"1">, 2 : index, #emitc.opaque<"Dims{1, {8}}">, #emitc.opaque<"1.0000000000000001e-05">, #emitc.opaque<"false">, #emitc.opaque<"nullptr">, 3 : index]}
// CHECK: call_opaque "layerNormGrad"({{.*}}) {args = [#emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"Dims{2, {2, 8}}">, #emitc.opaque<"1">, #emitc.opaque<"nullptr">, #emitc.opaque<"Dims{}">, #emitc.opaque<"0.5">, #emitc.opaque<"true">, 2 : index, #emitc.opaque<"nullptr">]}
// CHECK: call_opaque "crossEntropyGrad"({{.*}}) {args = [#emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{2, {2, 8}}">, #emitc.opaque<"1">, #emitc.opaque<"DT::I64">, 1 : index, 2 : index, #emitc.opaque<"1">, #emitc.opaque<"true">, #emitc.opaque<"-1">, 3 : index]}
func.func @train_step(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>, %w: tensor<8xf32>, %l: tensor<2xi64>, %s: tensor<f32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = merak.gelu_grad %x, %g {approximate_tanh} : tensor<2x8xf32>
  %1 = merak.softmax_grad %x, %g axis = 1 : tensor<2x8xf32>
  %2 = merak.log_softmax_grad %x, %g axis = 0 : tensor<2x8xf32>
  %3:2 = merak.layer_norm_grad %x, %g scale %w axis = 1 epsilon = 1.0e-5 : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %4:2 = merak.layer_norm_grad %x, %g axis = 1 epsilon = 0.5 {rms} : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %5 = merak.cross_entropy_grad %x, %l, %s axis = 1 reduction = "mean" {ignore_index = -1 : i64} : tensor<2x8xf32>, tensor<2xi64>, tensor<f32> -> tensor<2x8xf32>
  return %0, %1, %2, %3#1, %4#0, %5 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// softplus is unary(Unary::Softplus, ...), like the other attribute-free
// unary ops.
// CHECK: {{^//.-{5}$}}
// CHECK: call_opaque "unary"({{.*}}) {args = [#emitc.opaque<"Unary::Softplus">, #emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"6">, #emitc.opaque<"0">, #emitc.opaque<"0">]}
func.func @train_step(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = merak.softplus %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// expm1 and log1p are unary(Unary::Expm1/Log1p, ...).
// CHECK: {{^//.-{5}$}}
// CHECK: call_opaque "unary"({{.*}}) {args = [#emitc.opaque<"Unary::Expm1">, #emitc.opaque<"DT::F32">,
// CHECK: call_opaque "unary"({{.*}}) {args = [#emitc.opaque<"Unary::Log1p">, #emitc.opaque<"DT::F32">,
func.func @train_step(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = merak.expm1 %x : tensor<2x3xf32>
  %1 = merak.log1p %x : tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// asin, acos and atan are unary(Unary::Asin/Acos/Atan, ...).
// CHECK: {{^//.-{5}$}}
// CHECK: call_opaque "unary"({{.*}}) {args = [#emitc.opaque<"Unary::Asin">, #emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"6">, #emitc.opaque<"0">, #emitc.opaque<"0">]}
// CHECK: call_opaque "unary"({{.*}}) {args = [#emitc.opaque<"Unary::Acos">,
// CHECK: call_opaque "unary"({{.*}}) {args = [#emitc.opaque<"Unary::Atan">,
func.func @train_step(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = merak.asin %x : tensor<2x3xf32>
  %1 = merak.acos %x : tensor<2x3xf32>
  %2 = merak.atan %x : tensor<2x3xf32>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
