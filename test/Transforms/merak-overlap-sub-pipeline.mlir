// RUN: merak-opt %s -split-input-file -merak-overlap="tp-overlap=sub-pipeline" -verify-diagnostics | FileCheck %s --check-prefix=SUB
// RUN: merak-opt %s -split-input-file -merak-overlap | FileCheck %s --check-prefix=NONE

// NONE-LABEL: func.func @row_parallel
// NONE-NEXT: merak.matmul
// NONE-NEXT: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<4x3x6xf32>

// Sub-pipelined tensor parallelism: the row-parallel matmul is split along
// its leading (batch) dimension, half A's all-reduce runs under half B's
// matmul, and the halves are joined where the result is read.
// SUB-LABEL: func.func @row_parallel
// SUB-NEXT: %[[XA:.*]] = merak.slice %arg0 starts = [0, 0, 0] limits = [2, 3, 8] strides = [1, 1, 1] : tensor<4x3x8xf32> to tensor<2x3x8xf32>
// SUB-NEXT: %[[YA:.*]] = merak.matmul %[[XA]], %arg1 : tensor<2x3x8xf32>, tensor<8x6xf32> -> tensor<2x3x6xf32>
// SUB-NEXT: %[[RA:.*]] = merak.all_reduce_start %[[YA]] group = "tp" reduction = "sum" : tensor<2x3x6xf32>
// SUB-NEXT: %[[XB:.*]] = merak.slice %arg0 starts = [2, 0, 0] limits = [4, 3, 8] strides = [1, 1, 1] : tensor<4x3x8xf32> to tensor<2x3x8xf32>
// SUB-NEXT: %[[YB:.*]] = merak.matmul %[[XB]], %arg1 : tensor<2x3x8xf32>, tensor<8x6xf32> -> tensor<2x3x6xf32>
// SUB-NEXT: %[[RB:.*]] = merak.all_reduce_start %[[YB]] group = "tp" reduction = "sum" : tensor<2x3x6xf32>
// SUB-NEXT: %[[A:.*]] = merak.wait %[[RA]] : tensor<2x3x6xf32>
// SUB-NEXT: %[[B:.*]] = merak.wait %[[RB]] : tensor<2x3x6xf32>
// SUB-NEXT: %[[Y:.*]] = merak.concat %[[A]], %[[B]] axis = 0 : tensor<2x3x6xf32>, tensor<2x3x6xf32> -> tensor<4x3x6xf32>
// SUB-NEXT: merak.relu %[[Y]]
func.func @row_parallel(%x: tensor<4x3x8xf32>, %w: tensor<8x6xf32>) -> tensor<4x3x6xf32> {
  %y = merak.matmul %x, %w : tensor<4x3x8xf32>, tensor<8x6xf32> -> tensor<4x3x6xf32>
  %s = merak.all_reduce %y group = "tp" reduction = "sum" : tensor<4x3x6xf32> -> tensor<4x3x6xf32>
  %r = merak.relu %s : tensor<4x3x6xf32>
  return %r : tensor<4x3x6xf32>
}

// -----

// An odd leading dimension splits unevenly; a batch of 1 splits the next
// (sequence) dimension; a single row cannot be split (a remark says so) and
// its all-reduce is only started early.
// SUB-LABEL: func.func @odd_and_one
// SUB: merak.matmul %{{.*}}, %arg3 : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
// SUB: merak.slice %arg1 starts = [0, 0] limits = [1, 8]
// SUB: merak.slice %arg1 starts = [1, 0] limits = [3, 8]
// SUB: merak.concat %{{.*}}, %{{.*}} axis = 0 : tensor<1x8xf32>, tensor<2x8xf32> -> tensor<3x8xf32>
// SUB: merak.slice %arg2 starts = [0, 0, 0] limits = [1, 2, 8] strides = [1, 1, 1] : tensor<1x4x8xf32> to tensor<1x2x8xf32>
// SUB: merak.slice %arg2 starts = [0, 2, 0] limits = [1, 4, 8]
// SUB: merak.concat %{{.*}}, %{{.*}} axis = 1 : tensor<1x2x8xf32>, tensor<1x2x8xf32> -> tensor<1x4x8xf32>
func.func @odd_and_one(%one: tensor<1x8xf32>, %odd: tensor<3x8xf32>, %seq: tensor<1x4x8xf32>,
                       %w: tensor<8x8xf32>) -> (tensor<1x8xf32>, tensor<3x8xf32>, tensor<1x4x8xf32>) {
  %y1 = merak.matmul %one, %w : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
  // expected-remark @+1 {{tp-overlap=sub-pipeline does not apply to this all-reduce: its matmul has a single row (batch and sequence 1)}}
  %s1 = merak.all_reduce %y1 group = "tp" reduction = "sum" : tensor<1x8xf32> -> tensor<1x8xf32>
  %y3 = merak.matmul %odd, %w : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  %s3 = merak.all_reduce %y3 group = "tp" reduction = "sum" : tensor<3x8xf32> -> tensor<3x8xf32>
  %ys = merak.matmul %seq, %w : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %ss = merak.all_reduce %ys group = "tp" reduction = "sum" : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
  return %s1, %s3, %ss : tensor<1x8xf32>, tensor<3x8xf32>, tensor<1x4x8xf32>
}
