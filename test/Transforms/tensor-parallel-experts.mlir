// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s

// Expert tensor parallelism: a Mixture-of-Experts MLP's expert GEMMs
// (merak.expert_matmul) are a column-parallel Linear (every expert's gate/up
// matrix split on its output features) and a row-parallel one (the down
// matrices split on their input features), with g after the second. The
// fused gate/up output is chunked in two as TorchScript exports torch.chunk
// (two slices, each one of two equal parts): the split takes blocks = 2, so
// that every rank holds its share of both halves, and each slice becomes the
// local half.
// CHECK-DAG: merak.param @gate_up : tensor<4x12x8xf32> = dense<5.000000e-01> : tensor<4x24x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 2, parts = 2>}
// CHECK-DAG: merak.param @down : tensor<4x8x6xf32> = dense<5.000000e-01> : tensor<4x8x12xf32> {merak.shard = #merak.shard<axis = 2, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[F:.*]] = merak.tp_identity %{{.*}} : tensor<16x8xf32>
// CHECK: %[[H:.*]] = merak.expert_matmul %[[F]], %{{.*}}[%{{.*}}] : tensor<16x8xf32>, tensor<4x12x8xf32>, tensor<16xi64> -> tensor<16x12xf32>
// CHECK: merak.slice %[[H]] starts = [0, 0] limits = [16, 6] strides = [1, 1] : tensor<16x12xf32> to tensor<16x6xf32>
// CHECK: merak.slice %[[H]] starts = [0, 6] limits = [16, 12] strides = [1, 1] : tensor<16x12xf32> to tensor<16x6xf32>
// CHECK: %[[D:.*]] = merak.expert_matmul %{{.*}}, %{{.*}}[%{{.*}}] : tensor<16x6xf32>, tensor<4x8x6xf32>, tensor<16xi64> -> tensor<16x8xf32>
// CHECK-NEXT: merak.all_reduce %[[D]] group = "tp" reduction = "sum"
merak.param @gate_up : tensor<4x24x8xf32> = dense<0.5> : tensor<4x24x8xf32>
merak.param @down : tensor<4x8x12xf32> = dense<0.5> : tensor<4x8x12xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x8xf32> {
  %wu = merak.get_param @gate_up : tensor<4x24x8xf32>
  %wd = merak.get_param @down : tensor<4x8x12xf32>
  %h = merak.expert_matmul %x, %wu[%e] : tensor<16x8xf32>, tensor<4x24x8xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %g = merak.slice %h starts = [0, 0] limits = [16, 12] strides = [1, 1] : tensor<16x24xf32> to tensor<16x12xf32>
  %u = merak.slice %h starts = [0, 12] limits = [16, 24] strides = [1, 1] : tensor<16x24xf32> to tensor<16x12xf32>
  %s = merak.sigmoid %g : tensor<16x12xf32>
  %a = merak.mul %g, %s : tensor<16x12xf32>, tensor<16x12xf32>
  %m = merak.mul %a, %u : tensor<16x12xf32>, tensor<16x12xf32>
  %y = merak.expert_matmul %m, %wd[%e] : tensor<16x12xf32>, tensor<4x8x12xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// GPT-OSS's experts: transposed weights ([E, in, out]), biases gathered per
// token (each expert's bias row), and gate/up interleaved (x[:, ::2],
// x[:, 1::2]): the bias parameter is split with the GEMM's output, the
// gathered rows with it, and each strided slice takes every other local
// element.
// CHECK-DAG: merak.param @gate_up : tensor<4x8x12xf32> = dense<5.000000e-01> : tensor<4x8x24xf32> {merak.shard = #merak.shard<axis = 2, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @gate_up_bias : tensor<4x12xf32> = dense<2.500000e-01> : tensor<4x24xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @down : tensor<4x6x8xf32> = dense<5.000000e-01> : tensor<4x12x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[B:.*]] = merak.gather %{{.*}}[%{{.*}}] axis = 0 : tensor<4x12xf32>, tensor<16xi64> -> tensor<16x12xf32>
// CHECK: %[[H:.*]] = merak.expert_matmul %{{.*}}, %{{.*}}[%{{.*}}] transpose_weight : tensor<16x8xf32>, tensor<4x8x12xf32>, tensor<16xi64> -> tensor<16x12xf32>
// CHECK: %[[HB:.*]] = merak.add %[[H]], %[[B]] : tensor<16x12xf32>, tensor<16x12xf32>
// CHECK: merak.slice %[[HB]] starts = [0, 0] limits = [16, 12] strides = [1, 2] : tensor<16x12xf32> to tensor<16x6xf32>
// CHECK: merak.slice %[[HB]] starts = [0, 1] limits = [16, 12] strides = [1, 2] : tensor<16x12xf32> to tensor<16x6xf32>
// CHECK: %[[D:.*]] = merak.expert_matmul %{{.*}}, %{{.*}}[%{{.*}}] transpose_weight : tensor<16x6xf32>, tensor<4x6x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
// CHECK-NEXT: merak.all_reduce %[[D]] group = "tp" reduction = "sum"
merak.param @gate_up : tensor<4x8x24xf32> = dense<0.5> : tensor<4x8x24xf32>
merak.param @gate_up_bias : tensor<4x24xf32> = dense<0.25> : tensor<4x24xf32>
merak.param @down : tensor<4x12x8xf32> = dense<0.5> : tensor<4x12x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x8xf32> {
  %wu = merak.get_param @gate_up : tensor<4x8x24xf32>
  %bu = merak.get_param @gate_up_bias : tensor<4x24xf32>
  %wd = merak.get_param @down : tensor<4x12x8xf32>
  %b = merak.gather %bu[%e] axis = 0 : tensor<4x24xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %h = merak.expert_matmul %x, %wu[%e] transpose_weight : tensor<16x8xf32>, tensor<4x8x24xf32>, tensor<16xi64> -> tensor<16x24xf32>
  %hb = merak.add %h, %b : tensor<16x24xf32>, tensor<16x24xf32>
  %g = merak.slice %hb starts = [0, 0] limits = [16, 24] strides = [1, 2] : tensor<16x24xf32> to tensor<16x12xf32>
  %u = merak.slice %hb starts = [0, 1] limits = [16, 24] strides = [1, 2] : tensor<16x24xf32> to tensor<16x12xf32>
  %m = merak.mul %g, %u : tensor<16x12xf32>, tensor<16x12xf32>
  %y = merak.expert_matmul %m, %wd[%e] transpose_weight : tensor<16x12xf32>, tensor<4x12x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// transformers 4.x's MoE block: a module per expert, exported as one
// parameter per expert and matrix, stacked for the grouped GEMM
// (concat(reshape(W_e) [1, out, in], axis 0)). Each expert's parameter is
// split like its row of a stacked parameter: the gate/up ones on their
// output features, the down ones on their input features.
// CHECK-DAG: merak.param @e0.w1 : tensor<6x8xf32> = dense<{{.*}}> : tensor<12x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @e1.w1 : tensor<6x8xf32> = dense<{{.*}}> : tensor<12x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @e0.w2 : tensor<8x6xf32> = dense<{{.*}}> : tensor<8x12xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @e1.w2 : tensor<8x6xf32> = dense<{{.*}}> : tensor<8x12xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[F:.*]] = merak.tp_identity %arg0 : tensor<16x8xf32>
// CHECK: %[[WU:.*]] = merak.concat %{{.*}}, %{{.*}} axis = 0 : tensor<1x6x8xf32>, tensor<1x6x8xf32> -> tensor<2x6x8xf32>
// CHECK: %[[WD:.*]] = merak.concat %{{.*}}, %{{.*}} axis = 0 : tensor<1x8x6xf32>, tensor<1x8x6xf32> -> tensor<2x8x6xf32>
// CHECK: merak.expert_matmul %[[F]], %[[WU]][%arg1] : tensor<16x8xf32>, tensor<2x6x8xf32>, tensor<16xi64> -> tensor<16x6xf32>
// CHECK: %[[D:.*]] = merak.expert_matmul %{{.*}}, %[[WD]][%arg1] : tensor<16x6xf32>, tensor<2x8x6xf32>, tensor<16xi64> -> tensor<16x8xf32>
// CHECK-NEXT: merak.all_reduce %[[D]] group = "tp" reduction = "sum"
merak.param @e0.w1 : tensor<12x8xf32> = dense<0.5> : tensor<12x8xf32>
merak.param @e1.w1 : tensor<12x8xf32> = dense<0.25> : tensor<12x8xf32>
merak.param @e0.w2 : tensor<8x12xf32> = dense<0.5> : tensor<8x12xf32>
merak.param @e1.w2 : tensor<8x12xf32> = dense<0.25> : tensor<8x12xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x8xf32> {
  %a0 = merak.get_param @e0.w1 : tensor<12x8xf32>
  %a1 = merak.get_param @e1.w1 : tensor<12x8xf32>
  %b0 = merak.get_param @e0.w2 : tensor<8x12xf32>
  %b1 = merak.get_param @e1.w2 : tensor<8x12xf32>
  %ra0 = merak.reshape %a0 : tensor<12x8xf32> to tensor<1x12x8xf32>
  %ra1 = merak.reshape %a1 : tensor<12x8xf32> to tensor<1x12x8xf32>
  %wu = merak.concat %ra0, %ra1 axis = 0 : tensor<1x12x8xf32>, tensor<1x12x8xf32> -> tensor<2x12x8xf32>
  %rb0 = merak.reshape %b0 : tensor<8x12xf32> to tensor<1x8x12xf32>
  %rb1 = merak.reshape %b1 : tensor<8x12xf32> to tensor<1x8x12xf32>
  %wd = merak.concat %rb0, %rb1 axis = 0 : tensor<1x8x12xf32>, tensor<1x8x12xf32> -> tensor<2x8x12xf32>
  %h = merak.expert_matmul %x, %wu[%e] : tensor<16x8xf32>, tensor<2x12x8xf32>, tensor<16xi64> -> tensor<16x12xf32>
  %r = merak.relu %h : tensor<16x12xf32>
  %y = merak.expert_matmul %r, %wd[%e] : tensor<16x12xf32>, tensor<2x8x12xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
