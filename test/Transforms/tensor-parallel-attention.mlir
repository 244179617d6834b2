// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s

// GPT-2 attention with a fused QKV projection (c_attn, weight [3C, C], C = 8,
// 2 heads of 4): c_attn is column-parallel block-wise (blocks = 3: each rank
// holds its head's rows of q, k and v), the split into q, k, v gives each
// rank C/tp columns of each, the head reshapes, transposes, scores, causal
// mask, softmax and context run on H/tp = 1 head, and c_proj is
// row-parallel with the all-reduce before its bias. The dropout of the
// probabilities records its head split (tp_split = [dim, blocks, parts]),
// so that each rank draws its heads' part of the serial mask.
// CHECK-DAG: merak.param @c_attn.weight : tensor<12x8xf32> = dense<{{.*}}> : tensor<24x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2>}
// CHECK-DAG: merak.param @c_attn.bias : tensor<12xf32> = dense<{{.*}}> : tensor<24xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2>}
// CHECK-DAG: merak.param @c_proj.weight : tensor<8x4xf32> = dense<{{.*}}> : tensor<8x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @c_proj.bias : tensor<8xf32> = dense<{{.*}}> : tensor<8xf32>{{$}}
// CHECK-DAG: merak.param @mask : tensor<1x1x4x4xf32> = dense<{{.*}}> : tensor<1x1x4x4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: %[[F:.*]] = merak.tp_identity %{{.*}} : tensor<1x4x8xf32>
// CHECK: %[[QKV:.*]] = merak.matmul %[[F]], %{{.*}} : tensor<1x4x8xf32>, tensor<8x12xf32> -> tensor<1x4x12xf32>
// CHECK: merak.add %{{.*}}, %[[QKV]] : tensor<12xf32>, tensor<1x4x12xf32>
// CHECK: merak.split %{{.*}} axis = 2 sizes = [4, 4, 4] : tensor<1x4x12xf32> -> tensor<1x4x4xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>
// CHECK: merak.reshape %{{.*}} : tensor<1x4x4xf32> to tensor<1x4x1x4xf32>
// CHECK: merak.transpose %{{.*}} perm = [0, 2, 1, 3] : tensor<1x4x1x4xf32> to tensor<1x1x4x4xf32>
// CHECK: merak.matmul %{{.*}}, %{{.*}} : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32> -> tensor<1x1x4x4xf32>
// CHECK: merak.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x1x4x4xf32>
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<1x1x4x4xf32>
// CHECK: merak.dropout %{{.*}} ratio = {{.*}} seed = 5 {tp_split = array<i64: 1, 1, 2>} : tensor<1x1x4x4xf32>
// CHECK: merak.reshape %{{.*}} : tensor<1x4x1x4xf32> to tensor<1x4x4xf32>
// CHECK: %[[O:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x4x4xf32>, tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[R:.*]] = merak.all_reduce %[[O]] group = "tp" reduction = "sum" : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: merak.add %{{.*}}, %[[R]] : tensor<8xf32>, tensor<1x4x8xf32>
merak.param @c_attn.weight : tensor<24x8xf32> = dense<0.125> : tensor<24x8xf32>
merak.param @c_attn.bias : tensor<24xf32> = dense<0.25> : tensor<24xf32>
merak.param @c_proj.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @c_proj.bias : tensor<8xf32> = dense<0.25> : tensor<8xf32>
merak.param @mask : tensor<1x1x4x4xf32> = dense<1.0> : tensor<1x1x4x4xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %scale = merak.constant dense<5.000000e-01> : tensor<f32>
  %zero = merak.constant dense<0.000000e+00> : tensor<f32>
  %wa = merak.get_param @c_attn.weight : tensor<24x8xf32>
  %ba = merak.get_param @c_attn.bias : tensor<24xf32>
  %wp = merak.get_param @c_proj.weight : tensor<8x8xf32>
  %bp = merak.get_param @c_proj.bias : tensor<8xf32>
  %mask = merak.get_param @mask : tensor<1x1x4x4xf32>
  %ta = merak.transpose %wa perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %qkv0 = merak.matmul %x, %ta : tensor<1x4x8xf32>, tensor<8x24xf32> -> tensor<1x4x24xf32>
  %qkv = merak.add %ba, %qkv0 : tensor<24xf32>, tensor<1x4x24xf32>
  %s:3 = merak.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %q0 = merak.reshape %s#0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q = merak.transpose %q0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %k0 = merak.reshape %s#1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %kt = merak.transpose %k0 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %v0 = merak.reshape %s#2 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %v = merak.transpose %v0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %att0 = merak.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %att1 = merak.mul %att0, %scale : tensor<1x2x4x4xf32>, tensor<f32>
  %cond = merak.eq %mask, %zero : tensor<1x1x4x4xf32>, tensor<f32>
  %att2 = merak.where %cond, %ninf, %att1 : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %att3 = merak.softmax %att2 axis = 3 : tensor<1x2x4x4xf32>
  %att, %keep = merak.dropout %att3 ratio = 0.1 seed = 5 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>, tensor<1x2x4x4xi1>
  %y0 = merak.matmul %att, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %y1 = merak.transpose %y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %y = merak.reshape %y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %tp = merak.transpose %wp perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o0 = merak.matmul %y, %tp : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %o = merak.add %bp, %o0 : tensor<8xf32>, tensor<1x4x8xf32>
  return %o : tensor<1x4x8xf32>
}

