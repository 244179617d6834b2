// RUN: merak-opt %s -split-input-file -verify-diagnostics

// Verifier errors of merak.reduce_scatter, merak.all_gather,
// merak.local_shard and of the ZeRO layout on merak.param.

func.func @bad_group(%a: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{group must be "dp", "tp", "pp", "ep" or "edp", got "world"}}
  %r = merak.reduce_scatter %a group = "world" reduction = "sum" : tensor<8xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @bad_reduction(%a: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{reduction must be "sum" or "mean", got "max"}}
  %r = merak.reduce_scatter %a group = "dp" reduction = "max" : tensor<8xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @not_a_multiple(%a: tensor<7xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{the leading dimension of the operand (7) is not a multiple of the result's (2)}}
  %r = merak.reduce_scatter %a group = "dp" reduction = "mean" : tensor<7xf32> -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @trailing(%a: tensor<4x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{the operand 'tensor<4x3xf32>' and the result 'tensor<2x2xf32>' must have the same rank (at least 1) and differ in the leading dimension only}}
  %r = merak.reduce_scatter %a group = "dp" reduction = "mean" : tensor<4x3xf32> -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

func.func @scalar(%a: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{must have the same rank (at least 1)}}
  %r = merak.local_shard %a group = "dp" : tensor<f32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @two_groups(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  // expected-error @+1 {{operands split into different numbers of parts (2 and 4); one op is one group}}
  %g:2 = merak.all_gather %a, %b group = "dp" : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>, tensor<8xf32>
  return %g#0, %g#1 : tensor<4xf32>, tensor<8xf32>
}

// -----

func.func @gather_shrinks(%a: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{the leading dimension of the result (4) is not a multiple of the operand's (8)}}
  %g = merak.all_gather %a group = "dp" : tensor<8xf32> -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

func.func @element_type(%a: tensor<8xf32>) -> tensor<4xf64> {
  // expected-error @+1 {{result element types must equal the operands'}}
  %r = merak.local_shard %a group = "dp" : tensor<8xf32> -> tensor<4xf64>
  return %r : tensor<4xf64>
}

// -----

// expected-error @+1 {{a ZeRO shard of 6 elements over 4 parts must have type 'tensor<2xf32>', got 'tensor<6xf32>'}}
merak.param @s : tensor<6xf32> = dense<0.0> : tensor<6xf32> {merak.zero = #merak.zero<parts = 4, shape = [2, 3]>}

// -----

// expected-error @+1 {{malformed merak.zero}}
merak.param @s : tensor<2xf32> = dense<0.0> : tensor<2xf32> {merak.zero = #merak.zero<parts = 0, shape = [2, 3]>}

// -----

// The layouts are typed attributes: a dictionary is not one.
// expected-error @+1 {{malformed merak.shard}}
merak.param @d : tensor<2xf32> = dense<0.0> : tensor<4xf32> {merak.shard = {axis = 0 : i64, blocks = 1 : i64, parts = 2 : i64}}

// -----

// expected-error @+1 {{malformed merak.zero}}
merak.param @d : tensor<2xf32> = dense<0.0> : tensor<2xf32> {merak.zero = {parts = 2 : i64, shape = array<i64: 4>}}

// -----

// ZeRO state of a tensor-parallel shard: merak.zero's shape is the local
// shard, so the shard axis must lie within it.
merak.param @ok : tensor<1xf32> = dense<0.0> : tensor<1xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>, merak.zero = #merak.zero<parts = 2, shape = [2]>}
// expected-error @+1 {{malformed merak.shard}}
merak.param @s : tensor<1xf32> = dense<0.0> : tensor<1xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>, merak.zero = #merak.zero<parts = 2, shape = [2]>}

// -----

func.func @all_to_all_rows(%x: tensor<16x8xf32>, %e: tensor<30xi64>) -> tensor<30x8xf32> {
  // expected-error @+1 {{the group's 30 rows are not a multiple of this rank's 16}}
  %y = merak.all_to_all %x routed %e group = "ep" experts_per_rank = 2 : tensor<16x8xf32>, tensor<30xi64> -> tensor<30x8xf32>
  return %y : tensor<30x8xf32>
}

// -----

func.func @all_to_all_ids(%x: tensor<32x8xf32>, %e: tensor<16xi64>) -> tensor<16x8xf32> {
  // expected-error @+1 {{the input must have one row per expert id (16), got 32}}
  %y = merak.all_to_all %x routed %e group = "ep" combine experts_per_rank = 2 : tensor<32x8xf32>, tensor<16xi64> -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

func.func @all_to_all_width(%x: tensor<16x8xf32>, %e: tensor<32xi64>) -> tensor<32x4xf32> {
  // expected-error @+1 {{input and result must have one element type and row width}}
  %y = merak.all_to_all %x routed %e group = "ep" experts_per_rank = 2 : tensor<16x8xf32>, tensor<32xi64> -> tensor<32x4xf32>
  return %y : tensor<32x4xf32>
}

// -----

func.func @expert_first_scalar(%x: tensor<4x3xf32>, %w: tensor<2x5x3xf32>, %e: tensor<4xi64>, %f: tensor<1xi64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{first must be a scalar tensor<i64>}}
  %y = merak.expert_matmul %x, %w[%e first %f : tensor<1xi64>] : tensor<4x3xf32>, tensor<2x5x3xf32>, tensor<4xi64> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

func.func @shadow_slots(%w: tensor<2x5x3xf32>, %s: tensor<2xi64>) -> tensor<1x5x3xf32> {
  // expected-error @+1 {{the result must have one matrix per slot (2), got 1}}
  %y = merak.expert_shadow %w, %s group = "ep" parts = 2 : tensor<2x5x3xf32>, tensor<2xi64> -> tensor<1x5x3xf32>
  return %y : tensor<1x5x3xf32>
}

// -----

func.func @shadow_matrix(%g: tensor<1x5x3xf32>, %s: tensor<1xi64>) -> tensor<2x3x5xf32> {
  // expected-error @+1 {{input and result must be expert matrices of one type and shape}}
  %y = merak.expert_shadow %g, %s group = "ep" reduce parts = 2 : tensor<1x5x3xf32>, tensor<1xi64> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

func.func @shadow_group(%w: tensor<2x5x3xf32>, %s: tensor<1xi64>) -> tensor<1x5x3xf32> {
  // expected-error @+1 {{group must be}}
  %y = merak.expert_shadow %w, %s group = "ring" parts = 2 : tensor<2x5x3xf32>, tensor<1xi64> -> tensor<1x5x3xf32>
  return %y : tensor<1x5x3xf32>
}

// -----

func.func @shadow_plan_parts(%e: tensor<30xi64>) -> tensor<1xi64> {
  // expected-error @+1 {{the group's 30 rows do not divide by 4 parts}}
  %r, %s = merak.expert_shadow_plan %e experts_per_rank = 2 parts = 4 min_rows = 3 : tensor<30xi64> -> tensor<30xi64>, tensor<1xi64>
  return %s : tensor<1xi64>
}

// -----

func.func @shadow_plan_routed(%e: tensor<32xi64>) -> tensor<1xi64> {
  // expected-error @+1 {{expects one expert id per row (rank 1) and routed ids of that type}}
  %r, %s = merak.expert_shadow_plan %e experts_per_rank = 2 parts = 4 min_rows = 3 : tensor<32xi64> -> tensor<16xi64>, tensor<1xi64>
  return %s : tensor<1xi64>
}

// -----

func.func @shadow_plan_rows(%e: tensor<32xi64>) -> tensor<1xi64> {
  // expected-error @+1 {{experts_per_rank, parts and min_rows must be at least 1}}
  %r, %s = merak.expert_shadow_plan %e experts_per_rank = 2 parts = 4 min_rows = 0 : tensor<32xi64> -> tensor<32xi64>, tensor<1xi64>
  return %s : tensor<1xi64>
}

// -----

func.func @all_to_all_shadow(%x: tensor<16x8xf32>, %e: tensor<32xi64>) -> tensor<32x8xf32> {
  // expected-error @+1 {{shadow_slots must not be negative}}
  %y = merak.all_to_all %x routed %e group = "ep" experts_per_rank = 2 shadow_slots = -1 : tensor<16x8xf32>, tensor<32xi64> -> tensor<32x8xf32>
  return %y : tensor<32x8xf32>
}

// -----

func.func @expert_shadow_without_first(%x: tensor<4x3xf32>, %w: tensor<2x5x3xf32>, %s: tensor<1x5x3xf32>, %e: tensor<4xi64>, %f: tensor<i64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{shadow copies need first and shadow_first}}
  %y = "merak.expert_matmul"(%x, %w, %e, %s, %f) {operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 1>} : (tensor<4x3xf32>, tensor<2x5x3xf32>, tensor<4xi64>, tensor<1x5x3xf32>, tensor<i64>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

func.func @expert_shadow_shape(%x: tensor<4x3xf32>, %w: tensor<2x5x3xf32>, %s: tensor<1x3x5xf32>, %e: tensor<4xi64>, %f: tensor<i64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{shadow 'tensor<1x3x5xf32>' must hold matrices of the weight's, 'tensor<2x5x3xf32>'}}
  %y = merak.expert_matmul %x, %w[%e first %f : tensor<i64>] shadow %s[first %f : tensor<i64>] : tensor<1x3x5xf32> : tensor<4x3xf32>, tensor<2x5x3xf32>, tensor<4xi64> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

func.func @place_table(%e: tensor<32xi64>, %t: tensor<4x1xi64>) -> tensor<32xi64> {
  // expected-error @+1 {{expects a placement of at least one expert (rank 1)}}
  %p = merak.expert_place %e, %t table = 0 weight_rows = 6 rebalance_every = 2 : tensor<32xi64>, tensor<4x1xi64> -> tensor<32xi64>
  return %p : tensor<32xi64>
}

// -----

func.func @place_attrs(%e: tensor<32xi64>, %t: tensor<4xi64>) -> tensor<32xi64> {
  // expected-error @+1 {{expects table >= 0, weight_rows >= 1 and rebalance_every >= 0}}
  %p = merak.expert_place %e, %t table = -1 weight_rows = 6 rebalance_every = 2 : tensor<32xi64>, tensor<4xi64> -> tensor<32xi64>
  return %p : tensor<32xi64>
}

// -----

func.func @place_result(%e: tensor<32xi64>, %t: tensor<4xi64>) -> tensor<16xi64> {
  // expected-error @+1 {{expects one expert id per row (rank 1) and a result of that type}}
  %p = merak.expert_place %e, %t table = 0 weight_rows = 6 rebalance_every = 2 : tensor<32xi64>, tensor<4xi64> -> tensor<16xi64>
  return %p : tensor<16xi64>
}

// -----

func.func @a2a_start_ids(%x: tensor<16x8xf32>, %e: tensor<16xi64>) -> tensor<32x8xf32> {
  // expected-error @+1 {{the 16 routing ids do not match the dispatch's 16 rows over 2 parts}}
  %r = merak.all_to_all_start %x routed %e group = "ep" experts_per_rank = 2 parts = 2 : tensor<16x8xf32>, tensor<16xi64>
  %y = merak.wait %r : tensor<32x8xf32>
  return %y : tensor<32x8xf32>
}

// -----

func.func @a2a_start_wait(%x: tensor<16x8xf32>, %e: tensor<32xi64>) -> tensor<16x8xf32> {
  %r = merak.all_to_all_start %x routed %e group = "ep" experts_per_rank = 2 parts = 2 : tensor<16x8xf32>, tensor<32xi64>
  // expected-error @+1 {{result 0 has type 'tensor<16x8xf32>', but the collective yields 'tensor<32x8xf32>'}}
  %y = merak.wait %r : tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

func.func @capacity_probs_per_row(%e: tensor<8xi64>, %p: tensor<4xf32>) -> tensor<8xi64> {
  // expected-error @+1 {{expects one probability per row}}
  %k = merak.expert_capacity %e, %p experts = 2 capacity = 4 policy = "probs" : tensor<8xi64>, tensor<4xf32> -> tensor<8xi64>
  return %k : tensor<8xi64>
}

// -----

func.func @capacity_policy(%e: tensor<8xi64>, %p: tensor<8xf32>) -> tensor<8xi64> {
  // expected-error @+1 {{policy must be "probs" or "position", got "random"}}
  %k = merak.expert_capacity %e, %p experts = 2 capacity = 4 policy = "random" : tensor<8xi64>, tensor<8xf32> -> tensor<8xi64>
  return %k : tensor<8xi64>
}

// -----

func.func @capacity_zero(%e: tensor<8xi64>, %p: tensor<8xf32>) -> tensor<8xi64> {
  // expected-error @+1 {{expects experts >= 1 and capacity >= 1}}
  %k = merak.expert_capacity %e, %p experts = 2 capacity = 0 policy = "probs" : tensor<8xi64>, tensor<8xf32> -> tensor<8xi64>
  return %k : tensor<8xi64>
}

// -----

func.func @all_to_all_compact_rows(%x: tensor<16x8xf32>, %e: tensor<32xi64>) -> tensor<12x8xf32> {
  // expected-error @+1 {{the result must have the 10 compact rows, got 12}}
  %y = merak.all_to_all %x routed %e group = "ep" experts_per_rank = 2 compact = 10 : tensor<16x8xf32>, tensor<32xi64> -> tensor<12x8xf32>
  return %y : tensor<12x8xf32>
}

// -----

func.func @all_to_all_compact_shadow(%x: tensor<16x8xf32>, %e: tensor<32xi64>) -> tensor<12x8xf32> {
  // expected-error @+1 {{compact rows and shadow slots do not combine}}
  %y = merak.all_to_all %x routed %e group = "ep" experts_per_rank = 2 shadow_slots = 1 compact = 12 : tensor<16x8xf32>, tensor<32xi64> -> tensor<12x8xf32>
  return %y : tensor<12x8xf32>
}

// -----

func.func @compact_more_rows(%e: tensor<32xi64>, %f: tensor<i64>) -> tensor<40xi64> {
  // expected-error @+1 {{the 40 compact rows exceed the group's 32}}
  %c = merak.expert_compact %e, %f experts_per_rank = 2 : tensor<32xi64>, tensor<i64> -> tensor<40xi64>
  return %c : tensor<40xi64>
}

// -----

// Ragged blocks (a fused GQA projection's q, k, v): one length per block,
// each divisible by the parts, together the full dimension.
merak.param @qkv : tensor<8x8xf32> = dense<0.0> : tensor<16x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 4, 4]>}
// expected-error @+1 {{shard block sizes [8, 4, 2] must be 3 lengths, each divisible by 2, summing to 16 (the full shard dimension 0)}}
merak.param @short : tensor<8x8xf32> = dense<0.0> : tensor<16x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 4, 2]>}

// -----

// expected-error @+1 {{shard block sizes [8, 3, 5] must be 3 lengths, each divisible by 2}}
merak.param @odd : tensor<8x8xf32> = dense<0.0> : tensor<16x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 3, 5]>}

// -----

// expected-error @+1 {{shard block sizes [8, 8] must be 3 lengths}}
merak.param @count : tensor<8x8xf32> = dense<0.0> : tensor<16x8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 3, parts = 2, block_sizes = [8, 8]>}
