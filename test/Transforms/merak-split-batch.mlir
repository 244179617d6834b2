// RUN: merak-opt %s -split-input-file -merak-split-batch=parts=2 | FileCheck %s

// A static-batch export (batch 4, sequence 3, width 8, 2 heads): the token
// ids split, the batch followed through the lookup, the head reshapes and
// transposes, a flattening of batch and sequence into rows and back, and
// the Reshape targets that spelled 4 now spell 2. A causal mask built
// for the whole batch (equal in every part) keeps part 0; position ids
// broadcast to [4, 3] are broadcast to [2, 3]; the mean stays a scalar
// (each part's mean, as DDP computes one replica's loss).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:[a-z0-9]+]]: tensor<2x3xi64> {merak.name = "input_ids"}) -> (tensor<2x3x8xf32>, tensor<f32>)
// CHECK: %[[POS:.*]] = merak.constant dense<{{\[\[}}0, 1, 2{{\]\]}}> : tensor<1x3xi64>
// CHECK: merak.broadcast %[[POS]] : tensor<1x3xi64> to tensor<2x3xi64>
// CHECK: merak.gather %{{.*}}[%[[IDS]]] axis = 0 : tensor<16x8xf32>, tensor<2x3xi64> -> tensor<2x3x8xf32>
// CHECK: merak.reshape %{{.*}} : tensor<2x3x8xf32> to tensor<2x3x2x4xf32>
// CHECK: merak.transpose %{{.*}} perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> to tensor<2x2x3x4xf32>
// CHECK: merak.constant dense<{{.*}}> : tensor<2x1x3x3xf32>
// CHECK: merak.add %{{.*}}, %{{.*}} : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>
// CHECK: merak.softmax %{{.*}} axis = 3 : tensor<2x2x3x3xf32>
// CHECK: merak.reshape %{{.*}} : tensor<2x3x8xf32> to tensor<6x8xf32>
// CHECK: merak.matmul %{{.*}}, %{{.*}} : tensor<6x8xf32>, tensor<8x8xf32> -> tensor<6x8xf32>
// CHECK: merak.reshape %{{.*}} : tensor<6x8xf32> to tensor<2x3x8xf32>
// CHECK: merak.reduce_mean %{{.*}} axes = [0, 1, 2] : tensor<2x3x8xf32> -> tensor<f32>
merak.param @wte : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
merak.param @wpe : tensor<3x8xf32> = dense<0.25> : tensor<3x8xf32>
merak.param @w : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
func.func @forward(%ids: tensor<4x3xi64> {merak.name = "input_ids"}) -> (tensor<4x3x8xf32>, tensor<f32>) {
  %pos0 = merak.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  %pos = merak.broadcast %pos0 : tensor<1x3xi64> to tensor<4x3xi64>
  %wte = merak.get_param @wte : tensor<16x8xf32>
  %wpe = merak.get_param @wpe : tensor<3x8xf32>
  %tok = merak.gather %wte[%ids] axis = 0 : tensor<16x8xf32>, tensor<4x3xi64> -> tensor<4x3x8xf32>
  %p = merak.gather %wpe[%pos] axis = 0 : tensor<3x8xf32>, tensor<4x3xi64> -> tensor<4x3x8xf32>
  %x = merak.add %tok, %p : tensor<4x3x8xf32>, tensor<4x3x8xf32>
  %h = merak.reshape %x : tensor<4x3x8xf32> to tensor<4x3x2x4xf32>
  %q = merak.transpose %h perm = [0, 2, 1, 3] : tensor<4x3x2x4xf32> to tensor<4x2x3x4xf32>
  %k = merak.transpose %h perm = [0, 2, 3, 1] : tensor<4x3x2x4xf32> to tensor<4x2x4x3xf32>
  %s = merak.matmul %q, %k : tensor<4x2x3x4xf32>, tensor<4x2x4x3xf32> -> tensor<4x2x3x3xf32>
  %mask = merak.constant dense<[[[[0.0, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0]]], [[[0.0, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0]]], [[[0.0, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0]]], [[[0.0, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0]]]]> : tensor<4x1x3x3xf32>
  %m = merak.add %s, %mask : tensor<4x2x3x3xf32>, tensor<4x1x3x3xf32>
  %a = merak.softmax %m axis = 3 : tensor<4x2x3x3xf32>
  %rows = merak.reshape %x : tensor<4x3x8xf32> to tensor<12x8xf32>
  %w = merak.get_param @w : tensor<8x8xf32>
  %y = merak.matmul %rows, %w : tensor<12x8xf32>, tensor<8x8xf32> -> tensor<12x8xf32>
  %out = merak.reshape %y : tensor<12x8xf32> to tensor<4x3x8xf32>
  %mean = merak.reduce_mean %out axes = [0, 1, 2] : tensor<4x3x8xf32> -> tensor<f32>
  return %out, %mean : tensor<4x3x8xf32>, tensor<f32>
}