// -----

// Separate q, k and v Linears (BERT style): each is column-parallel, their
// regions meet at the scores and share one f; the output projection is
// row-parallel.
// CHECK-DAG: merak.param @q.weight : tensor<4x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @k.weight : tensor<4x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @v.weight : tensor<4x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @o.weight : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-1: merak.tp_identity
// CHECK-NOT: merak.tp_identity
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<1x1x4x4xf32>
// CHECK: merak.all_reduce
// CHECK-NOT: merak.all_reduce
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @k.weight : tensor<8x8xf32> = dense<0.25> : tensor<8x8xf32>
merak.param @v.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wk = merak.get_param @k.weight : tensor<8x8xf32>
  %wv = merak.get_param @v.weight : tensor<8x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %tv = merak.transpose %wv perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q1 = merak.matmul %x, %tq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %k1 = merak.matmul %x, %tk : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %v1 = merak.matmul %x, %tv : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q2 = merak.reshape %q1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q = merak.transpose %q2 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %k2 = merak.reshape %k1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %kt = merak.transpose %k2 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %v2 = merak.reshape %v1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %v = merak.transpose %v2 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %c = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %c1 = merak.transpose %c perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %c2 = merak.reshape %c1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %c2, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %o : tensor<1x4x8xf32>
}

// -----

