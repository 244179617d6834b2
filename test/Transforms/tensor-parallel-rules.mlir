// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s

// merak-tensor-parallel follows each op's sharding rule, not a list of op
// kinds: a split reaching a reduce_sum over the split features lands on its
// reduction factor, which ends the region like a row-parallel Linear (a
// partial sum per rank, summed over tp).
// CHECK-DAG: merak.param @fc.weight : tensor<6x4xf32> = dense<5.000000e-01> : tensor<12x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = merak.gelu %{{.*}} : tensor<2x3x6xf32>
// CHECK-NEXT: %[[S:.*]] = merak.reduce_sum %[[G]] axes = [2] : tensor<2x3x6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = merak.all_reduce %[[S]] group = "tp" reduction = "sum" : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: return %[[R]]
merak.param @fc.weight : tensor<12x4xf32> = dense<0.5> : tensor<12x4xf32>
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3xf32> {
  %w = merak.get_param @fc.weight : tensor<12x4xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<12x4xf32> to tensor<4x12xf32>
  %m = merak.matmul %x, %t : tensor<2x3x4xf32>, tensor<4x12xf32> -> tensor<2x3x12xf32>
  %g = merak.gelu %m : tensor<2x3x12xf32>
  %s = merak.reduce_sum %g axes = [2] : tensor<2x3x12xf32> -> tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}

// -----

// A norm per head (QK-norm style: layer_norm over each head's features)
// keeps a split of the heads, since only its normalised dims are replicated
// factors: the column Linear, the per-head norm and the row Linear are one
// region.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = merak.reshape %{{.*}} : tensor<2x3x6xf32> to tensor<2x3x1x6xf32>
// CHECK-NEXT: %[[N:.*]] = merak.layer_norm %[[H]] axis = 3 epsilon = 1.000000e-05 : (tensor<2x3x1x6xf32>) -> tensor<2x3x1x6xf32>
// CHECK-NEXT: %[[F:.*]] = merak.reshape %[[N]] : tensor<2x3x1x6xf32> to tensor<2x3x6xf32>
// CHECK: %[[M:.*]] = merak.matmul %[[F]], %{{.*}} : tensor<2x3x6xf32>, tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: merak.all_reduce %[[M]] group = "tp" reduction = "sum"
merak.param @fc.weight : tensor<12x4xf32> = dense<0.5> : tensor<12x4xf32>
merak.param @fc2.weight : tensor<4x12xf32> = dense<0.5> : tensor<4x12xf32>
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %w = merak.get_param @fc.weight : tensor<12x4xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<12x4xf32> to tensor<4x12xf32>
  %m = merak.matmul %x, %t : tensor<2x3x4xf32>, tensor<4x12xf32> -> tensor<2x3x12xf32>
  %h = merak.reshape %m : tensor<2x3x12xf32> to tensor<2x3x2x6xf32>
  %n = merak.layer_norm %h axis = 3 epsilon = 1.0e-05 : (tensor<2x3x2x6xf32>) -> tensor<2x3x2x6xf32>
  %f = merak.reshape %n : tensor<2x3x2x6xf32> to tensor<2x3x12xf32>
  %w2 = merak.get_param @fc2.weight : tensor<4x12xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x12xf32> to tensor<12x4xf32>
  %y = merak.matmul %f, %t2 : tensor<2x3x12xf32>, tensor<12x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// rotate_half on split heads (Llama, Qwen2, Mistral, GPT-NeoX): slices of
// each head's features that keep every head stay in the region, and their
// limits along the heads follow the local heads (1 of 2 here, was 2).
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = merak.reshape %{{.*}} : tensor<2x3x6xf32> to tensor<2x3x1x6xf32>
// CHECK-NEXT: %[[A:.*]] = merak.slice %[[H]] starts = [0, 0, 0, 0] limits = [2, 3, 1, 3] strides = [1, 1, 1, 1] : tensor<2x3x1x6xf32> to tensor<2x3x1x3xf32>
// CHECK-NEXT: %[[B:.*]] = merak.slice %[[H]] starts = [0, 0, 0, 3] limits = [2, 3, 1, 6] strides = [1, 1, 1, 1] : tensor<2x3x1x6xf32> to tensor<2x3x1x3xf32>
// CHECK-NEXT: merak.concat %[[B]], %[[A]] axis = 3 : tensor<2x3x1x3xf32>, tensor<2x3x1x3xf32> -> tensor<2x3x1x6xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum"
merak.param @fc.weight : tensor<12x4xf32> = dense<0.5> : tensor<12x4xf32>
merak.param @fc2.weight : tensor<4x12xf32> = dense<0.5> : tensor<4x12xf32>
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %w = merak.get_param @fc.weight : tensor<12x4xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<12x4xf32> to tensor<4x12xf32>
  %m = merak.matmul %x, %t : tensor<2x3x4xf32>, tensor<4x12xf32> -> tensor<2x3x12xf32>
  %h = merak.reshape %m : tensor<2x3x12xf32> to tensor<2x3x2x6xf32>
  %a = merak.slice %h starts = [0, 0, 0, 0] limits = [2, 3, 2, 3] strides = [1, 1, 1, 1] : tensor<2x3x2x6xf32> to tensor<2x3x2x3xf32>
  %b = merak.slice %h starts = [0, 0, 0, 3] limits = [2, 3, 2, 6] strides = [1, 1, 1, 1] : tensor<2x3x2x6xf32> to tensor<2x3x2x3xf32>
  %r = merak.concat %b, %a axis = 3 : tensor<2x3x2x3xf32>, tensor<2x3x2x3xf32> -> tensor<2x3x2x6xf32>
  %f = merak.reshape %r : tensor<2x3x2x6xf32> to tensor<2x3x12xf32>
  %w2 = merak.get_param @fc2.weight : tensor<4x12xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x12xf32> to tensor<12x4xf32>
  %y = merak.matmul %f, %t2 : tensor<2x3x12xf32>, tensor<12x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
