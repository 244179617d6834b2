// RUN: merak-opt --merak-plan-memory --merak-to-emitc %s | FileCheck %s

// Started collectives: each start takes the lowest request slot free at that
// point (slot 1 while slot 0 is in flight, slot 0 again after its wait),
// passes (pointer, count) pairs (reduce-scatter: the count of one part) and
// the wait passes the result pointers; while a collective is in flight the
// step polls them after every kernel (collectiveProgress).
// CHECK: emitc.include "merak_rt/collectives.h"
// CHECK: call_opaque "allReduceStart"(%{{.*}}) {args = [#emitc.opaque<"0">, #emitc.opaque<"Group::DP">, #emitc.opaque<"CollReduce::Mean">, #emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"4">, 1 : index, #emitc.opaque<"6">]}
// CHECK: call_opaque "unary"
// CHECK-NEXT: call_opaque "collectiveProgress"()
// CHECK: call_opaque "reduceScatterStart"(%{{.*}}) {args = [#emitc.opaque<"1">, #emitc.opaque<"Group::TP">, #emitc.opaque<"CollReduce::Sum">, #emitc.opaque<"DT::F32">, #emitc.opaque<"2">, 0 : index, #emitc.opaque<"2">]}
// CHECK: call_opaque "collectiveWait"(%{{.*}}, %{{.*}}) {args = [#emitc.opaque<"0">, 0 : index, 1 : index]}
// CHECK: call_opaque "allGatherStart"(%{{.*}}) {args = [#emitc.opaque<"0">, #emitc.opaque<"Group::DP">, #emitc.opaque<"DT::F32">, #emitc.opaque<"2">, 0 : index, #emitc.opaque<"4">]}
// CHECK: call_opaque "collectiveWait"(%{{.*}}) {args = [#emitc.opaque<"1">, 0 : index]}
// CHECK: call_opaque "collectiveWait"(%{{.*}}) {args = [#emitc.opaque<"0">, 0 : index]}
// CHECK-NOT: collectiveProgress
// CHECK: call_opaque "opMark"() {args = [#emitc.opaque<"-1">]}
func.func @train_step(%a: tensor<4xf32>, %b: tensor<2x3xf32>)
    -> (tensor<4xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<8xf32>) {
  %r = merak.all_reduce_start %a, %b group = "dp" reduction = "mean" : tensor<4xf32>, tensor<2x3xf32>
  %e = merak.exp %a : tensor<4xf32>
  %s = merak.reduce_scatter_start %e group = "tp" reduction = "sum" parts = 2 : tensor<4xf32>
  %x:2 = merak.wait %r : tensor<4xf32>, tensor<2x3xf32>
  %g = merak.all_gather_start %x#0 group = "dp" parts = 2 : tensor<4xf32>
  %y = merak.wait %s : tensor<2xf32>
  %z = merak.wait %g : tensor<8xf32>
  return %x#0, %x#1, %y, %z : tensor<4xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<8xf32>
}
