// RUN: merak-opt %s -merak-freeze-gradientless -verify-diagnostics | FileCheck %s
// RUN: not merak-opt %s -merak-freeze-gradientless -merak-autodiff="entry=loss" 2>&1 | FileCheck %s --check-prefix=ERR

// An op without a derivative rule on a parameter's path: the trial fails
// quietly (no diagnostic of its own) and nothing is frozen; merak-autodiff
// reports the op.
// CHECK: merak.param @w : tensor<3x3xf32> = dense<{{.*}}> : tensor<3x3xf32>{{$}}
merak.param @w : tensor<3x3xf32> = dense<0.125> : tensor<3x3xf32>
func.func @loss(%x: tensor<2x3xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  %ww = merak.get_param @w : tensor<3x3xf32>
  %l = merak.matmul %x, %ww : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %r = merak.rem %l, %l : tensor<2x3xf32>, tensor<2x3xf32>
  %loss = merak.cross_entropy %r, %t axis = 1 reduction = "mean" : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
// ERR: merak-autodiff: no derivative rule for 1 op kind(s) on the path to the loss: 'merak.rem' (1x)
// ERR-NOT: merak-freeze-gradientless:
