// RUN: merak-opt %s -split-input-file -merak-mixed-precision="precision=bf16" | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-mixed-precision | FileCheck %s --check-prefix=FP32
// RUN: not merak-opt %s -split-input-file -merak-mixed-precision="precision=fp16" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: merak-mixed-precision: precision 'fp16': expected fp32 or bf16

// A linear layer: the activation and the weight are cast to bf16, the
// weight's transpose moves below its cast (so merak-fold-transposes can
// still fold it), the GEMM takes bf16 operands and, since only a float32
// op reads its result (the bias here is an activation, not a parameter),
// gives its float32 accumulation directly (bf16 x bf16 -> f32).
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK: %[[WB:.*]] = merak.cast %[[W]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[WT:.*]] = merak.transpose %[[WB]] perm = [1, 0] : tensor<16x8xbf16> to tensor<8x16xbf16>
// CHECK: %[[XB:.*]] = merak.cast %[[X]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: %[[Y:.*]] = merak.matmul %[[XB]], %[[WT]] : tensor<2x4x8xbf16>, tensor<8x16xbf16> -> tensor<2x4x16xf32>
// CHECK-NEXT: merak.add %[[Y]], %[[B]]
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
// CHECK: merak.matmul {{.*}} : tensor<3x4x8xbf16>, tensor<3x8x5xbf16> -> tensor<3x4x5xf32>
// CHECK: merak.matmul {{.*}} : tensor<3x4x8xf32>, tensor<1x8x5xf32> -> tensor<3x4x5xf32>
// CHECK: merak.matmul {{.*}} : tensor<4x8xf64>, tensor<8x5xf64> -> tensor<4x5xf64>
func.func @batched(%a: tensor<3x4x8xf32>, %b: tensor<3x8x5xf32>, %c: tensor<1x8x5xf32>, %d: tensor<4x8xf64>, %e: tensor<8x5xf64>) -> (tensor<3x4x5xf32>, tensor<3x4x5xf32>, tensor<4x5xf64>) {
  %0 = merak.matmul %a, %b : tensor<3x4x8xf32>, tensor<3x8x5xf32> -> tensor<3x4x5xf32>
  %1 = merak.matmul %a, %c : tensor<3x4x8xf32>, tensor<1x8x5xf32> -> tensor<3x4x5xf32>
  %2 = merak.matmul %d, %e : tensor<4x8xf64>, tensor<8x5xf64> -> tensor<4x5xf64>
  return %0, %1, %2 : tensor<3x4x5xf32>, tensor<3x4x5xf32>, tensor<4x5xf64>
}

// -----

