// RUN: merak-opt %s -split-input-file -merak-fuse-gemm-sums | FileCheck %s

// A recurrent weight's gradient: the sum over 4 steps of h_t^T g_t, each
// contracted over a batch of 2 (16 x 64 outputs). One product over the
// joined contraction: the h_t joined by rows (in the sum's order, left to
// right) and transposed once, the g_t joined by rows; the other term stays
// added.
// CHECK-LABEL: func.func @steps
// CHECK-SAME: (%[[H0:.*]]: tensor<2x16xf32>, %[[H1:.*]]: tensor<2x16xf32>, %[[H2:.*]]: tensor<2x16xf32>, %[[H3:.*]]: tensor<2x16xf32>, %[[G0:.*]]: tensor<2x64xf32>, %[[G1:.*]]: tensor<2x64xf32>, %[[G2:.*]]: tensor<2x64xf32>, %[[G3:.*]]: tensor<2x64xf32>, %[[C:.*]]: tensor<16x64xf32>)
// CHECK-NEXT: %[[HS:.*]] = merak.concat %[[H3]], %[[H0]], %[[H1]], %[[H2]] axis = 0 : {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: %[[HT:.*]] = merak.transpose %[[HS]] perm = [1, 0] : tensor<8x16xf32> to tensor<16x8xf32>
// CHECK-NEXT: %[[GS:.*]] = merak.concat %[[G3]], %[[G0]], %[[G1]], %[[G2]] axis = 0 : {{.*}} -> tensor<8x64xf32>
// CHECK-NEXT: %[[P:.*]] = merak.matmul %[[HT]], %[[GS]] : tensor<16x8xf32>, tensor<8x64xf32> -> tensor<16x64xf32>
// CHECK-NEXT: %[[S:.*]] = merak.add %[[P]], %[[C]]
// CHECK-NEXT: return %[[S]]
func.func @steps(%h0: tensor<2x16xf32>, %h1: tensor<2x16xf32>, %h2: tensor<2x16xf32>, %h3: tensor<2x16xf32>,
                 %g0: tensor<2x64xf32>, %g1: tensor<2x64xf32>, %g2: tensor<2x64xf32>, %g3: tensor<2x64xf32>,
                 %c: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %t0 = merak.transpose %h0 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p0 = merak.matmul %t0, %g0 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %t1 = merak.transpose %h1 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p1 = merak.matmul %t1, %g1 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %s1 = merak.add %p0, %p1 : tensor<16x64xf32>, tensor<16x64xf32>
  %s2 = merak.add %s1, %c : tensor<16x64xf32>, tensor<16x64xf32>
  %t2 = merak.transpose %h2 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p2 = merak.matmul %t2, %g2 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %s3 = merak.add %s2, %p2 : tensor<16x64xf32>, tensor<16x64xf32>
  %t3 = merak.transpose %h3 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p3 = merak.matmul %t3, %g3 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %s4 = merak.add %p3, %s3 : tensor<16x64xf32>, tensor<16x64xf32>
  return %s4 : tensor<16x64xf32>
}

// -----

// The first step's state is a zero constant (its transpose already folded):
// joined as the transposed splat, so the lhs is still one transpose.
// CHECK-LABEL: func.func @zero_state
// CHECK-DAG: %[[Z:.*]] = merak.constant dense<0.000000e+00> : tensor<2x16xf32>
// CHECK: %[[HS:.*]] = merak.concat %[[Z]], %arg0, %arg1 axis = 0 : {{.*}} -> tensor<6x16xf32>
// CHECK: %[[HT:.*]] = merak.transpose %[[HS]] perm = [1, 0]
// CHECK: merak.matmul %[[HT]], {{.*}} : tensor<16x6xf32>, tensor<6x64xf32> -> tensor<16x64xf32>
// CHECK-NOT: tensor<16x2xf32>
func.func @zero_state(%h1: tensor<2x16xf32>, %h2: tensor<2x16xf32>, %g0: tensor<2x64xf32>,
                      %g1: tensor<2x64xf32>, %g2: tensor<2x64xf32>) -> tensor<16x64xf32> {
  %z = merak.constant dense<0.0> : tensor<16x2xf32>
  %p0 = merak.matmul %z, %g0 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %t1 = merak.transpose %h1 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p1 = merak.matmul %t1, %g1 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %t2 = merak.transpose %h2 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p2 = merak.matmul %t2, %g2 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %s1 = merak.add %p0, %p1 : tensor<16x64xf32>, tensor<16x64xf32>
  %s2 = merak.add %s1, %p2 : tensor<16x64xf32>, tensor<16x64xf32>
  return %s2 : tensor<16x64xf32>
}

