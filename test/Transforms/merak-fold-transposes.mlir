// RUN: merak-opt %s -merak-fold-transposes | FileCheck %s

// A linear layer's forward x W^T and its gradients g W (no transpose) and
// x^T g (a transposed activation): the GEMMs read the transposed operands.
// CHECK-LABEL: func.func @linear
// CHECK-NOT: merak.transpose
// CHECK: %[[Y:.*]] = merak.matmul_t %arg0, %arg1 {transpose_rhs} : tensor<6x4xf32>, tensor<3x4xf32> -> tensor<6x3xf32>
// CHECK: %[[DW:.*]] = merak.matmul_t %arg0, %arg2 {transpose_lhs} : tensor<6x4xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
// CHECK: return %[[Y]], %[[DW]]
func.func @linear(%x: tensor<6x4xf32>, %w: tensor<3x4xf32>, %g: tensor<6x3xf32>) -> (tensor<6x3xf32>, tensor<4x3xf32>) {
  %wt = merak.transpose %w perm = [1, 0] : tensor<3x4xf32> to tensor<4x3xf32>
  %y = merak.matmul %x, %wt : tensor<6x4xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
  %xt = merak.transpose %x perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %dw = merak.matmul %xt, %g : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  return %y, %dw : tensor<6x3xf32>, tensor<4x3xf32>
}

// Batched: q k^T with k^T a swap of the last two dimensions; a transpose
// read elsewhere stays (and is still read); both operands transposed, the
// same transpose on both sides.
// CHECK-LABEL: func.func @batched
// CHECK: %[[KT:.*]] = merak.transpose %arg1 perm = [0, 2, 1]
// CHECK: merak.matmul_t %arg0, %arg1 {transpose_rhs} : tensor<2x5x4xf32>, tensor<2x5x4xf32> -> tensor<2x5x5xf32>
// CHECK: merak.matmul_t %arg2, %arg3 {transpose_lhs, transpose_rhs} : tensor<2x3x4xf32>, tensor<2x5x3xf32> -> tensor<2x4x5xf32>
// CHECK: merak.matmul_t %arg4, %arg4 {transpose_lhs, transpose_rhs} : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK-NOT: merak.transpose
// CHECK: return {{.*}}, %[[KT]]
func.func @batched(%q: tensor<2x5x4xf32>, %k: tensor<2x5x4xf32>, %a: tensor<2x3x4xf32>, %b: tensor<2x5x3xf32>, %x: tensor<2x4x4xf32>) -> (tensor<2x5x5xf32>, tensor<2x4x5xf32>, tensor<2x4x4xf32>, tensor<2x4x5xf32>) {
  %kt = merak.transpose %k perm = [0, 2, 1] : tensor<2x5x4xf32> to tensor<2x4x5xf32>
  %s = merak.matmul %q, %kt : tensor<2x5x4xf32>, tensor<2x4x5xf32> -> tensor<2x5x5xf32>
  %at = merak.transpose %a perm = [0, 2, 1] : tensor<2x3x4xf32> to tensor<2x4x3xf32>
  %bt = merak.transpose %b perm = [0, 2, 1] : tensor<2x5x3xf32> to tensor<2x3x5xf32>
  %ab = merak.matmul %at, %bt : tensor<2x4x3xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
  %xt = merak.transpose %x perm = [0, 2, 1] : tensor<2x4x4xf32> to tensor<2x4x4xf32>
  %qq = merak.matmul %xt, %xt : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  return %s, %ab, %qq, %kt : tensor<2x5x5xf32>, tensor<2x4x5xf32>, tensor<2x4x4xf32>, tensor<2x4x5xf32>
}

// bf16 GEMMs (merak-mixed-precision's) fold the same way, also the
// widening form (bf16 operands, f32 result), which keeps its result type.
// CHECK-LABEL: func.func @bf16
// CHECK-NOT: merak.transpose
// CHECK: merak.matmul_t %arg0, %arg1 {transpose_rhs} : tensor<6x4xbf16>, tensor<3x4xbf16> -> tensor<6x3xbf16>
// CHECK: merak.matmul_t %arg0, %arg2 {transpose_lhs} : tensor<6x4xbf16>, tensor<6x3xbf16> -> tensor<4x3xf32>
func.func @bf16(%x: tensor<6x4xbf16>, %w: tensor<3x4xbf16>, %g: tensor<6x3xbf16>) -> (tensor<6x3xbf16>, tensor<4x3xf32>) {
  %wt = merak.transpose %w perm = [1, 0] : tensor<3x4xbf16> to tensor<4x3xbf16>
  %y = merak.matmul %x, %wt : tensor<6x4xbf16>, tensor<4x3xbf16> -> tensor<6x3xbf16>
  %xt = merak.transpose %x perm = [1, 0] : tensor<6x4xbf16> to tensor<4x6xbf16>
  %dw = merak.matmul %xt, %g : tensor<4x6xbf16>, tensor<6x3xbf16> -> tensor<4x3xf32>
  return %y, %dw : tensor<6x3xbf16>, tensor<4x3xf32>
}