// bf16 activations: an MLP (linear with a parameter bias, GELU, linear)
// keeps its hidden activations in bf16 -- the bias is cast to bf16 and added
// in bf16, GELU runs in bf16, the second GEMM takes GELU's result as it is
// -- and the second linear's bf16 result is widened only where a float32
// activation meets it (the residual add).
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>)
// CHECK-DAG: %[[W1:.*]] = merak.get_param @w1
// CHECK-DAG: %[[B1:.*]] = merak.get_param @b1
// CHECK-DAG: %[[B2:.*]] = merak.get_param @b2
// CHECK: %[[H:.*]] = merak.matmul %{{.*}}, %{{.*}} : tensor<2x8xbf16>, tensor<8x16xbf16> -> tensor<2x16xbf16>
// CHECK: %[[B1H:.*]] = merak.cast %[[B1]] : tensor<16xf32> to tensor<16xbf16>
// CHECK: %[[HB:.*]] = merak.add %[[H]], %[[B1H]] : tensor<2x16xbf16>, tensor<16xbf16>
// CHECK: %[[G:.*]] = merak.gelu %[[HB]] : tensor<2x16xbf16>
// CHECK: %[[Y:.*]] = merak.matmul %[[G]], %{{.*}} : tensor<2x16xbf16>, tensor<16x8xbf16> -> tensor<2x8xbf16>
// CHECK: %[[B2H:.*]] = merak.cast %[[B2]] : tensor<8xf32> to tensor<8xbf16>
// CHECK: %[[YB:.*]] = merak.add %[[B2H]], %[[Y]] : tensor<8xbf16>, tensor<2x8xbf16>
// CHECK: %[[YF:.*]] = merak.cast %[[YB]] : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: %[[R:.*]] = merak.add %[[X]], %[[YF]] : tensor<2x8xf32>, tensor<2x8xf32>
// CHECK-NOT: merak.cast
// CHECK: return %[[R]]
merak.param @w1 : tensor<16x8xf32> = dense<1.0> : tensor<16x8xf32>
merak.param @b1 : tensor<16xf32> = dense<1.0> : tensor<16xf32>
merak.param @w2 : tensor<8x16xf32> = dense<1.0> : tensor<8x16xf32>
merak.param @b2 : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @mlp(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w1 = merak.get_param @w1 : tensor<16x8xf32>
  %b1 = merak.get_param @b1 : tensor<16xf32>
  %w2 = merak.get_param @w2 : tensor<8x16xf32>
  %b2 = merak.get_param @b2 : tensor<8xf32>
  %w1t = merak.transpose %w1 perm = [1, 0] : tensor<16x8xf32> to tensor<8x16xf32>
  %h = merak.matmul %x, %w1t : tensor<2x8xf32>, tensor<8x16xf32> -> tensor<2x16xf32>
  %hb = merak.add %h, %b1 : tensor<2x16xf32>, tensor<16xf32>
  %g = merak.gelu %hb : tensor<2x16xf32>
  %w2t = merak.transpose %w2 perm = [1, 0] : tensor<8x16xf32> to tensor<16x8xf32>
  %y = merak.matmul %g, %w2t : tensor<2x16xf32>, tensor<16x8xf32> -> tensor<2x8xf32>
  %yb = merak.add %b2, %y : tensor<8xf32>, tensor<2x8xf32>
  %r = merak.add %x, %yb : tensor<2x8xf32>, tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// The projection before attention: the bias add, split, reshapes and
// transposes move bf16; the float32 op that reads them (here a softmax)
// gets the widened values. A bias that is an activation (a function
// argument) keeps the add float32.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[S:.*]]:2 = merak.split %{{.*}} axis = 1 sizes = [4, 4] : tensor<2x8xbf16> -> tensor<2x4xbf16>, tensor<2x4xbf16>
// CHECK-DAG: %[[T:.*]] = merak.transpose %[[S]]#0 perm = [1, 0] : tensor<2x4xbf16> to tensor<4x2xbf16>
// CHECK-DAG: %[[UF:.*]] = merak.cast %[[S]]#1 : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: %[[TF:.*]] = merak.cast %[[T]] : tensor<4x2xbf16> to tensor<4x2xf32>
// CHECK: merak.softmax %[[TF]]
// CHECK: merak.add %[[UF]], %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>
merak.param @wq : tensor<8x8xf32> = dense<1.0> : tensor<8x8xf32>
merak.param @bq : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @qkv(%x: tensor<2x8xf32>, %a: tensor<2x4xf32>) -> (tensor<4x2xf32>, tensor<2x4xf32>) {
  %w = merak.get_param @wq : tensor<8x8xf32>
  %b = merak.get_param @bq : tensor<8xf32>
  %h = merak.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %hb = merak.add %h, %b : tensor<2x8xf32>, tensor<8xf32>
  %q:2 = merak.split %hb axis = 1 sizes = [4, 4] : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  %t = merak.transpose %q#0 perm = [1, 0] : tensor<2x4xf32> to tensor<4x2xf32>
  %s = merak.softmax %t axis = 1 : tensor<4x2xf32>
  %u = merak.add %q#1, %a : tensor<2x4xf32>, tensor<2x4xf32>
  return %s, %u : tensor<4x2xf32>, tensor<2x4xf32>
}

// -----

// Attention whose query, key and value all arrive in bf16 runs in bf16
// (lse float32); its result goes on in bf16 to the next GEMM. With one
// operand float32 (here v, an argument) it stays float32.
// CHECK-LABEL: func.func @attention
// CHECK: %[[O:.*]], %[[L:.*]] = merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16> -> tensor<2x4x16xbf16>, tensor<2x4xf32>
// CHECK: merak.matmul %[[O]], %{{.*}} : tensor<2x4x16xbf16>, tensor<16x8xbf16> -> tensor<2x4x8xf32>
// CHECK: merak.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
func.func @attention(%x: tensor<2x4x16xf32>, %w: tensor<16x16xf32>, %wo: tensor<16x8xf32>, %v: tensor<2x4x16xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4x16xf32>) {
  %q = merak.matmul %x, %w : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
  %o, %l = merak.attention %q, %q, %q scale = 0.25 causal : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  %y = merak.matmul %o, %wo : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  %o2, %l2 = merak.attention %q, %q, %v scale = 0.25 causal : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>, tensor<2x4xf32>
  return %y, %l, %o2 : tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4x16xf32>
}
