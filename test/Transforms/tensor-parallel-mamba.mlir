// RUN: merak-opt %s -merak-tensor-parallel=tp=2 | FileCheck %s

// A Mamba mixer as transformers' PyTorch path exports it (its scan a
// merak.linear_scan over the tokens, as merak-raise-linear-scan leaves it,
// with a simpler decay and input than Mamba's):
// in_proj's output [B, L, 2C] is transposed to [B, 2C, L] and sliced into
// the hidden states and the gate, so in_proj is column-parallel in 2
// blocks (each rank holds its channels of both); the causal conv1d is
// depthwise (groups = C) and keeps the channels split, its weight and bias
// split alike and its groups the local channels; x_proj reads the split
// channels (row-parallel: dt, B and C summed over tp); dt_proj is
// `dt_proj.weight @ dt^T` (the weight on the left), column-parallel on its
// rows, and its bias, read through a reshape to [C, 1], is split alike (on
// the parameter's dimension the reshape keeps); the scan runs on each
// rank's channels (its rule keeps only the scanned axis whole); out_proj is
// row-parallel.
// CHECK-DAG: merak.param @in_proj : tensor<8x4xf32> = {{.*}} : tensor<16x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 2, parts = 2>}
// CHECK-DAG: merak.param @conv.weight : tensor<4x1x1x2xf32> = {{.*}} : tensor<8x1x1x2xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @conv.bias : tensor<4xf32> = {{.*}} : tensor<8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @x_proj : tensor<6x4xf32> = {{.*}} : tensor<6x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @dt_proj : tensor<4x2xf32> = {{.*}} : tensor<8x2xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @dt_bias : tensor<4xf32> = {{.*}} : tensor<8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @out_proj : tensor<4x4xf32> = {{.*}} : tensor<4x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[IN:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x3x4xf32>, tensor<4x8xf32> -> tensor<1x3x8xf32>
// CHECK: %[[T:.*]] = merak.transpose %[[IN]] perm = [0, 2, 1] : tensor<1x3x8xf32> to tensor<1x8x3xf32>
// CHECK: merak.slice %[[T]] starts = [0, 0, 0] limits = [1, 4, 3]
// CHECK: merak.slice %[[T]] starts = [0, 4, 0] limits = [1, 8, 3]
// CHECK: merak.conv2d {{.*}} groups = 4 : (tensor<1x4x1x3xf32>, tensor<4x1x1x2xf32>, tensor<4xf32>) -> tensor<1x4x1x4xf32>
// CHECK: %[[XP:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x3x4xf32>, tensor<4x6xf32> -> tensor<1x3x6xf32>
// CHECK: merak.all_reduce %[[XP]] group = "tp" reduction = "sum"
// CHECK: %[[F:.*]] = merak.tp_identity %{{.*}} : tensor<1x2x3xf32>
// CHECK: %[[DW:.*]] = merak.get_param @dt_proj : tensor<4x2xf32>
// CHECK: merak.matmul %[[DW]], %[[F]] : tensor<4x2xf32>, tensor<1x2x3xf32> -> tensor<1x4x3xf32>
// CHECK: %[[B:.*]] = merak.get_param @dt_bias : tensor<4xf32>
// CHECK: merak.reshape %[[B]] : tensor<4xf32> to tensor<4x1xf32>
// CHECK-NOT: merak.local_shard
// CHECK: merak.linear_scan %{{.*}}, %{{.*}} axis = 2 : tensor<1x4x3xf32>
// CHECK-NOT: merak.local_shard
// CHECK: %[[OUT:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
// CHECK: merak.all_reduce %[[OUT]] group = "tp" reduction = "sum"
merak.param @in_proj : tensor<16x4xf32> = dense<0.5> : tensor<16x4xf32>
merak.param @conv.weight : tensor<8x1x1x2xf32> = dense<0.5> : tensor<8x1x1x2xf32>
merak.param @conv.bias : tensor<8xf32> = dense<0.25> : tensor<8xf32>
merak.param @x_proj : tensor<6x8xf32> = dense<0.5> : tensor<6x8xf32>
merak.param @dt_proj : tensor<8x2xf32> = dense<0.5> : tensor<8x2xf32>
merak.param @dt_bias : tensor<8xf32> = dense<0.25> : tensor<8xf32>
merak.param @out_proj : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
func.func @forward(%h: tensor<1x3x4xf32>) -> tensor<1x3x4xf32> {
  %w = merak.get_param @in_proj : tensor<16x4xf32>
  %wt = merak.transpose %w perm = [1, 0] : tensor<16x4xf32> to tensor<4x16xf32>
  %p = merak.matmul %h, %wt : tensor<1x3x4xf32>, tensor<4x16xf32> -> tensor<1x3x16xf32>
  %pt = merak.transpose %p perm = [0, 2, 1] : tensor<1x3x16xf32> to tensor<1x16x3xf32>
  %x = merak.slice %pt starts = [0, 0, 0] limits = [1, 8, 3] strides = [1, 1, 1] : tensor<1x16x3xf32> to tensor<1x8x3xf32>
  %z = merak.slice %pt starts = [0, 8, 0] limits = [1, 16, 3] strides = [1, 1, 1] : tensor<1x16x3xf32> to tensor<1x8x3xf32>
  %x4 = merak.reshape %x : tensor<1x8x3xf32> to tensor<1x8x1x3xf32>
  %cw = merak.get_param @conv.weight : tensor<8x1x1x2xf32>
  %cb = merak.get_param @conv.bias : tensor<8xf32>
  %c = merak.conv2d %x4, %cw bias %cb strides = [1, 1] padding = [0, 1, 0, 1] dilations = [1, 1] groups = 8 : (tensor<1x8x1x3xf32>, tensor<8x1x1x2xf32>, tensor<8xf32>) -> tensor<1x8x1x4xf32>
  %c3 = merak.reshape %c : tensor<1x8x1x4xf32> to tensor<1x8x4xf32>
  %cs = merak.slice %c3 starts = [0, 0, 0] limits = [1, 8, 3] strides = [1, 1, 1] : tensor<1x8x4xf32> to tensor<1x8x3xf32>
  %sg = merak.sigmoid %cs : tensor<1x8x3xf32>
  %a = merak.mul %cs, %sg : tensor<1x8x3xf32>, tensor<1x8x3xf32>
  %at = merak.transpose %a perm = [0, 2, 1] : tensor<1x8x3xf32> to tensor<1x3x8xf32>
  %xw = merak.get_param @x_proj : tensor<6x8xf32>
  %xwt = merak.transpose %xw perm = [1, 0] : tensor<6x8xf32> to tensor<8x6xf32>
  %dbc = merak.matmul %at, %xwt : tensor<1x3x8xf32>, tensor<8x6xf32> -> tensor<1x3x6xf32>
  %parts:3 = merak.split %dbc axis = 2 sizes = [2, 2, 2] : tensor<1x3x6xf32> -> tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>
  %dtt = merak.transpose %parts#0 perm = [0, 2, 1] : tensor<1x3x2xf32> to tensor<1x2x3xf32>
  %dw = merak.get_param @dt_proj : tensor<8x2xf32>
  %dt = merak.matmul %dw, %dtt : tensor<8x2xf32>, tensor<1x2x3xf32> -> tensor<1x8x3xf32>
  %b = merak.get_param @dt_bias : tensor<8xf32>
  %b2 = merak.reshape %b : tensor<8xf32> to tensor<8x1xf32>
  %dt2 = merak.add %dt, %b2 : tensor<1x8x3xf32>, tensor<8x1xf32>
  %sp = merak.softplus %dt2 : tensor<1x8x3xf32>
  %y = merak.linear_scan %sp, %a axis = 2 : tensor<1x8x3xf32>
  %sz = merak.sigmoid %z : tensor<1x8x3xf32>
  %g = merak.mul %y, %sz : tensor<1x8x3xf32>, tensor<1x8x3xf32>
  %yt = merak.transpose %g perm = [0, 2, 1] : tensor<1x8x3xf32> to tensor<1x3x8xf32>
  %ow = merak.get_param @out_proj : tensor<4x8xf32>
  %owt = merak.transpose %ow perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %o = merak.matmul %yt, %owt : tensor<1x3x8xf32>, tensor<8x4xf32> -> tensor<1x3x4xf32>
  return %o : tensor<1x3x4xf32>
}
