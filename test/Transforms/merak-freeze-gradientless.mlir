// RUN: merak-opt %s -split-input-file -merak-freeze-gradientless -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-freeze-gradientless="frozen=emb" -merak-autodiff="entry=loss frozen=emb" 2>/dev/null | FileCheck %s --check-prefix=GRAD

// A sparse-attention indexer in small: @idx scores the rows of @emb, and
// the loss reads @emb's rows at the argmax of those scores. @idx reaches
// the loss only through the argmax's integer indices, so it gets no
// gradient: it becomes kind "frozen" (PyTorch's optimizers skip a
// parameter whose .grad is None), @emb and @w train. @bias is already a
// buffer, untouched.
// CHECK-DAG: merak.param @idx : tensor<4x3xf32> = dense<{{.*}}> : tensor<4x3xf32> {merak.kind = "frozen"}
// CHECK-DAG: merak.param @emb : tensor<4x3xf32> = dense<{{.*}}> : tensor<4x3xf32>{{$}}
// CHECK-DAG: merak.param @w : tensor<3x3xf32> = dense<{{.*}}> : tensor<3x3xf32>{{$}}
// With @emb frozen by a glob too, only @w's gradient is returned.
// GRAD-LABEL: func.func @loss_grad
// GRAD-SAME: -> (tensor<f32> {merak.name = "loss"}, tensor<3x3xf32> {merak.name = "grad:w"})
merak.param @idx : tensor<4x3xf32> = dense<0.25> : tensor<4x3xf32>
merak.param @emb : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
merak.param @w : tensor<3x3xf32> = dense<0.125> : tensor<3x3xf32>
// expected-remark @+1 {{merak-freeze-gradientless: 1 parameter(s) get no gradient from the loss (they reach it only through values without a derivative, such as TopK's indices) and stay as they are, as PyTorch's optimizers skip a parameter whose .grad is None: idx}}
func.func @loss(%x: tensor<2x3xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  %wi = merak.get_param @idx : tensor<4x3xf32>
  %ti = merak.transpose %wi perm = [1, 0] : tensor<4x3xf32> to tensor<3x4xf32>
  %s = merak.matmul %x, %ti : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %i = merak.argmax %s axis = 1 : tensor<2x4xf32> -> tensor<2xi64>
  %we = merak.get_param @emb : tensor<4x3xf32>
  %e = merak.gather %we[%i] axis = 0 : tensor<4x3xf32>, tensor<2xi64> -> tensor<2x3xf32>
  %ww = merak.get_param @w : tensor<3x3xf32>
  %l = merak.matmul %e, %ww : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %loss = merak.cross_entropy %l, %t axis = 1 reduction = "mean" : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Every parameter has a gradient: nothing changes, no remark.
// CHECK: merak.param @w : tensor<3x3xf32> = dense<{{.*}}> : tensor<3x3xf32>{{$}}
merak.param @w : tensor<3x3xf32> = dense<0.125> : tensor<3x3xf32>
func.func @loss(%x: tensor<2x3xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  %ww = merak.get_param @w : tensor<3x3xf32>
  %l = merak.matmul %x, %ww : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %loss = merak.cross_entropy %l, %t axis = 1 reduction = "mean" : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