// PyTorch's nn.MultiheadAttention (sequence-first [T, B, C]): one in_proj
// Linear [3C, C] whose output is viewed as [T, B, 3, C] and whose q, k and v
// are picked by index (gathers along the parts). The first split lands on
// the parts; the projection is then split block-wise (blocks = 3), each
// rank holding its heads of q, k and v, and out_proj is row-parallel.
// CHECK-DAG: merak.param @in_proj_weight : tensor<12x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2>}
// CHECK-DAG: merak.param @in_proj_bias : tensor<12xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2>}
// CHECK-DAG: merak.param @out_proj.weight : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.reshape %{{.*}} : tensor<4x2x12xf32> to tensor<4x2x3x4xf32>
// CHECK-COUNT-3: merak.gather %{{.*}} axis = 0 : tensor<3x4x2x4xf32>, tensor<i64> -> tensor<4x2x4xf32>
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<2x1x4x4xf32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<4x2x8xf32>
merak.param @in_proj_weight : tensor<24x8xf32> = dense<0.125> : tensor<24x8xf32>
merak.param @in_proj_bias : tensor<24xf32> = dense<0.25> : tensor<24xf32>
merak.param @out_proj.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<4x2x8xf32>) -> tensor<4x2x8xf32> {
  %i0 = merak.constant dense<0> : tensor<i64>
  %i1 = merak.constant dense<1> : tensor<i64>
  %i2 = merak.constant dense<2> : tensor<i64>
  %w = merak.get_param @in_proj_weight : tensor<24x8xf32>
  %b = merak.get_param @in_proj_bias : tensor<24xf32>
  %wo = merak.get_param @out_proj.weight : tensor<8x8xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %p0 = merak.matmul %x, %wt : tensor<4x2x8xf32>, tensor<8x24xf32> -> tensor<4x2x24xf32>
  %p = merak.add %b, %p0 : tensor<24xf32>, tensor<4x2x24xf32>
  %r = merak.reshape %p : tensor<4x2x24xf32> to tensor<4x2x3x8xf32>
  %t = merak.transpose %r perm = [2, 0, 1, 3] : tensor<4x2x3x8xf32> to tensor<3x4x2x8xf32>
  %q0 = merak.gather %t[%i0] axis = 0 : tensor<3x4x2x8xf32>, tensor<i64> -> tensor<4x2x8xf32>
  %k0 = merak.gather %t[%i1] axis = 0 : tensor<3x4x2x8xf32>, tensor<i64> -> tensor<4x2x8xf32>
  %v0 = merak.gather %t[%i2] axis = 0 : tensor<3x4x2x8xf32>, tensor<i64> -> tensor<4x2x8xf32>
  %q1 = merak.reshape %q0 : tensor<4x2x8xf32> to tensor<4x2x2x4xf32>
  %q = merak.transpose %q1 perm = [1, 2, 0, 3] : tensor<4x2x2x4xf32> to tensor<2x2x4x4xf32>
  %k1 = merak.reshape %k0 : tensor<4x2x8xf32> to tensor<4x2x2x4xf32>
  %kt = merak.transpose %k1 perm = [1, 2, 3, 0] : tensor<4x2x2x4xf32> to tensor<2x2x4x4xf32>
  %v1 = merak.reshape %v0 : tensor<4x2x8xf32> to tensor<4x2x2x4xf32>
  %v = merak.transpose %v1 perm = [1, 2, 0, 3] : tensor<4x2x2x4xf32> to tensor<2x2x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %a = merak.softmax %s axis = 3 : tensor<2x2x4x4xf32>
  %o0 = merak.matmul %a, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %o1 = merak.transpose %o0 perm = [2, 0, 1, 3] : tensor<2x2x4x4xf32> to tensor<4x2x2x4xf32>
  %o2 = merak.reshape %o1 : tensor<4x2x2x4xf32> to tensor<4x2x8xf32>
  %wot = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %o2, %wot : tensor<4x2x8xf32>, tensor<8x8xf32> -> tensor<4x2x8xf32>
  return %o : tensor<4x2x8xf32>
}

// -----