// -----

// Operands that are not transposes are joined as they are (the lhs along
// its columns); a transposed rhs is joined before it is transposed.
// CHECK-LABEL: func.func @plain
// CHECK: %[[A:.*]] = merak.concat %arg0, %arg1, %arg2 axis = 1 : {{.*}} -> tensor<16x3xf32>
// CHECK: %[[BT:.*]] = merak.concat %arg3, %arg4, %arg5 axis = 1 : {{.*}} -> tensor<64x3xf32>
// CHECK: %[[B:.*]] = merak.transpose %[[BT]] perm = [1, 0] : tensor<64x3xf32> to tensor<3x64xf32>
// CHECK: merak.matmul %[[A]], %[[B]] : tensor<16x3xf32>, tensor<3x64xf32> -> tensor<16x64xf32>
// CHECK-NOT: merak.add
func.func @plain(%a0: tensor<16x1xf32>, %a1: tensor<16x1xf32>, %a2: tensor<16x1xf32>,
                 %b0: tensor<64x1xf32>, %b1: tensor<64x1xf32>, %b2: tensor<64x1xf32>) -> tensor<16x64xf32> {
  %u0 = merak.transpose %b0 perm = [1, 0] : tensor<64x1xf32> to tensor<1x64xf32>
  %u1 = merak.transpose %b1 perm = [1, 0] : tensor<64x1xf32> to tensor<1x64xf32>
  %u2 = merak.transpose %b2 perm = [1, 0] : tensor<64x1xf32> to tensor<1x64xf32>
  %p0 = merak.matmul %a0, %u0 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %p1 = merak.matmul %a1, %u1 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %p2 = merak.matmul %a2, %u2 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %s1 = merak.add %p0, %p1 : tensor<16x64xf32>, tensor<16x64xf32>
  %s2 = merak.add %s1, %p2 : tensor<16x64xf32>, tensor<16x64xf32>
  return %s2 : tensor<16x64xf32>
}

// -----

