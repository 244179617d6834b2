// RUN: %python %S/Inputs/gradcheck.py %s | FileCheck %s

// The cast rule: a float -> float cast passes the gradient through (cast
// back to the operand's type); a float -> integer cast cuts the path.

// CHECK: case 0: PASS
// CHECK: case 1: PASS
// CHECK: gradcheck: all 2 cases passed

// f64 -> f32 -> (mul, add in f32) -> f64. The values and the step 2^-10
// have few significant bits, so v +- h and every f32 product stay exact and
// the central difference of this quadratic is exact too; the analytic
// gradient passes through f32 (relative error ~1e-7, inside the usual
// tolerance). Nothing else is loosened.
// gradcheck-step: 0.0009765625
merak.param @c : tensor<4xf64> = dense<[0.75, -1.5, 2.25, 0.375]> : tensor<4xf64>
merak.param @d : tensor<4xf64> = dense<[-0.5, 1.25, 0.625, -2.0]> : tensor<4xf64>
func.func @forward(%w: tensor<4xf64>) -> tensor<f64> {
  %c = merak.get_param @c : tensor<4xf64>
  %d = merak.get_param @d : tensor<4xf64>
  %k = merak.constant dense<[0.5, -1.25, 3.0, 0.625]> : tensor<4xf32>
  %c32 = merak.cast %c : tensor<4xf64> to tensor<4xf32>
  %0 = merak.mul %c32, %c32 : tensor<4xf32>, tensor<4xf32>
  %1 = merak.mul %c32, %k : tensor<4xf32>, tensor<4xf32>
  %2 = merak.add %0, %1 : tensor<4xf32>, tensor<4xf32>
  %3 = merak.cast %2 : tensor<4xf32> to tensor<4xf64>
  %d32 = merak.cast %d : tensor<4xf64> to tensor<4xf32>
  %d64 = merak.cast %d32 : tensor<4xf32> to tensor<4xf64>
  %4 = merak.mul %d64, %d64 : tensor<4xf64>, tensor<4xf64>
  %5 = merak.add %3, %4 : tensor<4xf64>, tensor<4xf64>
  %6 = merak.mul %5, %w : tensor<4xf64>, tensor<4xf64>
  %loss = merak.reduce_sum %6 axes = [0] : tensor<4xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// f64 -> i64 -> f64 is piecewise constant: @q gets exactly zero (the path
// through the integer value carries no gradient) while @k does not.
// gradcheck-zero: q
merak.param @q : tensor<3xf64> = dense<[1.4, -2.3, 0.6]> : tensor<3xf64>
merak.param @k : tensor<3xf64> = dense<[0.8, -0.45, 1.9]> : tensor<3xf64>
func.func @forward(%w: tensor<3xf64>) -> tensor<f64> {
  %q = merak.get_param @q : tensor<3xf64>
  %k = merak.get_param @k : tensor<3xf64>
  %0 = merak.cast %q : tensor<3xf64> to tensor<3xi64>
  %1 = merak.cast %0 : tensor<3xi64> to tensor<3xf64>
  %2 = merak.add %1, %k : tensor<3xf64>, tensor<3xf64>
  %3 = merak.mul %2, %k : tensor<3xf64>, tensor<3xf64>
  %4 = merak.mul %3, %w : tensor<3xf64>, tensor<3xf64>
  %loss = merak.reduce_sum %4 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
