// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s
// RUN: not merak-opt %s -split-input-file -merak-tensor-parallel=tp=4 2>&1 >/dev/null | FileCheck %s --check-prefix=TP4-REMARK
// RUN: not merak-opt %s -split-input-file -merak-tensor-parallel=tp=4 2>/dev/null | FileCheck %s --check-prefix=TP4

// A Mamba-2 mixer as transformers' PyTorch path exports it, reduced to its
// structure (the chunked scan becomes a per-head mix of x with B and C):
// in_proj's output [B, L, 20] is split into the gate z (4), xBC (12) and dt
// (4 heads); xBC goes through the causal depthwise conv1d and is split into
// x (4 heads of 1), B and C (2 groups of 2 states each). The x, B and C
// parts cut xBC apart further, so in_proj's ragged blocks become [z, x, B,
// C, dt] = [4, 4, 2, 2, 4] (the walk first takes [4, 8, 4]), and the
// conv1d's weight and bias (a dynamo splat zero here: each rank's is a
// splat of its size) are split in xBC's blocks [4, 2, 2]; the conv's
// groups become the local channels. Each rank holds its heads of z, x and
// dt and its group of B and C (the groups divide by tp, as Megatron-LM
// requires); out_proj is row-parallel.
// CHECK-DAG: merak.param @in_proj : tensor<8x4xf32> = {{.*}} : tensor<16x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 5, parts = 2, block_sizes = [4, 4, 2, 2, 4]>}
// CHECK-DAG: merak.param @conv.weight : tensor<4x1x2xf32> = {{.*}} : tensor<8x1x2xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [4, 2, 2]>}
// CHECK-DAG: merak.param @dt_bias : tensor<2xf32> = {{.*}} : tensor<4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @out_proj : tensor<4x2xf32> = {{.*}} : tensor<4x4xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[IN:.*]] = merak.matmul {{.*}} -> tensor<1x3x8xf32>
// CHECK: merak.split %[[IN]] axis = 2 sizes = [2, 4, 2] : tensor<1x3x8xf32> -> tensor<1x3x2xf32>, tensor<1x3x4xf32>, tensor<1x3x2xf32>
// CHECK: %[[Z:.*]] = merak.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: merak.conv2d %{{.*}}, %{{.*}} bias %[[Z]] {{.*}} groups = 4 : (tensor<1x4x1x3xf32>, tensor<4x1x1x2xf32>, tensor<4xf32>) -> tensor<1x4x1x4xf32>
// CHECK: merak.split %{{.*}} axis = 2 sizes = [2, 1, 1] : tensor<1x3x4xf32> -> tensor<1x3x2xf32>, tensor<1x3x1xf32>, tensor<1x3x1xf32>
// CHECK: %[[OUT:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x3x2xf32>, tensor<2x4xf32> -> tensor<1x3x4xf32>
// CHECK: merak.all_reduce %[[OUT]] group = "tp" reduction = "sum"
// At tp 4 the 2 groups' B and C (2 rows each) do not divide: whole, said.
// TP4-REMARK: remark: merak-tensor-parallel: 'in_proj' stays whole: its parts along the split dimension (4, 2, 2) do not all divide by tp=4
merak.param @in_proj : tensor<16x4xf32> = dense<0.5> : tensor<16x4xf32>
merak.param @conv.weight : tensor<8x1x2xf32> = dense<0.5> : tensor<8x1x2xf32>
merak.param @dt_bias : tensor<4xf32> = dense<0.25> : tensor<4xf32>
merak.param @out_proj : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
func.func @forward(%h: tensor<1x3x4xf32>) -> tensor<1x3x4xf32> {
  %w = merak.get_param @in_proj : tensor<16x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<16x4xf32> to tensor<4x16xf32>
  %p = merak.matmul %h, %wt : tensor<1x3x4xf32>, tensor<4x16xf32> -> tensor<1x3x16xf32>
  %z, %xbc, %dt = merak.split %p axis = 2 sizes = [4, 8, 4] : tensor<1x3x16xf32> -> tensor<1x3x4xf32>, tensor<1x3x8xf32>, tensor<1x3x4xf32>
  %t = merak.transpose %xbc perm = [0, 2, 1] : tensor<1x3x8xf32> to tensor<1x8x3xf32>
  %t4 = merak.reshape %t : tensor<1x8x3xf32> to tensor<1x8x1x3xf32>
  %cw = merak.get_param @conv.weight : tensor<8x1x2xf32>
  %cw4 = merak.reshape %cw : tensor<8x1x2xf32> to tensor<8x1x1x2xf32>
  %zero = merak.constant dense<0.0> : tensor<8xf32>
  %c = merak.conv2d %t4, %cw4 bias %zero strides = [1, 1] padding = [0, 1, 0, 1] dilations = [1, 1] groups = 8 : (tensor<1x8x1x3xf32>, tensor<8x1x1x2xf32>, tensor<8xf32>) -> tensor<1x8x1x4xf32>
  %c3 = merak.reshape %c : tensor<1x8x1x4xf32> to tensor<1x8x4xf32>
  %cs = merak.slice %c3 starts = [0, 0, 0] limits = [1, 8, 3] strides = [1, 1, 1] : tensor<1x8x4xf32> to tensor<1x8x3xf32>
  %sg = merak.sigmoid %cs : tensor<1x8x3xf32>
  %a = merak.mul %cs, %sg : tensor<1x8x3xf32>, tensor<1x8x3xf32>
  %at = merak.transpose %a perm = [0, 2, 1] : tensor<1x8x3xf32> to tensor<1x3x8xf32>
  %x, %b, %cc = merak.split %at axis = 2 sizes = [4, 2, 2] : tensor<1x3x8xf32> -> tensor<1x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>
  // Heads: x [1, 3, 4 heads], B and C [1, 3, 2 groups] broadcast to the
  // heads (2 per group).
  %b4 = merak.reshape %b : tensor<1x3x2xf32> to tensor<1x3x2x1xf32>
  %bb = merak.broadcast %b4 : tensor<1x3x2x1xf32> to tensor<1x3x2x2xf32>
  %bh = merak.reshape %bb : tensor<1x3x2x2xf32> to tensor<1x3x4xf32>
  %c4 = merak.reshape %cc : tensor<1x3x2xf32> to tensor<1x3x2x1xf32>
  %cb = merak.broadcast %c4 : tensor<1x3x2x1xf32> to tensor<1x3x2x2xf32>
  %ch = merak.reshape %cb : tensor<1x3x2x2xf32> to tensor<1x3x4xf32>
  %dtb = merak.get_param @dt_bias : tensor<4xf32>
  %d1 = merak.add %dt, %dtb : tensor<1x3x4xf32>, tensor<4xf32>
  %d2 = merak.softplus %d1 : tensor<1x3x4xf32>
  %xb = merak.mul %x, %bh : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %xd = merak.mul %xb, %d2 : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %y = merak.mul %xd, %ch : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %sz = merak.sigmoid %z : tensor<1x3x4xf32>
  %g = merak.mul %y, %sz : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %ow = merak.get_param @out_proj : tensor<4x4xf32>
  %owt = merak.transpose %ow perm = [1, 0] : tensor<4x4xf32> to tensor<4x4xf32>
  %o = merak.matmul %g, %owt : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  return %o : tensor<1x3x4xf32>
}

