// RUN: merak-opt %s -canonicalize -split-input-file | FileCheck %s

// Structural folds of merak ops (MerakFolds.cpp).

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.*]] = merak.reshape %[[X]] : tensor<2x3x4xf32> to tensor<4x6xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %0 = merak.reshape %x : tensor<2x3x4xf32> to tensor<24xf32>
  %1 = merak.reshape %0 : tensor<24xf32> to tensor<4x6xf32>
  return %1 : tensor<4x6xf32>
}

// -----

// A chain that comes back to the input's shape disappears.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xi64>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_round_trip(%x: tensor<2x3xi64>) -> tensor<2x3xi64> {
  %0 = merak.reshape %x : tensor<2x3xi64> to tensor<6xi64>
  %1 = merak.reshape %0 : tensor<6xi64> to tensor<3x2xi64>
  %2 = merak.reshape %1 : tensor<3x2xi64> to tensor<2x3xi64>
  return %2 : tensor<2x3xi64>
}

// -----

// The inner reshape stays when something else reads it.
// CHECK-LABEL: func.func @reshape_of_reshape_shared
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-DAG: %[[A:.*]] = merak.reshape %[[X]] : tensor<2x3xf32> to tensor<6xf32>
// CHECK-DAG: %[[B:.*]] = merak.reshape %[[X]] : tensor<2x3xf32> to tensor<3x2xf32>
// CHECK: return %[[A]], %[[B]]
func.func @reshape_of_reshape_shared(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x2xf32>) {
  %0 = merak.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %1 = merak.reshape %0 : tensor<6xf32> to tensor<3x2xf32>
  return %0, %1 : tensor<6xf32>, tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @identity_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_reshape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = merak.reshape %x : tensor<2x3xf32> to tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @identity_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<1x3xf16>)
// CHECK-NEXT: return %[[X]]
func.func @identity_broadcast(%x: tensor<1x3xf16>) -> tensor<1x3xf16> {
  %0 = merak.broadcast %x : tensor<1x3xf16> to tensor<1x3xf16>
  return %0 : tensor<1x3xf16>
}

// -----

// CHECK-LABEL: func.func @identity_cast
// CHECK-SAME: (%[[X:.*]]: tensor<4xi32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_cast(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = merak.cast %x : tensor<4xi32> to tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Narrowing an exactly widened value gives it back (bf16 -> f32 -> bf16,
// f32 -> f64 -> f32); the reverse order rounds, and bf16 -> f16 is not a
// widening (f16 has fewer exponent bits): both stay.
// CHECK-LABEL: func.func @cast_of_widening
// CHECK-SAME: (%[[H:.*]]: tensor<4xbf16>, %[[F:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[A:.*]] = merak.cast %[[F]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: %[[B:.*]] = merak.cast %[[A]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[C:.*]] = merak.cast %[[H]] : tensor<4xbf16> to tensor<4xf16>
// CHECK-NEXT: %[[D:.*]] = merak.cast %[[C]] : tensor<4xf16> to tensor<4xbf16>
// CHECK-NEXT: return %[[H]], %[[F]], %[[B]], %[[D]]
func.func @cast_of_widening(%h: tensor<4xbf16>, %f: tensor<4xf32>)
    -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>) {
  %0 = merak.cast %h : tensor<4xbf16> to tensor<4xf32>
  %1 = merak.cast %0 : tensor<4xf32> to tensor<4xbf16>
  %2 = merak.cast %f : tensor<4xf32> to tensor<4xf64>
  %3 = merak.cast %2 : tensor<4xf64> to tensor<4xf32>
  %4 = merak.cast %f : tensor<4xf32> to tensor<4xbf16>
  %5 = merak.cast %4 : tensor<4xbf16> to tensor<4xf32>
  %6 = merak.cast %h : tensor<4xbf16> to tensor<4xf16>
  %7 = merak.cast %6 : tensor<4xf16> to tensor<4xbf16>
  return %1, %3, %5, %7 : tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>
}

// -----

