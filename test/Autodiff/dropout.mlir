// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// The dropout mask is a pure function of the seed and the element index,
// so the forward function is deterministic and finite differences apply:
// kept elements get the gradient scaled by 1 / (1 - ratio), dropped ones 0.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: gradcheck: all 2 cases passed

// ratio 0.5 on 12 elements (some kept, some dropped), the mask unused.
merak.param @x : tensor<3x4xf64> = dense<[[0.3, -1.2, 0.7, 1.5], [-0.4, 0.9, 0.25, -0.6], [1.1, 0.8, -1.3, 0.45]]> : tensor<3x4xf64>
func.func @forward(%w: tensor<3x4xf64>) -> tensor<f64> {
  %x = merak.get_param @x : tensor<3x4xf64>
  %sq = merak.mul %x, %x : tensor<3x4xf64>, tensor<3x4xf64>
  %y, %m = merak.dropout %sq ratio = 0.5 seed = 7 : tensor<3x4xf64> -> tensor<3x4xf64>, tensor<3x4xi1>
  %0 = merak.mul %y, %w : tensor<3x4xf64>, tensor<3x4xf64>
  %loss = merak.reduce_sum %0 axes = [0, 1] : tensor<3x4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// ratio 0.25 followed by a use of the mask (a where on it), which must not
// disturb the gradient of the output; the mask of a second dropout with
// another seed is returned too.
merak.param @x : tensor<2x5xf64> = dense<[[0.3, -1.2, 0.7, 1.5, -0.4], [0.9, 0.25, -0.6, 1.1, 0.8]]> : tensor<2x5xf64>
func.func @forward(%w: tensor<2x5xf64>) -> (tensor<f64>, tensor<2x5xi1>) {
  %x = merak.get_param @x : tensor<2x5xf64>
  %y, %m = merak.dropout %x ratio = 0.25 seed = 11 : tensor<2x5xf64> -> tensor<2x5xf64>, tensor<2x5xi1>
  %one = merak.constant dense<1.0> : tensor<f64>
  %0 = merak.where %m, %y, %one : tensor<2x5xi1>, tensor<2x5xf64>, tensor<f64>
  %1 = merak.mul %0, %0 : tensor<2x5xf64>, tensor<2x5xf64>
  %2 = merak.mul %1, %w : tensor<2x5xf64>, tensor<2x5xf64>
  %loss = merak.reduce_sum %2 axes = [0, 1] : tensor<2x5xf64> -> tensor<f64>
  %z, %n = merak.dropout %x ratio = 0.5 seed = 3 : tensor<2x5xf64> -> tensor<2x5xf64>, tensor<2x5xi1>
  return %loss, %n : tensor<f64>, tensor<2x5xi1>
}
