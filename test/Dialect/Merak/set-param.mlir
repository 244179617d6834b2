// RUN: merak-opt %s | merak-opt | FileCheck %s
// RUN: merak-opt %s -cse -canonicalize | FileCheck %s --check-prefix=ORDER

// CHECK-LABEL: func.func @update
// CHECK: merak.set_param @w, %{{.*}} : tensor<2xf32>
// The read after the write is not merged with the read before it, nor
// removed with the write.
// ORDER-LABEL: func.func @update
// ORDER: %[[A:.*]] = merak.get_param @w
// ORDER: merak.set_param @w
// ORDER: %[[B:.*]] = merak.get_param @w
// ORDER: return %[[A]], %[[B]]
merak.param @w : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @update(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %a = merak.get_param @w : tensor<2xf32>
  %n = merak.add %a, %x : tensor<2xf32>, tensor<2xf32>
  merak.set_param @w, %n : tensor<2xf32>
  %b = merak.get_param @w : tensor<2xf32>
  return %a, %b : tensor<2xf32>, tensor<2xf32>
}