// Not folded: a permutation that moves a batch dimension, an f64 operand,
// a vector operand.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: matmul_t
func.func @kept(%a: tensor<2x3x4xf32>, %b: tensor<2x3xf64>, %c: tensor<3x2xf64>, %v: tensor<3xf32>, %m: tensor<4x3xf32>) -> (tensor<3x2x2xf32>, tensor<3x3xf64>, tensor<4xf32>) {
  %at = merak.transpose %a perm = [1, 2, 0] : tensor<2x3x4xf32> to tensor<3x4x2xf32>
  %a2 = merak.transpose %a perm = [1, 0, 2] : tensor<2x3x4xf32> to tensor<3x2x4xf32>
  %y = merak.matmul %a2, %at : tensor<3x2x4xf32>, tensor<3x4x2xf32> -> tensor<3x2x2xf32>
  %bt = merak.transpose %b perm = [1, 0] : tensor<2x3xf64> to tensor<3x2xf64>
  %z = merak.matmul %bt, %b : tensor<3x2xf64>, tensor<2x3xf64> -> tensor<3x3xf64>
  %w = merak.matmul %m, %v : tensor<4x3xf32>, tensor<3xf32> -> tensor<4xf32>
  return %y, %z, %w : tensor<3x2x2xf32>, tensor<3x3xf64>, tensor<4xf32>
}

// Attention whose query, key and value are heads transposes of
// [B, T, H, D] tensors reads those in place (seq_major) and gives its result
// in that layout (the transpose back is gone); its gradient likewise once
// the forward's result and the incoming gradient are heads transposes too,
// its results replacing the transposes back. Nothing else reads the heads
// transposes, so none is left.
// CHECK-LABEL: func.func @attention_layout
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x3x16xf32>, %[[K:.*]]: tensor<2x8x3x16xf32>, %[[V:.*]]: tensor<2x8x3x16xf32>, %[[G:.*]]: tensor<2x8x3x16xf32>)
// CHECK-NOT: merak.transpose
// CHECK: %[[O:.*]], %[[L:.*]] = merak.attention %[[Q]], %[[K]], %[[V]] scale = 2.500000e-01 causal seq_major : tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32> -> tensor<2x8x3x16xf32>, tensor<2x3x8xf32>
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = merak.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %[[G]] scale = 2.500000e-01 causal seq_major
// CHECK-NOT: merak.transpose
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @attention_layout(%q: tensor<2x8x3x16xf32>, %k: tensor<2x8x3x16xf32>, %v: tensor<2x8x3x16xf32>, %g: tensor<2x8x3x16xf32>)
    -> (tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) {
  %qt = merak.transpose %q perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
  %kt = merak.transpose %k perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
  %vt = merak.transpose %v perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
  %o, %l = merak.attention %qt, %kt, %vt scale = 0.25 causal : tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32> -> tensor<2x3x8x16xf32>, tensor<2x3x8xf32>
  %y = merak.transpose %o perm = [0, 2, 1, 3] : tensor<2x3x8x16xf32> to tensor<2x8x3x16xf32>
  %gt = merak.transpose %g perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
  %dq, %dk, %dv = merak.attention_grad %qt, %kt, %vt, %o, %l, %gt scale = 0.25 causal : tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8xf32>, tensor<2x3x8x16xf32> -> tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>
  %dqt = merak.transpose %dq perm = [0, 2, 1, 3] : tensor<2x3x8x16xf32> to tensor<2x8x3x16xf32>
  %dkt = merak.transpose %dk perm = [0, 2, 1, 3] : tensor<2x3x8x16xf32> to tensor<2x8x3x16xf32>
  %dvt = merak.transpose %dv perm = [0, 2, 1, 3] : tensor<2x3x8x16xf32> to tensor<2x8x3x16xf32>
  return %y, %dqt, %dkt, %dvt : tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>
}

