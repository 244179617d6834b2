// RUN: merak-opt %s -split-input-file -merak-moe-aux-loss=coefficient=0.5 -verify-diagnostics | FileCheck %s

// One MoE layer (N = 4 tokens, top-2 of E = 3 experts; the router's top-k
// of its softmax): loss + 0.5 * E / (L N)^2 * sum_e counts[e] * psum[e],
// counts from the one-hot of the top-k indices (no gradient), psum the
// column sums of the probabilities. 0.5 * 3 / 16 = 0.09375.
// CHECK-LABEL: func.func @loss
// CHECK: %[[P:.*]] = merak.softmax %{{.*}} axis = 1 : tensor<4x3xf32>
// CHECK: %[[I:.*]] = merak.argmax
// CHECK: %[[COL:.*]] = merak.reshape %[[I]] : tensor<4x2xi64> to tensor<8x1xi64>
// CHECK: %[[IOTA:.*]] = merak.constant dense<{{\[\[}}0, 1, 2]]> : tensor<1x3xi64>
// CHECK: %[[HIT:.*]] = merak.eq %[[COL]], %[[IOTA]]
// CHECK: %[[ONES:.*]] = merak.cast %[[HIT]] : tensor<8x3xi1> to tensor<8x3xf32>
// CHECK: %[[C:.*]] = merak.reduce_sum %[[ONES]] axes = [0] : tensor<8x3xf32> -> tensor<3xf32>
// CHECK: %[[PS:.*]] = merak.reduce_sum %[[P]] axes = [0] : tensor<4x3xf32> -> tensor<3xf32>
// CHECK: %[[CP:.*]] = merak.mul %[[C]], %[[PS]]
// CHECK: %[[D:.*]] = merak.reduce_sum %[[CP]] axes = [0] : tensor<3xf32> -> tensor<f32>
// CHECK: %[[S:.*]] = merak.constant dense<9.375000e-02> : tensor<f32>
// CHECK: %[[AUX:.*]] = merak.mul %[[D]], %[[S]]
// CHECK: %[[L:.*]] = merak.add %{{.*}}, %[[AUX]]
// CHECK: return %[[L]]
merak.param @w : tensor<3x6x5xf32> = dense<0.5> : tensor<3x6x5xf32>
func.func @loss(%x: tensor<8x5xf32>, %logits: tensor<4x3xf32>, %m: tensor<4x2x3xi64>) -> tensor<f32> {
  %p = merak.softmax %logits axis = 1 : tensor<4x3xf32>
  %i = merak.argmax %m axis = 2 : tensor<4x2x3xi64> -> tensor<4x2xi64>
  %v = merak.gather_elements %p[%i] axis = 1 : tensor<4x3xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %e = merak.reshape %i : tensor<4x2xi64> to tensor<8xi64>
  %w = merak.get_param @w : tensor<3x6x5xf32>
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x5xf32>, tensor<3x6x5xf32>, tensor<8xi64> -> tensor<8x6xf32>
  %l = merak.reduce_sum %y axes = [0, 1] : tensor<8x6xf32> -> tensor<f32>
  %s = merak.reduce_sum %v axes = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  %t = merak.add %l, %s : tensor<f32>, tensor<f32>
  return %t : tensor<f32>
}

// -----

// Top-k of the logits (GPT-OSS): their softmax is taken for P.
// CHECK-LABEL: func.func @loss
// CHECK: merak.gather_elements %[[LOGITS:[^\[]*]]
// CHECK: merak.softmax %[[LOGITS]] axis = 1 : tensor<4x3xf32>
merak.param @w : tensor<3x6x5xf32> = dense<0.5> : tensor<3x6x5xf32>
func.func @loss(%x: tensor<8x5xf32>, %logits: tensor<4x3xf32>, %m: tensor<4x2x3xi64>) -> tensor<f32> {
  %i = merak.argmax %m axis = 2 : tensor<4x2x3xi64> -> tensor<4x2xi64>
  %v = merak.gather_elements %logits[%i] axis = 1 : tensor<4x3xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %e = merak.reshape %i : tensor<4x2xi64> to tensor<8xi64>
  %w = merak.get_param @w : tensor<3x6x5xf32>
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x5xf32>, tensor<3x6x5xf32>, tensor<8xi64> -> tensor<8x6xf32>
  %l = merak.reduce_sum %y axes = [0, 1] : tensor<8x6xf32> -> tensor<f32>
  %s = merak.reduce_sum %v axes = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  %t = merak.add %l, %s : tensor<f32>, tensor<f32>
  return %t : tensor<f32>
}

// -----

// No MoE layer: an error, not a silently unchanged loss.
// expected-error @+1 {{merak-moe-aux-loss: the model has no Mixture-of-Experts layer}}
func.func @loss(%x: tensor<4xf32>) -> tensor<f32> {
  %l = merak.reduce_sum %x axes = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Expert indices that are not a top-k of router scores.
merak.param @w : tensor<3x6x5xf32> = dense<0.5> : tensor<3x6x5xf32>
func.func @loss(%x: tensor<8x5xf32>, %e: tensor<8xi64>) -> tensor<f32> {
  %w = merak.get_param @w : tensor<3x6x5xf32>
  // expected-error @+1 {{merak-moe-aux-loss: cannot find the router of this expert GEMM: expected its expert indices to be the top-k of a [tokens, 3] score tensor}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x5xf32>, tensor<3x6x5xf32>, tensor<8xi64> -> tensor<8x6xf32>
  %l = merak.reduce_sum %y axes = [0, 1] : tensor<8x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}
