// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// A fused projection whose output is cut into parts of different lengths
// (Phi-3's GQA qkv_proj: q of 8, k and v of 4 rows) is split in ragged
// blocks: each rank holds its part of every block (block_sizes on the
// shard), and each slice reads its block's local part (starts 0, 4, 6 of
// the local 8), split normally from there (three row-parallel ends here).
// CHECK-DAG: merak.param @qkv : tensor<8x8xf32> = {{.*}} : tensor<16x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 4, 4]>}
// CHECK-DAG: merak.param @wq : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @wk : tensor<8x2xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[M:.*]] = merak.matmul {{.*}} -> tensor<2x3x8xf32>
// CHECK-NEXT: merak.slice %[[M]] starts = [0, 0, 0] limits = [2, 3, 4] {{.*}} to tensor<2x3x4xf32>
// CHECK-NEXT: merak.slice %[[M]] starts = [0, 0, 4] limits = [2, 3, 6] {{.*}} to tensor<2x3x2xf32>
// CHECK-NEXT: merak.slice %[[M]] starts = [0, 0, 6] limits = [2, 3, 8] {{.*}} to tensor<2x3x2xf32>
// CHECK-COUNT-3: merak.all_reduce
merak.param @qkv : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @wq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @wk : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @wv : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @qkv : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %q = merak.slice %m starts = [0, 0, 0] limits = [2, 3, 8] strides = [1, 1, 1] : tensor<2x3x16xf32> to tensor<2x3x8xf32>
  %k = merak.slice %m starts = [0, 0, 8] limits = [2, 3, 12] strides = [1, 1, 1] : tensor<2x3x16xf32> to tensor<2x3x4xf32>
  %v = merak.slice %m starts = [0, 0, 12] limits = [2, 3, 16] strides = [1, 1, 1] : tensor<2x3x16xf32> to tensor<2x3x4xf32>
  %qg = merak.gelu %q : tensor<2x3x8xf32>
  %wq = merak.get_param @wq : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %yq = merak.matmul %qg, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %wk = merak.get_param @wk : tensor<8x4xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yk = merak.matmul %k, %tk : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %wv = merak.get_param @wv : tensor<8x4xf32>
  %tv = merak.transpose %wv perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yv = merak.matmul %v, %tv : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %s = merak.add %yq, %yk : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %y = merak.add %s, %yv : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// The same cut by one merak.split of different sizes.
