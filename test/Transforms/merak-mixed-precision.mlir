// RUN: merak-opt %s -split-input-file -merak-mixed-precision="precision=bf16" | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-mixed-precision | FileCheck %s --check-prefix=FP32
// RUN: not merak-opt %s -split-input-file -merak-mixed-precision="precision=fp16" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: merak-mixed-precision: precision 'fp16': expected fp32 or bf16

// A linear layer: the activation and the weight are cast to bf16, the
// weight's transpose moves below its cast (so merak-fold-transposes can
// still fold it), the GEMM is bf16 and its result goes back to f32 before
// the bias add.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK: %[[WB:.*]] = merak.cast %[[W]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[WT:.*]] = merak.transpose %[[WB]] perm = [1, 0] : tensor<16x8xbf16> to tensor<8x16xbf16>
// CHECK: %[[XB:.*]] = merak.cast %[[X]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: %[[Y:.*]] = merak.matmul %[[XB]], %[[WT]] : tensor<2x4x8xbf16>, tensor<8x16xbf16> -> tensor<2x4x16xbf16>
// CHECK: %[[YF:.*]] = merak.cast %[[Y]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK: merak.add %[[YF]], %[[B]]
// CHECK-NOT: merak.transpose
// FP32-LABEL: func.func @linear
// FP32-NOT: bf16
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %wt = merak.transpose %w perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %y = merak.matmul %x, %wt : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %z = merak.add %y, %b : tensor<2x4x16xf32>, tensor<16xf32>
  return %z : tensor<2x4x16xf32>
}

// -----

// Batched with equal batch dims: converted. Broadcast batch dims (whose VJP
// reduces over the broadcast) and f64: left alone.
// CHECK-LABEL: func.func @batched
// CHECK: merak.matmul {{.*}} : tensor<3x4x8xbf16>, tensor<3x8x5xbf16> -> tensor<3x4x5xbf16>
// CHECK: merak.matmul {{.*}} : tensor<3x4x8xf32>, tensor<1x8x5xf32> -> tensor<3x4x5xf32>
// CHECK: merak.matmul {{.*}} : tensor<4x8xf64>, tensor<8x5xf64> -> tensor<4x5xf64>
func.func @batched(%a: tensor<3x4x8xf32>, %b: tensor<3x8x5xf32>, %c: tensor<1x8x5xf32>, %d: tensor<4x8xf64>, %e: tensor<8x5xf64>) -> (tensor<3x4x5xf32>, tensor<3x4x5xf32>, tensor<4x5xf64>) {
  %0 = merak.matmul %a, %b : tensor<3x4x8xf32>, tensor<3x8x5xf32> -> tensor<3x4x5xf32>
  %1 = merak.matmul %a, %c : tensor<3x4x8xf32>, tensor<1x8x5xf32> -> tensor<3x4x5xf32>
  %2 = merak.matmul %d, %e : tensor<4x8xf64>, tensor<8x5xf64> -> tensor<4x5xf64>
  return %0, %1, %2 : tensor<3x4x5xf32>, tensor<3x4x5xf32>, tensor<4x5xf64>
}
