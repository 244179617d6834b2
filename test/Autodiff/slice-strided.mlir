// RUN: not merak-opt --merak-autodiff -split-input-file %s 2>&1 | FileCheck %s

// The slice rule handles strides 1 and -1 only; a strided slice of a
// parameter on the path to the loss is an error, not a wrong gradient.
// CHECK: slice-strided.mlir:11:{{[0-9]+}}: error: no derivative rule for a slice with stride 2
// CHECK: slice-strided.mlir:21:{{[0-9]+}}: error: no derivative rule for a slice with stride -3

merak.param @x : tensor<6xf64> = dense<[0.3, -1.2, 0.7, 1.5, -0.4, 0.9]> : tensor<6xf64>
func.func @forward() -> tensor<f64> {
  %x = merak.get_param @x : tensor<6xf64>
  %0 = merak.slice %x starts = [0] limits = [6] strides = [2] : tensor<6xf64> to tensor<3xf64>
  %loss = merak.reduce_sum %0 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

merak.param @y : tensor<2x5xf64> = dense<1.5> : tensor<2x5xf64>
func.func @forward() -> tensor<f64> {
  %y = merak.get_param @y : tensor<2x5xf64>
  %0 = merak.slice %y starts = [0, 4] limits = [2, -1] strides = [1, -3] : tensor<2x5xf64> to tensor<2x2xf64>
  %loss = merak.reduce_sum %0 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %loss : tensor<f64>
}
