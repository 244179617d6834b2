// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=full schedule=shifted-critical-path" | FileCheck %s --check-prefix=FULL
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=selective schedule=shifted-critical-path" | FileCheck %s --check-prefix=SEL
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=full" | FileCheck %s --check-prefix=ONEF
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=stage-aware memory-per-device=7000 schedule=shifted-critical-path" \
// RUN:   | FileCheck %s --check-prefix=AWARE
// RUN: merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=stage-aware memory-per-device=6100 schedule=shifted-critical-path" \
// RUN:   | FileCheck %s --check-prefix=FEWER
// RUN: not merak-opt %s -merak-attach-loss=loss=model-output -merak-pipeline="pp=4 microbatches=4" \
// RUN:   -merak-recompute="mode=stage-aware memory-per-device=5000 schedule=shifted-critical-path" \
// RUN:   2>&1 | FileCheck %s --check-prefix=TIGHT

// merak-recompute under the shifted-critical-path schedule, on the small
// GPT of merak-recompute.mlir (4 attention blocks, one a stage; see there):
// none stashes 640 bytes a micro-batch on stage 0 and 768 on stages 1-3,
// full 0 and 128; parameters, accumulators and AdamW state 4096 bytes.
//
// Memory: 1F1B holds 4, 3, 2, 1 micro-batches on stages 0..3. Under SCP
// stage s keeps its last min(m, p - s - 1) = 3, 2, 1, 0 forwards and the
// micro-batch recomputed ahead of its gradient holds everything too: at
// stage s's last forward all min(held, kept + 1) = 4, 3, 2, 1 held
// micro-batches hold none's stash:
//   stage 0: 4 x 640 + 4096 = 6656, stage 1: 3 x 768 + 4096 = 6400,
//   stage 2: 2 x 768 + 4096 = 5632, stage 3: 768 + 4096 = 4864
// i.e. the peak of no recomputation, whatever the mode (1F1B with full
// recomputation: 4096, 3 x 128 + 4096 = 4480, 4352, 4224).
// FULL: memory_estimate = [6656, 6400, 5632, 4864]
// SEL: memory_estimate = [6656, 6400, 5632, 4864]
// ONEF: memory_estimate = [4096, 4480, 4352, 4224]
//
// The last stage never recomputes (its backward follows its forward):
// mode none there, whatever the mode asked (the plan attribute
// prints memory_estimate before recompute).
// FULL: recompute = ["full", "full", "full", "none"]
// SEL: recompute = ["selective", "selective", "selective", "none"]
// ONEF: recompute = ["full", "full", "full", "full"]
//
// So stage-aware picks none wherever that peak fits (7000 bytes: all)...
// AWARE: memory_estimate = [6656, 6400, 5632, 4864]
// AWARE-SAME: recompute = ["none", "none", "none", "none"]
// AWARE-SAME: scp_kept = [3, 2, 1, 0]
// ...and where no mode fits with the paper's kept micro-batches, a stage
// keeps fewer (k kept: min(held, k + 1) micro-batches at none's stash, the
// rest at the mode's). 6100 bytes: stage 0 (held 4): none 6656; selective
// (512 a micro-batch) 6656, 6528, 6400, 6272 for k = 3..0; full (0) k = 3
// 6656, k = 2: 3 x 640 + 4096 = 6016, fits. Stage 1 (held 3): none 6400;
// selective (640) 6400, 6272, 6144; full (128) k = 2 6400, k = 1:
// 2 x 768 + 128 + 4096 = 5760. Stage 2: none 5632 fits with its 1 kept.
// FEWER: memory_estimate = [6016, 5760, 5632, 4864]
// FEWER-SAME: recompute = ["full", "full", "none", "none"], scp_kept = [2, 1, 1, 0]
// 5000 bytes: stage 0 fits full with none kept (640 + 4096 = 4736), stage 1
// not even so (768 + 2 x 128 + 4096 = 5120).
// TIGHT: error: merak-recompute: stage 1 needs 5120 bytes even with full recomputation (3 micro-batches in flight x 128 bytes of stage inputs, 1 of them holding all 768 bytes of activations under shifted-critical-path + 4096 bytes of parameters, gradients and optimizer state), more than memory-per-device = 5000 bytes

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
