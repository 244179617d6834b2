// RUN: not merak-opt --split-input-file --merak-plan-memory --merak-to-emitc %s 2>%t.cpu | FileCheck %s
// RUN: FileCheck %s --check-prefix=CPUERR < %t.cpu
// RUN: not merak-opt --split-input-file --merak-plan-memory --merak-to-emitc=target=cuda %s 2>%t.cuda | FileCheck %s --check-prefix=CUDA
// RUN: FileCheck %s --check-prefix=CUDAERR < %t.cuda

// merak.attention: q's dims, the key count, the scale and causal flag, and
// a null lse when nothing reads it (the forward of a program without a
// backward); attention_grad: the forward's o and lse, the incoming gradient,
// a null pointer for an unread gradient (here dk).
// CHECK-LABEL: emitc.func @merak_train_step
// CHECK: call_opaque "attention"{{.*}}args = [#emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{4, {2, 3, 16, 32}}">, 1 : index, 2 : index, #emitc.opaque<"16">, #emitc.opaque<"0.125">, #emitc.opaque<"true">, 3 : index, 4 : index]
// CHECK: call_opaque "attentionGrad"{{.*}}args = [#emitc.opaque<"DT::F32">, 0 : index, #emitc.opaque<"Dims{4, {2, 3, 16, 32}}">, 1 : index, 2 : index, #emitc.opaque<"16">, 3 : index, 4 : index, 5 : index, #emitc.opaque<"0.125">, #emitc.opaque<"true">, 6 : index, #emitc.opaque<"nullptr">, 7 : index]
// CUDA: call_opaque "gpu::attention"
// CUDA: call_opaque "gpu::attentionGrad"
func.func @train_step(%q: tensor<2x3x16x32xf32>, %k: tensor<2x3x16x32xf32>, %v: tensor<2x3x16x32xf32>, %g: tensor<2x3x16x32xf32>) -> (tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>) {
  %o, %lse = merak.attention %q, %k, %v scale = 0.125 causal : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x16x32xf32>, tensor<2x3x16xf32>
  %dq, %dk, %dv = merak.attention_grad %q, %k, %v, %o, %lse, %g scale = 0.125 causal : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>
  return %dq, %dv : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>
}

// -----

// seq_major ([B, T, H, D] operands, merak-fold-transposes' form): q's
// dims as stored, the key count from k's dim 1, and a trailing true.
// CHECK-LABEL: emitc.func @merak_train_step
// CHECK: call_opaque "attention"{{.*}}args = [#emitc.opaque<"DT::BF16">, 0 : index, #emitc.opaque<"Dims{4, {2, 16, 3, 32}}">, 1 : index, 2 : index, #emitc.opaque<"16">, #emitc.opaque<"0.125">, #emitc.opaque<"true">, 3 : index, 4 : index, #emitc.opaque<"true">]
// CHECK: call_opaque "attentionGrad"{{.*}}#emitc.opaque<"0.125">, #emitc.opaque<"true">, 6 : index, 7 : index, 8 : index, #emitc.opaque<"true">]
// CUDA: call_opaque "gpu::attention"{{.*}}#emitc.opaque<"true">]
func.func @train_step(%q: tensor<2x16x3x32xbf16>, %k: tensor<2x16x3x32xbf16>, %v: tensor<2x16x3x32xbf16>, %g: tensor<2x16x3x32xbf16>) -> (tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>) {
  %o, %lse = merak.attention %q, %k, %v scale = 0.125 causal seq_major : tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16> -> tensor<2x16x3x32xbf16>, tensor<2x3x16xf32>
  %dq, %dk, %dv = merak.attention_grad %q, %k, %v, %o, %lse, %g scale = 0.125 causal seq_major : tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x3x16xf32>, tensor<2x16x3x32xbf16> -> tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>
  return %dq, %dk, %dv : tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>, tensor<2x16x3x32xbf16>
}

// -----

