// RUN: merak-opt %s -split-input-file -merak-tensor-parallel="tp=2 vocab-parallel=true" | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-tensor-parallel="tp=2 vocab-parallel=true" -merak-attach-loss | FileCheck %s --check-prefix=LOSS
// RUN: merak-opt %s -split-input-file -merak-tensor-parallel="tp=4 vocab-parallel=true" -merak-attach-loss | FileCheck %s --check-prefix=PAD

// Vocabulary parallelism on a tied embedding / LM head (GPT-2's wte, V = 6,
// C = 4) around an MLP: wte is split on V (3 rows per rank); the lookup
// shifts the ids by -group_rank * 3, masks them to [0, 3), zeroes the rows
// of other ranks and all-reduces (tp, sum); the LM head takes f and
// returns the logits split [2, 3, 3] (never [2, 3, 6]), marked for
// merak-attach-loss, which builds the vocab-parallel cross-entropy.
// CHECK-DAG: merak.param @wte : tensor<3x4xf32> = dense<{{.*}}> : tensor<6x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x3x3xf32> {merak.vocab_parallel = "tp"})
// CHECK: %[[W:.*]] = merak.get_param @wte : tensor<3x4xf32>
// CHECK: %[[R:.*]] = merak.group_rank group = "tp" : tensor<i64>
// CHECK: %[[OFF:.*]] = merak.mul %[[R]], %{{.*}} : tensor<i64>, tensor<i64>
// CHECK: %[[S:.*]] = merak.sub %{{.*}}, %[[OFF]] : tensor<2x3xi64>, tensor<i64>
// CHECK: merak.ge %[[S]]
// CHECK: merak.lt %[[S]]
// CHECK: %[[IN:.*]] = merak.and
// CHECK: %[[SAFE:.*]] = merak.where %[[IN]], %[[S]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xi64>, tensor<i64>
// CHECK: %[[G:.*]] = merak.gather %[[W]][%[[SAFE]]] axis = 0 : tensor<3x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: %[[M:.*]] = merak.reshape %[[IN]] : tensor<2x3xi1> to tensor<2x3x1xi1>
// CHECK: %[[P:.*]] = merak.where %[[M]], %[[G]], %{{.*}} : tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<f32>
// CHECK: %[[E:.*]] = merak.all_reduce %[[P]] group = "tp" reduction = "sum"
// CHECK: merak.tp_identity %[[E]]
// CHECK: %[[WT:.*]] = merak.transpose %{{.*}} perm = [1, 0] : tensor<3x4xf32> to tensor<4x3xf32>
// CHECK: %[[HF:.*]] = merak.tp_identity %{{.*}} : tensor<2x3x4xf32>
// CHECK: %[[L:.*]] = merak.matmul %[[HF]], %[[WT]] : tensor<2x3x4xf32>, tensor<4x3xf32> -> tensor<2x3x3xf32>
// CHECK: return %[[L]] : tensor<2x3x3xf32>
// CHECK-NOT: tensor<2x3x6xf32>
// LOSS-LABEL: func.func @loss
// LOSS: merak.cross_entropy %{{.*}}, %{{.*}} axis = 2 reduction = "mean" {group = "tp", ignore_index = -100 : i64} : tensor<2x3x3xf32>, tensor<2x3xi64> -> tensor<f32>
// LOSS-NOT: tensor<2x3x6xf32>
// A vocabulary that does not divide by tp is padded (Megatron-LM): at tp 4,
// shards of ceil(6 / 4) = 2 rows, the last one all padding (rows 6 and 7,
// zeros, never looked up); the cross-entropy leaves the padding classes out.
// PAD: merak.param @wte : tensor<2x4xf32> = dense<{{.*}}> : tensor<6x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 4, size = 6>}
// PAD-LABEL: func.func @loss
// PAD: merak.cross_entropy %{{.*}}, %{{.*}} axis = 2 reduction = "mean" {classes = 6 : i64, group = "tp", ignore_index = -100 : i64} : tensor<2x3x2xf32>, tensor<2x3xi64> -> tensor<f32>
merak.param @wte : tensor<6x4xf32> = dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6], [1.7, 1.8, 1.9, 2.0], [2.1, 2.2, 2.3, 2.4]]> : tensor<6x4xf32>
merak.param @fc1.weight : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @fc2.weight : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x6xf32> {
  %w = merak.get_param @wte : tensor<6x4xf32>
  %e = merak.gather %w[%ids] axis = 0 : tensor<6x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %w1 = merak.get_param @fc1.weight : tensor<8x4xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %e, %t1 : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %g = merak.gelu %m1 : tensor<2x3x8xf32>
  %w2 = merak.get_param @fc2.weight : tensor<4x8xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %m2 = merak.matmul %g, %t2 : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %h = merak.add %e, %m2 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %wh = merak.get_param @wte : tensor<6x4xf32>
  %th = merak.transpose %wh perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %logits = merak.matmul %h, %th : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  return %logits : tensor<2x3x6xf32>
}

