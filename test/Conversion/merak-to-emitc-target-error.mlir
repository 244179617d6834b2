// RUN: not merak-opt --merak-plan-memory --merak-to-emitc=target=rocm %s 2>&1 | FileCheck %s
// CHECK: error: merak-to-emitc: unknown target 'rocm' (expected cpu or cuda)
func.func @train_step(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = merak.neg %x : tensor<2xf32>
  return %y : tensor<2xf32>
}