// -----

// One group of B and C (the original Mamba-2's ngroups = 1) shared by every
// head: B's 2 states cannot be cut over tp while the heads are (the state
// dimension meets the split heads), so every rank holds B and C whole
// (Megatron-LM requires the groups to divide by tp instead) and z and x
// split by heads: in_proj stays whole, each rank reading its rows through
// f (z's and x's part r, all of B's and C's). An MLP beside it splits.
// CHECK-DAG: merak.param @in_proj : tensor<12x4xf32> = dense<5.000000e-01> : tensor<12x4xf32>{{$}}
// CHECK-DAG: merak.param @out_proj : tensor<4x2xf32> = {{.*}} : tensor<4x4xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @up : tensor<4x4xf32> = {{.*}} : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @down : tensor<4x4xf32> = {{.*}} : tensor<4x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.constant dense<[0, 1, 4, 5, 8, 9, 10, 11]> : tensor<8xi64>
// CHECK-NEXT: merak.constant dense<[2, 2, 2, 2, 0, 0, 0, 0]> : tensor<8xi64>
// CHECK: merak.split %{{.*}} axis = 2 sizes = [2, 6] : tensor<1x3x8xf32>
// CHECK-NEXT: merak.split %{{.*}} axis = 2 sizes = [2, 2, 2] : tensor<1x3x6xf32>
// CHECK-NOT: merak.tp_identity
// CHECK-COUNT-2: merak.all_reduce
// CHECK-NOT: merak.all_reduce
merak.param @in_proj : tensor<12x4xf32> = dense<0.5> : tensor<12x4xf32>
merak.param @out_proj : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
merak.param @up : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @down : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%h: tensor<1x3x4xf32>) -> tensor<1x3x4xf32> {
  %w = merak.get_param @in_proj : tensor<12x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<12x4xf32> to tensor<4x12xf32>
  %p = merak.matmul %h, %wt : tensor<1x3x4xf32>, tensor<4x12xf32> -> tensor<1x3x12xf32>
  %z, %xbc = merak.split %p axis = 2 sizes = [4, 8] : tensor<1x3x12xf32> -> tensor<1x3x4xf32>, tensor<1x3x8xf32>
  %x, %b, %c = merak.split %xbc axis = 2 sizes = [4, 2, 2] : tensor<1x3x8xf32> -> tensor<1x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>
  %x2 = merak.reshape %x : tensor<1x3x4xf32> to tensor<1x3x4x1xf32>
  %b2 = merak.reshape %b : tensor<1x3x2xf32> to tensor<1x3x1x2xf32>
  %xb = merak.mul %x2, %b2 : tensor<1x3x4x1xf32>, tensor<1x3x1x2xf32>
  %c2 = merak.reshape %c : tensor<1x3x2xf32> to tensor<1x3x1x2xf32>
  %xbc2 = merak.mul %xb, %c2 : tensor<1x3x4x2xf32>, tensor<1x3x1x2xf32>
  %y = merak.reduce_sum %xbc2 axes = [3] : tensor<1x3x4x2xf32> -> tensor<1x3x4xf32>
  %sz = merak.sigmoid %z : tensor<1x3x4xf32>
  %g = merak.mul %y, %sz : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %ow = merak.get_param @out_proj : tensor<4x4xf32>
  %owt = merak.transpose %ow perm = [1, 0] : tensor<4x4xf32> to tensor<4x4xf32>
  %o = merak.matmul %g, %owt : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  %uw = merak.get_param @up : tensor<8x4xf32>
  %uwt = merak.transpose %uw perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %u = merak.matmul %h, %uwt : tensor<1x3x4xf32>, tensor<4x8xf32> -> tensor<1x3x8xf32>
  %ug = merak.gelu %u : tensor<1x3x8xf32>
  %dw = merak.get_param @down : tensor<4x8xf32>
  %dwt = merak.transpose %dw perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %d = merak.matmul %ug, %dwt : tensor<1x3x8xf32>, tensor<8x4xf32> -> tensor<1x3x4xf32>
  %r = merak.add %o, %d : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  return %r : tensor<1x3x4xf32>
}

