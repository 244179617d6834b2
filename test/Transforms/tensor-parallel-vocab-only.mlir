// RUN: merak-opt %s -split-input-file -merak-tensor-parallel="tp=2 vocab-parallel=true" -verify-diagnostics | FileCheck %s
// RUN: not merak-opt %s -split-input-file -merak-tensor-parallel="tp=2 vocab-parallel=true" -merak-attach-loss 2>/dev/null | FileCheck %s --check-prefix=LOSS

// No Linear -> ... -> Linear pair (an embedding, a recurrence-like tanh
// layer, an LM head with a bias of its own): only the vocabulary splits,
// with a warning. V = 5 at tp 2: shards of 3 rows, the last row of rank 1
// padding; the head's weight and its bias are split alike (size = 5), the
// bias add returns the split logits [2, 3, 3], and the cross-entropy leaves
// the padding class out (classes = 5). The input embedding (7 rows, another
// vocabulary than the head's, looked up by the argument's ids) splits as a
// token table of its own: 2 x 4 rows, the last one padding.
// CHECK-DAG: merak.param @head.weight : tensor<3x4xf32> = dense<{{.*}}> : tensor<5x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2, size = 5>}
// CHECK-DAG: merak.param @head.bias : tensor<3xf32> = dense<{{.*}}> : tensor<5xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2, size = 5>}
// CHECK-DAG: merak.param @emb : tensor<4x4xf32> = dense<{{.*}}> : tensor<7x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2, size = 7>}
// CHECK-DAG: merak.param @rec : tensor<4x4xf32> = dense<{{.*}}> : tensor<4x4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x3x3xf32> {merak.vocab_classes = 5 : i64, merak.vocab_parallel = "tp"})
// CHECK: merak.gather %{{.*}}[%{{.*}}] axis = 0 : tensor<4x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x3x4xf32>
// CHECK: %[[X:.*]] = merak.tp_identity
// CHECK: %[[L:.*]] = merak.matmul %[[X]], %{{.*}} : tensor<2x3x4xf32>, tensor<4x3xf32> -> tensor<2x3x3xf32>
// CHECK: %[[B:.*]] = merak.get_param @head.bias : tensor<3xf32>
// CHECK: %[[Y:.*]] = merak.add %[[B]], %[[L]] : tensor<3xf32>, tensor<2x3x3xf32>
// CHECK: return %[[Y]] : tensor<2x3x3xf32>
// LOSS-LABEL: func.func @loss
// LOSS: merak.cross_entropy %{{.*}}, %{{.*}} axis = 2 reduction = "mean" {classes = 5 : i64, group = "tp", ignore_index = -100 : i64} : tensor<2x3x3xf32>, tensor<2x3xi64> -> tensor<f32>
merak.param @emb : tensor<7x4xf32> = dense<0.25> : tensor<7x4xf32>
merak.param @rec : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
merak.param @head.weight : tensor<5x4xf32> = dense<0.125> : tensor<5x4xf32>
merak.param @head.bias : tensor<5xf32> = dense<0.0625> : tensor<5xf32>
// expected-warning @+1 {{merak-tensor-parallel: no Linear -> ... -> Linear pair to shard over tp=2: only the vocabulary is split (the LM head 'head.weight' and its bias, the cross-entropy, the token embedding(s) 'emb'); every other layer is computed whole on each tp rank}}
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x5xf32> {
  %e = merak.get_param @emb : tensor<7x4xf32>
  %x = merak.gather %e[%ids] axis = 0 : tensor<7x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %r = merak.get_param @rec : tensor<4x4xf32>
  %m = merak.matmul %x, %r : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %h = merak.tanh %m : tensor<2x3x4xf32>
  %m2 = merak.matmul %h, %r : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %h2 = merak.tanh %m2 : tensor<2x3x4xf32>
  %w = merak.get_param @head.weight : tensor<5x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<5x4xf32> to tensor<4x5xf32>
  %l = merak.matmul %h2, %wt : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %b = merak.get_param @head.bias : tensor<5xf32>
  %y = merak.add %b, %l : tensor<5xf32>, tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// A tied table and no pair: the lookup is masked and summed over tp, as
// with a pair (tensor-parallel-vocab.mlir).
// CHECK: merak.param @wte : tensor<3x4xf32> = dense<{{.*}}> : tensor<6x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.group_rank group = "tp"
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum"
// CHECK: return %{{.*}} : tensor<2x3x3xf32>
merak.param @wte : tensor<6x4xf32> = dense<0.25> : tensor<6x4xf32>
// expected-warning @+1 {{only the vocabulary is split (the LM head 'wte', 1 embedding lookup(s), the cross-entropy)}}
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x6xf32> {
  %w = merak.get_param @wte : tensor<6x4xf32>
  %x = merak.gather %w[%ids] axis = 0 : tensor<6x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %h = merak.tanh %x : tensor<2x3x4xf32>
  %wh = merak.get_param @wte : tensor<6x4xf32>
  %wt = merak.transpose %wh perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %l = merak.matmul %h, %wt : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  return %l : tensor<2x3x6xf32>
}

// -----

// Neither a pair nor a vocabulary to split: the head adds a computed bias
// (b * b), not a parameter (which the LOSS run above also fails on).
merak.param @head.weight : tensor<6x4xf32> = dense<0.125> : tensor<6x4xf32>
merak.param @head.bias : tensor<6xf32> = dense<0.0625> : tensor<6xf32>
// expected-error @+1 {{found no structure to shard over tp=2: no Linear -> ... -> Linear pair (an MLP, attention projections around a head split, or convolutions Conv -> ... -> Conv) whose intermediate values only pass through ops whose sharding rule keeps the split (elementwise ops, reshapes, transposes, splits, softmax, batched matmuls, ...), and no vocabulary to split (the LM head's bias is not a [V] parameter read only there)}}
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x6xf32> {
  %w = merak.get_param @head.weight : tensor<6x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %l = merak.matmul %x, %wt : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  %b = merak.get_param @head.bias : tensor<6xf32>
  %b2 = merak.mul %b, %b : tensor<6xf32>, tensor<6xf32>
  %y = merak.add %b2, %l : tensor<6xf32>, tensor<2x3x6xf32>
  return %y : tensor<2x3x6xf32>
}

// -----

// Asked for explicitly (vocab-parallel without the fallback), a head that
// does not qualify is an error even when a token embedding could split.
merak.param @tok : tensor<8x4xf32> = dense<0.25> : tensor<8x4xf32>
merak.param @head.weight : tensor<6x4xf32> = dense<0.125> : tensor<6x4xf32>
merak.param @head.bias : tensor<6xf32> = dense<0.0625> : tensor<6xf32>
// expected-error @+1 {{merak-tensor-parallel: vocab-parallel: the LM head's bias is not a [V] parameter read only there}}
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x6xf32> {
  %t = merak.get_param @tok : tensor<8x4xf32>
  %x = merak.gather %t[%ids] axis = 0 : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %w = merak.get_param @head.weight : tensor<6x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %l = merak.matmul %x, %wt : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  %b = merak.get_param @head.bias : tensor<6xf32>
  %b2 = merak.mul %b, %b : tensor<6xf32>, tensor<6xf32>
  %y = merak.add %b2, %l : tensor<6xf32>, tensor<2x3x6xf32>
  return %y : tensor<2x3x6xf32>
}