// -----

// Untied (Llama's embed_tokens and lm_head): the input table `tok` of the
// same vocabulary (6 rows) is split with the head, its lookup masked and
// summed over tp (Megatron-LM's VocabParallelEmbedding); `pos`, a table of
// another length (3 positions), stays replicated.
// CHECK-DAG: merak.param @tok : tensor<3x4xf32> = dense<{{.*}}> : tensor<6x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @out : tensor<3x4xf32> = dense<{{.*}}> : tensor<6x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @pos : tensor<3x4xf32> = dense<{{.*}}> : tensor<3x4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x3x3xf32> {merak.vocab_parallel = "tp"})
// CHECK: %[[T:.*]] = merak.get_param @tok : tensor<3x4xf32>
// CHECK: merak.group_rank group = "tp"
// CHECK: %[[G:.*]] = merak.gather %[[T]][%{{.*}}] axis = 0 : tensor<3x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: %[[P:.*]] = merak.where %{{.*}}, %[[G]], %{{.*}}
// CHECK: merak.all_reduce %[[P]] group = "tp" reduction = "sum"
// CHECK: %[[Q:.*]] = merak.get_param @pos : tensor<3x4xf32>
// CHECK: merak.gather %[[Q]][%{{.*}}] axis = 0 : tensor<3x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
// CHECK-NOT: merak.all_reduce {{.*}} tensor<3x4xf32>
// CHECK: return %{{.*}} : tensor<2x3x3xf32>
merak.param @tok : tensor<6x4xf32> = dense<0.25> : tensor<6x4xf32>
merak.param @pos : tensor<3x4xf32> = dense<0.125> : tensor<3x4xf32>
merak.param @out : tensor<6x4xf32> = dense<0.5> : tensor<6x4xf32>
merak.param @fc1.weight : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @fc2.weight : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%ids: tensor<2x3xi64>, %positions: tensor<3xi64>) -> tensor<2x3x6xf32> {
  %w = merak.get_param @tok : tensor<6x4xf32>
  %e = merak.gather %w[%ids] axis = 0 : tensor<6x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %wp = merak.get_param @pos : tensor<3x4xf32>
  %p = merak.gather %wp[%positions] axis = 0 : tensor<3x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %x = merak.add %e, %p : tensor<2x3x4xf32>, tensor<3x4xf32>
  %w1 = merak.get_param @fc1.weight : tensor<8x4xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %x, %t1 : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %g = merak.gelu %m1 : tensor<2x3x8xf32>
  %w2 = merak.get_param @fc2.weight : tensor<4x8xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %m2 = merak.matmul %g, %t2 : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %h = merak.add %x, %m2 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %wh = merak.get_param @out : tensor<6x4xf32>
  %th = merak.transpose %wh perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %logits = merak.matmul %h, %th : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  return %logits : tensor<2x3x6xf32>
}