// -----

// Two groups of two states each: at tp 2 each rank holds its group; at tp 4
// the blocks [z, x, B, C, dt] = [4, 4, 4, 4, 4] divide, but B's and C's 2
// groups do not (a rank would hold half a group's states, which the heads
// then meet), so the mixer stays whole, with a remark (Megatron-LM
// requires the groups to divide by tp), where equal blocks (attention
// heads) that do not divide are an error.
// CHECK-DAG: merak.param @in_proj3 : tensor<10x4xf32> = {{.*}} : tensor<20x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 5, parts = 2, block_sizes = [4, 4, 4, 4, 4]>}
// CHECK-DAG: merak.param @out_proj3 : tensor<4x2xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.reshape %{{.*}} : tensor<1x3x2xf32> to tensor<1x3x1x1x2xf32>
// TP4-REMARK: remark: merak-tensor-parallel: 'in_proj3' and its block stay whole: its parts (heads or groups) do not divide by tp=4
// TP4: merak.param @in_proj3 : tensor<20x4xf32> = dense<5.000000e-01> : tensor<20x4xf32>{{$}}
// TP4: merak.param @out_proj3 : tensor<4x4xf32> = dense<5.000000e-01> : tensor<4x4xf32>{{$}}
merak.param @in_proj3 : tensor<20x4xf32> = dense<0.5> : tensor<20x4xf32>
merak.param @out_proj3 : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
merak.param @up : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @down : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%h: tensor<1x3x4xf32>) -> tensor<1x3x4xf32> {
  %w = merak.get_param @in_proj3 : tensor<20x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<20x4xf32> to tensor<4x20xf32>
  %p = merak.matmul %h, %wt : tensor<1x3x4xf32>, tensor<4x20xf32> -> tensor<1x3x20xf32>
  %z, %xbc, %dt = merak.split %p axis = 2 sizes = [4, 12, 4] : tensor<1x3x20xf32> -> tensor<1x3x4xf32>, tensor<1x3x12xf32>, tensor<1x3x4xf32>
  %x, %b, %c = merak.split %xbc axis = 2 sizes = [4, 4, 4] : tensor<1x3x12xf32> -> tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>
  // B, C: [1, 3, 2 groups, 1, 2 states] broadcast to 2 heads per group.
  %b5 = merak.reshape %b : tensor<1x3x4xf32> to tensor<1x3x2x1x2xf32>
  %bb = merak.broadcast %b5 : tensor<1x3x2x1x2xf32> to tensor<1x3x2x2x2xf32>
  %bh = merak.reshape %bb : tensor<1x3x2x2x2xf32> to tensor<1x3x4x2xf32>
  %c5 = merak.reshape %c : tensor<1x3x4xf32> to tensor<1x3x2x1x2xf32>
  %cb = merak.broadcast %c5 : tensor<1x3x2x1x2xf32> to tensor<1x3x2x2x2xf32>
  %ch = merak.reshape %cb : tensor<1x3x2x2x2xf32> to tensor<1x3x4x2xf32>
  %x4 = merak.reshape %x : tensor<1x3x4xf32> to tensor<1x3x4x1xf32>
  %xb = merak.mul %x4, %bh : tensor<1x3x4x1xf32>, tensor<1x3x4x2xf32>
  %xbc2 = merak.mul %xb, %ch : tensor<1x3x4x2xf32>, tensor<1x3x4x2xf32>
  %y = merak.reduce_sum %xbc2 axes = [3] : tensor<1x3x4x2xf32> -> tensor<1x3x4xf32>
  %sd = merak.sigmoid %dt : tensor<1x3x4xf32>
  %yd = merak.mul %y, %sd : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %sz = merak.sigmoid %z : tensor<1x3x4xf32>
  %g = merak.mul %yd, %sz : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  %ow = merak.get_param @out_proj3 : tensor<4x4xf32>
  %owt = merak.transpose %ow perm = [1, 0] : tensor<4x4xf32> to tensor<4x4xf32>
  %o = merak.matmul %g, %owt : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  %uw = merak.get_param @up : tensor<8x4xf32>
  %uwt = merak.transpose %uw perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %u = merak.matmul %h, %uwt : tensor<1x3x4xf32>, tensor<4x8xf32> -> tensor<1x3x8xf32>
  %ug = merak.gelu %u : tensor<1x3x8xf32>
  %dw = merak.get_param @down : tensor<4x8xf32>
  %dwt = merak.transpose %dw perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %d = merak.matmul %ug, %dwt : tensor<1x3x8xf32>, tensor<8x4xf32> -> tensor<1x3x4xf32>
  %r = merak.add %o, %d : tensor<1x3x4xf32>, tensor<1x3x4xf32>
  return %r : tensor<1x3x4xf32>
}
