// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=4 -verify-diagnostics

// The hidden size of an MLP (6) does not divide by tp.
merak.param @w1 : tensor<6x4xf32> = dense<0.5> : tensor<6x4xf32>
merak.param @w2 : tensor<4x6xf32> = dense<0.5> : tensor<4x6xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w1 = merak.get_param @w1 : tensor<6x4xf32>
  %w2 = merak.get_param @w2 : tensor<4x6xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<6x4xf32> to tensor<4x6xf32>
  // expected-error @+1 {{merak-tensor-parallel: dimension 1 of this result (size 6) does not divide by tp=4 (the tensor-parallel block of 'w1')}}
  %m1 = merak.matmul %x, %t1 : tensor<3x4xf32>, tensor<4x6xf32> -> tensor<3x6xf32>
  %h = merak.relu %m1 : tensor<3x6xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<4x6xf32> to tensor<6x4xf32>
  %y = merak.matmul %h, %t2 : tensor<3x6xf32>, tensor<6x4xf32> -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// 2 attention heads do not divide by tp = 4 (the fused projection's 3 blocks
// of 8 features would).
merak.param @c_attn.weight : tensor<24x8xf32> = dense<0.125> : tensor<24x8xf32>
merak.param @c_proj.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %wa = merak.get_param @c_attn.weight : tensor<24x8xf32>
  %wp = merak.get_param @c_proj.weight : tensor<8x8xf32>
  %ta = merak.transpose %wa perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %qkv = merak.matmul %x, %ta : tensor<1x4x8xf32>, tensor<8x24xf32> -> tensor<1x4x24xf32>
  %s:3 = merak.split %qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  // expected-error @+1 {{dimension 2 of this result (size 2, e.g. the attention heads) does not divide by tp=4 (the tensor-parallel block of 'c_attn.weight')}}
  %q0 = merak.reshape %s#0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q = merak.transpose %q0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %k0 = merak.reshape %s#1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %kt = merak.transpose %k0 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %v0 = merak.reshape %s#2 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %v = merak.transpose %v0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %att0 = merak.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %att = merak.softmax %att0 axis = 3 : tensor<1x2x4x4xf32>
  %y0 = merak.matmul %att, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %y1 = merak.transpose %y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %y = merak.reshape %y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %tp = merak.transpose %wp perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %tp : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %o : tensor<1x4x8xf32>
}

// -----

// A weight [H, N, D] = [8, 2, 4] read as [1, H, N * D] (XLNet's einsum over
// heads): its 8 output features would divide by tp = 4, its 2 heads do not.
merak.param @w : tensor<8x2x4xf32> = dense<0.125> : tensor<8x2x4xf32>
merak.param @w2 : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %w = merak.get_param @w : tensor<8x2x4xf32>
  %w2 = merak.get_param @w2 : tensor<8x8xf32>
  %v = merak.reshape %w : tensor<8x2x4xf32> to tensor<1x8x8xf32>
  // expected-error @+1 {{merak-tensor-parallel: dimension 1 of 'w' (2, e.g. the attention heads) does not divide by tp=4}}
  %h = merak.matmul %x, %v : tensor<1x4x8xf32>, tensor<1x8x8xf32> -> tensor<1x4x8xf32>
  %r = merak.relu %h : tensor<1x4x8xf32>
  %y = merak.matmul %r, %w2 : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Nothing to shard: a Linear followed by a layer norm over its features,
// and one whose output is the result.
merak.param @w1 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
merak.param @w2 : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
// expected-error @+1 {{merak-tensor-parallel: found no structure to shard over tp=4}}
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %w1 = merak.get_param @w1 : tensor<8x4xf32>
  %w2 = merak.get_param @w2 : tensor<8x8xf32>
  %t1 = merak.transpose %w1 perm = [1, 0] : tensor<8x4xf32> to tensor<4x8xf32>
  %m1 = merak.matmul %x, %t1 : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
  %n = merak.layer_norm %m1 axis = 1 epsilon = 1.0e-5 : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %t2 = merak.transpose %w2 perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %y = merak.matmul %n, %t2 : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// The shard attribute's layout must fit the parameter.
// expected-error @+1 {{'merak.param' op shard dimension 0 (local size 4) does not divide into 3 blocks}}
merak.param @w : tensor<4x4xf32> = dense<0.5> : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2>}
