// RUN: merak-opt %s -split-input-file -merak-expert-parallel=ep=2 -verify-diagnostics
// RUN: not merak-opt %s -split-input-file -merak-expert-parallel="ep=2 shadow=1 dispatcher=allgather" 2>&1 | FileCheck %s --check-prefix=SHADOW
// SHADOW: merak-expert-parallel: shadowing needs the alltoall dispatcher, not 'allgather'

// 3 experts do not split over 2 ranks.
merak.param @w : tensor<3x4x8xf32> = dense<0.5> : tensor<3x4x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x4xf32> {
  %w = merak.get_param @w : tensor<3x4x8xf32>
  // expected-error @+1 {{merak-expert-parallel: 3 experts do not divide by --ep 2}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<16x8xf32>, tensor<3x4x8xf32>, tensor<16xi64> -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}

// -----

// The expert weight is read by something else too.
merak.param @w : tensor<4x4x8xf32> = dense<0.5> : tensor<4x4x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> (tensor<16x4xf32>, tensor<4x4x8xf32>) {
  // expected-error @+1 {{the expert weight @w is read here other than as an expert GEMM's weight}}
  %w = merak.get_param @w : tensor<4x4x8xf32>
  %y = merak.expert_matmul %x, %w[%e] : tensor<16x8xf32>, tensor<4x4x8xf32>, tensor<16xi64> -> tensor<16x4xf32>
  %z = merak.exp %w : tensor<4x4x8xf32>
  return %y, %z : tensor<16x4xf32>, tensor<4x4x8xf32>
}

// -----

// A computed weight is not a parameter.
merak.param @w : tensor<4x4x8xf32> = dense<0.5> : tensor<4x4x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x4xf32> {
  %w = merak.get_param @w : tensor<4x4x8xf32>
  %w2 = merak.exp %w : tensor<4x4x8xf32>
  // expected-error @+1 {{the expert weight is not a parameter}}
  %y = merak.expert_matmul %x, %w2[%e] : tensor<16x8xf32>, tensor<4x4x8xf32>, tensor<16xi64> -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}

// -----

// A dense model.
merak.param @w : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
// expected-error @+1 {{--ep 2 needs a Mixture-of-Experts model, but @forward has no expert GEMM}}
func.func @forward(%x: tensor<16x8xf32>) -> tensor<16x4xf32> {
  %w = merak.get_param @w : tensor<4x8xf32>
  %t = merak.transpose %w perm = [1, 0] : tensor<4x8xf32> to tensor<8x4xf32>
  %y = merak.matmul %x, %t : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}

// -----

// Experts stacked from one parameter each (transformers 4.x's module per
// expert) are no parameter [E, ...].
merak.param @e0 : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @e1 : tensor<4x8xf32> = dense<0.25> : tensor<4x8xf32>
func.func @forward(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<16x4xf32> {
  %w0 = merak.get_param @e0 : tensor<4x8xf32>
  %w1 = merak.get_param @e1 : tensor<4x8xf32>
  %r0 = merak.reshape %w0 : tensor<4x8xf32> to tensor<1x4x8xf32>
  %r1 = merak.reshape %w1 : tensor<4x8xf32> to tensor<1x4x8xf32>
  %w = merak.concat %r0, %r1 axis = 0 : tensor<1x4x8xf32>, tensor<1x4x8xf32> -> tensor<2x4x8xf32>
  // expected-error @+1 {{the expert weight is stacked from 2 tensors (one parameter per expert, as transformers 4.x's module per expert exports it)}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<16x8xf32>, tensor<2x4x8xf32>, tensor<16xi64> -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}
