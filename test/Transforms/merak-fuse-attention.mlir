// RUN: merak-opt %s -split-input-file -merak-fuse-attention="frozen=*.attn.bias" -canonicalize | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-fuse-attention="frozen=*.attn.bias cpu-forms=false" -canonicalize | FileCheck %s --check-prefix=NOWIN

// GPT-2's export: k transposed by the head split, the scale multiplied, the
// causal mask a frozen tril buffer compared with 0, masked scores -inf.
// CHECK-LABEL: func.func @gpt2_causal
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x4x16xf32>, %[[KT:.*]]: tensor<2x3x16x4xf32>, %[[V:.*]]: tensor<2x3x4x16xf32>)
// CHECK-NEXT: %[[K:.*]] = merak.transpose %[[KT]] perm = [0, 1, 3, 2]
// CHECK-NEXT: %[[O:.*]], %{{.*}} = merak.attention %[[Q]], %[[K]], %[[V]] scale = 2.500000e-01 causal
// CHECK-SAME: -> tensor<2x3x4x16xf32>, tensor<2x3x4xf32>
// CHECK-NEXT: return %[[O]]
merak.param @h.0.attn.bias : tensor<1x1x4x4xf32> = dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
func.func @gpt2_causal(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %bias = merak.get_param @h.0.attn.bias : tensor<1x1x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x3x4x4xf32>, tensor<f32>
  %c = merak.eq %bias, %zero : tensor<1x1x4x4xf32>, tensor<f32>
  %m = merak.where %c, %ninf, %ss : tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x3x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// SDPA's spelling: a constant additive mask (0 / finfo.min), the scale as a
// division, keys already [.., T, D] and transposed by a transpose that the
// fused op's own transpose cancels.
// CHECK-LABEL: func.func @additive_mask_div
// CHECK-SAME: (%[[Q:.*]]: tensor<3x4x32xf32>, %[[K:.*]]: tensor<3x4x32xf32>, %[[V:.*]]: tensor<3x4x32xf32>)
// CHECK-NEXT: %[[O:.*]], %{{.*}} = merak.attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01 causal
// CHECK-NEXT: return %[[O]]
func.func @additive_mask_div(%q: tensor<3x4x32xf32>, %k: tensor<3x4x32xf32>, %v: tensor<3x4x32xf32>) -> tensor<3x4x32xf32> {
  %eight = merak.constant dense<8.0> : tensor<f32>
  %mask = merak.constant dense<[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %kt = merak.transpose %k perm = [0, 2, 1] : tensor<3x4x32xf32> to tensor<3x32x4xf32>
  %s = merak.matmul %q, %kt : tensor<3x4x32xf32>, tensor<3x32x4xf32> -> tensor<3x4x4xf32>
  %ss = merak.div %s, %eight : tensor<3x4x4xf32>, tensor<f32>
  %m = merak.add %ss, %mask : tensor<3x4x4xf32>, tensor<4x4xf32>
  %p = merak.softmax %m axis = 2 : tensor<3x4x4xf32>
  %o = merak.matmul %p, %v : tensor<3x4x4xf32>, tensor<3x4x32xf32> -> tensor<3x4x32xf32>
  return %o : tensor<3x4x32xf32>
}

// -----

// No mask, no scale: bidirectional attention with scale 1.
// CHECK-LABEL: func.func @unmasked
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 :
// CHECK-NOT: merak.softmax
func.func @unmasked(%q: tensor<1x2x4x64xf32>, %kt: tensor<1x2x64x4xf32>, %v: tensor<1x2x4x64xf32>) -> tensor<1x2x4x64xf32> {
  %s = merak.matmul %q, %kt : tensor<1x2x4x64xf32>, tensor<1x2x64x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x64xf32> -> tensor<1x2x4x64xf32>
  return %o : tensor<1x2x4x64xf32>
}

// -----

// The mask is a parameter that trains (not frozen): its value may change,
// so nothing is fused.
// CHECK-LABEL: func.func @trainable_mask
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
merak.param @h.0.attn.mask : tensor<1x1x4x4xf32> = dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
func.func @trainable_mask(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %bias = merak.get_param @h.0.attn.mask : tensor<1x1x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %c = merak.eq %bias, %zero : tensor<1x1x4x4xf32>, tensor<f32>
  %m = merak.where %c, %ninf, %s : tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x3x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// A frozen sliding-window mask (two keys: r - 2 < c <= r): causal with
// window = 2; not fused when windows are off (the CUDA target).
// CHECK-LABEL: func.func @window_mask
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal window = 2 :
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @window_mask
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
// NOWIN-LABEL: func.func
merak.param @h.1.attn.bias : tensor<1x1x4x4xf32> = dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
func.func @window_mask(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %bias = merak.get_param @h.1.attn.bias : tensor<1x1x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %c = merak.eq %bias, %zero : tensor<1x1x4x4xf32>, tensor<f32>
  %m = merak.where %c, %ninf, %s : tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x3x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// ModernBERT's local layers: an additive band mask (|r - c| <= 1, a fill of
// float32's minimum outside) is a window of 2 keys on both sides, without
// causal; under a causal mask too it is a causal window of 2. Not fused when
// windows are off (the CUDA target).
// CHECK-LABEL: func.func @band_mask
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 window = 2 :
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal window = 2 :
// CHECK-NOT: merak.softmax
// (Without windows the previous block's last label is this function's.)
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
// NOWIN-LABEL: func.func
func.func @band_mask(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> (tensor<2x3x4x16xf32>, tensor<2x3x4x16xf32>) {
  %band = merak.constant dense<[[0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [-3.40282347E+38, 0.0, 0.0, 0.0], [-3.40282347E+38, -3.40282347E+38, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %m = merak.add %s, %band : tensor<2x3x4x4xf32>, tensor<4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x3x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  %tril = merak.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %min = merak.constant dense<-3.40282347E+38> : tensor<f32>
  %s2 = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %m2 = merak.add %s2, %band : tensor<2x3x4x4xf32>, tensor<4x4xf32>
  %c2 = merak.where %tril, %m2, %min : tensor<4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>
  %p2 = merak.softmax %c2 axis = 3 : tensor<2x3x4x4xf32>
  %o2 = merak.matmul %p2, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o, %o2 : tensor<2x3x4x16xf32>, tensor<2x3x4x16xf32>
}

// -----

// Not fused: the probabilities are also returned (they would have to be
// materialised anyway), a head dim the CUDA kernel lacks (8: fused for the
// CPU only), a masked fill that does not underflow (-1), an additive bias
// that is not a mask.
// CHECK-LABEL: func.func @probs_used
// CHECK-NOT: merak.attention
// CHECK-LABEL: func.func @head_dim_8
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 : tensor<1x2x4x8xf32>
// NOWIN-LABEL: func.func @head_dim_8
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
// NOWIN-LABEL: func.func @small_fill
// CHECK-LABEL: func.func @small_fill
// CHECK-NOT: merak.attention
// CHECK-LABEL: func.func @alibi_like
// CHECK-NOT: merak.attention
func.func @probs_used(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> (tensor<1x2x4x16xf32>, tensor<1x2x4x4xf32>) {
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o, %p : tensor<1x2x4x16xf32>, tensor<1x2x4x4xf32>
}
func.func @head_dim_8(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = merak.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}
func.func @small_fill(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %c = merak.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = merak.constant dense<-1.0> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %m = merak.where %c, %s, %fill : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p = merak.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}
func.func @alibi_like(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %bias = merak.constant dense<[[0.0, -1.0e9, -1.0e9, -1.0e9], [-1.0, 0.0, -1.0e9, -1.0e9], [-2.0, -1.0, 0.0, -1.0e9], [-3.0, -2.0, -1.0, 0.0]]> : tensor<4x4xf32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %m = merak.add %s, %bias : tensor<1x2x4x4xf32>, tensor<4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// A where whose condition keeps where true: where(tril, scores, -inf) with a
// boolean constant mask, written with the keep polarity.
// CHECK-LABEL: func.func @keep_polarity
// CHECK: merak.attention %{{.*}} scale = 1.000000e+00 causal
func.func @keep_polarity(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %c = merak.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = merak.constant dense<-1.0e9> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %m = merak.where %c, %s, %fill : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p = merak.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// torch.onnx folds the sliced causal buffer into a boolean dense_resource
// constant shared by every layer: both attentions fuse.
// CHECK-LABEL: func.func @resource_mask
// CHECK-COUNT-2: merak.attention {{.*}} causal
// CHECK-NOT: merak.softmax
func.func @resource_mask(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %c = merak.constant dense_resource<tril4> : tensor<1x1x4x4xi1>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %m = merak.where %c, %s, %ninf : tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p = merak.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  %s2 = merak.matmul %o, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %m2 = merak.where %c, %s2, %ninf : tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p2 = merak.softmax %m2 axis = 3 : tensor<1x2x4x4xf32>
  %o2 = merak.matmul %p2, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o2 : tensor<1x2x4x16xf32>
}

{-#
  dialect_resources: {
    builtin: {
      tril4: "0x0100000001000000010100000101010001010101"
    }
  }
#-}

// -----

// nn.MultiheadAttention's spelling (PyTorch 1.13): q divided by sqrt(d)
// before the product, heads folded into the batch, no mask; a second scale
// on k multiplies in.
// CHECK-LABEL: func.func @scaled_query
// CHECK-SAME: (%[[Q:.*]]: tensor<8x10x16xf32>, %[[KT:.*]]: tensor<8x16x10xf32>, %[[V:.*]]: tensor<8x10x16xf32>)
// CHECK: merak.attention %[[Q]], %{{.*}}, %[[V]] scale = 5.000000e-01 :
// CHECK-NOT: merak.softmax
// CHECK-NOT: merak.div
func.func @scaled_query(%q: tensor<8x10x16xf32>, %kt: tensor<8x16x10xf32>, %v: tensor<8x10x16xf32>) -> tensor<8x10x16xf32> {
  %four = merak.constant dense<4.0> : tensor<f32>
  %two = merak.constant dense<2.0> : tensor<f32>
  %qs = merak.div %q, %four : tensor<8x10x16xf32>, tensor<f32>
  %ks = merak.mul %two, %kt : tensor<f32>, tensor<8x16x10xf32>
  %s = merak.matmul %qs, %ks : tensor<8x10x16xf32>, tensor<8x16x10xf32> -> tensor<8x10x10xf32>
  %p = merak.softmax %s axis = 2 : tensor<8x10x10xf32>
  %o = merak.matmul %p, %v : tensor<8x10x10xf32>, tensor<8x10x16xf32> -> tensor<8x10x16xf32>
  return %o : tensor<8x10x16xf32>
}

// -----

// A scaled query with another user stays: attention reads it, scale 1.
// CHECK-LABEL: func.func @scaled_query_shared
// CHECK: %[[QS:.*]] = merak.div
// CHECK: merak.attention %[[QS]], %{{.*}}, %{{.*}} scale = 1.000000e+00 :
func.func @scaled_query_shared(%q: tensor<8x10x16xf32>, %kt: tensor<8x16x10xf32>, %v: tensor<8x10x16xf32>) -> (tensor<8x10x16xf32>, tensor<8x10x16xf32>) {
  %four = merak.constant dense<4.0> : tensor<f32>
  %qs = merak.div %q, %four : tensor<8x10x16xf32>, tensor<f32>
  %s = merak.matmul %qs, %kt : tensor<8x10x16xf32>, tensor<8x16x10xf32> -> tensor<8x10x10xf32>
  %p = merak.softmax %s axis = 2 : tensor<8x10x10xf32>
  %o = merak.matmul %p, %v : tensor<8x10x10xf32>, tensor<8x10x16xf32> -> tensor<8x10x16xf32>
  return %o, %qs : tensor<8x10x16xf32>, tensor<8x10x16xf32>
}

// -----

// torch 2's SDPA decomposition: the causal bias per batch ([2,1,T,S], the
// same in both batches), and the NaN guard where(isnan(p), 0, p) between
// softmax and the value product; the guard goes with the rest.
// CHECK-LABEL: func.func @sdpa_nan_guard
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal :
// CHECK-NOT: merak.softmax
// CHECK-NOT: merak.ne
func.func @sdpa_nan_guard(%q: tensor<2x2x3x16xf32>, %kt: tensor<2x2x16x3xf32>, %v: tensor<2x2x3x16xf32>) -> tensor<2x2x3x16xf32> {
  %c = merak.constant dense<0.5> : tensor<f32>
  %z = merak.constant dense<0.0> : tensor<f32>
  %bias = merak.constant dense<[[[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]], [[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]]]> : tensor<2x1x3x3xf32>
  %qs = merak.mul %q, %c : tensor<2x2x3x16xf32>, tensor<f32>
  %ks = merak.mul %kt, %c : tensor<2x2x16x3xf32>, tensor<f32>
  %s = merak.matmul %qs, %ks : tensor<2x2x3x16xf32>, tensor<2x2x16x3xf32> -> tensor<2x2x3x3xf32>
  %b = merak.add %s, %bias : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>
  %p = merak.softmax %b axis = 3 : tensor<2x2x3x3xf32>
  %nan = merak.ne %p, %p : tensor<2x2x3x3xf32>, tensor<2x2x3x3xf32>
  %g = merak.where %nan, %z, %p : tensor<2x2x3x3xi1>, tensor<f32>, tensor<2x2x3x3xf32>
  %o = merak.matmul %g, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x16xf32> -> tensor<2x2x3x16xf32>
  return %o : tensor<2x2x3x16xf32>
}

// -----

// A bias that differs between the batches is not one mask: a bias operand
// (cpu-forms), not fused for CUDA.
// CHECK-LABEL: func.func @per_batch_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x2x16xf32>,
// CHECK: %[[B:.*]] = merak.constant {{.*}} : tensor<2x1x2x2xf32>
// CHECK: merak.attention %[[Q]], %{{.*}}, %{{.*}} bias %[[B]] scale = 1.000000e+00 :
// CHECK-SAME: tensor<2x1x2x2xf32> -> tensor<2x2x2x16xf32>, tensor<2x2x2xf32>
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @per_batch_mask
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
// NOWIN-LABEL: func.func
func.func @per_batch_mask(%q: tensor<2x2x2x16xf32>, %kt: tensor<2x2x16x2xf32>, %v: tensor<2x2x2x16xf32>) -> tensor<2x2x2x16xf32> {
  %bias = merak.constant dense<[[[[0.0, 0xFF800000], [0.0, 0.0]]], [[[0.0, 0.0], [0.0, 0.0]]]]> : tensor<2x1x2x2xf32>
  %s = merak.matmul %q, %kt : tensor<2x2x2x16xf32>, tensor<2x2x16x2xf32> -> tensor<2x2x2x2xf32>
  %b = merak.add %s, %bias : tensor<2x2x2x2xf32>, tensor<2x1x2x2xf32>
  %p = merak.softmax %b axis = 3 : tensor<2x2x2x2xf32>
  %o = merak.matmul %p, %v : tensor<2x2x2x2xf32>, tensor<2x2x2x16xf32> -> tensor<2x2x2x16xf32>
  return %o : tensor<2x2x2x16xf32>
}

// -----

// The guarded probabilities are used elsewhere too: not fused.
// CHECK-LABEL: func.func @guard_used
// CHECK-NOT: merak.attention
func.func @guard_used(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> (tensor<1x2x4x16xf32>, tensor<1x2x4x4xi1>) {
  %z = merak.constant dense<0.0> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %nan = merak.ne %p, %p : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %g = merak.where %nan, %z, %p : tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %o = merak.matmul %g, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o, %nan : tensor<1x2x4x16xf32>, tensor<1x2x4x4xi1>
}

// -----

// Gemma 2: soft-capped scores (mul(tanh(div(s, 50)), 50)) before a causal
// bias: softcap = 50 (with cpu-forms; kept decomposed without).
// CHECK-LABEL: func.func @softcap
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal softcap = 5.000000e+01 :
// CHECK-NOT: merak.tanh
// NOWIN-LABEL: func.func @softcap
// NOWIN-NOT: merak.attention
// NOWIN: merak.tanh
func.func @softcap(%q: tensor<1x2x3x16xf32>, %kt: tensor<1x2x16x3xf32>, %v: tensor<1x2x3x16xf32>) -> tensor<1x2x3x16xf32> {
  %sc = merak.constant dense<0.25> : tensor<f32>
  %cap = merak.constant dense<50.0> : tensor<f32>
  %bias = merak.constant dense<[[[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %s = merak.matmul %q, %kt : tensor<1x2x3x16xf32>, tensor<1x2x16x3xf32> -> tensor<1x2x3x3xf32>
  %s1 = merak.mul %s, %sc : tensor<1x2x3x3xf32>, tensor<f32>
  %d = merak.div %s1, %cap : tensor<1x2x3x3xf32>, tensor<f32>
  %t = merak.tanh %d : tensor<1x2x3x3xf32>
  %c = merak.mul %t, %cap : tensor<1x2x3x3xf32>, tensor<f32>
  %b = merak.add %c, %bias : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>
  %p = merak.softmax %b axis = 3 : tensor<1x2x3x3xf32>
  %o = merak.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x16xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}

// -----

// T5's self-attention: no scale, a learned relative-position bias (a
// gathered table, [1, H, T, S]) added to the scores; the decoder's sits in
// the constant causal mask, which becomes `causal`. The bias feeds two
// layers (T5 computes it once).
// CHECK-LABEL: func.func @t5_relative_bias
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x16xf32>, %[[KT:.*]]: tensor<2x2x16x4xf32>, %[[V:.*]]: tensor<2x2x4x16xf32>, %[[TAB:.*]]: tensor<8x2xf32>, %[[IDX:.*]]: tensor<4x4xi64>)
// CHECK: %[[G:.*]] = merak.gather %[[TAB]][%[[IDX]]]
// CHECK: %[[T:.*]] = merak.transpose %[[G]]
// CHECK: %[[B:.*]] = merak.reshape %[[T]] : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
// CHECK: %[[O1:.*]], %{{.*}} = merak.attention %[[Q]], %{{.*}}, %[[V]] bias %[[B]] scale = 1.000000e+00 :
// CHECK: %[[O2:.*]], %{{.*}} = merak.attention %[[O1]], %{{.*}}, %[[V]] bias %[[B]] scale = 1.000000e+00 causal :
// CHECK-NOT: merak.softmax
// CHECK-NOT: merak.where
// NOWIN-LABEL: func.func @t5_relative_bias
// NOWIN-NOT: merak.attention
func.func @t5_relative_bias(%q: tensor<2x2x4x16xf32>, %kt: tensor<2x2x16x4xf32>, %v: tensor<2x2x4x16xf32>, %table: tensor<8x2xf32>, %buckets: tensor<4x4xi64>) -> tensor<2x2x4x16xf32> {
  %g = merak.gather %table[%buckets] axis = 0 : tensor<8x2xf32>, tensor<4x4xi64> -> tensor<4x4x2xf32>
  %t = merak.transpose %g perm = [2, 0, 1] : tensor<4x4x2xf32> to tensor<2x4x4xf32>
  %bias = merak.reshape %t : tensor<2x4x4xf32> to tensor<1x2x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x2x4x16xf32>, tensor<2x2x16x4xf32> -> tensor<2x2x4x4xf32>
  %b = merak.add %s, %bias : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>
  %p = merak.softmax %b axis = 3 : tensor<2x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x16xf32> -> tensor<2x2x4x16xf32>
  %keep = merak.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %min = merak.constant dense<-3.40282347E+38> : tensor<f32>
  %masked = merak.where %keep, %bias, %min : tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %s2 = merak.matmul %o, %kt : tensor<2x2x4x16xf32>, tensor<2x2x16x4xf32> -> tensor<2x2x4x4xf32>
  %b2 = merak.add %s2, %masked : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>
  %p2 = merak.softmax %b2 axis = 3 : tensor<2x2x4x4xf32>
  %o2 = merak.matmul %p2, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x16xf32> -> tensor<2x2x4x16xf32>
  return %o2 : tensor<2x2x4x16xf32>
}

// -----

// A bias that grows the scores ([T, 1]: one value per query row) is not
// the op's bias: not fused.
// CHECK-LABEL: func.func @bias_grows
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
func.func @bias_grows(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>, %r: tensor<1x2x4x1xf32>) -> tensor<1x2x4x16xf32> {
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %b = merak.add %s, %r : tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>
  %p = merak.softmax %b axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// torch's NaN guard with a per-batch additive mask: a row the mask hides
// entirely is 0 after the guard but would be NaN in the kernels, so the
// pair stays decomposed.
// CHECK-LABEL: func.func @guard_with_bias
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
func.func @guard_with_bias(%q: tensor<2x2x2x16xf32>, %kt: tensor<2x2x16x2xf32>, %v: tensor<2x2x2x16xf32>) -> tensor<2x2x2x16xf32> {
  %z = merak.constant dense<0.0> : tensor<f32>
  %bias = merak.constant dense<[[[[0xFF800000, 0xFF800000], [0.0, 0.0]]], [[[0.0, 0.0], [0.0, 0.0]]]]> : tensor<2x1x2x2xf32>
  %s = merak.matmul %q, %kt : tensor<2x2x2x16xf32>, tensor<2x2x16x2xf32> -> tensor<2x2x2x2xf32>
  %b = merak.add %s, %bias : tensor<2x2x2x2xf32>, tensor<2x1x2x2xf32>
  %p = merak.softmax %b axis = 3 : tensor<2x2x2x2xf32>
  %nan = merak.ne %p, %p : tensor<2x2x2x2xf32>, tensor<2x2x2x2xf32>
  %g = merak.where %nan, %z, %p : tensor<2x2x2x2xi1>, tensor<f32>, tensor<2x2x2x2xf32>
  %o = merak.matmul %g, %v : tensor<2x2x2x2xf32>, tensor<2x2x2x16xf32> -> tensor<2x2x2x16xf32>
  return %o : tensor<2x2x2x16xf32>
}

// -----

// Attention-probability dropout (Hugging Face's attn_pdrop) behind torch's
// NaN guard: the fused op takes its ratio, seed and the splits
// merak-tensor-parallel recorded on the probabilities. The CUDA kernels
// have no dropout: left decomposed there.
// CHECK-LABEL: func.func @probs_dropout
// CHECK-NEXT: %[[K:.*]] = merak.transpose
// CHECK-NEXT: %[[O:.*]], %{{.*}} = merak.attention %{{.*}}, %[[K]], %{{.*}} scale = 2.500000e-01 causal dropout = 1.000000e-01 seed = 5 {tp_split = array<i64: 1, 1, 2>}
// CHECK-NEXT: return %[[O]]
// NOWIN-LABEL: func.func @probs_dropout
// NOWIN-NOT: merak.attention
// NOWIN: merak.dropout
// NOWIN-LABEL: func.func
merak.param @h.0.attn.bias : tensor<1x1x4x4xf32> = dense<[[[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x4x4xf32>
func.func @probs_dropout(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %bias = merak.get_param @h.0.attn.bias : tensor<1x1x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x3x4x4xf32>, tensor<f32>
  %c = merak.eq %bias, %zero : tensor<1x1x4x4xf32>, tensor<f32>
  %m = merak.where %c, %ninf, %ss : tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x3x4x4xf32>
  %nan = merak.ne %p, %p : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %g = merak.where %nan, %zero, %p : tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>
  %d, %keep = merak.dropout %g ratio = 0.1 seed = 5 {tp_split = array<i64: 1, 1, 2>} : tensor<2x3x4x4xf32> -> tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %o = merak.matmul %d, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// A dropout whose mask something else reads stays decomposed.
// CHECK-LABEL: func.func @probs_dropout_mask_read
// CHECK-NOT: merak.attention
// CHECK: merak.dropout
func.func @probs_dropout_mask_read(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>) -> (tensor<1x2x4x16xf32>, tensor<1x2x4x4xi1>) {
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %d, %keep = merak.dropout %p ratio = 0.1 seed = 5 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>, tensor<1x2x4x4xi1>
  %o = merak.matmul %d, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o, %keep : tensor<1x2x4x16xf32>, tensor<1x2x4x4xi1>
}

// -----

// transformers at a large batch after canonicalize: the additive causal
// mask computed at [1, 1, T, S] and broadcast to the batch. The mask is read
// at its own size: at [B, 1, T, S] (2^27 elements here) it would not fit the
// evaluation budget, and the attention would stay decomposed.
// CHECK-LABEL: func.func @broadcast_mask
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @broadcast_mask
// NOWIN: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal
func.func @broadcast_mask(%q: tensor<32768x1x64x16xf32>, %kt: tensor<32768x1x16x64xf32>, %v: tensor<32768x1x64x16xf32>) -> tensor<32768x1x64x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %r = merak.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11], [12], [13], [14], [15], [16], [17], [18], [19], [20], [21], [22], [23], [24], [25], [26], [27], [28], [29], [30], [31], [32], [33], [34], [35], [36], [37], [38], [39], [40], [41], [42], [43], [44], [45], [46], [47], [48], [49], [50], [51], [52], [53], [54], [55], [56], [57], [58], [59], [60], [61], [62], [63]]]]> : tensor<1x1x64x1xi64>
  %c = merak.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]]]]> : tensor<1x1x1x64xi64>
  %keep = merak.le %c, %r : tensor<1x1x1x64xi64>, tensor<1x1x64x1xi64>
  %w = merak.where %keep, %zero, %ninf : tensor<1x1x64x64xi1>, tensor<f32>, tensor<f32>
  %mask = merak.broadcast %w : tensor<1x1x64x64xf32> to tensor<32768x1x64x64xf32>
  %s = merak.matmul %q, %kt : tensor<32768x1x64x16xf32>, tensor<32768x1x16x64xf32> -> tensor<32768x1x64x64xf32>
  %ss = merak.mul %s, %scale : tensor<32768x1x64x64xf32>, tensor<f32>
  %m = merak.add %ss, %mask : tensor<32768x1x64x64xf32>, tensor<32768x1x64x64xf32>
  %p = merak.softmax %m axis = 3 : tensor<32768x1x64x64xf32>
  %o = merak.matmul %p, %v : tensor<32768x1x64x64xf32>, tensor<32768x1x64x16xf32> -> tensor<32768x1x64x16xf32>
  return %o : tensor<32768x1x64x16xf32>
}

// -----

// GPT-Neo: the layer's own keep mask (a window of 2 keys) under the
// model's additive causal mask. Stacked masks intersect: the window (the
// CPU kernels only); two causal masks are causal on every target.
// CHECK-LABEL: func.func @stacked_masks
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal window = 2 :
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal :
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @stacked_masks
// NOWIN: merak.softmax
// NOWIN: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal :
func.func @stacked_masks(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> (tensor<2x3x4x16xf32>, tensor<2x3x4x16xf32>) {
  %min = merak.constant dense<-3.40282347E+38> : tensor<f32>
  %window = merak.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %tril = merak.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %causal = merak.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %w = merak.where %window, %s, %min : tensor<4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>
  %m = merak.add %w, %causal : tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x3x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  %s2 = merak.matmul %o, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %w2 = merak.where %tril, %s2, %min : tensor<4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>
  %m2 = merak.add %w2, %causal : tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>
  %p2 = merak.softmax %m2 axis = 3 : tensor<2x3x4x4xf32>
  %o2 = merak.matmul %p2, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o, %o2 : tensor<2x3x4x16xf32>, tensor<2x3x4x16xf32>
}

// -----

// BLOOM: the products over [B * H, T, D] (2 x 2 here), the scaled scores
// plus ALiBi (a constant per key: [B * H, 1, S]), regrouped to [B, H, T, S]
// for the additive causal mask and the softmax, and back for the product
// with the values. Fused at q's leading dims, ALiBi the op's bias (the CPU
// kernels only).
// CHECK-LABEL: func.func @bloom_alibi
// CHECK-SAME: (%[[Q:.*]]: tensor<4x4x16xf32>, %[[KT:.*]]: tensor<4x16x4xf32>, %[[V:.*]]: tensor<4x4x16xf32>)
// CHECK: %[[ALIBI:.*]] = merak.constant {{.*}} : tensor<4x1x4xf32>
// CHECK: %[[K:.*]] = merak.transpose %[[KT]] perm = [0, 2, 1]
// CHECK-NEXT: %[[O:.*]], %{{.*}} = merak.attention %[[Q]], %[[K]], %[[V]] bias %[[ALIBI]] scale = 2.500000e-01 causal
// CHECK-SAME: -> tensor<4x4x16xf32>, tensor<4x4xf32>
// CHECK-NEXT: return %[[O]]
// NOWIN-LABEL: func.func @bloom_alibi
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
func.func @bloom_alibi(%q: tensor<4x4x16xf32>, %kt: tensor<4x16x4xf32>, %v: tensor<4x4x16xf32>) -> tensor<4x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %alibi = merak.constant dense<[[[0.0, 0.5, 1.0, 1.5]], [[0.0, 0.25, 0.5, 0.75]], [[0.0, 0.5, 1.0, 1.5]], [[0.0, 0.25, 0.5, 0.75]]]> : tensor<4x1x4xf32>
  %causal = merak.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %s = merak.matmul %q, %kt : tensor<4x4x16xf32>, tensor<4x16x4xf32> -> tensor<4x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<4x4x4xf32>, tensor<f32>
  %b = merak.add %ss, %alibi : tensor<4x4x4xf32>, tensor<4x1x4xf32>
  %b4 = merak.reshape %b : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %m = merak.add %b4, %causal : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
  %p4 = merak.softmax %m axis = 3 : tensor<2x2x4x4xf32>
  %p = merak.reshape %p4 : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = merak.matmul %p, %v : tensor<4x4x4xf32>, tensor<4x4x16xf32> -> tensor<4x4x16xf32>
  return %o : tensor<4x4x16xf32>
}

// -----

// A bias added after the regrouping has the scores' [B, H, T, S] dims, not
// q's [B * H, T, D]: broadcast to the scores and regrouped alike.
// CHECK-LABEL: func.func @bias_after_regroup
// CHECK-SAME: (%[[Q:.*]]: tensor<4x4x16xf32>, %{{.*}}: tensor<4x16x4xf32>, %[[V:.*]]: tensor<4x4x16xf32>, %[[B:.*]]: tensor<1x2x4x4xf32>)
// CHECK: %[[BB:.*]] = merak.broadcast %[[B]] : tensor<1x2x4x4xf32> to tensor<2x2x4x4xf32>
// CHECK: %[[RB:.*]] = merak.reshape %[[BB]] : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
// CHECK: merak.attention %[[Q]], %{{.*}}, %[[V]] bias %[[RB]] scale = 1.000000e+00 :
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @bias_after_regroup
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
func.func @bias_after_regroup(%q: tensor<4x4x16xf32>, %kt: tensor<4x16x4xf32>, %v: tensor<4x4x16xf32>, %bias: tensor<1x2x4x4xf32>) -> tensor<4x4x16xf32> {
  %s = merak.matmul %q, %kt : tensor<4x4x16xf32>, tensor<4x16x4xf32> -> tensor<4x4x4xf32>
  %s4 = merak.reshape %s : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %b = merak.add %s4, %bias : tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>
  %p4 = merak.softmax %b axis = 3 : tensor<2x2x4x4xf32>
  %p = merak.reshape %p4 : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = merak.matmul %p, %v : tensor<4x4x4xf32>, tensor<4x4x16xf32> -> tensor<4x4x16xf32>
  return %o : tensor<4x4x16xf32>
}

// -----

// Falcon's multi-query attention: one key and value head for 4 query
// heads, which the products broadcast; the fused op reads them broadcast.
// CHECK-LABEL: func.func @multi_query
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x4x16xf32>, %[[KT:.*]]: tensor<2x1x16x4xf32>, %[[V:.*]]: tensor<2x1x4x16xf32>)
// CHECK: %[[K:.*]] = merak.transpose %[[KT]] perm = [0, 1, 3, 2]
// CHECK: %[[KB:.*]] = merak.broadcast %[[K]] : tensor<2x1x4x16xf32> to tensor<2x4x4x16xf32>
// CHECK: %[[VB:.*]] = merak.broadcast %[[V]] : tensor<2x1x4x16xf32> to tensor<2x4x4x16xf32>
// CHECK: merak.attention %[[Q]], %[[KB]], %[[VB]] scale = 2.500000e-01 causal
// CHECK-NOT: merak.softmax
func.func @multi_query(%q: tensor<2x4x4x16xf32>, %kt: tensor<2x1x16x4xf32>, %v: tensor<2x1x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %causal = merak.constant dense<[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = merak.matmul %q, %kt : tensor<2x4x4x16xf32>, tensor<2x1x16x4xf32> -> tensor<2x4x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x4x4x4xf32>, tensor<f32>
  %m = merak.add %ss, %causal : tensor<2x4x4x4xf32>, tensor<4x4xf32>
  %p = merak.softmax %m axis = 3 : tensor<2x4x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x4x4x4xf32>, tensor<2x1x4x16xf32> -> tensor<2x4x4x16xf32>
  return %o : tensor<2x4x4x16xf32>
}

// -----

// GPT-OSS's attention sinks: a learned logit per head concatenated to every
// row's scores, the row maximum subtracted, the softmax, the sinks' column
// sliced off. The fused op's result is rescaled by sigmoid(lse - sink), the
// share of each row's softmax the sink does not take; both targets fuse it.
// CHECK-LABEL: func.func @sinks
// CHECK-SAME: (%[[Q:.*]]: tensor<2x3x4x16xf32>, %[[KT:.*]]: tensor<2x3x16x4xf32>, %[[V:.*]]: tensor<2x3x4x16xf32>)
// CHECK: %[[SINK:.*]] = merak.broadcast %{{.*}} : tensor<1x3x1x1xf32> to tensor<2x3x4x1xf32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = merak.attention %[[Q]], %{{.*}}, %[[V]] scale = 2.500000e-01 causal
// CHECK-NEXT: %[[L:.*]] = merak.reshape %[[LSE]] : tensor<2x3x4xf32> to tensor<2x3x4x1xf32>
// CHECK-NEXT: %[[D:.*]] = merak.sub %[[L]], %[[SINK]] : tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>
// CHECK-NEXT: %[[SH:.*]] = merak.sigmoid %[[D]]
// CHECK-NEXT: %[[R:.*]] = merak.mul %[[O]], %[[SH]] : tensor<2x3x4x16xf32>, tensor<2x3x4x1xf32>
// CHECK-NEXT: return %[[R]]
// NOWIN-LABEL: func.func @sinks
// NOWIN: merak.attention
// NOWIN-NOT: merak.softmax
merak.param @h.0.attn.sinks : tensor<3xf32> = dense<[0.5, -0.25, 1.0]> : tensor<3xf32>
func.func @sinks(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %causal = merak.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %sinks = merak.get_param @h.0.attn.sinks : tensor<3xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x3x4x4xf32>, tensor<f32>
  %m = merak.add %ss, %causal : tensor<2x3x4x4xf32>, tensor<1x1x4x4xf32>
  %sr = merak.reshape %sinks : tensor<3xf32> to tensor<1x3x1x1xf32>
  %sb = merak.broadcast %sr : tensor<1x3x1x1xf32> to tensor<2x3x4x1xf32>
  %c = merak.concat %m, %sb axis = 3 : tensor<2x3x4x4xf32>, tensor<2x3x4x1xf32> -> tensor<2x3x4x5xf32>
  %mx = merak.reduce_max %c axes = [3] {keepdims} : tensor<2x3x4x5xf32> -> tensor<2x3x4x1xf32>
  %sh = merak.sub %c, %mx : tensor<2x3x4x5xf32>, tensor<2x3x4x1xf32>
  %p = merak.softmax %sh axis = 3 : tensor<2x3x4x5xf32>
  %ps = merak.slice %p starts = [0, 0, 0, 0] limits = [2, 3, 4, 4] strides = [1, 1, 1, 1] : tensor<2x3x4x5xf32> to tensor<2x3x4x4xf32>
  %o = merak.matmul %ps, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// A column sliced off the front (the sink's kept, a key's dropped) is not
// the sinks' form: it stays decomposed.
// CHECK-LABEL: func.func @sinks_front_column
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
// NOWIN-LABEL: func.func @sinks_front_column
merak.param @h.0.attn.sinks : tensor<3xf32> = dense<[0.5, -0.25, 1.0]> : tensor<3xf32>
func.func @sinks_front_column(%q: tensor<2x3x4x16xf32>, %kt: tensor<2x3x16x4xf32>, %v: tensor<2x3x4x16xf32>) -> tensor<2x3x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %sinks = merak.get_param @h.0.attn.sinks : tensor<3xf32>
  %s = merak.matmul %q, %kt : tensor<2x3x4x16xf32>, tensor<2x3x16x4xf32> -> tensor<2x3x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x3x4x4xf32>, tensor<f32>
  %sr = merak.reshape %sinks : tensor<3xf32> to tensor<1x3x1x1xf32>
  %sb = merak.broadcast %sr : tensor<1x3x1x1xf32> to tensor<2x3x4x1xf32>
  %c = merak.concat %ss, %sb axis = 3 : tensor<2x3x4x4xf32>, tensor<2x3x4x1xf32> -> tensor<2x3x4x5xf32>
  %p = merak.softmax %c axis = 3 : tensor<2x3x4x5xf32>
  %ps = merak.slice %p starts = [0, 0, 0, 1] limits = [2, 3, 4, 5] strides = [1, 1, 1, 1] : tensor<2x3x4x5xf32> to tensor<2x3x4x4xf32>
  %o = merak.matmul %ps, %v : tensor<2x3x4x4xf32>, tensor<2x3x4x16xf32> -> tensor<2x3x4x16xf32>
  return %o : tensor<2x3x4x16xf32>
}

// -----

// Multi-head latent attention (DeepSeek-V3): query/key heads of 24 (16
// plain + 8 rotary dims), value heads of 16. For the CPU the values get 8
// zero columns, the fused op computes 24 and its output is cut back to the
// first 16; values wider than the queries (@wide_values) pad the queries
// and keys instead (a zero column adds nothing to a score). The CUDA
// kernel has one head dim: decomposed there.
// CHECK-LABEL: func.func @latent_attention
// CHECK: %[[Z:.*]] = merak.constant dense<0.000000e+00> : tensor<1x2x4x8xf32>
// CHECK: %[[V:.*]] = merak.concat %{{.*}}, %[[Z]] axis = 3 : tensor<1x2x4x16xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x24xf32>
// CHECK: %[[O:[^,]*]], %{{.*}} = merak.attention %{{.*}}, %{{.*}}, %[[V]] scale = 2.500000e-01 causal : tensor<1x2x4x24xf32>
// CHECK: merak.slice %[[O]] {{.*}} : tensor<1x2x4x24xf32> to tensor<1x2x4x16xf32>
// CHECK-LABEL: func.func @wide_values
// CHECK-COUNT-2: merak.concat %{{.*}}, %{{.*}} axis = 3 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x16xf32>
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 : tensor<1x2x4x16xf32>
// CHECK-NOT: merak.slice
// NOWIN-LABEL: func.func @latent_attention
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
// NOWIN-LABEL: func.func @wide_values
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
func.func @latent_attention(%q: tensor<1x2x4x24xf32>, %kt: tensor<1x2x24x4xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %c = merak.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %scale = merak.constant dense<2.500000e-01> : tensor<f32>
  %s0 = merak.matmul %q, %kt : tensor<1x2x4x24xf32>, tensor<1x2x24x4xf32> -> tensor<1x2x4x4xf32>
  %s = merak.mul %s0, %scale : tensor<1x2x4x4xf32>, tensor<f32>
  %m = merak.where %c, %s, %ninf : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %p = merak.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}
func.func @wide_values(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %s = merak.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %p = merak.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// XLNet's relative attention: the content scores q kT over [B * H]
// regrouped to [B, H, T, S], the position scores added (a computed bias),
// the segment term a constant 0, and the scale applied to the sum. The
// scale becomes the fused op's and multiplies the bias; the bias is
// regrouped to q's leading dims.
// CHECK-LABEL: func.func @xlnet_scaled_sum
// CHECK-SAME: (%[[Q:.*]]: tensor<4x4x16xf32>, %{{.*}}: tensor<4x16x4xf32>, %[[V:.*]]: tensor<4x4x16xf32>, %[[BD:.*]]: tensor<2x2x4x4xf32>)
// CHECK: %[[C:.*]] = merak.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[SB:.*]] = merak.mul %[[BD]], %[[C]]
// CHECK: %[[RB:.*]] = merak.reshape %[[SB]] : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
// CHECK: merak.attention %[[Q]], %{{.*}}, %[[V]] bias %[[RB]] scale = 2.500000e-01 :
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @xlnet_scaled_sum
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
func.func @xlnet_scaled_sum(%q: tensor<4x4x16xf32>, %kt: tensor<4x16x4xf32>, %v: tensor<4x4x16xf32>, %bd: tensor<2x2x4x4xf32>) -> tensor<4x4x16xf32> {
  %zero = merak.constant dense<0.0> : tensor<f32>
  %scale = merak.constant dense<0.25> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<4x4x16xf32>, tensor<4x16x4xf32> -> tensor<4x4x4xf32>
  %s4 = merak.reshape %s : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %ab = merak.add %s4, %bd : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %abe = merak.add %ab, %zero : tensor<2x2x4x4xf32>, tensor<f32>
  %scaled = merak.mul %abe, %scale : tensor<2x2x4x4xf32>, tensor<f32>
  %p4 = merak.softmax %scaled axis = 3 : tensor<2x2x4x4xf32>
  %p = merak.reshape %p4 : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = merak.matmul %p, %v : tensor<4x4x4xf32>, tensor<4x4x16xf32> -> tensor<4x4x16xf32>
  return %o : tensor<4x4x16xf32>
}

// -----

// A constant mask inside a scale applied outside it: the scale would scale
// its fill too (here to -1e4 * 0.01 = -100, no longer hidden): not fused.
// CHECK-LABEL: func.func @mask_inside_outer_scale
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
func.func @mask_inside_outer_scale(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>, %b: tensor<1x2x4x4xf32>) -> tensor<1x2x4x16xf32> {
  %keep = merak.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %fill = merak.constant dense<-1.0e4> : tensor<f32>
  %c = merak.constant dense<0.01> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %m = merak.where %keep, %s, %fill : tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>
  %a = merak.add %m, %b : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %scaled = merak.mul %a, %c : tensor<1x2x4x4xf32>, tensor<f32>
  %p = merak.softmax %scaled axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// DeepSeek-V4's attention: more keys than queries (its compressed keys
// after the sliding ones), a mask computed from the tokens added as a bias
// ([B, 1, T, S]), and sinks. Fused with the CPU kernels, which take any
// number of keys without a causal mask or a window.
// CHECK-LABEL: func.func @more_keys_than_queries
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x16xf32>, %{{.*}}: tensor<2x2x16x6xf32>, %[[V:.*]]: tensor<2x2x6x16xf32>, %[[B:.*]]: tensor<2x1x4x6xf32>, %{{.*}}: tensor<2x2x4x1xf32>)
// CHECK: merak.attention %[[Q]], %{{.*}}, %[[V]] bias %[[B]] scale = 2.500000e-01 :
// CHECK-SAME: tensor<2x2x4x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x16xf32>, tensor<2x1x4x6xf32>
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @more_keys_than_queries
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
func.func @more_keys_than_queries(%q: tensor<2x2x4x16xf32>, %kt: tensor<2x2x16x6xf32>, %v: tensor<2x2x6x16xf32>, %b: tensor<2x1x4x6xf32>, %sink: tensor<2x2x4x1xf32>) -> tensor<2x2x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<2x2x4x16xf32>, tensor<2x2x16x6xf32> -> tensor<2x2x4x6xf32>
  %ss = merak.mul %s, %scale : tensor<2x2x4x6xf32>, tensor<f32>
  %sb = merak.add %ss, %b : tensor<2x2x4x6xf32>, tensor<2x1x4x6xf32>
  %c = merak.concat %sb, %sink axis = 3 : tensor<2x2x4x6xf32>, tensor<2x2x4x1xf32> -> tensor<2x2x4x7xf32>
  %m = merak.reduce_max %c axes = [3] {keepdims} : tensor<2x2x4x7xf32> -> tensor<2x2x4x1xf32>
  %d = merak.sub %c, %m : tensor<2x2x4x7xf32>, tensor<2x2x4x1xf32>
  %p7 = merak.softmax %d axis = 3 : tensor<2x2x4x7xf32>
  %p = merak.slice %p7 starts = [0, 0, 0, 0] limits = [2, 2, 4, 6] strides = [1, 1, 1, 1] : tensor<2x2x4x7xf32> to tensor<2x2x4x6xf32>
  %o = merak.matmul %p, %v : tensor<2x2x4x6xf32>, tensor<2x2x6x16xf32> -> tensor<2x2x4x16xf32>
  return %o : tensor<2x2x4x16xf32>
}

// -----

// More keys than queries under a constant mask that keeps the keys c <= r:
// the kernels' causal mask needs as many keys as queries: not fused.
// CHECK-LABEL: func.func @more_keys_causal
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
func.func @more_keys_causal(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x6xf32>, %v: tensor<1x2x6x16xf32>) -> tensor<1x2x4x16xf32> {
  %keep = merak.constant dense<[[[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false]]]]> : tensor<1x1x4x6xi1>
  %fill = merak.constant dense<-1.0e9> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x6xf32> -> tensor<1x2x4x6xf32>
  %m = merak.where %keep, %s, %fill : tensor<1x1x4x6xi1>, tensor<1x2x4x6xf32>, tensor<f32>
  %p = merak.softmax %m axis = 3 : tensor<1x2x4x6xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x6x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// XLNet's padding mask, subtracted from the scaled scores
// (`score - 1e30 * mask`, the mask from the tokens): the fused op's bias
// is its negation.
// CHECK-LABEL: func.func @subtracted_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x16xf32>, %{{.*}}: tensor<2x2x16x4xf32>, %[[V:.*]]: tensor<2x2x4x16xf32>, %[[M:.*]]: tensor<2x1x4x4xf32>)
// CHECK-DAG: %[[NEG:.*]] = merak.constant dense<-1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[BIG:.*]] = merak.constant dense<1.000000e+30> : tensor<f32>
// CHECK: %[[HIDE:.*]] = merak.mul %[[M]], %[[BIG]]
// CHECK: %[[B:.*]] = merak.mul %[[HIDE]], %[[NEG]]
// CHECK: merak.attention %[[Q]], %{{.*}}, %[[V]] bias %[[B]] scale = 2.500000e-01 :
// CHECK-NOT: merak.softmax
// NOWIN-LABEL: func.func @subtracted_mask
// NOWIN-NOT: merak.attention
// NOWIN: merak.softmax
func.func @subtracted_mask(%q: tensor<2x2x4x16xf32>, %kt: tensor<2x2x16x4xf32>, %v: tensor<2x2x4x16xf32>, %m: tensor<2x1x4x4xf32>) -> tensor<2x2x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %big = merak.constant dense<1.0e30> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<2x2x4x16xf32>, tensor<2x2x16x4xf32> -> tensor<2x2x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x2x4x4xf32>, tensor<f32>
  %hide = merak.mul %m, %big : tensor<2x1x4x4xf32>, tensor<f32>
  %d = merak.sub %ss, %hide : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
  %p = merak.softmax %d axis = 3 : tensor<2x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x16xf32> -> tensor<2x2x4x16xf32>
  return %o : tensor<2x2x4x16xf32>
}

// -----

// Scores subtracted from a bias (`b - s`) are not the scores plus a bias:
// not fused.
// CHECK-LABEL: func.func @scores_subtracted
// CHECK-NOT: merak.attention
// CHECK: merak.softmax
func.func @scores_subtracted(%q: tensor<1x2x4x16xf32>, %kt: tensor<1x2x16x4xf32>, %v: tensor<1x2x4x16xf32>, %b: tensor<1x2x4x4xf32>) -> tensor<1x2x4x16xf32> {
  %s = merak.matmul %q, %kt : tensor<1x2x4x16xf32>, tensor<1x2x16x4xf32> -> tensor<1x2x4x4xf32>
  %d = merak.sub %b, %s : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %p = merak.softmax %d axis = 3 : tensor<1x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}
