// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 -merak-autodiff | FileCheck %s --check-prefix=GRAD

// Qwen3-style per-head RMSNorm of the queries (its weight [D] is shared by
// every head): the heads split over tp, the weight stays whole on each
// rank, and each rank's gradient of it sums over its own heads only. The
// weight's read by the split norm goes through Megatron's f
// (merak.tp_identity), whose derivative sums that gradient over tp; the
// constant scale needs none.
// CHECK-DAG: merak.param @qn.weight : tensor<4xf32> = dense<{{.*}}> : tensor<4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: merak.tp_identity %arg0 : tensor<1x4x8xf32>
// CHECK: %[[W:.*]] = merak.get_param @qn.weight : tensor<4xf32>
// CHECK-NEXT: %[[FW:.*]] = merak.tp_identity %[[W]] : tensor<4xf32>
// CHECK-NOT: merak.tp_identity
// CHECK: merak.rms_norm %{{.*}} scale %[[FW]] axis = 3 {{.*}} : (tensor<1x4x1x4xf32>, tensor<4xf32>) -> tensor<1x4x1x4xf32>
// CHECK-NEXT: merak.mul %{{.*}}, %{{.*}} : tensor<1x4x1x4xf32>, tensor<f32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<1x4x8xf32>

// The norm weight's gradient is the tp sum of the ranks' parts.
// GRAD-LABEL: func.func @forward_grad
// GRAD: %[[G:.*]] = merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
// GRAD: return {{.*}}%[[G]]
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @qn.weight : tensor<4xf32> = dense<1.0> : tensor<4xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
  %scale = merak.constant dense<5.000000e-01> : tensor<f32>
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wn = merak.get_param @qn.weight : tensor<4xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q2 = merak.rms_norm %q1 scale %wn axis = 3 epsilon = 1.0e-06 : (tensor<1x4x2x4xf32>, tensor<4xf32>) -> tensor<1x4x2x4xf32>
  %q3 = merak.mul %q2, %scale : tensor<1x4x2x4xf32>, tensor<f32>
  %y = merak.reshape %q3 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// T5-style relative-position bias [1, H, T, S] added to the split scores:
// computed from a parameter through other ops and read twice (T5 computes
// it once and adds it in every layer; here a second, replicated reader),
// so it is not split at its source. Each rank reads its heads of it
// through merak.local_shard (Megatron's scatter: the heads to the front,
// the rank's part, back), whose derivative gathers the parts' gradients
// over tp, so every rank computes the whole table's gradient.
// CHECK-DAG: merak.param @rel : tensor<4x4x2xf32> = dense<{{.*}}> : tensor<4x4x2xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: %[[B:.*]] = merak.reshape %{{.*}} : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[T:.*]] = merak.transpose %[[B]] perm = [1, 0, 2, 3] : tensor<1x2x4x4xf32> to tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[L:.*]] = merak.local_shard %[[T]] group = "tp" : tensor<2x1x4x4xf32> -> tensor<1x1x4x4xf32>
// CHECK-NEXT: %[[P:.*]] = merak.transpose %[[L]] perm = [1, 0, 2, 3] : tensor<1x1x4x4xf32> to tensor<1x1x4x4xf32>
// CHECK: merak.add %{{.*}}, %[[P]] : tensor<2x1x4x4xf32>, tensor<1x1x4x4xf32>
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<2x1x4x4xf32>

// GRAD-LABEL: func.func @forward_grad
// GRAD: merak.all_gather %{{.*}} group = "tp" : tensor<1x1x4x4xf32> -> tensor<2x1x4x4xf32>
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @k.weight : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @v.weight : tensor<8x8xf32> = dense<0.375> : tensor<8x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @rel : tensor<4x4x2xf32> = dense<0.0625> : tensor<4x4x2xf32>
func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wk = merak.get_param @k.weight : tensor<8x8xf32>
  %wv = merak.get_param @v.weight : tensor<8x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %rel = merak.get_param @rel : tensor<4x4x2xf32>
  %bt = merak.transpose %rel perm = [2, 0, 1] : tensor<4x4x2xf32> to tensor<2x4x4xf32>
  %bias = merak.reshape %bt : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %tv = merak.transpose %wv perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %k0 = merak.matmul %x, %tk : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %v0 = merak.matmul %x, %tv : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %q = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %k1 = merak.reshape %k0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %kt = merak.transpose %k1 perm = [0, 2, 3, 1] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %v1 = merak.reshape %v0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %v = merak.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %s0 = merak.matmul %q, %kt : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %s = merak.add %s0, %bias : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>
  %a = merak.softmax %s axis = 3 : tensor<2x2x4x4xf32>
  %o0 = merak.matmul %a, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %o1 = merak.transpose %o0 perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> to tensor<2x4x2x4xf32>
  %o2 = merak.reshape %o1 : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %o2, %to : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  %r = merak.reduce_sum %bias axes = [0, 1, 2, 3] : tensor<1x2x4x4xf32> -> tensor<f32>
  %lr = merak.add %l, %r : tensor<f32>, tensor<f32>
  return %lr : tensor<f32>
}

