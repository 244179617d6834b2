// RUN: merak-opt %s -split-input-file -merak-moe-capacity -verify-diagnostics
// RUN: not merak-opt %s -split-input-file -merak-moe-capacity="capacity-factor=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FACTOR
// RUN: not merak-opt %s -split-input-file -merak-moe-capacity="drop-policy=random" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=POLICY

// FACTOR: the capacity factor must be a finite number > 0, got 0
// POLICY: the drop policy must be probs or position, got 'random'

// The rows are never weighted: nothing to zero for a dropped row.
func.func @forward(%x: tensor<8x4xf32>, %w: tensor<2x4x4xf32>, %e: tensor<8xi64>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot find the routing weight of this Mixture-of-Experts layer}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x4xf32>, tensor<2x4x4xf32>, tensor<8xi64> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Two per-row weights: which one is the router's is ambiguous.
func.func @forward(%x: tensor<8x4xf32>, %w: tensor<2x4x4xf32>, %e: tensor<8xi64>,
                   %p: tensor<8x1xf32>, %q: tensor<8x1xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  // expected-error @+1 {{found several candidates for the routing weight}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x4xf32>, tensor<2x4x4xf32>, tensor<8xi64> -> tensor<8x4xf32>
  %a = merak.mul %y, %p : tensor<8x4xf32>, tensor<8x1xf32>
  %b = merak.mul %y, %q : tensor<8x4xf32>, tensor<8x1xf32>
  return %a, %b : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// A weight computed from the experts' output cannot decide what they compute.
func.func @forward(%x: tensor<8x4xf32>, %w: tensor<2x4x4xf32>, %e: tensor<8xi64>) -> tensor<8x4xf32> {
  %y = merak.expert_matmul %x, %w[%e] : tensor<8x4xf32>, tensor<2x4x4xf32>, tensor<8xi64> -> tensor<8x4xf32>
  %t = merak.reduce_sum %y axes = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %r = merak.broadcast %t : tensor<f32> to tensor<8x1xf32>
  // expected-error @+1 {{the routing weight of this Mixture-of-Experts layer depends on its experts' output}}
  %m = merak.mul %y, %r : tensor<8x4xf32>, tensor<8x1xf32>
  return %m : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{--moe-capacity-factor needs a Mixture-of-Experts model, but @forward has no expert GEMM}}
func.func @forward(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  return %x : tensor<8x4xf32>
}