// Multi-query attention (one key/value head, RecurrentGemma's and Gemma's
// 2B): the key and value projections split inside their one head would
// meet the queries split by heads at the scores and the context; those
// seeds are given up first (Walk::conflicts), so the queries split by
// heads, the key and value stay whole and are read through f before their
// broadcast to the heads, and the output projection is row-parallel, as
// Megatron-LM replicates key heads fewer than tp.
// CHECK-DAG: merak.param @q.weight : tensor<4x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @k.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<4x8xf32>{{$}}
// CHECK-DAG: merak.param @v.weight : tensor<4x8xf32> = dense<{{.*}}> : tensor<4x8xf32>{{$}}
// CHECK-DAG: merak.param @o.weight : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[K:.*]] = merak.tp_identity %{{.*}} : tensor<1x1x4x4xf32>
// CHECK-NEXT: merak.broadcast %[[K]] : tensor<1x1x4x4xf32> to tensor<1x1x4x4xf32>
// CHECK: %[[V:.*]] = merak.tp_identity %{{.*}} : tensor<1x1x4x4xf32>
// CHECK-NEXT: merak.broadcast %[[V]] : tensor<1x1x4x4xf32> to tensor<1x1x4x4xf32>
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<1x1x4x4xf32>
// CHECK: merak.all_reduce
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @k.weight : tensor<4x8xf32> = dense<0.25> : tensor<4x8xf32>
merak.param @v.weight : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wk = merak.get_param @k.weight : tensor<4x8xf32>
  %wv = merak.get_param @v.weight : tensor<4x8xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q = merak.transpose %q1 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %k0 = merak.matmul %x, %tk : tensor<1x4x8xf32>, tensor<8x4xf32> -> tensor<1x4x4xf32>
  %k1 = merak.reshape %k0 : tensor<1x4x4xf32> to tensor<1x4x1x4xf32>
  %k2 = merak.transpose %k1 perm = [0, 2, 3, 1] : tensor<1x4x1x4xf32> to tensor<1x1x4x4xf32>
  %kt = merak.broadcast %k2 : tensor<1x1x4x4xf32> to tensor<1x2x4x4xf32>
  %tv = merak.transpose %wv perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %v0 = merak.matmul %x, %tv : tensor<1x4x8xf32>, tensor<8x4xf32> -> tensor<1x4x4xf32>
  %v1 = merak.reshape %v0 : tensor<1x4x4xf32> to tensor<1x4x1x4xf32>
  %v2 = merak.transpose %v1 perm = [0, 2, 1, 3] : tensor<1x4x1x4xf32> to tensor<1x1x4x4xf32>
  %v = merak.broadcast %v2 : tensor<1x1x4x4xf32> to tensor<1x2x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %y0 = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %y1 = merak.transpose %y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %y = merak.reshape %y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %o : tensor<1x4x8xf32>
}

// -----

