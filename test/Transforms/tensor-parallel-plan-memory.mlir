// RUN: merak-opt %s -merak-plan-memory=entry=step | FileCheck %s --check-prefix=PLAN

// Memory plan: parameters copied as they are first (params_init_bytes ends
// them), then shards the program cuts out of full tensors, then zeros;
// merak.tp_identity is a view (no buffer of its own).
// PLAN-LABEL: module attributes
// PLAN-SAME: merak.params_bytes = 192 : i64, merak.params_init_bytes = 64 : i64
// PLAN-DAG: merak.param @z {{.*}} {merak.offset = 128 : i64, merak.shard
// PLAN-DAG: merak.param @s {{.*}} {merak.offset = 64 : i64, merak.shard
// PLAN-DAG: merak.param @r {{.*}} {merak.offset = 0 : i64}
// PLAN: merak.tp_identity
// PLAN-NOT: merak.offsets
// PLAN-SAME: tensor<2x3xf32>
// PLAN-NEXT: merak.add {{.*}} {merak.offsets
merak.param @z : tensor<2x3xf32> = dense<0.0> : tensor<4x3xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
merak.param @s : tensor<2x3xf32> = dense<1.0> : tensor<4x3xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
merak.param @r : tensor<2x3xf32> = dense<1.0> : tensor<2x3xf32>
func.func @step(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %f = merak.tp_identity %x : tensor<2x3xf32>
  %a = merak.add %f, %f : tensor<2x3xf32>, tensor<2x3xf32>
  %z = merak.get_param @z : tensor<2x3xf32>
  %s = merak.get_param @s : tensor<2x3xf32>
  %r = merak.get_param @r : tensor<2x3xf32>
  %b = merak.add %a, %z : tensor<2x3xf32>, tensor<2x3xf32>
  %c = merak.add %b, %s : tensor<2x3xf32>, tensor<2x3xf32>
  %d = merak.add %c, %r : tensor<2x3xf32>, tensor<2x3xf32>
  return %d : tensor<2x3xf32>
}