// -----

// The same bias read only by the scores: the walk goes up from the add
// through the reshape and the transpose to the table, read only there,
// which is split on its heads (each rank stores and trains its heads'
// columns; no scatter, no gather).

// CHECK-DAG: merak.param @rel : tensor<4x4x1xf32> = dense<{{.*}}> : tensor<4x4x2xf32> {merak.shard = #merak.shard<axis = 2, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[R:.*]] = merak.get_param @rel : tensor<4x4x1xf32>
// CHECK-NEXT: %[[T:.*]] = merak.transpose %[[R]] perm = [2, 0, 1] : tensor<4x4x1xf32> to tensor<1x4x4xf32>
// CHECK-NEXT: %[[B:.*]] = merak.reshape %[[T]] : tensor<1x4x4xf32> to tensor<1x1x4x4xf32>
// CHECK-NOT: merak.local_shard
// CHECK: merak.add %{{.*}}, %[[B]] : tensor<2x1x4x4xf32>, tensor<1x1x4x4xf32>

// GRAD-LABEL: func.func @forward_grad
// GRAD-NOT: merak.all_gather
// GRAD: return
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @k.weight : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @v.weight : tensor<8x8xf32> = dense<0.375> : tensor<8x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @rel : tensor<4x4x2xf32> = dense<0.0625> : tensor<4x4x2xf32>
func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wk = merak.get_param @k.weight : tensor<8x8xf32>
  %wv = merak.get_param @v.weight : tensor<8x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %rel = merak.get_param @rel : tensor<4x4x2xf32>
  %bt = merak.transpose %rel perm = [2, 0, 1] : tensor<4x4x2xf32> to tensor<2x4x4xf32>
  %bias = merak.reshape %bt : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %tv = merak.transpose %wv perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %k0 = merak.matmul %x, %tk : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %v0 = merak.matmul %x, %tv : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %q = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %k1 = merak.reshape %k0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %kt = merak.transpose %k1 perm = [0, 2, 3, 1] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %v1 = merak.reshape %v0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %v = merak.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %s0 = merak.matmul %q, %kt : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %s = merak.add %s0, %bias : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>
  %a = merak.softmax %s axis = 3 : tensor<2x2x4x4xf32>
  %o0 = merak.matmul %a, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %o1 = merak.transpose %o0 perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> to tensor<2x4x2x4xf32>
  %o2 = merak.reshape %o1 : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %o2, %to : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// BLOOM's ALiBi bias [batch * heads, 1, S], computed from an input (the
