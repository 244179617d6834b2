// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=stage-aware memory-per-device=6100" | FileCheck %s --check-prefix=AWARE
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=selective" | FileCheck %s --check-prefix=SEL
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=full" | FileCheck %s --check-prefix=FULL
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=stage-aware memory-per-device=6100 schedule=gpipe" | FileCheck %s --check-prefix=GPIPE

// A small GPT: 4 attention blocks h = h + proj(attn(h)) (B 1, T 4, C 8,
// 2 heads; weights w_attn [24, 8] and w_proj [8, 8]: 256 floats, 1024 bytes
// a block), loss = mean(h). merak-pipeline puts one block on each of 4
// stages. Per stage, what the reverse sweep reads of the forward:
// q, k^T, v (the score and context matmuls' operands), the softmax output
// (its VJP and probs x V's) and y (the projection's input): 5 values of 32
// floats = 640 bytes, plus the stage input h (128 bytes; stage 0's input x
// is data, held for the step anyway, so 0).
//   none:      stage 0 640, stages 1-3 640 + 128 = 768 bytes/micro-batch
//   selective: the attention core (QK^T, scale, mask, softmax, probs x V)
//              is recomputed from q, k^T, v: q, k^T, v, y = 512 (+ 128)
//   full:      the stage input only: 0 (stage 0), 128
// Parameters, accumulators and AdamW's two moments: 4 x 1024 = 4096 bytes.
// 1F1B with m = 4 holds 4, 3, 2, 1 micro-batches on stages 0..3:
//   stage 0: none 4*640+4096 = 6656, selective 4*512+4096 = 6144, full 4096
//   stage 1: none 3*768+4096 = 6400, selective 3*640+4096 = 6016
//   stage 2: none 2*768+4096 = 5632; stage 3: none 768+4096 = 4864
// A budget of 6100 bytes: stage 0 full, stage 1 selective, 2 and 3 none.
// AWARE: memory_estimate = [4096, 6016, 5632, 4864]
// AWARE-SAME: recompute = ["full", "selective", "none", "none"]
// AWARE-SAME: stash_bytes = [0, 640, 768, 768]
//
// Stage 0 (full): the forward returns only its output, the backward
// recomputes everything (both batched matmuls and the softmax appear twice:
// forward copy and VJP).
// AWARE-LABEL: func.func @stage0_forward
// AWARE-SAME: -> (tensor<1x4x8xf32> {merak.name = "act:0"})
// AWARE-LABEL: func.func @stage0_backward
// AWARE-SAME: (%{{.*}}: tensor<1x4x8xf32> {merak.name = "x"}, %{{.*}}: tensor<1x4x8xf32> {merak.name = "cot:0"})
// AWARE: merak.matmul %arg0
// AWARE: merak.softmax
// AWARE-LABEL: func.func @stage0_grads
//
// Stage 1 (selective): q, k^T, v and y are stashed; the backward recomputes
// the score matmul, scale, mask and softmax from the stashed q and k^T (the
// visible clones), not the QKV projection; probs x V is dead (its output
// y0 is not read by the sweep: y is stashed) and erased.
// AWARE-LABEL: func.func @stage1_forward
// AWARE-SAME: -> (tensor<1x4x8xf32> {merak.name = "act:0"}, tensor<1x2x4x4xf32> {merak.name = "stash:0"}, tensor<1x2x4x4xf32> {merak.name = "stash:1"}, tensor<1x2x4x4xf32> {merak.name = "stash:2"}, tensor<1x4x8xf32> {merak.name = "stash:3"})
// AWARE-LABEL: func.func @stage1_backward
// AWARE-SAME: %[[Q:[a-z0-9]+]]: tensor<1x2x4x4xf32> {merak.name = "stash:0"}, %[[KT:[a-z0-9]+]]: tensor<1x2x4x4xf32> {merak.name = "stash:1"}, %{{.*}}: tensor<1x2x4x4xf32> {merak.name = "stash:2"}, %{{.*}}: tensor<1x4x8xf32> {merak.name = "stash:3"})
// AWARE-NOT: merak.split
// AWARE: %[[S:.*]] = merak.matmul %[[Q]], %[[KT]] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
// AWARE-NEXT: %[[M:.*]] = merak.mul %[[S]]
// AWARE-NEXT: %[[W:.*]] = merak.where %{{.*}}, %{{.*}}, %[[M]]
// AWARE-NEXT: merak.softmax %[[W]]
// AWARE-NOT: merak.split
// AWARE-LABEL: func.func @stage1_grads
//
// Stages 2 and 3 (none): every value the sweep reads is stashed, the
// backward starts with the sweep: no forward matmul or softmax is cloned.
// AWARE-LABEL: func.func @stage2_forward
// AWARE-SAME: {merak.name = "stash:4"})
// AWARE-LABEL: func.func @stage2_backward
// AWARE-NOT: merak.softmax %
// AWARE-LABEL: func.func @stage2_grads
// AWARE-LABEL: func.func @stage3_forward
// AWARE-SAME: -> (tensor<f32> {merak.name = "loss"}, {{.*}} {merak.name = "stash:4"})
// AWARE-LABEL: func.func @stage3_backward
// AWARE-NOT: merak.softmax %
// AWARE-LABEL: func.func @stage3_grads