// XLNet's attention as dynamo writes it: `einsum("ibh,hnd->ibnd", h, W)`
// with W [H, N, D] = [8, 2, 4] is a batch-1 matmul by `reshape(W) [1, H,
// N * D]`, and the output `einsum("ibnd,hnd->ibh", a, o)` one by
// `reshape(transpose(o)) [1, N * D, H]`. The q, k and v weights split on
// their heads (dimension 1, which leads N * D), the views with them; the
// per-head bias [N, D] on its heads; o on its heads, read through its
// transpose and view by the row-parallel product, whose partial sums are
// all-reduced.
// CHECK-DAG: merak.param @q : tensor<8x1x4xf32> = dense<{{.*}}> : tensor<8x2x4xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @k : tensor<8x1x4xf32> = dense<{{.*}}> : tensor<8x2x4xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @v : tensor<8x1x4xf32> = dense<{{.*}}> : tensor<8x2x4xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @o : tensor<8x1x4xf32> = dense<{{.*}}> : tensor<8x2x4xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @r_w_bias : tensor<1x4xf32> = dense<{{.*}}> : tensor<2x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[WQ:.*]] = merak.get_param @q : tensor<8x1x4xf32>
// CHECK: %[[WO:.*]] = merak.get_param @o : tensor<8x1x4xf32>
// CHECK: %[[H:.*]] = merak.tp_identity %{{.*}} : tensor<1x8x8xf32>
// CHECK: %[[VQ:.*]] = merak.reshape %[[WQ]] : tensor<8x1x4xf32> to tensor<1x8x4xf32>
// CHECK: merak.matmul %[[H]], %[[VQ]] : tensor<1x8x8xf32>, tensor<1x8x4xf32> -> tensor<1x8x4xf32>
// CHECK: merak.reshape %{{.*}} : tensor<1x8x4xf32> to tensor<4x2x1x4xf32>
// CHECK: merak.add %{{.*}}, %{{.*}} : tensor<4x2x1x4xf32>, tensor<1x4xf32>
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<2x1x4x4xf32>
// CHECK: %[[TO:.*]] = merak.transpose %[[WO]] perm = [1, 2, 0] : tensor<8x1x4xf32> to tensor<1x4x8xf32>
// CHECK: %[[VO:.*]] = merak.reshape %[[TO]] : tensor<1x4x8xf32> to tensor<1x4x8xf32>
// CHECK: %[[OUT:.*]] = merak.matmul %{{.*}}, %[[VO]] : tensor<1x8x4xf32>, tensor<1x4x8xf32> -> tensor<1x8x8xf32>
// CHECK-NEXT: merak.all_reduce %[[OUT]] group = "tp" reduction = "sum" : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
merak.param @q : tensor<8x2x4xf32> = dense<0.125> : tensor<8x2x4xf32>
merak.param @k : tensor<8x2x4xf32> = dense<0.25> : tensor<8x2x4xf32>
merak.param @v : tensor<8x2x4xf32> = dense<0.5> : tensor<8x2x4xf32>
merak.param @o : tensor<8x2x4xf32> = dense<0.75> : tensor<8x2x4xf32>
merak.param @r_w_bias : tensor<2x4xf32> = dense<0.5> : tensor<2x4xf32>
func.func @forward(%h: tensor<4x2x8xf32>) -> tensor<4x2x8xf32> {
  %wq = merak.get_param @q : tensor<8x2x4xf32>
  %wk = merak.get_param @k : tensor<8x2x4xf32>
  %wv = merak.get_param @v : tensor<8x2x4xf32>
  %wo = merak.get_param @o : tensor<8x2x4xf32>
  %bias = merak.get_param @r_w_bias : tensor<2x4xf32>
  %x = merak.reshape %h : tensor<4x2x8xf32> to tensor<1x8x8xf32>
  %vq = merak.reshape %wq : tensor<8x2x4xf32> to tensor<1x8x8xf32>
  %q0 = merak.matmul %x, %vq : tensor<1x8x8xf32>, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %q1 = merak.reshape %q0 : tensor<1x8x8xf32> to tensor<4x2x2x4xf32>
  %q2 = merak.add %q1, %bias : tensor<4x2x2x4xf32>, tensor<2x4xf32>
  %vk = merak.reshape %wk : tensor<8x2x4xf32> to tensor<1x8x8xf32>
  %k0 = merak.matmul %x, %vk : tensor<1x8x8xf32>, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %k1 = merak.reshape %k0 : tensor<1x8x8xf32> to tensor<4x2x2x4xf32>
  %vv = merak.reshape %wv : tensor<8x2x4xf32> to tensor<1x8x8xf32>
  %v0 = merak.matmul %x, %vv : tensor<1x8x8xf32>, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %v1 = merak.reshape %v0 : tensor<1x8x8xf32> to tensor<4x2x2x4xf32>
  // [I, B, N, D] -> [B, N, I, D] and [B, N, D, J]: scores [B, N, I, J].
  %qt = merak.transpose %q2 perm = [1, 2, 0, 3] : tensor<4x2x2x4xf32> to tensor<2x2x4x4xf32>
  %kt = merak.transpose %k1 perm = [1, 2, 3, 0] : tensor<4x2x2x4xf32> to tensor<2x2x4x4xf32>
  %s0 = merak.matmul %qt, %kt : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %p = merak.softmax %s0 axis = 3 : tensor<2x2x4x4xf32>
  %vt = merak.transpose %v1 perm = [1, 2, 0, 3] : tensor<4x2x2x4xf32> to tensor<2x2x4x4xf32>
  %c0 = merak.matmul %p, %vt : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %c1 = merak.transpose %c0 perm = [2, 0, 1, 3] : tensor<2x2x4x4xf32> to tensor<4x2x2x4xf32>
  %c2 = merak.reshape %c1 : tensor<4x2x2x4xf32> to tensor<1x8x8xf32>
  %to = merak.transpose %wo perm = [1, 2, 0] : tensor<8x2x4xf32> to tensor<2x4x8xf32>
  %vo = merak.reshape %to : tensor<2x4x8xf32> to tensor<1x8x8xf32>
  %out0 = merak.matmul %c2, %vo : tensor<1x8x8xf32>, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %out = merak.reshape %out0 : tensor<1x8x8xf32> to tensor<4x2x8xf32>
  return %out : tensor<4x2x8xf32>
}
