// RUN: merak-opt %s -split-input-file -merak-overlap -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-overlap="dp-overlap=false" -verify-diagnostics | FileCheck %s --check-prefix=OFF
// RUN: not merak-opt %s -split-input-file -merak-overlap="tp-overlap=halves" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: merak-overlap: tp-overlap must be none or sub-pipeline, got 'halves'

// Two gradient buckets of a backward (the last layer's gradient first), then
// the optimizer. Each bucket's all-reduce starts right after its gradient
// and is waited for right before the update that reads it: bucket A runs
// under the rest of the backward (exp, mul) and the update of w1.
// CHECK-LABEL: func.func @buckets
// CHECK-NEXT: %[[G2:.*]] = merak.mul %arg0, %arg2
// CHECK-NEXT: %[[RA:.*]] = merak.all_reduce_start %[[G2]] group = "dp" reduction = "mean" : tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = merak.exp %arg0
// CHECK-NEXT: %[[G1:.*]] = merak.mul %[[H]], %arg1
// CHECK-NEXT: %[[RB:.*]] = merak.all_reduce_start %[[G1]] group = "dp" reduction = "mean" : tensor<4xf32>
// CHECK-NEXT: %[[T:.*]] = merak.tanh %arg0
// CHECK-NEXT: %[[B:.*]] = merak.wait %[[RB]] : tensor<4xf32>
// CHECK-NEXT: %[[U1:.*]] = merak.sub %arg1, %[[B]]
// CHECK-NEXT: %[[A:.*]] = merak.wait %[[RA]] : tensor<4xf32>
// CHECK-NEXT: %[[U2:.*]] = merak.sub %arg2, %[[A]]
// CHECK-NEXT: return %[[U1]], %[[U2]], %[[T]]
// OFF-LABEL: func.func @buckets
// OFF-NOT: merak.wait
// OFF: merak.all_reduce %{{.*}} group = "dp"
// OFF-NOT: merak.wait
func.func @buckets(%x: tensor<4xf32>, %w1: tensor<4xf32>, %w2: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %g2 = merak.mul %x, %w2 : tensor<4xf32>, tensor<4xf32>
  %a = merak.all_reduce %g2 group = "dp" reduction = "mean" : tensor<4xf32> -> tensor<4xf32>
  %h = merak.exp %x : tensor<4xf32>
  %g1 = merak.mul %h, %w1 : tensor<4xf32>, tensor<4xf32>
  %b = merak.all_reduce %g1 group = "dp" reduction = "mean" : tensor<4xf32> -> tensor<4xf32>
  %t = merak.tanh %x : tensor<4xf32>
  %u1 = merak.sub %w1, %b : tensor<4xf32>, tensor<4xf32>
  %u2 = merak.sub %w2, %a : tensor<4xf32>, tensor<4xf32>
  return %u1, %u2, %t : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A collective written late starts as soon as its operand exists; the
// starts keep the program's order (the second operand is ready first, its
// start still comes after the first one's), and a collective of a
// collective's result starts after that one's wait. A tp all-reduce stays
// blocking without tp-overlap.
// CHECK-LABEL: func.func @order
// CHECK-NEXT: %[[G1:.*]] = merak.neg %arg0
// CHECK-NEXT: %[[G2:.*]] = merak.exp %arg0
// CHECK-NEXT: %[[R1:.*]] = merak.all_reduce_start %[[G2]] group = "dp" reduction = "sum"
// CHECK-NEXT: %[[R2:.*]] = merak.all_reduce_start %[[G1]] group = "dp" reduction = "sum"
// CHECK-NEXT: %[[E:.*]] = merak.exp %[[G2]]
// CHECK-NEXT: %[[W1:.*]] = merak.wait %[[R1]]
// CHECK-NEXT: %[[R3:.*]] = merak.all_reduce_start %[[W1]] group = "dp" reduction = "max"
// CHECK-NEXT: %[[TP:.*]] = merak.all_reduce %[[E]] group = "tp" reduction = "sum"
// CHECK-NEXT: %[[W2:.*]] = merak.wait %[[R2]]
// CHECK-NEXT: %[[S:.*]] = merak.add %[[W2]], %[[TP]]
// CHECK-NEXT: %[[W3:.*]] = merak.wait %[[R3]]
// CHECK-NEXT: return %[[S]], %[[W3]]
func.func @order(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %g1 = merak.neg %x : tensor<4xf32>
  %g2 = merak.exp %x : tensor<4xf32>
  %e = merak.exp %g2 : tensor<4xf32>
  %r1 = merak.all_reduce %g2 group = "dp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
  %r2 = merak.all_reduce %g1 group = "dp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
  %r3 = merak.all_reduce %r1 group = "dp" reduction = "max" : tensor<4xf32> -> tensor<4xf32>
  %tp = merak.all_reduce %e group = "tp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
  %s = merak.add %r2, %tp : tensor<4xf32>, tensor<4xf32>
  return %s, %r3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// ZeRO's reduce-scatter and all-gather are started alike.
// CHECK-LABEL: func.func @zero
// CHECK-NEXT: %[[RS:.*]] = merak.reduce_scatter_start %arg0 group = "dp" reduction = "mean" parts = 2 : tensor<8xf32>
// CHECK-NEXT: %[[AG:.*]] = merak.all_gather_start %arg1 group = "dp" parts = 2 : tensor<2xf32>
// CHECK-NEXT: merak.exp %arg0
// CHECK-NEXT: %[[P:.*]] = merak.wait %[[RS]] : tensor<4xf32>
// CHECK-NEXT: %[[G:.*]] = merak.wait %[[AG]] : tensor<4xf32>
// CHECK-NEXT: merak.add %[[P]], %[[G]]
func.func @zero(%g: tensor<8xf32>, %p: tensor<2xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %rs = merak.reduce_scatter %g group = "dp" reduction = "mean" : tensor<8xf32> -> tensor<4xf32>
  %ag = merak.all_gather %p group = "dp" : tensor<2xf32> -> tensor<4xf32>
  %e = merak.exp %g : tensor<8xf32>
  %s = merak.add %rs, %ag : tensor<4xf32>, tensor<4xf32>
  return %s, %e : tensor<4xf32>, tensor<8xf32>
}