// Selective everywhere: each backward recomputes the score matmul and the
// softmax and nothing before them.
// SEL: recompute = ["selective", "selective", "selective", "selective"]
// SEL-SAME: stash_bytes = [512, 640, 640, 640]
// SEL-LABEL: func.func @stage2_backward
// SEL-NOT: merak.split
// SEL: merak.matmul %arg{{[0-9]+}}, %arg{{[0-9]+}} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
// SEL: merak.softmax
// SEL-NOT: merak.split
// SEL-LABEL: func.func @stage2_grads

// None: no stage recomputes anything: each backward starts with the sweep
// (no split, no forward softmax; the softmax's VJP is merak.softmax_grad).
// NONE: recompute = ["none", "none", "none", "none"]
// NONE-SAME: stash_bytes = [640, 768, 768, 768]
// NONE-LABEL: func.func @stage0_backward
// NONE-NOT: merak.split
// NONE-NOT: merak.softmax %
// NONE-LABEL: func.func @stage0_grads
// NONE-LABEL: func.func @stage3_backward
// NONE-NOT: merak.split
// NONE-NOT: merak.softmax %
// NONE-LABEL: func.func @stage3_grads

// Full: merak-pipeline's program (stage inputs only).
// FULL: recompute = ["full", "full", "full", "full"]
// FULL-SAME: stash_bytes = [0, 128, 128, 128]
// FULL-NOT: stash:

// GPipe holds all 4 micro-batches on every stage: stage 0 full (4096),
// stages 1-3 need 4 * 128 + 4096 = 4608 with full recomputation, and
// 4 * 640 + 4096 = 6656 selective, so all full.
// GPIPE: memory_estimate = [4096, 4608, 4608, 4608]
// GPIPE-SAME: recompute = ["full", "full", "full", "full"]

