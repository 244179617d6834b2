// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 -merak-autodiff | FileCheck %s --check-prefix=GRAD

// OLMo 2's query norm: an RMS norm over the whole projection, before the
// heads are taken apart. The projection stays column-parallel: the norm's
// weight is split with it, each rank sums the squares of its own features,
// the sums are summed over tp (g) and go through f, so that every rank's
// partial gradient of them is summed too.
// CHECK-DAG: merak.param @q.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @qn.weight : tensor<4xf32> = dense<{{.*}}> : tensor<8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @o.weight : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x4x8xf32>, tensor<8x4xf32> -> tensor<1x4x4xf32>
// CHECK-NEXT: %[[SQ:.*]] = merak.mul %[[Q]], %[[Q]] : tensor<1x4x4xf32>, tensor<1x4x4xf32>
// CHECK-NEXT: %[[SS:.*]] = merak.reduce_sum %[[SQ]] axes = [2] {keepdims} : tensor<1x4x4xf32> -> tensor<1x4x1xf32>
// CHECK-NEXT: %[[G:.*]] = merak.all_reduce %[[SS]] group = "tp" reduction = "sum" : tensor<1x4x1xf32> -> tensor<1x4x1xf32>
// CHECK-NEXT: %[[F:.*]] = merak.tp_identity %[[G]] : tensor<1x4x1xf32>
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<1.250000e-01> : tensor<f32>
// CHECK-NEXT: %[[MS:.*]] = merak.mul %[[F]], %[[C]]
// CHECK-NEXT: %[[E:.*]] = merak.constant dense<9.99999997E-7> : tensor<f32>
// CHECK-NEXT: %[[V:.*]] = merak.add %[[MS]], %[[E]]
// CHECK-NEXT: %[[R:.*]] = merak.rsqrt %[[V]] : tensor<1x4x1xf32>
// CHECK-NEXT: %[[N:.*]] = merak.mul %[[Q]], %[[R]] : tensor<1x4x4xf32>, tensor<1x4x1xf32>
// CHECK-NEXT: merak.mul %[[N]], %{{.*}} : tensor<1x4x4xf32>, tensor<4xf32>
// CHECK-NOT: merak.rms_norm
// CHECK: merak.reshape %{{.*}} : tensor<1x4x4xf32> to tensor<1x4x1x4xf32>
// CHECK: %[[O:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x4x4xf32>, tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: merak.all_reduce %[[O]] group = "tp" reduction = "sum" : tensor<1x4x8xf32>