// attention mask) and constants alone, added to the split scores on the
// merged [batch * heads] dimension (the heads split in blocks of the
// batch): each rank reads its heads of every batch row through
// merak.local_shard, the merged dimension viewed as [batch, heads] around
// it. An input-derived value holds no gradient, so no f goes with it.
// CHECK-LABEL: func.func @forward
// CHECK: %[[A:.*]] = merak.mul %arg1, %{{.*}} : tensor<4x1x4xf32>, tensor<f32>
// CHECK-NEXT: %[[V:.*]] = merak.reshape %[[A]] : tensor<4x1x4xf32> to tensor<2x2x1x4xf32>
// CHECK-NEXT: %[[T:.*]] = merak.transpose %[[V]] perm = [1, 0, 2, 3] : tensor<2x2x1x4xf32> to tensor<2x2x1x4xf32>
// CHECK-NEXT: %[[L:.*]] = merak.local_shard %[[T]] group = "tp" : tensor<2x2x1x4xf32> -> tensor<1x2x1x4xf32>
// CHECK-NEXT: %[[B:.*]] = merak.transpose %[[L]] perm = [1, 0, 2, 3] : tensor<1x2x1x4xf32> to tensor<2x1x1x4xf32>
// CHECK-NEXT: %[[P:.*]] = merak.reshape %[[B]] : tensor<2x1x1x4xf32> to tensor<2x1x4xf32>
// CHECK: merak.add %{{.*}}, %[[P]] : tensor<2x4x4xf32>, tensor<2x1x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x4x8xf32>
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x4x8xf32>, %m: tensor<4x1x4xf32>) -> tensor<f32> {
  %slope = merak.constant dense<5.000000e-01> : tensor<f32>
  %alibi = merak.mul %m, %slope : tensor<4x1x4xf32>, tensor<f32>
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %q2 = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> to tensor<2x2x4x4xf32>
  %q3 = merak.reshape %q2 : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %s = merak.add %q3, %alibi : tensor<4x4x4xf32>, tensor<4x1x4xf32>
  %t = merak.tanh %s : tensor<4x4x4xf32>
  %y0 = merak.reshape %t : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %y1 = merak.transpose %y0 perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> to tensor<2x4x2x4xf32>
  %y = merak.reshape %y1 : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %to : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// DeepSeek-V3's rotary key part: one head of an activation (computed from
// the input by a Linear that is no seed here: its weight is read twice)
// broadcast to every head and combined with the split heads. It is split
// where it is computed: the broadcast yields this rank's heads, and its
// input is read through f (the broadcast's gradient sums over the rank's
// heads only).
// CHECK-DAG: merak.param @k.weight : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: %[[KM:.*]] = merak.matmul %arg0, %{{.*}} : tensor<2x4x8xf32>, tensor<8x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[K:.*]] = merak.reshape %[[KM]] : tensor<2x4x4xf32> to tensor<2x4x1x4xf32>
// CHECK-NEXT: %[[F:.*]] = merak.tp_identity %[[K]] : tensor<2x4x1x4xf32>
// CHECK-NEXT: %[[B:.*]] = merak.broadcast %[[F]] : tensor<2x4x1x4xf32> to tensor<2x4x1x4xf32>
// CHECK-NEXT: merak.add %{{.*}}, %[[B]] : tensor<2x4x1x4xf32>, tensor<2x4x1x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<2x4x8xf32>
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @k.weight : tensor<8x4xf32> = dense<0.25> : tensor<8x4xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wk = merak.get_param @k.weight : tensor<8x4xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %q0 = merak.matmul %x, %wq : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %k0 = merak.matmul %x, %wk : tensor<2x4x8xf32>, tensor<8x4xf32> -> tensor<2x4x4xf32>
  %k1 = merak.reshape %k0 : tensor<2x4x4xf32> to tensor<2x4x1x4xf32>
  %k2 = merak.broadcast %k1 : tensor<2x4x1x4xf32> to tensor<2x4x2x4xf32>
  %s = merak.add %q1, %k2 : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>
  %t = merak.tanh %s : tensor<2x4x2x4xf32>
  %y = merak.reshape %t : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %o = merak.matmul %y, %wo : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  %wk2 = merak.get_param @k.weight : tensor<8x4xf32>
  %r = merak.reduce_sum %wk2 axes = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %t2 = merak.add %l, %r : tensor<f32>, tensor<f32>
  return %t2 : tensor<f32>
}

// -----

// Funnel Transformer's relative attention: the positional scores
// [B, H, T, 2T] read as [B, H, 2T, T] (a reshape whose last two
// dimensions have no common refinement; the heads before them still
// split), a slice, and a folded all-true mask [B, H, T, T] with a splat
// fill in a where: each rank reads a splat of its heads' size.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[MASK:.*]] = merak.constant dense<true> : tensor<1x1x4x4xi1>
// CHECK-DAG: %[[LOW:.*]] = merak.constant dense<-1.000000e+09> : tensor<1x1x4x4xf32>
// CHECK: merak.reshape %{{.*}} : tensor<1x1x4x6xf32> to tensor<1x1x6x4xf32>
// CHECK: merak.where %[[MASK]], %{{.*}}, %[[LOW]] : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<1x4x8xf32>
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
  %r = merak.constant dense<0.25> : tensor<4x6xf32>
  %mask = merak.constant dense<true> : tensor<1x2x4x4xi1>
  %low = merak.constant dense<-1.0e9> : tensor<1x2x4x4xf32>
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %p = merak.matmul %q, %r : tensor<1x2x4x4xf32>, tensor<4x6xf32> -> tensor<1x2x4x6xf32>
  %ps = merak.reshape %p : tensor<1x2x4x6xf32> to tensor<1x2x6x4xf32>
  %pc = merak.slice %ps starts = [0, 0, 2, 0] limits = [1, 2, 6, 4] strides = [1, 1, 1, 1] : tensor<1x2x6x4xf32> to tensor<1x2x4x4xf32>
  %m = merak.where %mask, %pc, %low : tensor<1x2x4x4xi1>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %a = merak.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %c = merak.matmul %a, %q : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %c1 = merak.transpose %c perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %y = merak.reshape %c1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