// CHECK-LABEL: func.func @identity_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_transpose(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = merak.transpose %x perm = [0, 1, 2] : tensor<2x3x4xf32> to tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// Same input and result type is not enough: this transpose moves data.
// CHECK-LABEL: func.func @transpose_equal_dims_kept
// CHECK: merak.transpose %{{.*}} perm = [1, 0]
func.func @transpose_equal_dims_kept(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = merak.transpose %x perm = [1, 0] : tensor<3x3xf32> to tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// CHECK-LABEL: func.func @identity_slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_slice(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = merak.slice %x starts = [0, 0] limits = [4, 6] strides = [1, 1] : tensor<4x6xf32> to tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// A full reversal keeps the type but is not the identity.
// CHECK-LABEL: func.func @reverse_slice_kept
// CHECK: merak.slice %{{.*}} starts = [3] limits = [-1] strides = [-1]
func.func @reverse_slice_kept(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = merak.slice %x starts = [3] limits = [-1] strides = [-1] : tensor<4xf32> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @concat_of_one
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xi1>)
// CHECK-NEXT: return %[[X]]
func.func @concat_of_one(%x: tensor<2x3xi1>) -> tensor<2x3xi1> {
  %0 = merak.concat %x axis = 1 : tensor<2x3xi1> -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

// transpose(transpose(x, [1, 0, 2]), [0, 2, 1]) == transpose(x, [1, 2, 0]).
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = merak.transpose %[[X]] perm = [1, 2, 0] : tensor<2x3x4xf32> to tensor<3x4x2xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = merak.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf32> to tensor<3x2x4xf32>
  %1 = merak.transpose %0 perm = [0, 2, 1] : tensor<3x2x4xf32> to tensor<3x4x2xf32>
  return %1 : tensor<3x4x2xf32>
}

// -----

// Composition order matters: with p1 = [2, 0, 1, 3], p2 = [1, 3, 0, 2] the
// composed perm is p1[p2[i]] = [0, 3, 2, 1] (not p2[p1[i]] = [0, 1, 3, 2]).
// CHECK-LABEL: func.func @transpose_composition_order
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x5xf32>)
// CHECK-NEXT: %[[T:.*]] = merak.transpose %[[X]] perm = [0, 3, 2, 1] : tensor<2x3x4x5xf32> to tensor<2x5x4x3xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_composition_order(%x: tensor<2x3x4x5xf32>) -> tensor<2x5x4x3xf32> {
  %0 = merak.transpose %x perm = [2, 0, 1, 3] : tensor<2x3x4x5xf32> to tensor<4x2x3x5xf32>
  %1 = merak.transpose %0 perm = [1, 3, 0, 2] : tensor<4x2x3x5xf32> to tensor<2x5x4x3xf32>
  return %1 : tensor<2x5x4x3xf32>
}

// -----

