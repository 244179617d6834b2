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

// -----

// A text classifier (no Linear pair, a 3-class head): its token embedding
// (8 rows >= 4 features, looked up by the argument's ids through a reshape)
// splits alone, as Megatron-LM's VocabParallelEmbedding; the position
// table (looked up by constant ids) and the token-type table (2 rows < 4
// features) stay whole.
// CHECK-DAG: merak.param @tok : tensor<4x4xf32> = dense<{{.*}}> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @pos : tensor<3x4xf32> = dense<{{.*}}> : tensor<3x4xf32>{{$}}
// CHECK-DAG: merak.param @type : tensor<2x4xf32> = dense<{{.*}}> : tensor<2x4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: merak.group_rank group = "tp"
// CHECK: merak.gather %{{.*}}[%{{.*}}] axis = 0 : tensor<4x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x3x4xf32>
// CHECK-NOT: merak.all_reduce
// CHECK: return %{{.*}} : tensor<2x3xf32>
merak.param @tok : tensor<8x4xf32> = dense<0.25> : tensor<8x4xf32>
merak.param @pos : tensor<3x4xf32> = dense<0.5> : tensor<3x4xf32>
merak.param @type : tensor<2x4xf32> = dense<0.75> : tensor<2x4xf32>
merak.param @head.weight : tensor<3x4xf32> = dense<0.125> : tensor<3x4xf32>
// expected-warning @+1 {{no Linear -> ... -> Linear pair to shard over tp=2: only the vocabulary is split (the token embedding(s) 'tok'); every other layer is computed whole on each tp rank (the LM head and loss stay replicated: the head 'head.weight' has fewer classes (3) than input features (4)}}
func.func @forward(%ids: tensor<6xi64>, %types: tensor<2x3xi64>) -> tensor<2x3xf32> {
  %r = merak.reshape %ids : tensor<6xi64> to tensor<2x3xi64>
  %t = merak.get_param @tok : tensor<8x4xf32>
  %e = merak.gather %t[%r] axis = 0 : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %p = merak.get_param @pos : tensor<3x4xf32>
  %pi = merak.constant dense<[0, 1, 2]> : tensor<3xi64>
  %pe = merak.gather %p[%pi] axis = 0 : tensor<3x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %ty = merak.get_param @type : tensor<2x4xf32>
  %te = merak.gather %ty[%types] axis = 0 : tensor<2x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %s = merak.add %e, %pe : tensor<2x3x4xf32>, tensor<3x4xf32>
  %s2 = merak.add %s, %te : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %h = merak.tanh %s2 : tensor<2x3x4xf32>
  %m = merak.reduce_mean %h axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %w = merak.get_param @head.weight : tensor<3x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<3x4xf32> to tensor<4x3xf32>
  %l = merak.matmul %m, %wt : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %l : tensor<2x3xf32>
}

// -----

// The last matmul is itself the row-parallel end of a pair (BERT's pooler
// dense -> tanh -> classifier): the remark says so.
// CHECK-DAG: merak.param @head.weight : tensor<3x4xf32> = dense<{{.*}}> : tensor<3x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
merak.param @fc1 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @head.weight : tensor<3x8xf32> = dense<0.125> : tensor<3x8xf32>
// expected-remark @+1 {{the embedding, LM head and loss stay replicated (no vocabulary parallelism): the last matmul is the row-parallel end of a Linear pair (already split on its input features)}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w1 = merak.get_param @fc1 : tensor<8x4xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %x, %t1 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %g = merak.tanh %m1 : tensor<2x8xf32>
  %w = merak.get_param @head.weight : tensor<3x8xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<3x8xf32> to tensor<8x3xf32>
  %l = merak.matmul %g, %wt : tensor<2x8xf32>, tensor<8x3xf32> -> tensor<2x3xf32>
  return %l : tensor<2x3xf32>
}

// -----

// A softmax over the vocabulary after the head is not column-wise: the
// head (tied to the embedding) stays replicated, with the remark; the MLP
// splits.
// CHECK-DAG: merak.param @wte : tensor<6x4xf32> = dense<{{.*}}> : tensor<6x4xf32>{{$}}
// CHECK: func.func @forward(%arg0: tensor<2x3xi64>) -> tensor<2x3x6xf32> {
// CHECK: merak.softmax %{{.*}} axis = 2 : tensor<2x3x6xf32>
merak.param @wte : tensor<6x4xf32> = dense<0.25> : tensor<6x4xf32>
merak.param @fc1 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @fc2 : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
// expected-remark @+1 {{the embedding, LM head and loss stay replicated (no vocabulary parallelism): the result is not an LM head matmul(x, transpose(W)) with W [V, C] or matmul(x, W) with W [C, V] (plus a bias, then column-wise ops), W a parameter}}
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x6xf32> {
  %w = merak.get_param @wte : tensor<6x4xf32>
  %e = merak.gather %w[%ids] axis = 0 : tensor<6x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %w1 = merak.get_param @fc1 : tensor<8x4xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %e, %t1 : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %g = merak.gelu %m1 : tensor<2x3x8xf32>
  %w2 = merak.get_param @fc2 : tensor<4x8xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %m2 = merak.matmul %g, %t2 : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %wh = merak.get_param @wte : tensor<6x4xf32>
  %th = merak.transpose %wh perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %logits = merak.matmul %m2, %th : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  %p = merak.softmax %logits axis = 2 : tensor<2x3x6xf32>
  return %p : tensor<2x3x6xf32>
}
