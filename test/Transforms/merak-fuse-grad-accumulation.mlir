// RUN: merak-opt %s -split-input-file --merak-fuse-grad-accumulation | FileCheck %s
// RUN: merak-opt %s -split-input-file --merak-fuse-grad-accumulation --merak-plan-memory --merak-to-emitc | FileCheck %s --check-prefix=EMIT

// A weight gradient's product added into its accumulator becomes one GEMM
// accumulating into it, where the product was; the accumulator's read (here
// after the product) moves up to it. merak-plan-memory lets the GEMM write
// the accumulator's storage in place: the set_param copies nothing, and
// the product and the add get no buffers. A plain matmul is fused too
// (the bias gradient's reduce_sum is not a product: its add stays, in
// place).
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[A:.+]] = merak.get_param @pipeline.grad.w : tensor<8x4xf32>
// CHECK-NEXT: %[[G:.+]] = merak.matmul_t %arg0, %arg1 acc %[[A]] {transpose_lhs} : tensor<16x8xf32>, tensor<16x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.+]] = merak.get_param @pipeline.grad.v : tensor<8x4xf32>
// CHECK-NEXT: %[[H:.+]] = merak.matmul_t %arg2, %arg1 acc %[[B]] : tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: merak.reduce_sum
// CHECK-NEXT: merak.get_param @pipeline.grad.b
// CHECK-NEXT: merak.add
// CHECK-NEXT: merak.set_param @pipeline.grad.b
// CHECK-NEXT: merak.set_param @pipeline.grad.w, %[[G]]
// CHECK-NEXT: merak.set_param @pipeline.grad.v, %[[H]]
// EMIT-LABEL: emitc.func @merak_train_step
// EMIT-NOT: copyBytes
// EMIT: call_opaque "matmul"({{.*}}) {args = [{{.*}}#emitc.opaque<"true">, #emitc.opaque<"false">, #emitc.opaque<"DT::F32">, #emitc.opaque<"true">]}
// EMIT-NOT: copyBytes
// EMIT: call_opaque "matmul"({{.*}}) {args = [{{.*}}#emitc.opaque<"false">, #emitc.opaque<"false">, #emitc.opaque<"DT::F32">, #emitc.opaque<"true">]}
// EMIT-NOT: copyBytes
// EMIT: return
merak.param @pipeline.grad.w : tensor<8x4xf32> = dense<0.0> : tensor<8x4xf32>
merak.param @pipeline.grad.v : tensor<8x4xf32> = dense<0.0> : tensor<8x4xf32>
merak.param @pipeline.grad.b : tensor<4xf32> = dense<0.0> : tensor<4xf32>
func.func @train_step(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>, %xt: tensor<8x16xf32>) {
  %g = merak.matmul_t %x, %dy {transpose_lhs} : tensor<16x8xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %h = merak.matmul %xt, %dy : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %db = merak.reduce_sum %dy axes = [0] : tensor<16x4xf32> -> tensor<4xf32>
  %ab = merak.get_param @pipeline.grad.b : tensor<4xf32>
  %sb = merak.add %ab, %db : tensor<4xf32>, tensor<4xf32>
  merak.set_param @pipeline.grad.b, %sb : tensor<4xf32>
  %a = merak.get_param @pipeline.grad.w : tensor<8x4xf32>
  %s = merak.add %a, %g : tensor<8x4xf32>, tensor<8x4xf32>
  merak.set_param @pipeline.grad.w, %s : tensor<8x4xf32>
  %b = merak.get_param @pipeline.grad.v : tensor<8x4xf32>
  %t = merak.add %h, %b : tensor<8x4xf32>, tensor<8x4xf32>
  merak.set_param @pipeline.grad.v, %t : tensor<8x4xf32>
  return
}

// -----

