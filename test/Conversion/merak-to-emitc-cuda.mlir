// RUN: merak-opt --merak-plan-memory --merak-to-emitc=target=cuda %s | FileCheck %s
// RUN: merak-opt --merak-plan-memory --merak-to-emitc=target=cuda %s | mlir-translate --mlir-to-cpp | FileCheck %s --check-prefix=CPP

// target=cuda: the CPU lowering's calls, qualified as gpu:: (the GPU ABI of
// runtime/include/merak_rt/cuda/ops.h; a qualified call keeps
// argument-dependent lookup from also finding merak::rt::cpu's), with the
// GPU headers and namespace. Pointers, shapes and literals are unchanged.

// CHECK: emitc.include "merak_rt/cuda/ops.h"
// CHECK: emitc.verbatim "namespace gpu = merak::rt::gpu;"
// CHECK: emitc.verbatim "using namespace merak::rt::gpu;"
// CHECK: emitc.func @merak_train_step(
// CHECK: call_opaque "gpu::opMark"() {args = [#emitc.opaque<"0">]}
// CHECK: %[[O64:.*]] = literal "64" : i64
// CHECK: %[[Y:.*]] = add %arg0, %[[O64]]
// CHECK: call_opaque "gpu::binary"(%arg0, %arg2, %[[Y]]) {args = [#emitc.opaque<"Binary::Add">, #emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{2, {2, 3}}">, 1 : index, #emitc.opaque<"Dims{1, {3}}">, 2 : index, #emitc.opaque<"Dims{2, {2, 3}}">]}
// CHECK: call_opaque "gpu::unary"(%[[Y]], %arg0) {args = [#emitc.opaque<"Unary::Clamp">, #emitc.opaque<"DT::F32">, 0 : index, 1 : index, #emitc.opaque<"6">, #emitc.opaque<"0">, #emitc.opaque<"HUGE_VAL">]}
// CHECK: call_opaque "gpu::reduce"(%arg0, %[[Y]]) {args = [#emitc.opaque<"Reduce::Sum">, #emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{1, {6}}">, #emitc.opaque<"Dims{1, {0}}">, 1 : index]}
// CHECK: call_opaque "gpu::copyBytes"(%arg1, %arg0) {args = [0 : index, 1 : index, #emitc.opaque<"24">]}
// CHECK: call_opaque "gpu::copyBytes"(%arg0, %arg1) {args = [0 : index, 1 : index, #emitc.opaque<"24">]}
// CHECK: call_opaque "gpu::opMark"() {args = [#emitc.opaque<"-1">]}
// CHECK-NEXT: return
// CHECK-NOT: "opMark"
// CHECK-NOT: merak.

// CPP: #include "merak_rt/cuda/ops.h"
// CPP: namespace gpu = merak::rt::gpu;
// CPP-NEXT: using namespace merak::rt::gpu;
// CPP: extern "C" void merak_train_step(
// CPP: gpu::binary(Binary::Add, DT::F32,
// CPP: gpu::opMark(-1);
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
