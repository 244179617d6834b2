// RUN: merak-opt %s -split-input-file -merak-tensor-parallel="tp=2 vocab-parallel=true vocab-parallel-fallback=true" -verify-diagnostics | FileCheck %s

// merak-compile's default (vocab-parallel-fallback): a classifier head of
// fewer classes than input features (V = 3 < C = 4, with its bias) stays
// replicated with a remark; the MLP before it is split as usual.
// CHECK-DAG: merak.param @head.weight : tensor<3x4xf32> = dense<{{.*}}> : tensor<3x4xf32>{{$}}
// CHECK-DAG: merak.param @head.bias : tensor<3xf32> = dense<{{.*}}> : tensor<3xf32>{{$}}
// CHECK-DAG: merak.param @fc1 : tensor<4x4xf32> = dense<{{.*}}> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> tensor<2x3xf32>
// CHECK: merak.all_reduce
merak.param @fc1 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @fc2 : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @head.weight : tensor<3x4xf32> = dense<0.125> : tensor<3x4xf32>
merak.param @head.bias : tensor<3xf32> = dense<0.0625> : tensor<3xf32>
// expected-remark @+1 {{merak-tensor-parallel: the embedding, LM head and loss stay replicated (no vocabulary parallelism): the head 'head.weight' has fewer classes (3) than input features (4): a classifier, which --vocab-parallel splits only when asked}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w1 = merak.get_param @fc1 : tensor<8x4xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %x, %t1 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %g = merak.relu %m1 : tensor<2x8xf32>
  %w2 = merak.get_param @fc2 : tensor<4x8xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %m2 = merak.matmul %g, %t2 : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %w = merak.get_param @head.weight : tensor<3x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<3x4xf32> to tensor<4x3xf32>
  %l = merak.matmul %m2, %wt : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %b = merak.get_param @head.bias : tensor<3xf32>
  %y = merak.add %l, %b : tensor<2x3xf32>, tensor<3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// No Linear pair and only such a classifier: nothing worth splitting.
merak.param @head.weight : tensor<3x4xf32> = dense<0.125> : tensor<3x4xf32>
// expected-error @+1 {{and no vocabulary to split (the head 'head.weight' has fewer classes (3) than input features (4): a classifier, which --vocab-parallel splits only when asked)}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %h = merak.tanh %x : tensor<2x4xf32>
  %w = merak.get_param @head.weight : tensor<3x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<3x4xf32> to tensor<4x3xf32>
  %l = merak.matmul %h, %wt : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %l : tensor<2x3xf32>
}