// The sums' gradient is summed over tp (f's derivative); the norm weight's
// gradient is its rank's part, with no sum.
// GRAD-LABEL: func.func @forward_grad
// GRAD: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<1x4x1xf32> -> tensor<1x4x1xf32>
// GRAD: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<1x4x1xf32> -> tensor<1x4x1xf32>
// GRAD-NOT: merak.all_reduce %{{.*}} : tensor<4xf32>
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @qn.weight : tensor<8xf32> = dense<1.0> : tensor<8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wn = merak.get_param @qn.weight : tensor<8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q1 = merak.rms_norm %q0 scale %wn axis = 2 epsilon = 1.0e-06 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q2 = merak.reshape %q1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q3 = merak.tanh %q2 : tensor<1x4x2x4xf32>
  %y = merak.reshape %q3 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A layer norm over split features: the mean and then the variance (two
// passes) summed over tp; the bias split with the scale.
// CHECK-DAG: merak.param @ln.bias : tensor<4xf32> = dense<{{.*}}> : tensor<8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<3x8xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %[[S:.*]] = merak.reduce_sum %[[H]] axes = [1] {keepdims} : tensor<3x4xf32> -> tensor<3x1xf32>
// CHECK-NEXT: merak.all_reduce %[[S]] group = "tp" reduction = "sum" : tensor<3x1xf32>
// CHECK: %[[XC:.*]] = merak.sub %[[H]], %{{.*}} : tensor<3x4xf32>, tensor<3x1xf32>
// CHECK-NEXT: %[[SQ:.*]] = merak.mul %[[XC]], %[[XC]]
// CHECK-NEXT: %[[V:.*]] = merak.reduce_sum %[[SQ]] axes = [1] {keepdims}
// CHECK-NEXT: merak.all_reduce %[[V]] group = "tp" reduction = "sum" : tensor<3x1xf32>
// CHECK: merak.rsqrt
// CHECK: merak.add %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4xf32>
// CHECK-NOT: merak.layer_norm
merak.param @w1 : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @ln.weight : tensor<8xf32> = dense<1.0> : tensor<8xf32>
merak.param @ln.bias : tensor<8xf32> = dense<0.5> : tensor<8xf32>
merak.param @w2 : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
func.func @forward(%x: tensor<3x8xf32>) -> tensor<f32> {
  %w1 = merak.get_param @w1 : tensor<8x8xf32>
  %g = merak.get_param @ln.weight : tensor<8xf32>
  %b = merak.get_param @ln.bias : tensor<8xf32>
  %w2 = merak.get_param @w2 : tensor<8x8xf32>
  %h = merak.matmul %x, %w1 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %n = merak.layer_norm %h scale %g bias %b axis = 1 epsilon = 1.0e-05 : (tensor<3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %o = merak.matmul %n, %w2 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Not a block: an LM head's transform (dense -> layer norm -> the head) ends
// in a sum wider than its input (the logits, read by a softmax), so it
// stays replicated. (The MLP beside it is split.)
// CHECK-DAG: merak.param @dense : tensor<8x8xf32> = dense<{{.*}}> : tensor<8x8xf32>{{$}}
// CHECK-DAG: merak.param @head : tensor<8x16xf32> = dense<{{.*}}> : tensor<8x16xf32>{{$}}
// CHECK-DAG: merak.param @m1 : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard
// CHECK-LABEL: func.func @forward
// CHECK-NOT: merak.all_reduce
// CHECK: merak.layer_norm
merak.param @m1 : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @m2 : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @dense : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @head : tensor<8x16xf32> = dense<0.125> : tensor<8x16xf32>
func.func @forward(%x: tensor<3x8xf32>) -> tensor<f32> {
  %w1 = merak.get_param @dense : tensor<8x8xf32>
  %w2 = merak.get_param @head : tensor<8x16xf32>
  %h = merak.matmul %x, %w1 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %n = merak.layer_norm %h axis = 1 epsilon = 1.0e-05 : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %o = merak.matmul %n, %w2 : tensor<3x8xf32>, tensor<8x16xf32> -> tensor<3x16xf32>
  %p = merak.softmax %o axis = 1 : tensor<3x16xf32>
  %l = merak.reduce_sum %p axes = [0, 1] : tensor<3x16xf32> -> tensor<f32>
  %u1 = merak.get_param @m1 : tensor<8x8xf32>
  %u2 = merak.get_param @m2 : tensor<8x8xf32>
  %ua = merak.matmul %x, %u1 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %ur = merak.relu %ua : tensor<3x8xf32>
  %ub = merak.matmul %ur, %u2 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %ul = merak.reduce_sum %ub axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  %t = merak.add %l, %ul : tensor<f32>, tensor<f32>
  return %t : tensor<f32>
}

// -----

// Not a block: a norm on a residual stream, whose region's columns read
// different values (here two inputs; in ELECTRA, the embedding projection
// and each block's output Linear): summing its statistics would split the
// stream across blocks. The region stays replicated (and the last Linear,
// read by a softmax, too).
// CHECK-DAG: merak.param @a : tensor<8x8xf32> = dense<{{.*}}> : tensor<8x8xf32>{{$}}
// CHECK-DAG: merak.param @b : tensor<8x8xf32> = dense<{{.*}}> : tensor<8x8xf32>{{$}}
// CHECK-DAG: merak.param @c : tensor<8x8xf32> = dense<{{.*}}> : tensor<8x8xf32>{{$}}
// CHECK-DAG: merak.param @m1 : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard
// CHECK-LABEL: func.func @forward
// CHECK-NOT: merak.all_reduce
// CHECK: merak.layer_norm
merak.param @m1 : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @m2 : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @a : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @b : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @c : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
func.func @forward(%x: tensor<3x8xf32>, %y: tensor<3x8xf32>) -> tensor<f32> {
  %wa = merak.get_param @a : tensor<8x8xf32>
  %wb = merak.get_param @b : tensor<8x8xf32>
  %wc = merak.get_param @c : tensor<8x8xf32>
  %ha = merak.matmul %x, %wa : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %hb = merak.matmul %y, %wb : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %s = merak.add %ha, %hb : tensor<3x8xf32>, tensor<3x8xf32>
  %n = merak.layer_norm %s axis = 1 epsilon = 1.0e-05 : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %o = merak.matmul %n, %wc : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %p = merak.softmax %o axis = 1 : tensor<3x8xf32>
  %l = merak.reduce_sum %p axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  %u1 = merak.get_param @m1 : tensor<8x8xf32>
  %u2 = merak.get_param @m2 : tensor<8x8xf32>
  %ua = merak.matmul %x, %u1 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %ur = merak.relu %ua : tensor<3x8xf32>
  %ub = merak.matmul %ur, %u2 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %ul = merak.reduce_sum %ub axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  %t = merak.add %l, %ul : tensor<f32>, tensor<f32>
  return %t : tensor<f32>
}

// -----

// A region waiting for another's split: the queries' region meets keys
// computed behind a low-rank projection (DeepSeek-V3's kv path), whose own
// region (a, its norm, kv) is consistent but pruned (its end is wider than
// its input). The queries' region is given up only after the pruning, which
// seeds kv: q and kv end up column-parallel, o row-parallel, a replicated.
// CHECK-DAG: merak.param @q.weight : tensor<8x8xf32> = dense<{{.*}}> : tensor<8x16xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @a.weight : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x4xf32>{{$}}
// CHECK-DAG: merak.param @kv.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<4x16xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @o.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.rms_norm %{{.*}} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: merak.matmul %{{.*}}, %{{.*}} : tensor<2x1x4x8xf32>, tensor<2x1x8x4xf32> -> tensor<2x1x4x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x4x8xf32>
merak.param @q.weight : tensor<8x16xf32> = dense<0.125> : tensor<8x16xf32>
merak.param @a.weight : tensor<8x4xf32> = dense<0.25> : tensor<8x4xf32>
merak.param @kv.weight : tensor<4x16xf32> = dense<0.25> : tensor<4x16xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
  %wq = merak.get_param @q.weight : tensor<8x16xf32>
  %wa = merak.get_param @a.weight : tensor<8x4xf32>
  %wkv = merak.get_param @kv.weight : tensor<4x16xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %q0 = merak.matmul %x, %wq : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %q1 = merak.reshape %q0 : tensor<2x4x16xf32> to tensor<2x4x2x8xf32>
  %q2 = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x8xf32> to tensor<2x2x4x8xf32>
  %a0 = merak.matmul %x, %wa : tensor<2x4x8xf32>, tensor<8x4xf32> -> tensor<2x4x4xf32>
  %a1 = merak.rms_norm %a0 axis = 2 epsilon = 1.0e-06 : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %k0 = merak.matmul %a1, %wkv : tensor<2x4x4xf32>, tensor<4x16xf32> -> tensor<2x4x16xf32>
  %k1 = merak.reshape %k0 : tensor<2x4x16xf32> to tensor<2x4x2x8xf32>
  %k2 = merak.transpose %k1 perm = [0, 2, 3, 1] : tensor<2x4x2x8xf32> to tensor<2x2x8x4xf32>
  %s = merak.matmul %q2, %k2 : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %t = merak.tanh %s : tensor<2x2x4x4xf32>
  %t1 = merak.transpose %t perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> to tensor<2x4x2x4xf32>
  %y = merak.reshape %t1 : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %o = merak.matmul %y, %wo : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// ConvNeXt V2's global response normalisation between the MLP's Linears: a
// mean over the split features (reduce_mean, axis 2). Each rank's mean of
// its own features, summed over tp (g) and halved, is the whole mean; it
// is read by the split division through f, so that the ranks' partial
// gradients of it are summed.
// CHECK-LABEL: func.func @forward
// CHECK: %[[GX:.*]] = merak.reduce_sum %{{.*}} axes = [1] {keepdims} : tensor<1x3x4xf32> -> tensor<1x1x4xf32>
// CHECK-NEXT: %[[M:.*]] = merak.reduce_mean %[[GX]] axes = [2] {keepdims} : tensor<1x1x4xf32> -> tensor<1x1x1xf32>
// CHECK-NEXT: %[[G:.*]] = merak.all_reduce %[[M]] group = "tp" reduction = "sum" : tensor<1x1x1xf32> -> tensor<1x1x1xf32>
// CHECK-NEXT: %[[HALF:.*]] = merak.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = merak.mul %[[G]], %[[HALF]] : tensor<1x1x1xf32>, tensor<f32>
// CHECK-NEXT: %[[D:.*]] = merak.add %[[W]], %{{.*}} : tensor<1x1x1xf32>, tensor<f32>
// CHECK-NEXT: %[[F:.*]] = merak.tp_identity %[[D]] : tensor<1x1x1xf32>
// CHECK-NEXT: merak.div %[[GX]], %[[F]] : tensor<1x1x4xf32>, tensor<1x1x1xf32>
// CHECK: %[[O:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
// CHECK-NEXT: merak.all_reduce %[[O]] group = "tp" reduction = "sum" : tensor<1x3x4xf32>
merak.param @up.weight : tensor<8x4xf32> = dense<0.125> : tensor<8x4xf32>
merak.param @down.weight : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%x: tensor<1x3x4xf32>) -> tensor<f32> {
  %eps = merak.constant dense<1.0e-06> : tensor<f32>
  %wu = merak.get_param @up.weight : tensor<8x4xf32>
  %wd = merak.get_param @down.weight : tensor<4x8xf32>
  %tu = merak.transpose %wu perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %h = merak.matmul %x, %tu : tensor<1x3x4xf32>, tensor<4x8xf32> -> tensor<1x3x8xf32>
  %sq = merak.mul %h, %h : tensor<1x3x8xf32>, tensor<1x3x8xf32>
  %gx = merak.reduce_sum %sq axes = [1] {keepdims} : tensor<1x3x8xf32> -> tensor<1x1x8xf32>
  %m = merak.reduce_mean %gx axes = [2] {keepdims} : tensor<1x1x8xf32> -> tensor<1x1x1xf32>
  %d = merak.add %m, %eps : tensor<1x1x1xf32>, tensor<f32>
  %nx = merak.div %gx, %d : tensor<1x1x8xf32>, tensor<1x1x1xf32>
  %y = merak.mul %h, %nx : tensor<1x3x8xf32>, tensor<1x1x8xf32>
  %td = merak.transpose %wd perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %o = merak.matmul %y, %td : tensor<1x3x8xf32>, tensor<8x4xf32> -> tensor<1x3x4xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<1x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A latent query (DeepSeek-V3's and Mistral 4's `q_b(norm(q_a(x)))`, rank 4
// under width 8): q_a narrows, the norm's sums would be all-reduced and q_b,
// contracting 4 into 8, widens the rank back. As a column/row pair that
// would all-reduce q_b's whole output (its width) to save two products of
// rank 4: no Megatron block (Megatron-LM's MLA replicates the down
// projections). q_a stays whole and q_b is the column-parallel Linear, split
// on its 2 heads, through the scores to the row-parallel o.
// CHECK-DAG: merak.param @qa.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<4x8xf32>{{$}}
// CHECK-DAG: merak.param @qn.weight : tensor<4xf32> = dense<{{.*}}> : tensor<4xf32>{{$}}
// CHECK-DAG: merak.param @qb.weight : tensor<4x4xf32> = dense<{{.*}}> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @k.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @o.weight : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.rms_norm %{{.*}} scale %{{.*}} axis = 2 {{.*}} : (tensor<1x4x4xf32>, tensor<4xf32>) -> tensor<1x4x4xf32>
// CHECK: merak.matmul %{{.*}}, %{{.*}} : tensor<1x4x4xf32>, tensor<4x4xf32> -> tensor<1x4x4xf32>
// CHECK: %[[O:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x4x4xf32>, tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: merak.all_reduce %[[O]] group = "tp" reduction = "sum" : tensor<1x4x8xf32>
// CHECK-NOT: merak.all_reduce
merak.param @qa.weight : tensor<4x8xf32> = dense<0.125> : tensor<4x8xf32>
merak.param @qn.weight : tensor<4xf32> = dense<1.0> : tensor<4xf32>
merak.param @qb.weight : tensor<8x4xf32> = dense<0.25> : tensor<8x4xf32>
merak.param @k.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
  %wqa = merak.get_param @qa.weight : tensor<4x8xf32>
  %wqn = merak.get_param @qn.weight : tensor<4xf32>
  %wqb = merak.get_param @qb.weight : tensor<8x4xf32>
  %wk = merak.get_param @k.weight : tensor<8x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tqa = merak.transpose %wqa perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %qa = merak.matmul %x, %tqa : tensor<1x4x8xf32>, tensor<8x4xf32> -> tensor<1x4x4xf32>
  %qn = merak.rms_norm %qa scale %wqn axis = 2 epsilon = 1.0E-6 : (tensor<1x4x4xf32>, tensor<4xf32>) -> tensor<1x4x4xf32>
  %tqb = merak.transpose %wqb perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %q0 = merak.matmul %qn, %tqb : tensor<1x4x4xf32>, tensor<4x8xf32> -> tensor<1x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %k0 = merak.matmul %x, %tk : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %k1 = merak.reshape %k0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %kt = merak.transpose %k1 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %c0 = merak.transpose %p perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %c = merak.reshape %c0 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %y = merak.matmul %c, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %l = merak.reduce_sum %y axes = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
