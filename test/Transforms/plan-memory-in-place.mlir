// RUN: merak-opt --merak-plan-memory --split-input-file %s | FileCheck %s
// RUN: merak-opt --merak-plan-memory --merak-to-emitc --split-input-file %s | FileCheck %s --check-prefix=EMIT

// A fused update whose parameter and state are read nowhere after it and
// written back only by set_param updates in place: its results are its
// operands' parameter storage (merak.in_place names the operand), they get
// no arena offsets, and the set_params copy nothing. The gradient stays in
// the arena.
// CHECK-LABEL: func.func @train_step
// CHECK: merak.adamw_update
// CHECK-SAME: merak.in_place = array<i64: 0, 2, 3>
// CHECK-NOT: merak.offsets
// EMIT-LABEL: emitc.func @merak_train_step
// EMIT: call_opaque "adamwUpdate"(%[[P:[^,]*]], %{{[^,]*}}, %[[M:[^,]*]], %[[V:[^,]*]], %{{[^,]*}}, %{{[^,]*}}, %[[P]], %[[M]], %[[V]])
// The three set_params copy nothing; the returned %lr (parameter storage)
// is copied to its result slot.
// EMIT-NEXT: call_opaque "opMark"() {args = [#emitc.opaque<"1">]}
// EMIT-NEXT: call_opaque "opMark"() {args = [#emitc.opaque<"2">]}
// EMIT-NEXT: call_opaque "opMark"() {args = [#emitc.opaque<"3">]}
// EMIT-NEXT: call_opaque "copyBytes"(%arg0, %{{[^,]*}}) {args = [0 : index, 1 : index, #emitc.opaque<"4">]}
merak.param @w : tensor<4xf32> = dense<1.0> : tensor<4xf32>
merak.param @m : tensor<4xf32> = dense<0.0> : tensor<4xf32>
merak.param @v : tensor<4xf32> = dense<0.0> : tensor<4xf32>
merak.param @lr : tensor<f32> = dense<0.1> : tensor<f32>
func.func @train_step(%g: tensor<4xf32>, %step: tensor<i64>) -> tensor<f32> {
  %lr = merak.get_param @lr : tensor<f32>
  %p = merak.get_param @w : tensor<4xf32>
  %m = merak.get_param @m : tensor<4xf32>
  %v = merak.get_param @v : tensor<4xf32>
  %p1, %m1, %v1 = merak.adamw_update %p, %g, %m, %v lr %lr step %step beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  merak.set_param @m, %m1 : tensor<4xf32>
  merak.set_param @v, %v1 : tensor<4xf32>
  merak.set_param @w, %p1 : tensor<4xf32>
  return %lr : tensor<f32>
}

// -----

// Not in place: the old parameter is read after the update (a second
// get_param of @w), the new exp_avg is also returned, and the momentum-free
// SGD's operand is an argument. ZeRO-like arena operands (a local shard) are
// updated in place in the arena: the result takes no offset of its own.
// CHECK-LABEL: func.func @train_step
// CHECK: merak.adamw_update
// CHECK-SAME: merak.in_place = array<i64: -1, -1, 3>
// CHECK-SAME: merak.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, -1>
// CHECK: merak.exp
// CHECK: %[[S:.*]] = merak.local_shard
// CHECK: merak.sgd_update %[[S]]
// CHECK-SAME: merak.in_place = array<i64: 0>
// CHECK-NOT: merak.offsets
// CHECK: merak.sgd_update %arg0
// CHECK-NOT: merak.in_place
// CHECK-SAME: merak.offsets
merak.param @w : tensor<4xf32> = dense<1.0> : tensor<4xf32>
merak.param @m : tensor<4xf32> = dense<0.0> : tensor<4xf32>
merak.param @v : tensor<4xf32> = dense<0.0> : tensor<4xf32>
merak.param @lr : tensor<f32> = dense<0.1> : tensor<f32>
func.func @train_step(%g: tensor<4xf32>, %step: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %lr = merak.get_param @lr : tensor<f32>
  %p = merak.get_param @w : tensor<4xf32>
  %m = merak.get_param @m : tensor<4xf32>
  %v = merak.get_param @v : tensor<4xf32>
  %old = merak.get_param @w : tensor<4xf32>
  %p1, %m1, %v1 = merak.adamw_update %p, %g, %m, %v lr %lr step %step beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %e = merak.exp %old : tensor<4xf32>
  merak.set_param @m, %m1 : tensor<4xf32>
  merak.set_param @v, %v1 : tensor<4xf32>
  merak.set_param @w, %p1 : tensor<4xf32>
  %full = merak.exp %g : tensor<4xf32>
  %s = merak.local_shard %full group = "dp" : tensor<4xf32> -> tensor<4xf32>
  %u = merak.sgd_update %s, %g lr %lr momentum = 0.0 weight_decay = 0.0 : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a = merak.sgd_update %g, %g lr %lr momentum = 0.0 weight_decay = 0.0 : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %e, %m1, %u, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
