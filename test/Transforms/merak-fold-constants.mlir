// RUN: merak-opt %s -split-input-file -merak-fold-constants -verify-diagnostics | FileCheck %s
// RUN: merak-opt %s -split-input-file -merak-fold-constants=max-elements=4 -verify-diagnostics | FileCheck %s --check-prefix=LIMIT

// merak-fold-constants runs the reference evaluator on merak ops whose
// operands are all constants. -verify-diagnostics with no expectations
// checks that nothing is reported, even for ops that fail to evaluate.
// The pass leaves dead constants behind; canonicalisation removes them.

// CHECK-LABEL: func.func @arith
// CHECK: %[[R:.*]] = merak.constant dense<{{\[}}[1.500000e+00, 2.500000e+00], [3.500000e+00, 4.500000e+00]]> : tensor<2x2xf32>
// CHECK-NOT: merak.add
// CHECK-NOT: merak.mul
// CHECK: return %[[R]]
func.func @arith() -> tensor<2x2xf32> {
  %a = merak.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = merak.constant dense<[0.25]> : tensor<1xf32>
  %c = merak.constant dense<2.0> : tensor<f32>
  %0 = merak.mul %b, %c : tensor<1xf32>, tensor<f32>
  %1 = merak.add %a, %0 : tensor<2x2xf32>, tensor<1xf32>
  return %1 : tensor<2x2xf32>
}

// -----

// Results are rounded to the element type: 1 + 2^-12 is 1 in f16.
// CHECK-LABEL: func.func @f16_rounding
// CHECK: %[[R:.*]] = merak.constant dense<[1.000000e+00, 1.000980e+00]> : tensor<2xf16>
// CHECK: return %[[R]]
func.func @f16_rounding() -> tensor<2xf16> {
  %a = merak.constant dense<1.0> : tensor<2xf16>
  %b = merak.constant dense<[2.44140625e-4, 9.765625e-4]> : tensor<2xf16>
  %0 = merak.add %a, %b : tensor<2xf16>, tensor<2xf16>
  return %0 : tensor<2xf16>
}

// -----

// i32 arithmetic wraps; integer division truncates toward zero.
// CHECK-LABEL: func.func @i32_wrap_and_div
// CHECK-DAG: %[[W:.*]] = merak.constant dense<[-2147483648, 0]> : tensor<2xi32>
// CHECK-DAG: %[[D:.*]] = merak.constant dense<[-3, 3]> : tensor<2xi32>
// CHECK: return %[[W]], %[[D]]
func.func @i32_wrap_and_div() -> (tensor<2xi32>, tensor<2xi32>) {
  %a = merak.constant dense<[2147483647, -1]> : tensor<2xi32>
  %one = merak.constant dense<1> : tensor<i32>
  %0 = merak.add %a, %one : tensor<2xi32>, tensor<i32>
  %n = merak.constant dense<[-7, 7]> : tensor<2xi32>
  %d = merak.constant dense<2> : tensor<2xi32>
  %1 = merak.div %n, %d : tensor<2xi32>, tensor<2xi32>
  return %0, %1 : tensor<2xi32>, tensor<2xi32>
}

// -----

// The shape arithmetic of an exported reshape: pick dims of a shape,
// append -1, cast to i32.
// CHECK-LABEL: func.func @shape_chain
// CHECK-DAG: %[[S:.*]] = merak.constant dense<[2, 4, -1]> : tensor<3xi64>
// CHECK-DAG: %[[T:.*]] = merak.constant dense<[2, 4, -1]> : tensor<3xi32>
// CHECK-NOT: merak.gather
// CHECK-NOT: merak.concat
// CHECK-NOT: merak.cast
// CHECK: return %[[S]], %[[T]]
func.func @shape_chain() -> (tensor<3xi64>, tensor<3xi32>) {
  %shape = merak.constant dense<[2, 3, 4]> : tensor<3xi64>
  %idx = merak.constant dense<[0, -1]> : tensor<2xi64>
  %dims = merak.gather %shape[%idx] axis = 0 : tensor<3xi64>, tensor<2xi64> -> tensor<2xi64>
  %m1 = merak.constant dense<[-1]> : tensor<1xi64>
  %new = merak.concat %dims, %m1 axis = 0 : tensor<2xi64>, tensor<1xi64> -> tensor<3xi64>
  %i32 = merak.cast %new : tensor<3xi64> to tensor<3xi32>
  return %new, %i32 : tensor<3xi64>, tensor<3xi32>
}

// -----