// A transpose followed by its inverse cancels.
// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_inverse(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = merak.transpose %x perm = [1, 2, 0] : tensor<2x3x4xf32> to tensor<3x4x2xf32>
  %1 = merak.transpose %0 perm = [2, 0, 1] : tensor<3x4x2xf32> to tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @splat_broadcast
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<2.500000e+00> : tensor<2x3xf32>
// CHECK-NEXT: return %[[C]]
func.func @splat_broadcast() -> tensor<2x3xf32> {
  %c = merak.constant dense<2.5> : tensor<3xf32>
  %0 = merak.broadcast %c : tensor<3xf32> to tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Only splats are broadcast by the folder; other constants are left to
// merak-fold-constants.
// CHECK-LABEL: func.func @dense_broadcast_kept
// CHECK: %[[C:.*]] = merak.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK: merak.broadcast %[[C]] : tensor<3xi64> to tensor<2x3xi64>
func.func @dense_broadcast_kept() -> tensor<2x3xi64> {
  %c = merak.constant dense<[1, 2, 3]> : tensor<3xi64>
  %0 = merak.broadcast %c : tensor<3xi64> to tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// CHECK-LABEL: func.func @splat_transpose
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<7> : tensor<4x2xi32>
// CHECK-NEXT: return %[[C]]
func.func @splat_transpose() -> tensor<4x2xi32> {
  %c = merak.constant dense<7> : tensor<2x4xi32>
  %0 = merak.transpose %c perm = [1, 0] : tensor<2x4xi32> to tensor<4x2xi32>
  return %0 : tensor<4x2xi32>
}

// -----

// CHECK-LABEL: func.func @splat_slice
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<true> : tensor<2xi1>
// CHECK-NEXT: return %[[C]]
func.func @splat_slice() -> tensor<2xi1> {
  %c = merak.constant dense<true> : tensor<5xi1>
  %0 = merak.slice %c starts = [4] limits = [0] strides = [-2] : tensor<5xi1> to tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

// CHECK-LABEL: func.func @splat_cast_f32_to_f16
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<1.500000e+00> : tensor<2x2xf16>
// CHECK-NEXT: return %[[C]]
func.func @splat_cast_f32_to_f16() -> tensor<2x2xf16> {
  %c = merak.constant dense<1.5> : tensor<2x2xf32>
  %0 = merak.cast %c : tensor<2x2xf32> to tensor<2x2xf16>
  return %0 : tensor<2x2xf16>
}

// -----

// CHECK-LABEL: func.func @splat_cast_i64_to_f64
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<-3.000000e+00> : tensor<3xf64>
// CHECK-NEXT: return %[[C]]
func.func @splat_cast_i64_to_f64() -> tensor<3xf64> {
  %c = merak.constant dense<-3> : tensor<3xi64>
  %0 = merak.cast %c : tensor<3xi64> to tensor<3xf64>
  return %0 : tensor<3xf64>
}

// -----

// true is 1.0, not -1.0 (an i1 is not sign-extended).
// CHECK-LABEL: func.func @splat_cast_i1_to_bf16
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<1.000000e+00> : tensor<4xbf16>
// CHECK-NEXT: return %[[C]]
func.func @splat_cast_i1_to_bf16() -> tensor<4xbf16> {
  %c = merak.constant dense<true> : tensor<4xi1>
  %0 = merak.cast %c : tensor<4xi1> to tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Float to integer casts are not folded by the canonicaliser (the rounding
// is merak-fold-constants' evaluator's); integer to bool is (nonzero).
// CHECK-LABEL: func.func @splat_cast_to_int_kept
// CHECK: merak.constant dense<true> : tensor<2xi1>
// CHECK: merak.cast %{{.*}} : tensor<2xf32> to tensor<2xi64>
// CHECK-NOT: merak.cast
func.func @splat_cast_to_int_kept() -> (tensor<2xi64>, tensor<2xi1>) {
  %c = merak.constant dense<2.75> : tensor<2xf32>
  %0 = merak.cast %c : tensor<2xf32> to tensor<2xi64>
  %d = merak.constant dense<5> : tensor<2xi64>
  %1 = merak.cast %d : tensor<2xi64> to tensor<2xi1>
  return %0, %1 : tensor<2xi64>, tensor<2xi1>
}

// -----

// A dense constant is reshaped in place, row-major.
// CHECK-LABEL: func.func @reshape_of_constant
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<{{\[}}[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
// CHECK-NEXT: return %[[C]]
func.func @reshape_of_constant() -> tensor<2x3xi64> {
  %c = merak.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi64>
  %0 = merak.reshape %c : tensor<6xi64> to tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// CHECK-LABEL: func.func @reshape_of_float_constant
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<{{\[}}[1.000000e+00], [2.000000e+00]]> : tensor<2x1xf32>
// CHECK-NEXT: return %[[C]]
func.func @reshape_of_float_constant() -> tensor<2x1xf32> {
  %c = merak.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %0 = merak.reshape %c : tensor<1x2xf32> to tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// Folds chain: reshape, then broadcast and transpose of a splat.
// CHECK-LABEL: func.func @fold_chain
// CHECK-NEXT: %[[C:.*]] = merak.constant dense<0.000000e+00> : tensor<3x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @fold_chain() -> tensor<3x2xf32> {
  %c = merak.constant dense<0.0> : tensor<2xf32>
  %0 = merak.reshape %c : tensor<2xf32> to tensor<2x1xf32>
  %1 = merak.broadcast %0 : tensor<2x1xf32> to tensor<2x3xf32>
  %2 = merak.transpose %1 perm = [1, 0] : tensor<2x3xf32> to tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}

// -----

// Ops that read a parameter are not constants.
merak.param @w : tensor<3xf32> = dense<1.0> : tensor<3xf32>

// CHECK-LABEL: func.func @param_not_folded
// CHECK: %[[W:.*]] = merak.get_param @w
// CHECK: merak.broadcast %[[W]] : tensor<3xf32> to tensor<2x3xf32>
func.func @param_not_folded() -> tensor<2x3xf32> {
  %w = merak.get_param @w : tensor<3xf32>
  %0 = merak.broadcast %w : tensor<3xf32> to tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// x * 1, 1 * x, x / 1, neg(neg x), not(not b), broadcast(broadcast x).
// CHECK-LABEL: func.func @algebraic_identities
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xi1>)
// CHECK-NEXT: %[[BC:.*]] = merak.broadcast %[[X]] : tensor<3xf32> to tensor<4x2x3xf32>
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[B]], %[[BC]]
func.func @algebraic_identities(%x: tensor<3xf32>, %b: tensor<3xi1>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi1>, tensor<4x2x3xf32>) {
  %one = merak.constant dense<1.0> : tensor<f32>
  %0 = merak.mul %x, %one : tensor<3xf32>, tensor<f32>
  %1 = merak.mul %one, %x : tensor<f32>, tensor<3xf32>
  %2 = merak.div %x, %one : tensor<3xf32>, tensor<f32>
  %n = merak.neg %x : tensor<3xf32>
  %3 = merak.neg %n : tensor<3xf32>
  %nb = merak.not %b : tensor<3xi1>
  %4 = merak.not %nb : tensor<3xi1>
  %b1 = merak.broadcast %x : tensor<3xf32> to tensor<2x3xf32>
  %5 = merak.broadcast %b1 : tensor<2x3xf32> to tensor<4x2x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi1>, tensor<4x2x3xf32>
}

// -----

// Not folded: multiplying by 1 broadcasts x to a larger shape; x * 2.
// CHECK-LABEL: func.func @not_identities
// CHECK: merak.mul
// CHECK: merak.mul
func.func @not_identities(%x: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>) {
  %one = merak.constant dense<1.0> : tensor<2x3xf32>
  %two = merak.constant dense<2.0> : tensor<f32>
  %0 = merak.mul %x, %one : tensor<3xf32>, tensor<2x3xf32>
  %1 = merak.mul %x, %two : tensor<3xf32>, tensor<f32>
  return %0, %1 : tensor<2x3xf32>, tensor<3xf32>
}

// -----

// transformers' padding mask (all true) looked up at b * T + t with indices
// computed from constants: a splat. and(x, true) is x at the result's
// shape; the select of a broadcast mask happens at the mask's own size and
// is broadcast after. The causal mask stays [1, 1, 3, 3].
// CHECK-LABEL: func.func @padding_mask
// CHECK-SAME: (%[[S:.*]]: tensor<4x2x3x3xf32>, %[[C:.*]]: tensor<1x1x3x3xi1>)
// CHECK-NOT: merak.gather
// CHECK-NOT: merak.and
// CHECK: %[[W:.*]] = merak.where %[[C]], %{{.*}}, %{{.*}} : tensor<1x1x3x3xi1>, tensor<f32>, tensor<f32>
// CHECK: %[[B:.*]] = merak.broadcast %[[W]] : tensor<1x1x3x3xf32> to tensor<4x1x3x3xf32>
// CHECK: merak.add %[[S]], %[[B]]
func.func @padding_mask(%s: tensor<4x2x3x3xf32>, %causal: tensor<1x1x3x3xi1>) -> tensor<4x2x3x3xf32> {
  %b = merak.constant dense<[[[[0]]], [[[1]]], [[[2]]], [[[3]]]]> : tensor<4x1x1x1xi64>
  %t = merak.constant dense<[[[[0, 1, 2]]]]> : tensor<1x1x1x3xi64>
  %len = merak.constant dense<3> : tensor<i64>
  %row = merak.mul %b, %len : tensor<4x1x1x1xi64>, tensor<i64>
  %flat = merak.add %row, %t : tensor<4x1x1x1xi64>, tensor<1x1x1x3xi64>
  %pad = merak.constant dense<true> : tensor<12xi1>
  %padm = merak.gather %pad[%flat] axis = 0 : tensor<12xi1>, tensor<4x1x1x3xi64> -> tensor<4x1x1x3xi1>
  %keep = merak.and %causal, %padm : tensor<1x1x3x3xi1>, tensor<4x1x1x3xi1>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %bias = merak.where %keep, %zero, %ninf : tensor<4x1x3x3xi1>, tensor<f32>, tensor<f32>
  %m = merak.add %s, %bias : tensor<4x2x3x3xf32>, tensor<4x1x3x3xf32>
  return %m : tensor<4x2x3x3xf32>
}

// -----

// Not folded: indices that are an input (token ids may be out of range,
// an error at run time), a table that is not a splat; and(x, false) and
// a select whose branches are larger than the condition stay.
// CHECK-LABEL: func.func @kept
// CHECK: merak.gather
// CHECK: merak.gather
// CHECK: merak.and
// CHECK: merak.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3xi1>, tensor<4x3xf32>, tensor<f32>
func.func @kept(%ids: tensor<4x3xi64>, %c: tensor<1x3xi1>, %x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xf32>) {
  %splat = merak.constant dense<1.0> : tensor<16xf32>
  %a = merak.gather %splat[%ids] axis = 0 : tensor<16xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
  %dense = merak.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %i = merak.constant dense<[[0, 1, 2], [3, 0, 1], [2, 3, 0], [1, 2, 3]]> : tensor<4x3xi64>
  %b = merak.gather %dense[%i] axis = 0 : tensor<4xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
  %false = merak.constant dense<false> : tensor<4x3xi1>
  %c4 = merak.broadcast %c : tensor<1x3xi1> to tensor<4x3xi1>
  %and = merak.and %c4, %false : tensor<4x3xi1>, tensor<4x3xi1>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %w = merak.where %c4, %x, %zero : tensor<4x3xi1>, tensor<4x3xf32>, tensor<f32>
  return %a, %b, %and, %w : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xf32>
}

// -----

// Splat integer casts: to bool is "nonzero" (ones_like(ids) as a mask),
// to a wider integer sign-extends, to a narrower one truncates.
// CHECK-LABEL: func.func @int_casts
// CHECK-DAG: merak.constant dense<true> : tensor<4x3xi1>
// CHECK-DAG: merak.constant dense<false> : tensor<2xi1>
// CHECK-DAG: merak.constant dense<-2> : tensor<3xi64>
// CHECK-DAG: merak.constant dense<44> : tensor<3xi8>
// CHECK-NOT: merak.cast
func.func @int_casts() -> (tensor<4x3xi1>, tensor<2xi1>, tensor<3xi64>, tensor<3xi8>) {
  %ones = merak.constant dense<1> : tensor<4x3xi64>
  %zeros = merak.constant dense<0> : tensor<2xi32>
  %m2 = merak.constant dense<-2> : tensor<3xi32>
  %big = merak.constant dense<300> : tensor<3xi64>
  %a = merak.cast %ones : tensor<4x3xi64> to tensor<4x3xi1>
  %b = merak.cast %zeros : tensor<2xi32> to tensor<2xi1>
  %c = merak.cast %m2 : tensor<3xi32> to tensor<3xi64>
  %d = merak.cast %big : tensor<3xi64> to tensor<3xi8>
  return %a, %b, %c, %d : tensor<4x3xi1>, tensor<2xi1>, tensor<3xi64>, tensor<3xi8>
}

// -----

// This rank's part of a sum over the group is a reduce-scatter, through a
// reshape that keeps the leading split (sequence parallelism's backward);
// the all-reduce, read nowhere else, goes. Not when the sum is read again
// or is over another group.
// CHECK-LABEL: func.func @local_shard_of_sum
// CHECK-NEXT: %[[V:.+]] = merak.reshape %arg0 : tensor<2x4x8xf32> to tensor<8x1x8xf32>
// CHECK-NEXT: %[[S:.+]] = merak.reduce_scatter %[[V]] group = "tp" reduction = "sum" : tensor<8x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[A:.+]] = merak.all_reduce %arg1 group = "tp"
// CHECK-NEXT: %[[L:.+]] = merak.local_shard %[[A]] group = "tp"
// CHECK-NEXT: %[[D:.+]] = merak.all_reduce %arg2 group = "dp"
// CHECK-NEXT: %[[M:.+]] = merak.local_shard %[[D]] group = "tp"
// CHECK-NEXT: return %[[S]], %[[L]], %[[A]], %[[M]]
func.func @local_shard_of_sum(%x: tensor<2x4x8xf32>, %y: tensor<8x8xf32>, %z: tensor<8x8xf32>)
    -> (tensor<4x1x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) {
  %a = merak.all_reduce %x group = "tp" reduction = "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %v = merak.reshape %a : tensor<2x4x8xf32> to tensor<8x1x8xf32>
  %s = merak.local_shard %v group = "tp" : tensor<8x1x8xf32> -> tensor<4x1x8xf32>
  %b = merak.all_reduce %y group = "tp" reduction = "sum" : tensor<8x8xf32> -> tensor<8x8xf32>
  %l = merak.local_shard %b group = "tp" : tensor<8x8xf32> -> tensor<4x8xf32>
  %d = merak.all_reduce %z group = "dp" reduction = "sum" : tensor<8x8xf32> -> tensor<8x8xf32>
  %m = merak.local_shard %d group = "tp" : tensor<8x8xf32> -> tensor<4x8xf32>
  return %s, %l, %b, %m : tensor<4x1x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>
}

// -----

// A tp_identity moves above the reshapes and broadcasts read by it alone
// (a MoE layer's top-k copies of its tokens), so that its gradient is
// summed over tp at the tokens' size; not above a view read elsewhere too.
// CHECK-LABEL: func.func @tp_identity_above_views
// CHECK-NEXT: %[[I:.+]] = merak.tp_identity %arg0 : tensor<4x8xf32>
// CHECK-NEXT: %[[R:.+]] = merak.reshape %[[I]] : tensor<4x8xf32> to tensor<4x1x8xf32>
// CHECK-NEXT: %[[B:.+]] = merak.broadcast %[[R]] : tensor<4x1x8xf32> to tensor<4x2x8xf32>
// CHECK-NEXT: %[[F:.+]] = merak.reshape %[[B]] : tensor<4x2x8xf32> to tensor<8x8xf32>
// CHECK-NEXT: %[[S:.+]] = merak.reshape %arg1 : tensor<4x8xf32> to tensor<8x4xf32>
// CHECK-NEXT: %[[J:.+]] = merak.tp_identity %[[S]] : tensor<8x4xf32>
// CHECK-NEXT: return %[[F]], %[[J]], %[[S]]
func.func @tp_identity_above_views(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>)
    -> (tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %r = merak.reshape %x : tensor<4x8xf32> to tensor<4x1x8xf32>
  %b = merak.broadcast %r : tensor<4x1x8xf32> to tensor<4x2x8xf32>
  %f = merak.reshape %b : tensor<4x2x8xf32> to tensor<8x8xf32>
  %i = merak.tp_identity %f : tensor<8x8xf32>
  %s = merak.reshape %y : tensor<4x8xf32> to tensor<8x4xf32>
  %j = merak.tp_identity %s : tensor<8x4xf32>
  return %i, %j, %s : tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Adjacent tp sums of vectors (sequence parallelism's norm-scale
// gradients) become one bucket; an activation's all-reduce, one over dp, and
// one that reads the previous one's result keep their own ops.
// CHECK-LABEL: func.func @tp_vector_buckets
// CHECK-NEXT: %[[B:.+]]:3 = merak.all_reduce %arg0, %arg1, %arg2 group = "tp" reduction = "sum" : tensor<8xf32>, tensor<8xf32>, tensor<4xf32>
// CHECK-NEXT: %[[X:.+]] = merak.all_reduce %arg3 group = "tp"
// CHECK-NEXT: %[[D:.+]] = merak.all_reduce %arg0 group = "dp"
// CHECK-NEXT: %[[E:.+]] = merak.all_reduce %arg1 group = "tp"
// CHECK-NEXT: %[[F:.+]] = merak.all_reduce %[[E]] group = "tp"
// CHECK-NEXT: return %[[B]]#0, %[[B]]#1, %[[B]]#2, %[[X]], %[[D]], %[[F]]
func.func @tp_vector_buckets(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<4xf32>, %x: tensor<2x8xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %ra = merak.all_reduce %a group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %rb = merak.all_reduce %b group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %rc = merak.all_reduce %c group = "tp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
  %rx = merak.all_reduce %x group = "tp" reduction = "sum" : tensor<2x8xf32> -> tensor<2x8xf32>
  %rd = merak.all_reduce %a group = "dp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %re = merak.all_reduce %b group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %rf = merak.all_reduce %re group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  return %ra, %rb, %rc, %rx, %rd, %rf : tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
}