// Left alone: a product read twice (%p is also returned); a bf16 product
// (an accumulated product is f32); an accumulator written between the
// product and its read (@w: its read cannot move up to the product).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[P:.+]] = merak.matmul %arg0, %arg1 :
// CHECK: merak.add %{{.+}}, %[[P]]
// CHECK: merak.matmul %arg2, %arg3 :
// CHECK: merak.add
// CHECK: %[[Q:.+]] = merak.matmul %arg0, %arg1 :
// CHECK: merak.set_param @w
// CHECK: merak.add %{{.+}}, %[[Q]]
// CHECK-NOT: acc
// EMIT-LABEL: emitc.func @merak_train_step
merak.param @v : tensor<4x4xf32> = dense<0.0> : tensor<4x4xf32>
merak.param @h : tensor<4x4xbf16> = dense<0.0> : tensor<4x4xbf16>
merak.param @w : tensor<4x4xf32> = dense<0.0> : tensor<4x4xf32>
func.func @train_step(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xbf16>, %d: tensor<4x4xbf16>) -> tensor<4x4xf32> {
  %p = merak.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %v = merak.get_param @v : tensor<4x4xf32>
  %sv = merak.add %v, %p : tensor<4x4xf32>, tensor<4x4xf32>
  merak.set_param @v, %sv : tensor<4x4xf32>
  %ph = merak.matmul %c, %d : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
  %h = merak.get_param @h : tensor<4x4xbf16>
  %sh = merak.add %h, %ph : tensor<4x4xbf16>, tensor<4x4xbf16>
  merak.set_param @h, %sh : tensor<4x4xbf16>
  %q = merak.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  merak.set_param @w, %a : tensor<4x4xf32>
  %w = merak.get_param @w : tensor<4x4xf32>
  %sw = merak.add %w, %q : tensor<4x4xf32>, tensor<4x4xf32>
  merak.set_param @w, %sw : tensor<4x4xf32>
  return %p : tensor<4x4xf32>
}

// -----

// Fused but not in place: @u is read again after the GEMM, so the GEMM
// gets its own buffer, into which the accumulator is copied first.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[U:.+]] = merak.get_param @u
// CHECK-NEXT: merak.matmul_t %arg0, %arg1 acc %[[U]] :
// CHECK-NOT: merak.in_place
// EMIT-LABEL: emitc.func @merak_train_step
// EMIT: call_opaque "copyBytes"(%[[Y:[0-9]+]], %{{[a-z0-9]+}})
// EMIT-NEXT: call_opaque "matmul"(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %[[Y]]) {{.*}}#emitc.opaque<"DT::F32">, #emitc.opaque<"true">]}
merak.param @u : tensor<4x4xf32> = dense<0.0> : tensor<4x4xf32>
func.func @train_step(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %u = merak.get_param @u : tensor<4x4xf32>
  %r = merak.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %su = merak.add %u, %r : tensor<4x4xf32>, tensor<4x4xf32>
  merak.set_param @u, %su : tensor<4x4xf32>
  %u2 = merak.get_param @u : tensor<4x4xf32>
  return %u2 : tensor<4x4xf32>
}

// -----

// An embedding's gradient (the scatter-add gather_grad) added into its
// accumulator accumulates into it too, in place: only the rows the indices
// reach are touched (gatherGrad's `accumulate`), no table-sized buffer is
// cleared, and nothing is copied. A tied weight (@t: the embedding's
// scatter and the head's GEMM summed, then added into the accumulator):
// both accumulate, one after the other in program order, and the chain
// shares the accumulator's storage (the GEMM's accumulator is the
// scatter's in-place result).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.+]] = merak.get_param @e
// CHECK-NEXT: %[[S:.+]] = merak.gather_grad %arg0[%arg1] axis = 0 acc %[[E]] :
// CHECK: %[[T:.+]] = merak.get_param @t
// CHECK-NEXT: %[[TS:.+]] = merak.gather_grad %arg0[%arg1] axis = 0 acc %[[T]] :
// CHECK-NEXT: %[[TG:.+]] = merak.matmul_t %arg2, %arg3 acc %[[TS]] {transpose_lhs} :
// CHECK-NOT: merak.add
// CHECK: merak.set_param @e, %[[S]]
// CHECK-NEXT: merak.set_param @t, %[[TG]]
// EMIT-LABEL: emitc.func @merak_train_step
// EMIT-NOT: copyBytes
// EMIT: call_opaque "gatherGrad"({{.*}}#emitc.opaque<"true">]}
// EMIT-NOT: copyBytes
// EMIT: call_opaque "gatherGrad"({{.*}}#emitc.opaque<"true">]}
// EMIT: call_opaque "matmul"({{.*}}#emitc.opaque<"true">]}
// EMIT-NOT: copyBytes
// EMIT: return
merak.param @e : tensor<10x4xf32> = dense<0.0> : tensor<10x4xf32>
merak.param @t : tensor<10x4xf32> = dense<0.0> : tensor<10x4xf32>
func.func @train_step(%g: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>, %h: tensor<6x10xf32>,
                      %dy: tensor<6x4xf32>) {
  %s = merak.gather_grad %g[%ids] axis = 0 : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<10x4xf32>
  %e = merak.get_param @e : tensor<10x4xf32>
  %se = merak.add %e, %s : tensor<10x4xf32>, tensor<10x4xf32>
  %ts = merak.gather_grad %g[%ids] axis = 0 : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<10x4xf32>
  %tg = merak.matmul_t %h, %dy {transpose_lhs} : tensor<6x10xf32>, tensor<6x4xf32> -> tensor<10x4xf32>
  %sum = merak.add %ts, %tg : tensor<10x4xf32>, tensor<10x4xf32>
  %t = merak.get_param @t : tensor<10x4xf32>
  %st = merak.add %sum, %t : tensor<10x4xf32>, tensor<10x4xf32>
  merak.set_param @e, %se : tensor<10x4xf32>
  merak.set_param @t, %st : tensor<10x4xf32>
  return
}