// An operand that is not a heads transpose (v here) keeps the op heads-first;
// a result also read heads-first (returned here) gets one transpose back.
// CHECK-LABEL: func.func @attention_kept
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 : tensor<2x3x8x16xf32>
// CHECK-NOT: seq_major
// CHECK-LABEL: func.func @attention_result_read_twice
// CHECK: %[[O:.*]], %{{.*}} = merak.attention {{.*}} seq_major
// CHECK: %[[B:.*]] = merak.transpose %[[O]] perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
// CHECK: return %[[O]], %[[B]]
func.func @attention_kept(%q: tensor<2x8x3x16xf32>, %v: tensor<2x3x8x16xf32>) -> tensor<2x3x8x16xf32> {
  %qt = merak.transpose %q perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
  %o, %l = merak.attention %qt, %qt, %v scale = 0.25 : tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32> -> tensor<2x3x8x16xf32>, tensor<2x3x8xf32>
  return %o : tensor<2x3x8x16xf32>
}
func.func @attention_result_read_twice(%q: tensor<2x8x3x16xf32>) -> (tensor<2x8x3x16xf32>, tensor<2x3x8x16xf32>) {
  %qt = merak.transpose %q perm = [0, 2, 1, 3] : tensor<2x8x3x16xf32> to tensor<2x3x8x16xf32>
  %o, %l = merak.attention %qt, %qt, %qt scale = 0.25 : tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32> -> tensor<2x3x8x16xf32>, tensor<2x3x8xf32>
  %y = merak.transpose %o perm = [0, 2, 1, 3] : tensor<2x3x8x16xf32> to tensor<2x8x3x16xf32>
  return %y, %o : tensor<2x8x3x16xf32>, tensor<2x3x8x16xf32>
}

// A product read only transposed is computed in that layout, (a b)^T =
// b^T a^T: a weight's gradient x^T g transposed back into the weight's
// [out, in] layout becomes g^T x (no copy); a plain product likewise. A
// product read untransposed too, or a transpose that is not the last two
// dims' swap, stays.
// CHECK-LABEL: func.func @transposed_product
// CHECK-SAME: (%[[X:.*]]: tensor<6x4xf32>, %[[G:.*]]: tensor<6x3xf32>, %[[A:.*]]: tensor<2x4x5xf32>, %[[B:.*]]: tensor<2x5x3xf32>)
// CHECK: %[[DW:.*]] = merak.matmul_t %[[G]], %[[X]] {transpose_lhs} : tensor<6x3xf32>, tensor<6x4xf32> -> tensor<3x4xf32>
// CHECK: %[[P:.*]] = merak.matmul_t %[[B]], %[[A]] {transpose_lhs, transpose_rhs} : tensor<2x5x3xf32>, tensor<2x4x5xf32> -> tensor<2x3x4xf32>
// CHECK: %[[K:.*]] = merak.matmul %[[A]], %[[B]]
// CHECK: %[[KT:.*]] = merak.transpose %[[K]] perm = [0, 2, 1]
// CHECK: %[[R:.*]] = merak.matmul %[[A]], %[[B]]
// CHECK: %[[RT:.*]] = merak.transpose %[[R]] perm = [1, 0, 2]
// CHECK: return %[[DW]], %[[P]], %[[KT]], %[[K]], %[[RT]]
func.func @transposed_product(%x: tensor<6x4xf32>, %g: tensor<6x3xf32>, %a: tensor<2x4x5xf32>, %b: tensor<2x5x3xf32>) -> (tensor<3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x4x3xf32>, tensor<4x2x3xf32>) {
  %xt = merak.transpose %x perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  %dwt = merak.matmul %xt, %g : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %dw = merak.transpose %dwt perm = [1, 0] : tensor<4x3xf32> to tensor<3x4xf32>
  %ab = merak.matmul %a, %b : tensor<2x4x5xf32>, tensor<2x5x3xf32> -> tensor<2x4x3xf32>
  %p = merak.transpose %ab perm = [0, 2, 1] : tensor<2x4x3xf32> to tensor<2x3x4xf32>
  %k = merak.matmul %a, %b : tensor<2x4x5xf32>, tensor<2x5x3xf32> -> tensor<2x4x3xf32>
  %kt = merak.transpose %k perm = [0, 2, 1] : tensor<2x4x3xf32> to tensor<2x3x4xf32>
  %r = merak.matmul %a, %b : tensor<2x4x5xf32>, tensor<2x5x3xf32> -> tensor<2x4x3xf32>
  %rt = merak.transpose %r perm = [1, 0, 2] : tensor<2x4x3xf32> to tensor<4x2x3xf32>
  return %dw, %p, %kt, %k, %rt : tensor<3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x4x3xf32>, tensor<4x2x3xf32>
}
