// RUN: merak-opt %s | FileCheck %s
// CHECK-LABEL: func @f
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: merak.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32>
  %0 = merak.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}