// CHECK-DAG: merak.param @qkv : tensor<8x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 4, 4]>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.split %{{.*}} axis = 2 sizes = [4, 2, 2]
merak.param @qkv : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @wq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @wk : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @qkv : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %q, %k, %v = merak.split %m axis = 2 sizes = [8, 4, 4] : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %wq = merak.get_param @wq : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %yq = merak.matmul %q, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %kv = merak.add %k, %v : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %wk = merak.get_param @wk : tensor<8x4xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yk = merak.matmul %kv, %tk : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %y = merak.add %yq, %yk : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// A bias added to the fused projection before its blocks are taken apart
// (a fused QKV Linear with a bias, GQA): the bias [16] is split in the same
// ragged blocks as the weight's rows, the add runs on the local [.., 8].
// CHECK-DAG: merak.param @qkv.weight : tensor<8x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 4, 4]>}
// CHECK-DAG: merak.param @qkv.bias : tensor<8xf32> = {{.*}} : tensor<16xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 4, 4]>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[M:.*]] = merak.matmul {{.*}} -> tensor<2x3x8xf32>
// CHECK: %[[B:.*]] = merak.get_param @qkv.bias : tensor<8xf32>
// CHECK: %[[A:.*]] = merak.add %[[B]], %[[M]] : tensor<8xf32>, tensor<2x3x8xf32>
// CHECK-NEXT: merak.slice %[[A]] starts = [0, 0, 0] limits = [2, 3, 4] {{.*}} to tensor<2x3x4xf32>
// CHECK-NEXT: merak.slice %[[A]] starts = [0, 0, 4] limits = [2, 3, 6] {{.*}} to tensor<2x3x2xf32>
// CHECK-NEXT: merak.slice %[[A]] starts = [0, 0, 6] limits = [2, 3, 8] {{.*}} to tensor<2x3x2xf32>
// CHECK-COUNT-3: merak.all_reduce
merak.param @qkv.weight : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @qkv.bias : tensor<16xf32> = dense<0.25> : tensor<16xf32>
merak.param @wq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @wk : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @wv : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @qkv.weight : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %b = merak.get_param @qkv.bias : tensor<16xf32>
  %a = merak.add %b, %m : tensor<16xf32>, tensor<2x3x16xf32>
  %q = merak.slice %a starts = [0, 0, 0] limits = [2, 3, 8] strides = [1, 1, 1] : tensor<2x3x16xf32> to tensor<2x3x8xf32>
  %k = merak.slice %a starts = [0, 0, 8] limits = [2, 3, 12] strides = [1, 1, 1] : tensor<2x3x16xf32> to tensor<2x3x4xf32>
  %v = merak.slice %a starts = [0, 0, 12] limits = [2, 3, 16] strides = [1, 1, 1] : tensor<2x3x16xf32> to tensor<2x3x4xf32>
  %wq = merak.get_param @wq : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %yq = merak.matmul %q, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %wk = merak.get_param @wk : tensor<8x4xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yk = merak.matmul %k, %tk : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %wv = merak.get_param @wv : tensor<8x4xf32>
  %tv = merak.transpose %wv perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yv = merak.matmul %v, %tv : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %s = merak.add %yq, %yk : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %y = merak.add %s, %yv : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Split values joined along their split dimension (Qwen3-Next regroups its
// per-head q, k and v into one [q | k | v] before the conv1d; OLMo Hybrid
// concatenates its q, k and v projections): the concat's result is split
// in ragged blocks [8, 4], one per part, passes the activation and is cut
// apart again in the same blocks (each rank's [4 | 2]).
// CHECK-DAG: merak.param @wq : tensor<4x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @wk : tensor<2x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @oq : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.concat %{{.*}}, %{{.*}} axis = 2 : tensor<2x3x4xf32>, tensor<2x3x2xf32> -> tensor<2x3x6xf32>
// CHECK: merak.gelu %{{.*}} : tensor<2x3x6xf32>
// CHECK: merak.split %{{.*}} axis = 2 sizes = [4, 2] : tensor<2x3x6xf32>
// CHECK-COUNT-2: merak.all_reduce
merak.param @wq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @wk : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @oq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @ok : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %wq = merak.get_param @wq : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q = merak.matmul %x, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %wk = merak.get_param @wk : tensor<4x8xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %k = merak.matmul %x, %tk : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %qk = merak.concat %q, %k axis = 2 : tensor<2x3x8xf32>, tensor<2x3x4xf32> -> tensor<2x3x12xf32>
  %a = merak.gelu %qk : tensor<2x3x12xf32>
  %q2, %k2 = merak.split %a axis = 2 sizes = [8, 4] : tensor<2x3x12xf32> -> tensor<2x3x8xf32>, tensor<2x3x4xf32>
  %oq = merak.get_param @oq : tensor<8x8xf32>
  %toq = merak.transpose %oq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %yq = merak.matmul %q2, %toq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %ok = merak.get_param @ok : tensor<8x4xf32>
  %tok = merak.transpose %ok perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yk = merak.matmul %k2, %tok : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %y = merak.add %yq, %yk : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// A dropout between: its mask is drawn at each element's position in the
// whole tensor, recorded in equal blocks only, so the ragged [8 | 4] does
// not pass it and q, k stay whole (with a dropout the split program would
// otherwise draw other masks than the serial one). The MLP beside splits.
// CHECK-DAG: merak.param @wq : tensor<8x8xf32> = dense<5.000000e-01> : tensor<8x8xf32>{{$}}
// CHECK-DAG: merak.param @wk : tensor<4x8xf32> = dense<5.000000e-01> : tensor<4x8xf32>{{$}}
// CHECK-DAG: merak.param @up : tensor<4x8xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.dropout %{{.*}} : tensor<2x3x12xf32>
merak.param @wq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @wk : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @oq : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @ok : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @up : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @down : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %wq = merak.get_param @wq : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q = merak.matmul %x, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %wk = merak.get_param @wk : tensor<4x8xf32>
  %tk = merak.transpose %wk perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %k = merak.matmul %x, %tk : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %qk = merak.concat %q, %k axis = 2 : tensor<2x3x8xf32>, tensor<2x3x4xf32> -> tensor<2x3x12xf32>
  %a, %mask = merak.dropout %qk ratio = 0.1 seed = 5 : tensor<2x3x12xf32> -> tensor<2x3x12xf32>, tensor<2x3x12xi1>
  %q2, %k2 = merak.split %a axis = 2 sizes = [8, 4] : tensor<2x3x12xf32> -> tensor<2x3x8xf32>, tensor<2x3x4xf32>
  %oq = merak.get_param @oq : tensor<8x8xf32>
  %toq = merak.transpose %oq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %yq = merak.matmul %q2, %toq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %ok = merak.get_param @ok : tensor<8x4xf32>
  %tok = merak.transpose %ok perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %yk = merak.matmul %k2, %tok : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %up = merak.get_param @up : tensor<8x8xf32>
  %tup = merak.transpose %up perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %u = merak.matmul %x, %tup : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %g = merak.gelu %u : tensor<2x3x8xf32>
  %down = merak.get_param @down : tensor<8x8xf32>
  %tdown = merak.transpose %down perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %d = merak.matmul %g, %tdown : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %y1 = merak.add %yq, %yk : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %y = merak.add %y1, %d : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// A fused multi-query projection (GPT-BigCode's c_attn: 2 query heads of 4
// beside one key and one value head): the key and value blocks, one head
// each, cannot split over tp=2 and are held whole by every rank, the query
// heads split. The weight stays whole (no merak.shard); each rank reads its
// rows of it through f, `gather(tp_identity(W), base + rank * stride)`: its
// query rows [4 r, 4 r + 4) and every key and value row. The whole k and v
// are read without f (each rank's gradient of them is partial, summed
// through the weight's f and the input's), broadcast to the local heads.
// REMARK: remark: merak-tensor-parallel: 'qkv' stays whole on every rank: its blocks of 4, 4 rows (heads or groups that do not split over tp=2) are computed by every rank, the others split
// CHECK-DAG: merak.param @qkv : tensor<16x8xf32> = dense<5.000000e-01> : tensor<16x8xf32>{{$}}
// CHECK-DAG: merak.param @o : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.*]] = merak.tp_identity %arg0
// CHECK-NEXT: %[[W:.*]] = merak.get_param @qkv : tensor<16x8xf32>
// CHECK-NEXT: %[[F:.*]] = merak.tp_identity %[[W]] : tensor<16x8xf32>
// CHECK-NEXT: %[[R:.*]] = merak.group_rank group = "tp"
// CHECK-NEXT: %[[BASE:.*]] = merak.constant dense<[0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<12xi64>
// CHECK-NEXT: %[[STRIDE:.*]] = merak.constant dense<[4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<12xi64>
// CHECK-NEXT: %[[S:.*]] = merak.mul %[[R]], %[[STRIDE]]
// CHECK-NEXT: %[[ROWS:.*]] = merak.add %[[BASE]], %[[S]]
// CHECK-NEXT: %[[MINE:.*]] = merak.gather %[[F]][%[[ROWS]]] axis = 0 : tensor<16x8xf32>, tensor<12xi64> -> tensor<12x8xf32>
// CHECK-NEXT: %[[T:.*]] = merak.transpose %[[MINE]] perm = [1, 0] : tensor<12x8xf32> to tensor<8x12xf32>
// CHECK-NEXT: merak.matmul %[[X]], %[[T]]
// CHECK: merak.split %{{.*}} axis = 2 sizes = [4, 4, 4] : tensor<2x3x12xf32> -> tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
// CHECK-NOT: merak.tp_identity
// CHECK: merak.broadcast %{{.*}} : tensor<2x1x3x4xf32> to tensor<2x1x3x4xf32>
// CHECK: merak.softmax %{{.*}} : tensor<2x1x3x3xf32>
// CHECK: merak.all_reduce
merak.param @qkv : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @o : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @qkv : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %q, %k, %v = merak.split %m axis = 2 sizes = [8, 4, 4] : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %qh = merak.reshape %q : tensor<2x3x8xf32> to tensor<2x3x2x4xf32>
  %qt = merak.transpose %qh perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> to tensor<2x2x3x4xf32>
  %kh = merak.reshape %k : tensor<2x3x4xf32> to tensor<2x1x3x4xf32>
  %kb = merak.broadcast %kh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %kt = merak.transpose %kb perm = [0, 1, 3, 2] : tensor<2x2x3x4xf32> to tensor<2x2x4x3xf32>
  %vh = merak.reshape %v : tensor<2x3x4xf32> to tensor<2x1x3x4xf32>
  %vb = merak.broadcast %vh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %s = merak.matmul %qt, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %p = merak.softmax %s axis = 3 : tensor<2x2x3x3xf32>
  %a = merak.matmul %p, %vb : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %at = merak.transpose %a perm = [0, 2, 1, 3] : tensor<2x2x3x4xf32> to tensor<2x3x2x4xf32>
  %ar = merak.reshape %at : tensor<2x3x2x4xf32> to tensor<2x3x8xf32>
  %wo = merak.get_param @o : tensor<8x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %y = merak.matmul %ar, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// A whole key block scaled by a parameter of its own (a key norm's weight)
// before it meets the split heads: the scale's gradient on each rank is
// partial too, so it is read through f; the key itself is not.
// CHECK-DAG: merak.param @qkv : tensor<16x8xf32> = dense<5.000000e-01> : tensor<16x8xf32>{{$}}
// CHECK-DAG: merak.param @kscale : tensor<4xf32> = dense<2.000000e+00> : tensor<4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]]:3 = merak.split %{{.*}} axis = 2 sizes = [4, 4, 4]
// CHECK: %[[G:.*]] = merak.get_param @kscale : tensor<4xf32>
// CHECK-NEXT: %[[F:.*]] = merak.tp_identity %[[G]] : tensor<4xf32>
// CHECK-NEXT: merak.mul %[[Q]]#1, %[[F]] : tensor<2x3x4xf32>, tensor<4xf32>
// CHECK: merak.all_reduce
merak.param @qkv : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @kscale : tensor<4xf32> = dense<2.0> : tensor<4xf32>
merak.param @o : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @qkv : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %q, %k0, %v = merak.split %m axis = 2 sizes = [8, 4, 4] : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %ks = merak.get_param @kscale : tensor<4xf32>
  %k = merak.mul %k0, %ks : tensor<2x3x4xf32>, tensor<4xf32>
  %qh = merak.reshape %q : tensor<2x3x8xf32> to tensor<2x3x2x4xf32>
  %qt = merak.transpose %qh perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> to tensor<2x2x3x4xf32>
  %kh = merak.reshape %k : tensor<2x3x4xf32> to tensor<2x1x3x4xf32>
  %kb = merak.broadcast %kh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %kt = merak.transpose %kb perm = [0, 1, 3, 2] : tensor<2x2x3x4xf32> to tensor<2x2x4x3xf32>
  %vh = merak.reshape %v : tensor<2x3x4xf32> to tensor<2x1x3x4xf32>
  %vb = merak.broadcast %vh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %s = merak.matmul %qt, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %p = merak.softmax %s axis = 3 : tensor<2x2x3x3xf32>
  %a = merak.matmul %p, %vb : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %at = merak.transpose %a perm = [0, 2, 1, 3] : tensor<2x2x3x4xf32> to tensor<2x3x2x4xf32>
  %ar = merak.reshape %at : tensor<2x3x2x4xf32> to tensor<2x3x8xf32>
  %wo = merak.get_param @o : tensor<8x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %y = merak.matmul %ar, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// A whole key block that is also a result of the function (a key cache)
// would leave the walk's reach with a partial gradient: the projection and
// its attention stay replicated; an MLP beside them splits.
// CHECK-DAG: merak.param @qkv : tensor<16x8xf32> = dense<5.000000e-01> : tensor<16x8xf32>{{$}}
// CHECK-DAG: merak.param @o : tensor<8x8xf32> = dense<5.000000e-01> : tensor<8x8xf32>{{$}}
// CHECK-DAG: merak.param @up : tensor<8x8xf32> = {{.*}} : tensor<16x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: merak.gather
// CHECK-COUNT-1: merak.all_reduce
// CHECK-NOT: merak.all_reduce
// CHECK: return
merak.param @qkv : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @o : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
merak.param @up : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @down : tensor<8x16xf32> = dense<0.5> : tensor<8x16xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x1x3x4xf32>) {
  %w = merak.get_param @qkv : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %q, %k, %v = merak.split %m axis = 2 sizes = [8, 4, 4] : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %qh = merak.reshape %q : tensor<2x3x8xf32> to tensor<2x3x2x4xf32>
  %qt = merak.transpose %qh perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> to tensor<2x2x3x4xf32>
  %kh = merak.reshape %k : tensor<2x3x4xf32> to tensor<2x1x3x4xf32>
  %kb = merak.broadcast %kh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %kt = merak.transpose %kb perm = [0, 1, 3, 2] : tensor<2x2x3x4xf32> to tensor<2x2x4x3xf32>
  %vh = merak.reshape %v : tensor<2x3x4xf32> to tensor<2x1x3x4xf32>
  %vb = merak.broadcast %vh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %s = merak.matmul %qt, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %p = merak.softmax %s axis = 3 : tensor<2x2x3x3xf32>
  %a = merak.matmul %p, %vb : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %at = merak.transpose %a perm = [0, 2, 1, 3] : tensor<2x2x3x4xf32> to tensor<2x3x2x4xf32>
  %ar = merak.reshape %at : tensor<2x3x2x4xf32> to tensor<2x3x8xf32>
  %wo = merak.get_param @o : tensor<8x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %y = merak.matmul %ar, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %uw = merak.get_param @up : tensor<16x8xf32>
  %uwt = merak.transpose %uw perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %u = merak.matmul %x, %uwt : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %ug = merak.gelu %u : tensor<2x3x16xf32>
  %dw = merak.get_param @down : tensor<8x16xf32>
  %dwt = merak.transpose %dw perm = [1, 0] : tensor<8x16xf32> to tensor<16x8xf32>
  %d = merak.matmul %ug, %dwt : tensor<2x3x16xf32>, tensor<16x8xf32> -> tensor<2x3x8xf32>
  %r = merak.add %y, %d : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return %r, %kh : tensor<2x3x8xf32>, tensor<2x1x3x4xf32>
}