// Only the forward: nothing reads lse, so it is not written.
// CHECK-LABEL: emitc.func @merak_train_step
// CHECK: call_opaque "attention"{{.*}}#emitc.opaque<"false">, 3 : index, #emitc.opaque<"nullptr">]
func.func @train_step(%q: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %o, %lse = merak.attention %q, %q, %q scale = 0.25 : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

// float64 attention (accepted by the op for the evaluator) has no kernel.
// CPUERR: merak-to-emitc: no CPU kernel for merak.attention
// CUDAERR: merak-to-emitc: no CUDA kernel for merak.attention
func.func @train_step(%q: tensor<2x4x16xf64>) -> tensor<2x4x16xf64> {
  %o, %l = merak.attention %q, %q, %q scale = 1.0 : tensor<2x4x16xf64>, tensor<2x4x16xf64>, tensor<2x4x16xf64> -> tensor<2x4x16xf64>, tensor<2x4xf64>
  return %o : tensor<2x4x16xf64>
}

// -----

// Probability dropout: the whole tail (no bias: nullptr, Dims{}; the
// gradient's dbias nullptr), then the ratio, the seed and the recorded
// splits; CUDA has no such kernel.
// CHECK-LABEL: emitc.func @merak_train_step
// CHECK: call_opaque "attention"{{.*}}#emitc.opaque<"0.125">, #emitc.opaque<"true">, 3 : index, 4 : index, #emitc.opaque<"false">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"nullptr">, #emitc.opaque<"Dims{0, {}}">, #emitc.opaque<"0.10000000000000001">, #emitc.opaque<"7">, #emitc.opaque<"Dims{3, {0, 1, 2}}">, #emitc.opaque<"Dims{0, {}}">]
// CHECK: call_opaque "attentionGrad"{{.*}}#emitc.opaque<"false">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"nullptr">, #emitc.opaque<"Dims{0, {}}">, #emitc.opaque<"nullptr">, #emitc.opaque<"0.10000000000000001">, #emitc.opaque<"7">, #emitc.opaque<"Dims{3, {0, 1, 2}}">, #emitc.opaque<"Dims{0, {}}">]
// CUDAERR: 'merak.attention' op with dropout has no CUDA kernel
func.func @train_step(%q: tensor<2x3x16x32xf32>, %k: tensor<2x3x16x32xf32>, %v: tensor<2x3x16x32xf32>, %g: tensor<2x3x16x32xf32>) -> (tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>) {
  %o, %lse = merak.attention %q, %k, %v scale = 0.125 causal dropout = 0.1 seed = 7 {batch_split = array<i64: 0, 1, 2>} : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x16x32xf32>, tensor<2x3x16xf32>
  %dq, %dk, %dv = merak.attention_grad %q, %k, %v, %o, %lse, %g scale = 0.125 causal dropout = 0.1 seed = 7 {batch_split = array<i64: 0, 1, 2>} : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>
  return %dq, %dk, %dv : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>
}

// -----

// A gradient of lse (attention sinks'): the whole tail with dropout 0 and
// no splits, then its pointer last; CUDA takes it too.
// CHECK-LABEL: emitc.func @merak_train_step
// CHECK: call_opaque "attentionGrad"{{.*}}#emitc.opaque<"0.125">, #emitc.opaque<"true">, 6 : index, 7 : index, 8 : index, #emitc.opaque<"false">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"nullptr">, #emitc.opaque<"Dims{0, {}}">, #emitc.opaque<"nullptr">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"Dims{0, {}}">, #emitc.opaque<"Dims{0, {}}">, 9 : index]
// CUDA: call_opaque "gpu::attentionGrad"{{.*}}#emitc.opaque<"Dims{0, {}}">, #emitc.opaque<"Dims{0, {}}">, 9 : index]
func.func @train_step(%q: tensor<2x3x16x32xf32>, %k: tensor<2x3x16x32xf32>, %v: tensor<2x3x16x32xf32>, %g: tensor<2x3x16x32xf32>, %gl: tensor<2x3x16xf32>) -> (tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>) {
  %o, %lse = merak.attention %q, %k, %v scale = 0.125 causal : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x16x32xf32>, tensor<2x3x16xf32>
  %dq, %dk, %dv = merak.attention_grad %q, %k, %v, %o, %lse, %g lse_grad %gl : tensor<2x3x16xf32> scale = 0.125 causal : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>
  return %dq, %dk, %dv : tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>
}