// Long contractions (two micro-batches' 32 rows into an 8 x 8 weight): the
// copies would cost more than the adds saved; left alone.
// CHECK-LABEL: func.func @long
// CHECK-NOT: merak.concat
// CHECK: merak.matmul
// CHECK: merak.matmul
// CHECK: merak.add
func.func @long(%x0: tensor<8x32xf32>, %g0: tensor<32x8xf32>, %x1: tensor<8x32xf32>, %g1: tensor<32x8xf32>) -> tensor<8x8xf32> {
  %p0 = merak.matmul %x0, %g0 : tensor<8x32xf32>, tensor<32x8xf32> -> tensor<8x8xf32>
  %p1 = merak.matmul %x1, %g1 : tensor<8x32xf32>, tensor<32x8xf32> -> tensor<8x8xf32>
  %s = merak.add %p0, %p1 : tensor<8x8xf32>, tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// A product read elsewhere, a partial sum read elsewhere, and a broadcast
// add do not take part: here the joined products are %p1 and %p2 only, and
// %s1 (returned too) is a term of the sum, not a part of it.
// CHECK-LABEL: func.func @shared
// CHECK: %[[P0:.*]] = merak.matmul %arg0, %arg4 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
// CHECK: %[[S1:.*]] = merak.add %[[P0]], %[[P0]]
// CHECK: %[[A:.*]] = merak.concat %arg1, %arg2 axis = 1
// CHECK: %[[B:.*]] = merak.concat %arg5, %arg6 axis = 0
// CHECK: %[[P:.*]] = merak.matmul %[[A]], %[[B]] : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
// CHECK: %[[S:.*]] = merak.add %[[P]], %[[S1]]
// CHECK: %[[R:.*]] = merak.add %arg3, %[[S]] : tensor<64xf32>, tensor<16x64xf32>
// CHECK: return %[[R]], %[[S1]], %[[P0]]
func.func @shared(%a0: tensor<16x1xf32>, %a1: tensor<16x1xf32>, %a2: tensor<16x1xf32>, %bias: tensor<64xf32>,
                  %b0: tensor<1x64xf32>, %b1: tensor<1x64xf32>, %b2: tensor<1x64xf32>)
    -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %p0 = merak.matmul %a0, %b0 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %s1 = merak.add %p0, %p0 : tensor<16x64xf32>, tensor<16x64xf32>
  %p1 = merak.matmul %a1, %b1 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %p2 = merak.matmul %a2, %b2 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %s2 = merak.add %s1, %p1 : tensor<16x64xf32>, tensor<16x64xf32>
  %s3 = merak.add %s2, %p2 : tensor<16x64xf32>, tensor<16x64xf32>
  %r = merak.add %bias, %s3 : tensor<64xf32>, tensor<16x64xf32>
  return %r, %s1, %p0 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// A transpose also read after the sum is kept for that reader (the
// others go); the joined side reads its input.
// CHECK-LABEL: func.func @shared_transpose
// CHECK: %[[T0:.*]] = merak.transpose %arg0 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
// CHECK: merak.concat %arg0, %arg1, %arg2 axis = 0
// CHECK: merak.matmul {{.*}} : tensor<16x6xf32>, tensor<6x64xf32> -> tensor<16x64xf32>
// CHECK-NOT: merak.transpose %arg1
// CHECK: return %{{.*}}, %[[T0]]
func.func @shared_transpose(%h0: tensor<2x16xf32>, %h1: tensor<2x16xf32>, %h2: tensor<2x16xf32>,
                            %g0: tensor<2x64xf32>, %g1: tensor<2x64xf32>, %g2: tensor<2x64xf32>)
    -> (tensor<16x64xf32>, tensor<16x2xf32>) {
  %t0 = merak.transpose %h0 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p0 = merak.matmul %t0, %g0 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %t1 = merak.transpose %h1 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p1 = merak.matmul %t1, %g1 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %t2 = merak.transpose %h2 perm = [1, 0] : tensor<2x16xf32> to tensor<16x2xf32>
  %p2 = merak.matmul %t2, %g2 : tensor<16x2xf32>, tensor<2x64xf32> -> tensor<16x64xf32>
  %s1 = merak.add %p0, %p1 : tensor<16x64xf32>, tensor<16x64xf32>
  %s2 = merak.add %s1, %p2 : tensor<16x64xf32>, tensor<16x64xf32>
  return %s2, %t0 : tensor<16x64xf32>, tensor<16x2xf32>
}

// -----

// Products of other operand types (bf16 operands widened to an f32 result)
// are not joined with the f32 ones: the first product's types decide.
// CHECK-LABEL: func.func @mixed_types
// CHECK: %[[W:.*]] = merak.matmul %arg6, %arg7 : tensor<16x1xbf16>, tensor<1x64xbf16> -> tensor<16x64xf32>
// CHECK: %[[A:.*]] = merak.concat %arg0, %arg1, %arg2 axis = 1 : {{.*}} -> tensor<16x3xf32>
// CHECK: %[[P:.*]] = merak.matmul %[[A]], {{.*}} : tensor<16x3xf32>, tensor<3x64xf32> -> tensor<16x64xf32>
// CHECK: merak.add %[[P]], %[[W]]
func.func @mixed_types(%a0: tensor<16x1xf32>, %a1: tensor<16x1xf32>, %a2: tensor<16x1xf32>,
                       %b0: tensor<1x64xf32>, %b1: tensor<1x64xf32>, %b2: tensor<1x64xf32>,
                       %c: tensor<16x1xbf16>, %d: tensor<1x64xbf16>) -> tensor<16x64xf32> {
  %p0 = merak.matmul %a0, %b0 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %w = merak.matmul %c, %d : tensor<16x1xbf16>, tensor<1x64xbf16> -> tensor<16x64xf32>
  %p1 = merak.matmul %a1, %b1 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %p2 = merak.matmul %a2, %b2 : tensor<16x1xf32>, tensor<1x64xf32> -> tensor<16x64xf32>
  %s1 = merak.add %p0, %w : tensor<16x64xf32>, tensor<16x64xf32>
  %s2 = merak.add %s1, %p1 : tensor<16x64xf32>, tensor<16x64xf32>
  %s3 = merak.add %s2, %p2 : tensor<16x64xf32>, tensor<16x64xf32>
  return %s3 : tensor<16x64xf32>
}
