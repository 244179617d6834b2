// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s

// An MLP as PyTorch exports it (transpose W + matmul + add b, GELU): the
// first Linear column-parallel (weight rows and bias split), the second
// row-parallel (weight columns split); f (tp_identity) on the input, g
// (all_reduce tp sum) on the second matmul's output before its bias.
// CHECK-DAG: merak.param @fc1.weight : tensor<6x4xf32> = dense<5.000000e-01> : tensor<12x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @fc1.bias : tensor<6xf32> = dense<2.500000e-01> : tensor<12xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @fc2.weight : tensor<4x6xf32> = dense<5.000000e-01> : tensor<4x12xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @fc2.bias : tensor<4xf32> = dense<2.500000e-01> : tensor<4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[F:.*]] = merak.tp_identity %[[X]] : tensor<2x3x4xf32>
// CHECK: %[[T1:.*]] = merak.transpose %{{.*}} perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
// CHECK: %[[M1:.*]] = merak.matmul %[[F]], %[[T1]] : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
// CHECK: %[[H:.*]] = merak.add %{{.*}}, %[[M1]] : tensor<6xf32>, tensor<2x3x6xf32>
// CHECK: %[[G:.*]] = merak.gelu %[[H]] : tensor<2x3x6xf32>
// CHECK: %[[T2:.*]] = merak.transpose %{{.*}} perm = [1, 0] : tensor<4x6xf32> to tensor<6x4xf32>
// CHECK: %[[M2:.*]] = merak.matmul %[[G]], %[[T2]] : tensor<2x3x6xf32>, tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[R:.*]] = merak.all_reduce %[[M2]] group = "tp" reduction = "sum" : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[Y:.*]] = merak.add %{{.*}}, %[[R]] : tensor<4xf32>, tensor<2x3x4xf32>
// CHECK: return %[[Y]]
merak.param @fc1.weight : tensor<12x4xf32> = dense<0.5> : tensor<12x4xf32>
merak.param @fc1.bias : tensor<12xf32> = dense<0.25> : tensor<12xf32>
merak.param @fc2.weight : tensor<4x12xf32> = dense<0.5> : tensor<4x12xf32>
merak.param @fc2.bias : tensor<4xf32> = dense<0.25> : tensor<4xf32>
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %w1 = merak.get_param @fc1.weight : tensor<12x4xf32>
  %b1 = merak.get_param @fc1.bias : tensor<12xf32>
  %w2 = merak.get_param @fc2.weight : tensor<4x12xf32>
  %b2 = merak.get_param @fc2.bias : tensor<4xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<12x4xf32> to tensor<4x12xf32>
  %m1 = merak.matmul %x, %t1 : tensor<2x3x4xf32>, tensor<4x12xf32> -> tensor<2x3x12xf32>
  %h = merak.add %b1, %m1 : tensor<12xf32>, tensor<2x3x12xf32>
  %g = merak.gelu %h : tensor<2x3x12xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x12xf32> to tensor<12x4xf32>
  %m2 = merak.matmul %g, %t2 : tensor<2x3x12xf32>, tensor<12x4xf32> -> tensor<2x3x4xf32>
  %y = merak.add %b2, %m2 : tensor<4xf32>, tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// Gemm-like weights ([in, out], no transpose), ReLU, bias after the matmul;
// a following Linear whose output is the function's result (an LM head)
// stays replicated.
// CHECK-DAG: merak.param @w1 : tensor<4x4xf32> = dense<{{.*}}> : tensor<4x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @b1 : tensor<4xf32> = dense<{{.*}}> : tensor<8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @w2 : tensor<4x4xf32> = dense<{{.*}}> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @head : tensor<4x5xf32> = dense<{{.*}}> : tensor<4x5xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: merak.tp_identity
// CHECK: merak.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
// CHECK: merak.relu %{{.*}} : tensor<3x4xf32>
// CHECK: %[[M2:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %[[R:.*]] = merak.all_reduce %[[M2]] group = "tp"
// CHECK-NEXT: merak.matmul %[[R]], %{{.*}} : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
// CHECK-NOT: merak.tp_identity
// CHECK-NOT: merak.all_reduce
merak.param @w1 : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @b1 : tensor<8xf32> = dense<0.25> : tensor<8xf32>
merak.param @w2 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @head : tensor<4x5xf32> = dense<0.5> : tensor<4x5xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %w1 = merak.get_param @w1 : tensor<4x8xf32>
  %b1 = merak.get_param @b1 : tensor<8xf32>
  %w2 = merak.get_param @w2 : tensor<8x4xf32>
  %head = merak.get_param @head : tensor<4x5xf32>
  %m1 = merak.matmul %x, %w1 : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
  %h = merak.add %m1, %b1 : tensor<3x8xf32>, tensor<8xf32>
  %r = merak.relu %h : tensor<3x8xf32>
  %m2 = merak.matmul %r, %w2 : tensor<3x8xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
  %y = merak.matmul %m2, %head : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// ELECTRA's factorised embedding: a projection (a seed of its own) feeds
// both the next layer's Linear and a layer norm over its features. Seeded
// first, its region stops at the norm and stays replicated; the Linear it
// feeds, row-parallel in that first walk only, is seeded again in the next
// one and its MLP is split.
// CHECK-DAG: merak.param @proj : tensor<4x8xf32> = dense<{{.*}}> : tensor<4x8xf32>{{$}}
// CHECK-DAG: merak.param @w1 : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @w2 : tensor<4x8xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[F:.*]] = merak.tp_identity %[[H]] : tensor<3x8xf32>
// CHECK-NEXT: merak.layer_norm %[[H]]
// CHECK: merak.matmul %[[F]], %{{.*}} : tensor<3x8xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
// CHECK: %[[M2:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: merak.all_reduce %[[M2]] group = "tp" reduction = "sum" : tensor<3x8xf32>
merak.param @proj : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @w1 : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @w2 : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<f32> {
  %p = merak.get_param @proj : tensor<4x8xf32>
  %w1 = merak.get_param @w1 : tensor<8x8xf32>
  %w2 = merak.get_param @w2 : tensor<8x8xf32>
  %h = merak.matmul %x, %p : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
  %n = merak.layer_norm %h axis = 1 epsilon = 1.0e-05 : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %a = merak.matmul %h, %w1 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %r = merak.relu %a : tensor<3x8xf32>
  %b = merak.matmul %r, %w2 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %y = merak.add %n, %b : tensor<3x8xf32>, tensor<3x8xf32>
  %l = merak.reduce_sum %y axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
