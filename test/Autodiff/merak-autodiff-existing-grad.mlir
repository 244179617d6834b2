// RUN: not merak-opt --merak-autodiff %s 2>&1 | FileCheck %s

// The function the pass would add, @forward_grad, already exists: an error
// naming it, not a silently renamed or replaced function.
// CHECK: error: {{.*}}forward_grad

merak.param @p : tensor<3xf64> = dense<[0.5, -1.0, 1.5]> : tensor<3xf64>
func.func @forward() -> tensor<f64> {
  %p = merak.get_param @p : tensor<3xf64>
  %l = merak.reduce_sum %p axes = [0] : tensor<3xf64> -> tensor<f64>
  return %l : tensor<f64>
}
func.func @forward_grad() -> tensor<f64> {
  %c = merak.constant dense<0.0> : tensor<f64>
  return %c : tensor<f64>
}