// -----

// An LM head stored [C, V] (matmul(x, W), no transpose: a weight kept as
// [in, out], as JAX/TF exports and bare nn.Parameters are) splits on its
// columns (axis 1), with the untied input table of its 8 entries on rows.
// CHECK-DAG: merak.param @tok : tensor<4x4xf32> = dense<{{.*}}> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @head : tensor<4x4xf32> = dense<{{.*}}> : tensor<4x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x3x4xf32> {merak.vocab_parallel = "tp"})
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum"
// CHECK: %[[W:.*]] = merak.get_param @head : tensor<4x4xf32>
// CHECK: %[[X:.*]] = merak.tp_identity
// CHECK: merak.matmul %[[X]], %[[W]] : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
// LOSS: merak.cross_entropy %{{.*}}, %{{.*}} axis = 2 reduction = "mean" {group = "tp", ignore_index = -100 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<f32>
merak.param @tok : tensor<8x4xf32> = dense<0.25> : tensor<8x4xf32>
merak.param @head : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @tok : tensor<8x4xf32>
  %e = merak.gather %w[%ids] axis = 0 : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %h = merak.tanh %e : tensor<2x3x4xf32>
  %wh = merak.get_param @head : tensor<4x8xf32>
  %logits = merak.matmul %h, %wh : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  return %logits : tensor<2x3x8xf32>
}

// -----

// Column-wise ops after the head (Gemma 2's and nanochat's soft-capping
// cap * tanh(logits / cap), a cast) run on each rank's columns: the result
// is the capped logits split [2, 3, 3], and the loss reads them split.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x3x3xf32> {merak.vocab_parallel = "tp"})
// CHECK: %[[L:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<2x3x4xf32>, tensor<4x3xf32> -> tensor<2x3x3xf32>
// CHECK: %[[D:.*]] = merak.div %[[L]], %{{.*}} : tensor<2x3x3xf32>, tensor<f32>
// CHECK: %[[T:.*]] = merak.tanh %[[D]] : tensor<2x3x3xf32>
// CHECK: %[[C:.*]] = merak.mul %[[T]], %{{.*}} : tensor<2x3x3xf32>, tensor<1x1x1xf32>
// CHECK: return %[[C]] : tensor<2x3x3xf32>
// LOSS: merak.cross_entropy %{{.*}}, %{{.*}} axis = 2 reduction = "mean" {group = "tp", ignore_index = -100 : i64} : tensor<2x3x3xf32>, tensor<2x3xi64> -> tensor<f32>
// PAD: merak.cross_entropy %{{.*}}, %{{.*}} axis = 2 reduction = "mean" {classes = 6 : i64, group = "tp", ignore_index = -100 : i64} : tensor<2x3x2xf32>, tensor<2x3xi64> -> tensor<f32>
merak.param @wte : tensor<6x4xf32> = dense<0.25> : tensor<6x4xf32>
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x6xf32> {
  %w = merak.get_param @wte : tensor<6x4xf32>
  %e = merak.gather %w[%ids] axis = 0 : tensor<6x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %wh = merak.get_param @wte : tensor<6x4xf32>
  %th = merak.transpose %wh perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %logits = merak.matmul %e, %th : tensor<2x3x4xf32>, tensor<4x6xf32> -> tensor<2x3x6xf32>
  %cap = merak.constant dense<30.0> : tensor<f32>
  %capb = merak.constant dense<30.0> : tensor<1x1x1xf32>
  %d = merak.div %logits, %cap : tensor<2x3x6xf32>, tensor<f32>
  %t = merak.tanh %d : tensor<2x3x6xf32>
  %c = merak.mul %t, %capb : tensor<2x3x6xf32>, tensor<1x1x1xf32>
  return %c : tensor<2x3x6xf32>
}

