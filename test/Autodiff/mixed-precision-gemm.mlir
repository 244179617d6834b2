// RUN: merak-opt --merak-autodiff %s | FileCheck %s

// The gradients of merak-mixed-precision's GEMMs. The forward GEMM widens
// its result (bf16 x bf16 -> f32, the LM head's form): its VJP rounds the
// float32 gradient to bf16 for the gradient GEMMs, as the VJP of a
// widening cast would. The weight is a bf16 copy of a float32 parameter,
// read transposed: the cast's VJP makes the weight-gradient GEMM (and the
// transpose back to the weight's layout) float32 instead of rounding the
// gradient to bf16 and widening it. The input gradient stays bf16: its
// cast's VJP widens it.
// CHECK-LABEL: func.func @forward_grad
// CHECK: %[[G:.*]] = merak.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK-DAG: merak.matmul %[[G]], %{{.*}} : tensor<2x3xbf16>, tensor<3x4xbf16> -> tensor<2x4xbf16>
// CHECK-DAG: %[[DW:.*]] = merak.matmul %{{.*}}, %[[G]] : tensor<4x2xbf16>, tensor<2x3xbf16> -> tensor<4x3xf32>
// CHECK-DAG: %[[DWT:.*]] = merak.transpose %[[DW]] perm = [1, 0] : tensor<4x3xf32> to tensor<3x4xf32>
// CHECK-NOT: merak.cast %[[DWT]]
// CHECK: return %{{.*}}, %[[DWT]] : tensor<f32>, tensor<3x4xf32>
merak.param @w : tensor<3x4xf32> = dense<0.5> : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xbf16>) -> tensor<f32> {
  %w = merak.get_param @w : tensor<3x4xf32>
  %wb = merak.cast %w : tensor<3x4xf32> to tensor<3x4xbf16>
  %wt = merak.transpose %wb perm = [1, 0] : tensor<3x4xbf16> to tensor<4x3xbf16>
  %y = merak.matmul %x, %wt : tensor<2x4xbf16>, tensor<4x3xbf16> -> tensor<2x3xf32>
  %l = merak.reduce_sum %y axes = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