// -----

// Left alone: a sum of two gradients of which only one has an accumulating
// form (the broadcast is none): fusing the scatter alone would leave an add
// reading it from a buffer of its own, not the accumulator's storage.
// CHECK-LABEL: func.func @train_step
// CHECK: merak.gather_grad %arg0[%arg1] axis = 0 :
// CHECK-NOT: acc
// CHECK: return
merak.param @r : tensor<10x4xf32> = dense<0.0> : tensor<10x4xf32>
func.func @train_step(%g: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>, %b: tensor<1x4xf32>) {
  %s = merak.gather_grad %g[%ids] axis = 0 : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<10x4xf32>
  %e = merak.broadcast %b : tensor<1x4xf32> to tensor<10x4xf32>
  %sum = merak.add %s, %e : tensor<10x4xf32>, tensor<10x4xf32>
  %r = merak.get_param @r : tensor<10x4xf32>
  %sr = merak.add %r, %sum : tensor<10x4xf32>, tensor<10x4xf32>
  merak.set_param @r, %sr : tensor<10x4xf32>
  return
}

// -----

// An expert weight's gradient (Mixture-of-Experts: the grouped GEMM over
// each expert's rows, with expert parallelism's `first`) added into its
// accumulator accumulates into it in place: each expert's GEMM with beta =
// 1 (expertMatmulGradWeight's `accumulate`), nothing cleared or copied.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W:.+]] = merak.get_param @w
// CHECK-NEXT: %[[G:.+]] = merak.expert_matmul_grad_weight %arg0, %arg1[%arg2 first %arg3 : tensor<i64>] acc %[[W]] transpose_weight :
// CHECK-NOT: merak.add
// CHECK: merak.set_param @w, %[[G]]
// EMIT-LABEL: emitc.func @merak_train_step
// EMIT-NOT: copyBytes
// EMIT: call_opaque "expertMatmulGradWeight"({{.*}}#emitc.opaque<"true">, {{[0-9]+}} : index, #emitc.opaque<"true">]}
// EMIT-NOT: copyBytes
// EMIT: return
merak.param @w : tensor<2x4x6xf32> = dense<0.0> : tensor<2x4x6xf32>
func.func @train_step(%x: tensor<8x4xf32>, %dy: tensor<8x6xf32>, %ids: tensor<8xi64>,
                      %first: tensor<i64>) {
  %dw = merak.expert_matmul_grad_weight %x, %dy[%ids first %first : tensor<i64>] transpose_weight : tensor<8x4xf32>, tensor<8x6xf32>, tensor<8xi64> -> tensor<2x4x6xf32>
  %w = merak.get_param @w : tensor<2x4x6xf32>
  %sw = merak.add %w, %dw : tensor<2x4x6xf32>, tensor<2x4x6xf32>
  merak.set_param @w, %sw : tensor<2x4x6xf32>
  return
}