merak.param @b0.w_attn : tensor<24x8xf32> = dense<0.01> : tensor<24x8xf32>
merak.param @b0.w_proj : tensor<8x8xf32> = dense<0.02> : tensor<8x8xf32>
merak.param @b1.w_attn : tensor<24x8xf32> = dense<0.02> : tensor<24x8xf32>
merak.param @b1.w_proj : tensor<8x8xf32> = dense<0.03> : tensor<8x8xf32>
merak.param @b2.w_attn : tensor<24x8xf32> = dense<0.03> : tensor<24x8xf32>
merak.param @b2.w_proj : tensor<8x8xf32> = dense<0.04> : tensor<8x8xf32>
merak.param @b3.w_attn : tensor<24x8xf32> = dense<0.04> : tensor<24x8xf32>
merak.param @b3.w_proj : tensor<8x8xf32> = dense<0.05> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32> {merak.name = "x"}) -> tensor<f32> {
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %scale = merak.constant dense<5.000000e-01> : tensor<f32>
  %cond = merak.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %b0_wa = merak.get_param @b0.w_attn : tensor<24x8xf32>
  %b0_wp = merak.get_param @b0.w_proj : tensor<8x8xf32>
  %b0_ta = merak.transpose %b0_wa perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %b0_qkv = merak.matmul %x, %b0_ta : tensor<1x4x8xf32>, tensor<8x24xf32> -> tensor<1x4x24xf32>
  %b0_s:3 = merak.split %b0_qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b0_q0 = merak.reshape %b0_s#0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b0_q = merak.transpose %b0_q0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b0_k0 = merak.reshape %b0_s#1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b0_kt = merak.transpose %b0_k0 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b0_v0 = merak.reshape %b0_s#2 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b0_v = merak.transpose %b0_v0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b0_att0 = merak.matmul %b0_q, %b0_kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b0_att1 = merak.mul %b0_att0, %scale : tensor<1x2x4x4xf32>, tensor<f32>
  %b0_att2 = merak.where %cond, %ninf, %b0_att1 : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %b0_att = merak.softmax %b0_att2 axis = 3 : tensor<1x2x4x4xf32>
  %b0_y0 = merak.matmul %b0_att, %b0_v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b0_y1 = merak.transpose %b0_y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %b0_y = merak.reshape %b0_y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %b0_tp = merak.transpose %b0_wp perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %b0_o = merak.matmul %b0_y, %b0_tp : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %b0_h = merak.add %x, %b0_o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b1_wa = merak.get_param @b1.w_attn : tensor<24x8xf32>
  %b1_wp = merak.get_param @b1.w_proj : tensor<8x8xf32>
  %b1_ta = merak.transpose %b1_wa perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %b1_qkv = merak.matmul %b0_h, %b1_ta : tensor<1x4x8xf32>, tensor<8x24xf32> -> tensor<1x4x24xf32>
  %b1_s:3 = merak.split %b1_qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b1_q0 = merak.reshape %b1_s#0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b1_q = merak.transpose %b1_q0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b1_k0 = merak.reshape %b1_s#1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b1_kt = merak.transpose %b1_k0 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b1_v0 = merak.reshape %b1_s#2 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b1_v = merak.transpose %b1_v0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b1_att0 = merak.matmul %b1_q, %b1_kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b1_att1 = merak.mul %b1_att0, %scale : tensor<1x2x4x4xf32>, tensor<f32>
  %b1_att2 = merak.where %cond, %ninf, %b1_att1 : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %b1_att = merak.softmax %b1_att2 axis = 3 : tensor<1x2x4x4xf32>
  %b1_y0 = merak.matmul %b1_att, %b1_v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b1_y1 = merak.transpose %b1_y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %b1_y = merak.reshape %b1_y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %b1_tp = merak.transpose %b1_wp perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %b1_o = merak.matmul %b1_y, %b1_tp : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %b1_h = merak.add %b0_h, %b1_o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b2_wa = merak.get_param @b2.w_attn : tensor<24x8xf32>
  %b2_wp = merak.get_param @b2.w_proj : tensor<8x8xf32>
  %b2_ta = merak.transpose %b2_wa perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %b2_qkv = merak.matmul %b1_h, %b2_ta : tensor<1x4x8xf32>, tensor<8x24xf32> -> tensor<1x4x24xf32>
  %b2_s:3 = merak.split %b2_qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b2_q0 = merak.reshape %b2_s#0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b2_q = merak.transpose %b2_q0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b2_k0 = merak.reshape %b2_s#1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b2_kt = merak.transpose %b2_k0 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b2_v0 = merak.reshape %b2_s#2 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b2_v = merak.transpose %b2_v0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b2_att0 = merak.matmul %b2_q, %b2_kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b2_att1 = merak.mul %b2_att0, %scale : tensor<1x2x4x4xf32>, tensor<f32>
  %b2_att2 = merak.where %cond, %ninf, %b2_att1 : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %b2_att = merak.softmax %b2_att2 axis = 3 : tensor<1x2x4x4xf32>
  %b2_y0 = merak.matmul %b2_att, %b2_v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b2_y1 = merak.transpose %b2_y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %b2_y = merak.reshape %b2_y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %b2_tp = merak.transpose %b2_wp perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %b2_o = merak.matmul %b2_y, %b2_tp : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %b2_h = merak.add %b1_h, %b2_o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b3_wa = merak.get_param @b3.w_attn : tensor<24x8xf32>
  %b3_wp = merak.get_param @b3.w_proj : tensor<8x8xf32>
  %b3_ta = merak.transpose %b3_wa perm = [1, 0] : tensor<24x8xf32> to tensor<8x24xf32>
  %b3_qkv = merak.matmul %b2_h, %b3_ta : tensor<1x4x8xf32>, tensor<8x24xf32> -> tensor<1x4x24xf32>
  %b3_s:3 = merak.split %b3_qkv axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %b3_q0 = merak.reshape %b3_s#0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b3_q = merak.transpose %b3_q0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b3_k0 = merak.reshape %b3_s#1 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b3_kt = merak.transpose %b3_k0 perm = [0, 2, 3, 1] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b3_v0 = merak.reshape %b3_s#2 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %b3_v = merak.transpose %b3_v0 perm = [0, 2, 1, 3] : tensor<1x4x2x4xf32> to tensor<1x2x4x4xf32>
  %b3_att0 = merak.matmul %b3_q, %b3_kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b3_att1 = merak.mul %b3_att0, %scale : tensor<1x2x4x4xf32>, tensor<f32>
  %b3_att2 = merak.where %cond, %ninf, %b3_att1 : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>
  %b3_att = merak.softmax %b3_att2 axis = 3 : tensor<1x2x4x4xf32>
  %b3_y0 = merak.matmul %b3_att, %b3_v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %b3_y1 = merak.transpose %b3_y0 perm = [0, 2, 1, 3] : tensor<1x2x4x4xf32> to tensor<1x4x2x4xf32>
  %b3_y = merak.reshape %b3_y1 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %b3_tp = merak.transpose %b3_wp perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %b3_o = merak.matmul %b3_y, %b3_tp : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %b3_h = merak.add %b2_h, %b3_o : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %l = merak.reduce_mean %b3_h axes = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
