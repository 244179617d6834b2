// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// Finite-difference checks of the slice rule with strides other than +-1:
// each element of the upstream gradient lands at its input position, and
// the positions the slice skips get zero. The upstream gradients are random
// (the arguments), so a wrong offset or spacing shows.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: case 2: PASS
// CHECK: case 3: PASS
// CHECK: gradcheck: all 4 cases passed

// Interleaved rotary embeddings (Meta's Llama, GPT-J): x[..., ::2] and
// x[..., 1::2] of the same tensor, recombined as (x0 * c - x1 * s).
merak.param @x : tensor<2x6xf64> = dense<[[0.3, -1.2, 0.7, 1.5, -0.4, 0.9], [0.25, -0.6, 1.1, 0.8, -1.3, 0.45]]> : tensor<2x6xf64>
func.func @forward(%c: tensor<2x3xf64>, %s: tensor<2x3xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<2x6xf64>
  %0 = merak.slice %x starts = [0, 0] limits = [2, 6] strides = [1, 2] : tensor<2x6xf64> to tensor<2x3xf64>
  %1 = merak.slice %x starts = [0, 1] limits = [2, 6] strides = [1, 2] : tensor<2x6xf64> to tensor<2x3xf64>
  %2 = merak.mul %0, %c : tensor<2x3xf64>, tensor<2x3xf64>
  %3 = merak.mul %1, %s : tensor<2x3xf64>, tensor<2x3xf64>
  %4 = merak.mul %2, %3 : tensor<2x3xf64>, tensor<2x3xf64>
  %5 = merak.sub %2, %3 : tensor<2x3xf64>, tensor<2x3xf64>
  %6 = merak.add %4, %5 : tensor<2x3xf64>, tensor<2x3xf64>
  %loss = merak.reduce_sum %6 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Stride 3 from an interior start whose last step ends before the input's
// end (elements 1 and 4 of 6), and stride -3 from the last element
// (elements 4 and 1 of 5, reversed).
merak.param @y : tensor<6xf64> = dense<[0.3, -1.2, 0.7, 1.5, -0.4, 0.9]> : tensor<6xf64>
merak.param @z : tensor<2x5xf64> = dense<[[1.5, -0.2, 0.35, 0.8, -1.1], [0.6, 0.9, -0.7, 0.15, 1.2]]> : tensor<2x5xf64>
func.func @forward(%w: tensor<2xf64>, %v: tensor<2x2xf64>) -> tensor<f64> {
  %y = merak.get_param @y : tensor<6xf64>
  %z = merak.get_param @z : tensor<2x5xf64>
  %0 = merak.slice %y starts = [1] limits = [6] strides = [3] : tensor<6xf64> to tensor<2xf64>
  %1 = merak.mul %0, %0 : tensor<2xf64>, tensor<2xf64>
  %2 = merak.mul %1, %w : tensor<2xf64>, tensor<2xf64>
  %3 = merak.slice %z starts = [0, 4] limits = [2, -1] strides = [1, -3] : tensor<2x5xf64> to tensor<2x2xf64>
  %4 = merak.mul %3, %v : tensor<2x2xf64>, tensor<2x2xf64>
  %5 = merak.reduce_sum %2 axes = [0] : tensor<2xf64> -> tensor<f64>
  %6 = merak.reduce_sum %4 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  %loss = merak.add %5, %6 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// Strides on two dimensions at once, one of them negative (-2 from the end
// reaching element 0) and a single-element result along the other.
merak.param @p : tensor<4x5xf64> = dense<[[0.3, -1.2, 0.7, 1.5, -0.4], [0.9, 0.25, -0.6, 1.1, 0.8], [-1.3, 0.45, 1.5, -0.2, 0.35], [0.8, -1.1, 0.6, 0.9, -0.7]]> : tensor<4x5xf64>
func.func @forward(%w: tensor<2x3xf64>, %u: tensor<1x2xf64>) -> tensor<f64> {
  %p = merak.get_param @p : tensor<4x5xf64>
  %0 = merak.slice %p starts = [3, 4] limits = [-1, -1] strides = [-2, -2] : tensor<4x5xf64> to tensor<2x3xf64>
  %1 = merak.mul %0, %w : tensor<2x3xf64>, tensor<2x3xf64>
  %2 = merak.slice %p starts = [1, 0] limits = [2, 5] strides = [5, 3] : tensor<4x5xf64> to tensor<1x2xf64>
  %3 = merak.mul %2, %u : tensor<1x2xf64>, tensor<1x2xf64>
  %4 = merak.reduce_sum %1 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  %5 = merak.reduce_sum %3 axes = [0, 1] : tensor<1x2xf64> -> tensor<f64>
  %loss = merak.add %4, %5 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// -----

// An empty slice (Phi-3's pass-through rotary part x[..., rotary_dim:] when
// the rotary part is all of it) concatenated back: its gradient is empty and
// the input's gradient comes from the other slice alone.
merak.param @e : tensor<2x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6]]> : tensor<2x4xf64>
func.func @forward(%w: tensor<2x4xf64>) -> tensor<f64> {
  %e = merak.get_param @e : tensor<2x4xf64>
  %0 = merak.slice %e starts = [0, 0] limits = [2, 4] strides = [1, 1] : tensor<2x4xf64> to tensor<2x4xf64>
  %1 = merak.slice %e starts = [0, 4] limits = [2, 4] strides = [1, 1] : tensor<2x4xf64> to tensor<2x0xf64>
  %2 = merak.concat %0, %1 axis = 1 : tensor<2x4xf64>, tensor<2x0xf64> -> tensor<2x4xf64>
  %3 = merak.mul %2, %2 : tensor<2x4xf64>, tensor<2x4xf64>
  %4 = merak.mul %3, %w : tensor<2x4xf64>, tensor<2x4xf64>
  %loss = merak.reduce_sum %4 axes = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