// -----

// Falcon's fused multi-query projection: viewed as [.., heads + 2,
// head_dim], the queries sliced by heads, the key and value heads picked by
// index behind a transpose. The parts [2, 1, 1] heads are the projection's
// ragged blocks [8, 4, 4]; the picked key and value heads are held whole,
// and the picks read their local positions (1 and 2 of the local 3 heads).
// CHECK-DAG: merak.param @qkv : tensor<16x8xf32> = dense<5.000000e-01> : tensor<16x8xf32>{{$}}
// CHECK-DAG: merak.param @o : tensor<8x4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.constant dense<[0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<12xi64>
// CHECK: %[[V:.*]] = merak.reshape %{{.*}} : tensor<2x3x12xf32> to tensor<2x3x3x4xf32>
// CHECK: %[[T:.*]] = merak.transpose %[[V]] perm = [2, 0, 1, 3] : tensor<2x3x3x4xf32> to tensor<3x2x3x4xf32>
// CHECK: merak.slice %[[V]] starts = [0, 0, 0, 0] limits = [2, 3, 1, 4]
// CHECK: %[[K:.*]] = merak.constant dense<1> : tensor<1xi64>
// CHECK-NEXT: merak.gather %[[T]][%[[K]]] axis = 0 : tensor<3x2x3x4xf32>, tensor<1xi64> -> tensor<1x2x3x4xf32>
// CHECK: %[[VI:.*]] = merak.constant dense<2> : tensor<1xi64>
// CHECK-NEXT: merak.gather %[[T]][%[[VI]]] axis = 0 : tensor<3x2x3x4xf32>, tensor<1xi64> -> tensor<1x2x3x4xf32>
// CHECK: merak.softmax %{{.*}} : tensor<2x1x3x3xf32>
// CHECK: merak.all_reduce
merak.param @qkv : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @o : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = merak.get_param @qkv : tensor<16x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %m = merak.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %h = merak.reshape %m : tensor<2x3x16xf32> to tensor<2x3x4x4xf32>
  %hp = merak.transpose %h perm = [2, 0, 1, 3] : tensor<2x3x4x4xf32> to tensor<4x2x3x4xf32>
  %q = merak.slice %h starts = [0, 0, 0, 0] limits = [2, 3, 2, 4] strides = [1, 1, 1, 1] : tensor<2x3x4x4xf32> to tensor<2x3x2x4xf32>
  %qt = merak.transpose %q perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> to tensor<2x2x3x4xf32>
  %ki = merak.constant dense<2> : tensor<1xi64>
  %k = merak.gather %hp[%ki] axis = 0 : tensor<4x2x3x4xf32>, tensor<1xi64> -> tensor<1x2x3x4xf32>
  %kh = merak.transpose %k perm = [1, 0, 2, 3] : tensor<1x2x3x4xf32> to tensor<2x1x3x4xf32>
  %kb = merak.broadcast %kh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %kt = merak.transpose %kb perm = [0, 1, 3, 2] : tensor<2x2x3x4xf32> to tensor<2x2x4x3xf32>
  %vi = merak.constant dense<3> : tensor<1xi64>
  %v = merak.gather %hp[%vi] axis = 0 : tensor<4x2x3x4xf32>, tensor<1xi64> -> tensor<1x2x3x4xf32>
  %vh = merak.transpose %v perm = [1, 0, 2, 3] : tensor<1x2x3x4xf32> to tensor<2x1x3x4xf32>
  %vb = merak.broadcast %vh : tensor<2x1x3x4xf32> to tensor<2x2x3x4xf32>
  %s = merak.matmul %qt, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %p = merak.softmax %s axis = 3 : tensor<2x2x3x3xf32>
  %a = merak.matmul %p, %vb : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %at = merak.transpose %a perm = [0, 2, 1, 3] : tensor<2x2x3x4xf32> to tensor<2x3x2x4xf32>
  %ar = merak.reshape %at : tensor<2x3x2x4xf32> to tensor<2x3x8xf32>
  %wo = merak.get_param @o : tensor<8x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %y = merak.matmul %ar, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}