// -----

// Sequence-major attention as nn.MultiheadAttention exports it: [T, B, C]
// with the heads folded into the batch ([T, B*H, D]: the batch is the major
// factor of dimension 1) and the rows flattened sequence-major ([T*B, C]:
// the batch is split in each of T blocks). An attention mask input that
// meets the batch is split too.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.*}}: tensor<2x3xi64> {merak.name = "ids"}, %{{.*}}: tensor<2x3xf32> {merak.name = "mask"}) -> tensor<3x2x8xf32>
// CHECK: merak.reshape %{{.*}} : tensor<3x2x8xf32> to tensor<3x4x4xf32>
// CHECK: merak.reshape %{{.*}} : tensor<3x4x4xf32> to tensor<6x8xf32>
// CHECK: merak.reshape %{{.*}} : tensor<6x8xf32> to tensor<3x2x8xf32>
// CHECK: merak.transpose %{{.*}} perm = [1, 0] : tensor<2x3xf32> to tensor<3x2xf32>
merak.param @wte : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
func.func @forward(%ids: tensor<4x3xi64> {merak.name = "ids"}, %mask: tensor<4x3xf32> {merak.name = "mask"}) -> tensor<3x4x8xf32> {
  %wte = merak.get_param @wte : tensor<16x8xf32>
  %t = merak.transpose %ids perm = [1, 0] : tensor<4x3xi64> to tensor<3x4xi64>
  %x = merak.gather %wte[%t] axis = 0 : tensor<16x8xf32>, tensor<3x4xi64> -> tensor<3x4x8xf32>
  %h = merak.reshape %x : tensor<3x4x8xf32> to tensor<3x8x4xf32>
  %r = merak.reshape %h : tensor<3x8x4xf32> to tensor<12x8xf32>
  %y = merak.reshape %r : tensor<12x8xf32> to tensor<3x4x8xf32>
  %mt = merak.transpose %mask perm = [1, 0] : tensor<4x3xf32> to tensor<3x4xf32>
  %m = merak.reshape %mt : tensor<3x4xf32> to tensor<3x4x1xf32>
  %z = merak.mul %y, %m : tensor<3x4x8xf32>, tensor<3x4x1xf32>
  return %z : tensor<3x4x8xf32>
}

// -----