// where(shape == 0, input_shape, shape): ONNX Reshape's "0 copies the dim".
// CHECK-LABEL: func.func @where_eq_chain
// CHECK: %[[R:.*]] = merak.constant dense<[8, 16, 4]> : tensor<3xi64>
// CHECK-NOT: merak.eq
// CHECK-NOT: merak.where
// CHECK: return %[[R]]
func.func @where_eq_chain() -> tensor<3xi64> {
  %shape = merak.constant dense<[0, 16, 4]> : tensor<3xi64>
  %input = merak.constant dense<[8, 64, 1]> : tensor<3xi64>
  %zero = merak.constant dense<0> : tensor<i64>
  %is0 = merak.eq %shape, %zero : tensor<3xi64>, tensor<i64>
  %0 = merak.where %is0, %input, %shape : tensor<3xi1>, tensor<3xi64>, tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// Reductions and products of shapes.
// CHECK-LABEL: func.func @numel
// CHECK: %[[R:.*]] = merak.constant dense<24> : tensor<i64>
// CHECK: return %[[R]]
func.func @numel() -> tensor<i64> {
  %shape = merak.constant dense<[2, 3, 4]> : tensor<3xi64>
  %0 = merak.reduce_prod %shape axes = [0] : tensor<3xi64> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// Multi-result ops fold to one constant per result.
// CHECK-LABEL: func.func @split
// CHECK-DAG: %[[A:.*]] = merak.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-DAG: %[[B:.*]] = merak.constant dense<3> : tensor<1xi64>
// CHECK-NOT: merak.split
// CHECK: return %[[A]], %[[B]]
func.func @split() -> (tensor<2xi64>, tensor<1xi64>) {
  %c = merak.constant dense<[1, 2, 3]> : tensor<3xi64>
  %0:2 = merak.split %c axis = 0 sizes = [2, 1] : tensor<3xi64> -> tensor<2xi64>, tensor<1xi64>
  return %0#0, %0#1 : tensor<2xi64>, tensor<1xi64>
}

// -----

// A constant held as a resource blob is a constant too.
// CHECK-LABEL: func.func @resource_constant
// CHECK: %[[R:.*]] = merak.constant dense<[2.000000e+00, 4.000000e+00]> : tensor<2xf32>
// CHECK: return %[[R]]
func.func @resource_constant() -> tensor<2xf32> {
  %c = merak.constant dense_resource<two_floats> : tensor<2xf32>
  %0 = merak.add %c, %c : tensor<2xf32>, tensor<2xf32>
  return %0 : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      two_floats: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// A result with more than max-elements elements is not folded; the
// 4-element op before it still is.
// CHECK-LABEL: func.func @max_elements
// CHECK-DAG: merak.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: merak.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00], [1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]]> : tensor<2x4xf32>
// CHECK-NOT: merak.broadcast
// LIMIT-LABEL: func.func @max_elements
// LIMIT: %[[V:.*]] = merak.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// LIMIT: %[[B:.*]] = merak.broadcast %[[V]] : tensor<4xf32> to tensor<2x4xf32>
// LIMIT: return %[[B]]
func.func @max_elements() -> tensor<2x4xf32> {
  %a = merak.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %one = merak.constant dense<1.0> : tensor<f32>
  %0 = merak.add %a, %one : tensor<4xf32>, tensor<f32>
  %1 = merak.broadcast %0 : tensor<4xf32> to tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}

// -----

// An op with a non-constant operand is left alone, and so is its user.
// CHECK-LABEL: func.func @non_constant
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK: %[[C:.*]] = merak.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK: %[[A:.*]] = merak.add %[[X]], %[[C]] : tensor<3xf32>, tensor<3xf32>
// CHECK: %[[E:.*]] = merak.exp %[[A]] : tensor<3xf32>
// CHECK: return %[[E]]
func.func @non_constant(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = merak.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = merak.add %x, %c : tensor<3xf32>, tensor<3xf32>
  %1 = merak.exp %0 : tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

// Parameters are trainable, not constants: neither the read nor its users
// fold, even with a constant initial value.
merak.param @scale : tensor<3xf32> = dense<2.0> : tensor<3xf32>

// CHECK-LABEL: func.func @get_param
// CHECK: %[[P:.*]] = merak.get_param @scale : tensor<3xf32>
// CHECK: %[[C:.*]] = merak.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK: %[[M:.*]] = merak.mul %[[P]], %[[C]]
// CHECK: return %[[M]]
func.func @get_param() -> tensor<3xf32> {
  %p = merak.get_param @scale : tensor<3xf32>
  %c = merak.constant dense<1.0> : tensor<3xf32>
  %0 = merak.mul %p, %c : tensor<3xf32>, tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// An index out of range is a run-time error: not folded, and not reported
// at compile time.
// CHECK-LABEL: func.func @gather_out_of_range
// CHECK: %[[G:.*]] = merak.gather
// CHECK: return %[[G]]
func.func @gather_out_of_range() -> tensor<1xi64> {
  %shape = merak.constant dense<[2, 3, 4]> : tensor<3xi64>
  %idx = merak.constant dense<[3]> : tensor<1xi64>
  %0 = merak.gather %shape[%idx] axis = 0 : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// -----

// CHECK-LABEL: func.func @int_division_by_zero
// CHECK: %[[D:.*]] = merak.div
// CHECK: return %[[D]]
func.func @int_division_by_zero() -> tensor<2xi64> {
  %a = merak.constant dense<[4, 5]> : tensor<2xi64>
  %b = merak.constant dense<[2, 0]> : tensor<2xi64>
  %0 = merak.div %a, %b : tensor<2xi64>, tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Dropout reads the training step (a new mask every step) and group_rank
// the rank: neither folds, even of constants.
// CHECK-LABEL: func.func @position_dependent
// CHECK: merak.dropout
// CHECK: merak.group_rank
// LIMIT-LABEL: func.func @position_dependent
func.func @position_dependent() -> (tensor<2xf32>, tensor<i64>) {
  %a = merak.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %y, %m = merak.dropout %a ratio = 0.5 seed = 3 : tensor<2xf32> -> tensor<2xf32>, tensor<2xi1>
  %r = merak.group_rank group = "tp" : tensor<i64>
  return %y, %r : tensor<2xf32>, tensor<i64>
}