// A CNN without token ids: the images split; convolution, batch
// normalisation (each part's statistics, as DDP without SyncBatchNorm) and
// pooling follow the batch.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.*}}: tensor<2x1x4x4xf32> {merak.name = "image"}) -> tensor<2x2x2x2xf32>
// CHECK: merak.conv2d {{.*}} -> tensor<2x2x4x4xf32>
// CHECK: merak.batch_norm {{.*}} -> tensor<2x2x4x4xf32>
// CHECK: merak.max_pool2d {{.*}} : tensor<2x2x4x4xf32> -> tensor<2x2x2x2xf32>
merak.param @k : tensor<2x1x3x3xf32> = dense<0.5> : tensor<2x1x3x3xf32>
merak.param @c : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @forward(%x: tensor<4x1x4x4xf32> {merak.name = "image"}) -> tensor<4x2x2x2xf32> {
  %k = merak.get_param @k : tensor<2x1x3x3xf32>
  %c = merak.get_param @c : tensor<2xf32>
  %y = merak.conv2d %x, %k bias %c strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<4x1x4x4xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<4x2x4x4xf32>
  %n = merak.batch_norm %y, %c, %c, %c, %c epsilon = 1.0e-5 {training} : (tensor<4x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2x4x4xf32>
  %p = merak.max_pool2d %n kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<4x2x4x4xf32> -> tensor<4x2x2x2xf32>
  return %p : tensor<4x2x2x2xf32>
}

// -----

// A dense MoE gate: the renormalised top-2 router probabilities scattered
// into [rows, experts] (ScatterElements, imported as gather_elements_grad)
// and the experts' outputs weighted by it: the rows follow the batch.
// CHECK-LABEL: func.func @forward
// CHECK: merak.gather_elements_grad %{{.*}}[%{{.*}}] axis = 1 : tensor<6x2xf32>, tensor<6x2xi64> -> tensor<6x4xf32>
// CHECK: merak.mul %{{.*}}, %{{.*}} : tensor<6x4xf32>, tensor<6x4xf32>
func.func @forward(%x: tensor<4x3x4xf32> {merak.name = "scores"}, %i: tensor<4x3x2xi64> {merak.name = "choice"}) -> tensor<12x4xf32> {
  %s = merak.reshape %x : tensor<4x3x4xf32> to tensor<12x4xf32>
  %p = merak.softmax %s axis = 1 : tensor<12x4xf32>
  %idx = merak.reshape %i : tensor<4x3x2xi64> to tensor<12x2xi64>
  %top = merak.gather_elements %p[%idx] axis = 1 : tensor<12x4xf32>, tensor<12x2xi64> -> tensor<12x2xf32>
  %gate = merak.gather_elements_grad %top[%idx] axis = 1 : tensor<12x2xf32>, tensor<12x2xi64> -> tensor<12x4xf32>
  %y = merak.mul %gate, %p : tensor<12x4xf32>, tensor<12x4xf32>
  return %y : tensor<12x4xf32>
}

// -----

// One whole-batch value (zeros broadcast to [4, 8]) read by two ops of the
// batch: both reads take the local copy, and the whole-batch broadcast,
// listed twice, goes once (it was erased twice: a recurrent net's initial
// state met both the first step and the masked output).
// CHECK: func.func @forward(%[[X:.*]]: tensor<2x8xf32> {merak.name = "shared"})
// CHECK: %[[Z:.*]] = merak.broadcast %{{.*}} : tensor<f32> to tensor<2x8xf32>
// CHECK-NOT: tensor<4x8xf32>
// CHECK: merak.add %[[X]], %[[Z]] : tensor<2x8xf32>, tensor<2x8xf32>
// CHECK: merak.mul %{{.*}}, %[[Z]] : tensor<2x8xf32>, tensor<2x8xf32>
func.func @forward(%x: tensor<4x8xf32> {merak.name = "shared"}) -> tensor<4x8xf32> {
  %zero = merak.constant dense<0.0> : tensor<f32>
  %z = merak.broadcast %zero : tensor<f32> to tensor<4x8xf32>
  %a = merak.add %x, %z : tensor<4x8xf32>, tensor<4x8xf32>
  %m = merak.mul %a, %z : tensor<4x8xf32>, tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}

// -----

// Dropout records where its local elements lie in the whole tensor
// (batch_split = [dim, blocks, parts]), so each part draws its own rows of
// the serial mask: the batch in dimension 0, in dimension 1 after a
// transpose, and a whole-batch value's local copy (which also gets one:
// its parts' masks differ though its values do not).
// CHECK: func.func @forward(%{{.*}}: tensor<2x3xf32> {merak.name = "x"})
// CHECK: merak.dropout %{{.*}} seed = 1 {batch_split = array<i64: 0, 1, 2>} : tensor<2x3xf32>
// CHECK: merak.dropout %{{.*}} seed = 2 {batch_split = array<i64: 1, 1, 2>} : tensor<3x2xf32>
// CHECK-NOT: tensor<4x3xf32>
// CHECK: merak.dropout %{{.*}} seed = 3 {batch_split = array<i64: 0, 1, 2>} : tensor<2x3xf32>
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"})
    -> (tensor<4x3xf32>, tensor<3x4xf32>, tensor<4x3xf32>) {
  %y, %m = merak.dropout %x ratio = 0.5 seed = 1 : tensor<4x3xf32> -> tensor<4x3xf32>, tensor<4x3xi1>
  %t = merak.transpose %x perm = [1, 0] : tensor<4x3xf32> to tensor<3x4xf32>
  %ty, %tm = merak.dropout %t ratio = 0.5 seed = 2 : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<3x4xi1>
  %one = merak.constant dense<1.0> : tensor<f32>
  %z = merak.broadcast %one : tensor<f32> to tensor<4x3xf32>
  %zy, %zm = merak.dropout %z ratio = 0.5 seed = 3 : tensor<4x3xf32> -> tensor<4x3xf32>, tensor<4x3xi1>
  %s = merak.add %x, %zy : tensor<4x3xf32>, tensor<4x3xf32>
  return %y, %ty, %s : tensor<4x3xf32>, tensor<3x4xf32>, tensor<4x3xf32>
}

// -----

// BART's decoder ids shifted right as dynamo exports them (`x[:, 1:] = y`
// on the ids transposed to [T, B]) and the importer lowers that ScatterND:
// a gather of whole rows (the batch last) and a select against a row map.
// The batch stays in the last dimension throughout.
// CHECK: func.func @forward(%{{.*}}: tensor<2x16xi64> {merak.name = "input_ids"}) -> tensor<2x16xi64>
// CHECK: merak.gather %{{.*}}[%{{.*}}] axis = 1 : tensor<1x15x2xi64>, tensor<16xi64> -> tensor<1x16x2xi64>
// CHECK: merak.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x1xi1>, tensor<1x16x2xi64>, tensor<1x16x2xi64>
// CHECK: merak.transpose %{{.*}} perm = [1, 0] : tensor<16x2xi64> to tensor<2x16xi64>
func.func @forward(%ids: tensor<4x16xi64> {merak.name = "input_ids"}) -> tensor<4x16xi64> {
  %s = merak.slice %ids starts = [0, 0] limits = [4, 15] strides = [1, 1] : tensor<4x16xi64> to tensor<4x15xi64>
  %t = merak.transpose %s perm = [1, 0] : tensor<4x15xi64> to tensor<15x4xi64>
  %u = merak.reshape %t : tensor<15x4xi64> to tensor<1x15x4xi64>
  %src = merak.constant dense<[0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]> : tensor<16xi64>
  %g = merak.gather %u[%src] axis = 1 : tensor<1x15x4xi64>, tensor<16xi64> -> tensor<1x16x4xi64>
  %set = merak.constant dense<[[false], [true], [true], [true], [true], [true], [true], [true], [true], [true], [true], [true], [true], [true], [true], [true]]> : tensor<16x1xi1>
  %start = merak.constant dense<2> : tensor<1x16x4xi64>
  %w = merak.where %set, %g, %start : tensor<16x1xi1>, tensor<1x16x4xi64>, tensor<1x16x4xi64>
  %r = merak.reshape %w : tensor<1x16x4xi64> to tensor<16x4xi64>
  %o = merak.transpose %r perm = [1, 0] : tensor<16x4xi64> to tensor<4x16xi64>
  return %o : tensor<4x16xi64>
}

// -----

// Funnel Transformer's relative shift reads [B, H, 31, 16] as
// [B, H, 16, 31]: the last two dimensions have no common refinement, but
// the batch and heads before them stay whole factors, so the batch splits.
// CHECK: func.func @forward(%{{.*}}: tensor<2x2x31x16xf32> {merak.name = "x"}) -> tensor<2x2x16x31xf32>
// CHECK: merak.reshape %{{.*}} : tensor<2x2x31x16xf32> to tensor<2x2x16x31xf32>
func.func @forward(%x: tensor<4x2x31x16xf32> {merak.name = "x"}) -> tensor<4x2x16x31xf32> {
  %y = merak.reshape %x : tensor<4x2x31x16xf32> to tensor<4x2x16x31xf32>
  return %y : tensor<4x2x16x31xf32>
}

// -----

// Rows sorted across the batch and back (a Mixture-of-Experts dispatch that
// orders its (token, choice) rows by expert, JetMoE's): the argsort of the
// rows' experts holds positions along the batch, and so do its quotient
// (the token of a row, 2 choices per token) and the importer's check of it
// against the axis; each part sorts its own rows, gathers them at its own
// positions and scatter-adds them back to its own tokens. The per-token
// result is the same.
// CHECK: func.func @forward(%[[X:.*]]: tensor<2x3xf32> {merak.name = "x"}) -> tensor<2x3xf32>
// CHECK: %[[C:.*]] = merak.argsort %{{.*}} axis = 1 {descending} : tensor<2x2xf32> -> tensor<2x2xi64>
// CHECK: %[[K:.*]] = merak.reshape %[[C]] : tensor<2x2xi64> to tensor<4xi64>
// CHECK: %[[P:.*]] = merak.argsort %[[K]] axis = 0 : tensor<4xi64> -> tensor<4xi64>
// CHECK: %[[T:.*]] = merak.div %[[P]], %{{.*}} : tensor<4xi64>, tensor<i64>
// CHECK: %[[I:.*]] = merak.where %{{.*}}, %[[T]], %{{.*}} : tensor<4xi1>, tensor<4xi64>, tensor<i64>
// CHECK: %[[R:.*]] = merak.gather %[[X]][%[[I]]] axis = 0 : tensor<2x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
// CHECK: %[[Y:.*]] = merak.mul %[[R]], %[[R]] : tensor<4x3xf32>, tensor<4x3xf32>
// CHECK: merak.gather_grad %[[Y]][%[[T]]] axis = 0 : tensor<4x3xf32>, tensor<4xi64> -> tensor<2x3xf32>
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<4x3xf32> {
  %w = merak.constant dense<[[1.0, -1.0], [0.5, 2.0], [-1.0, 0.25]]> : tensor<3x2xf32>
  %logits = merak.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %choices = merak.argsort %logits axis = 1 {descending} : tensor<4x2xf32> -> tensor<4x2xi64>
  %k = merak.reshape %choices : tensor<4x2xi64> to tensor<8xi64>
  %p = merak.argsort %k axis = 0 : tensor<8xi64> -> tensor<8xi64>
  %two = merak.constant dense<2> : tensor<i64>
  %t = merak.div %p, %two : tensor<8xi64>, tensor<i64>
  %size = merak.constant dense<4> : tensor<i64>
  %in = merak.lt %t, %size : tensor<8xi64>, tensor<i64>
  %i = merak.where %in, %t, %size : tensor<8xi1>, tensor<8xi64>, tensor<i64>
  %r = merak.gather %x[%i] axis = 0 : tensor<4x3xf32>, tensor<8xi64> -> tensor<8x3xf32>
  %y = merak.mul %r, %r : tensor<8x3xf32>, tensor<8x3xf32>
  %back = merak.gather_grad %y[%t] axis = 0 : tensor<8x3xf32>, tensor<8xi64> -> tensor<4x3xf32>
  return %back : tensor<4x3xf32>
}
