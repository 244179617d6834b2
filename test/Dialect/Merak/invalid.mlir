// RUN: merak-opt %s -split-input-file -verify-diagnostics

// Every verifier and type-inference error of the merak dialect. Errors from
// `inferReturnTypes` are reported at the op's location without the op-name
// prefix, followed by the generic "failed to infer returned types" when the
// op is verified; ops whose result type is inferred while parsing (binary
// ops, where) report only the first error, from the parser.

//===----------------------------------------------------------------------===//
// merak.param / merak.get_param
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'merak.param' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor}}
merak.param @w : tensor<?x2xf32> = dense<1.0> : tensor<3x2xf32>

// -----

// expected-error @+1 {{'merak.param' op initial value type 'tensor<3xf32>' does not match 'tensor<2xf32>'}}
merak.param @w : tensor<2xf32> = dense<1.0> : tensor<3xf32>

// -----

// expected-error @+1 {{'merak.param' op initial value type 'tensor<2xf16>' does not match 'tensor<2xf32>'}}
merak.param @w : tensor<2xf32> = dense_resource<blob> : tensor<2xf16>

{-#
  dialect_resources: {
    builtin: {
      blob: "0x02000000003C0040"
    }
  }
#-}

// -----

// expected-error @+1 {{'merak.param' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of}}
merak.param @w : tensor<2xi4> = dense<1> : tensor<2xi4>

// -----

func.func @get_param_unknown() -> tensor<2xf32> {
  // expected-error @+1 {{'merak.get_param' op 'missing' does not name a merak.param}}
  %0 = merak.get_param @missing : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @not_a_param() {
  return
}

func.func @get_param_of_func() -> tensor<2xf32> {
  // expected-error @+1 {{'merak.get_param' op 'not_a_param' does not name a merak.param}}
  %0 = merak.get_param @not_a_param : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

merak.param @w : tensor<2x3xf32> = dense<0.0> : tensor<2x3xf32>

func.func @get_param_type_mismatch() -> tensor<3x2xf32> {
  // expected-error @+1 {{'merak.get_param' op result type 'tensor<3x2xf32>' does not match parameter type 'tensor<2x3xf32>'}}
  %0 = merak.get_param @w : tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @constant_type_mismatch() {
  // expected-error @+1 {{'merak.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "merak.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @constant_bad_element_type() {
  // expected-error @+1 {{'merak.constant' op result #0 must be statically shaped tensor of}}
  %0 = merak.constant dense<1> : tensor<2xi128>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// -----

func.func @binary_element_types(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'f16'}}
  %0 = merak.add %a, %b : tensor<2xf32>, tensor<2xf16>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{shapes 'tensor<2x3xf32>' and 'tensor<2xf32>' are not broadcast-compatible}}
  %0 = merak.mul %a, %b : tensor<2x3xf32>, tensor<2xf32>
  return
}

// -----

func.func @compare_broadcast(%a: tensor<4x3xi64>, %b: tensor<2x1xi64>) {
  // expected-error @+1 {{shapes 'tensor<4x3xi64>' and 'tensor<2x1xi64>' are not broadcast-compatible}}
  %0 = merak.lt %a, %b : tensor<4x3xi64>, tensor<2x1xi64>
  return
}

// -----

func.func @binary_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'merak.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'merak.add' op failed to infer returned types}}
  %0 = "merak.add"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @compare_result_not_i1(%a: tensor<3xf32>) {
  // expected-error @+2 {{'merak.eq' op inferred type(s) 'tensor<3xi1>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'merak.eq' op failed to infer returned types}}
  %0 = "merak.eq"(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @arith_on_i1(%a: tensor<3xi1>) {
  // expected-error @+1 {{'merak.add' op operand #0 must be statically shaped tensor of}}
  %0 = merak.add %a, %a : tensor<3xi1>, tensor<3xi1>
  return
}

// -----

func.func @logical_on_float(%a: tensor<3xf32>) {
  // expected-error @+1 {{'merak.and' op operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = merak.and %a, %a : tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @where_element_types(%c: tensor<2xi1>, %a: tensor<2xi64>, %b: tensor<2xi32>) {
  // expected-error @+1 {{operand element types differ: 'i64' vs 'i32'}}
  %0 = merak.where %c, %a, %b : tensor<2xi1>, tensor<2xi64>, tensor<2xi32>
  return
}

// -----

func.func @where_broadcast(%c: tensor<3xi1>, %a: tensor<2x1xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{shapes 'tensor<3xi1>', 'tensor<2x1xf32>' and 'tensor<2xf32>' are not broadcast-compatible}}
  %0 = merak.where %c, %a, %b : tensor<3xi1>, tensor<2x1xf32>, tensor<2xf32>
  return
}

// -----

func.func @where_condition_not_i1(%c: tensor<2xi64>, %a: tensor<2xf32>) {
  // expected-error @+1 {{'merak.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = merak.where %c, %a, %a : tensor<2xi64>, tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @exp_of_i1(%a: tensor<3xi1>) {
  // expected-error @+1 {{'merak.exp' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %0 = merak.exp %a : tensor<3xi1>
  return
}

// -----

func.func @exp_of_i64(%a: tensor<3xi64>) {
  // expected-error @+1 {{'merak.exp' op operand #0 must be statically shaped tensor of}}
  %0 = merak.exp %a : tensor<3xi64>
  return
}

// -----

func.func @relu_of_i1(%a: tensor<3xi1>) {
  // expected-error @+1 {{'merak.relu' op operand #0 must be statically shaped tensor of}}
  %0 = merak.relu %a : tensor<3xi1>
  return
}

// -----

func.func @not_of_float(%a: tensor<3xf32>) {
  // expected-error @+1 {{'merak.not' op operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = merak.not %a : tensor<3xf32>
  return
}

// -----

func.func @unranked(%a: tensor<*xf32>) {
  // expected-error @+1 {{'merak.tanh' op operand #0 must be statically shaped tensor of}}
  %0 = "merak.tanh"(%a) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @unary_result_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{'merak.neg' op requires the same type for all operands and results}}
  %0 = "merak.neg"(%a) : (tensor<3xf32>) -> tensor<3xf16>
  return
}

// -----

func.func @leaky_relu_needs_alpha(%a: tensor<3xf32>) {
  // expected-error @+1 {{'merak.leaky_relu' op requires attribute 'alpha'}}
  %0 = "merak.leaky_relu"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @clamp_bound_not_f64(%a: tensor<3xf32>) {
  // expected-error @+1 {{'merak.clamp' op attribute 'min' failed to satisfy constraint: 64-bit float attribute}}
  %0 = merak.clamp %a {min = 0.0 : f32} : tensor<3xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.cast' op requires the same shape for all operands and results}}
  %0 = merak.cast %a : tensor<2x3xf32> to tensor<6xi64>
  return
}

// -----

// The dialect works on static shapes only (merak-run aborts on a tensor
// with a dynamic dimension).
func.func @dynamic_operand(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{static}}
  %0 = merak.exp %a : tensor<?x3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

// -----

func.func @reshape_element_type(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.reshape' op element type changes from 'f32' to 'f16'}}
  %0 = merak.reshape %a : tensor<2x3xf32> to tensor<6xf16>
  return
}

// -----

func.func @reshape_dynamic(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{'merak.reshape' op operand #0 must be statically shaped tensor}}
  %0 = merak.reshape %a : tensor<?x3xf32> to tensor<6xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.reshape' op cannot reshape 6 elements into 8}}
  %0 = merak.reshape %a : tensor<2x3xf32> to tensor<2x4xf32>
  return
}

// -----

func.func @broadcast_element_type(%a: tensor<3xi64>) {
  // expected-error @+1 {{'merak.broadcast' op element type changes from 'i64' to 'i32'}}
  %0 = merak.broadcast %a : tensor<3xi64> to tensor<2x3xi32>
  return
}

// -----

func.func @broadcast_incompatible(%a: tensor<3x1xf32>) {
  // expected-error @+1 {{'merak.broadcast' op cannot broadcast 'tensor<3x1xf32>' to 'tensor<2x4xf32>'}}
  %0 = merak.broadcast %a : tensor<3x1xf32> to tensor<2x4xf32>
  return
}

// -----

func.func @broadcast_to_lower_rank(%a: tensor<1x3xf32>) {
  // expected-error @+1 {{'merak.broadcast' op cannot broadcast 'tensor<1x3xf32>' to 'tensor<3xf32>'}}
  %0 = merak.broadcast %a : tensor<1x3xf32> to tensor<3xf32>
  return
}

// -----

func.func @broadcast_to_dynamic(%a: tensor<3xf32>) {
  // expected-error @+1 {{static}}
  %0 = merak.broadcast %a : tensor<3xf32> to tensor<?x3xf32>
  return
}

// -----

func.func @transpose_perm_size(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{perm has 3 entries for rank 2}}
  // expected-error @+1 {{'merak.transpose' op failed to infer returned types}}
  %0 = merak.transpose %a perm = [0, 1, 2] : tensor<2x3xf32> to tensor<2x3xf32>
  return
}

// -----

func.func @transpose_perm_duplicate(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{perm is not a permutation}}
  // expected-error @+1 {{'merak.transpose' op failed to infer returned types}}
  %0 = merak.transpose %a perm = [1, 1] : tensor<2x3xf32> to tensor<3x3xf32>
  return
}

// -----

func.func @transpose_perm_out_of_range(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{perm is not a permutation}}
  // expected-error @+1 {{'merak.transpose' op failed to infer returned types}}
  %0 = merak.transpose %a perm = [2, 0] : tensor<2x3xf32> to tensor<3x2xf32>
  return
}

// -----

func.func @transpose_wrong_result(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'merak.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'merak.transpose' op failed to infer returned types}}
  %0 = merak.transpose %a perm = [1, 0] : tensor<2x3xf32> to tensor<2x3xf32>
  return
}

// -----

func.func @slice_entries(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{starts/limits/strides need 2 entries each}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [0, 0] limits = [4] strides = [1, 1] : tensor<4x6xf32> to tensor<4x6xf32>
  return
}

// -----

func.func @slice_zero_stride(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{stride of dimension 1 is zero}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [0, 0] limits = [4, 6] strides = [1, 0] : tensor<4x6xf32> to tensor<4x6xf32>
  return
}

// -----

func.func @slice_limit_past_end(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{slice [0, 7) out of bounds for dimension 1 of size 6}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [0, 0] limits = [4, 7] strides = [1, 1] : tensor<4x6xf32> to tensor<4x7xf32>
  return
}

// -----

func.func @slice_negative_start(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{slice [-1, 2) out of bounds for dimension 0 of size 4}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [-1, 0] limits = [2, 6] strides = [1, 1] : tensor<4x6xf32> to tensor<3x6xf32>
  return
}

// -----

func.func @slice_reverse_start_past_end(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{slice [4, -1) out of bounds for dimension 0 of size 4}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [4, 0] limits = [-1, 6] strides = [-1, 1] : tensor<4x6xf32> to tensor<5x6xf32>
  return
}

// -----

func.func @slice_reverse_limit_below(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{slice [5, -2) out of bounds for dimension 1 of size 6}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [0, 5] limits = [4, -2] strides = [1, -1] : tensor<4x6xf32> to tensor<4x7xf32>
  return
}

// -----

// A reversed slice starts in [-1, dim - 1]; an empty dimension has no
// element 0 to start from (the importer clamps such a start to -1).
func.func @slice_reverse_of_empty(%a: tensor<0xf32>) {
  // expected-error @+2 {{slice [0, -1) out of bounds for dimension 0 of size 0}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [0] limits = [-1] strides = [-1] : tensor<0xf32> to tensor<0xf32>
  return
}

// -----

func.func @slice_wrong_result(%a: tensor<4x6xf32>) {
  // expected-error @+2 {{'merak.slice' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x2xf32>'}}
  // expected-error @+1 {{'merak.slice' op failed to infer returned types}}
  %0 = merak.slice %a starts = [0, 0] limits = [4, 6] strides = [2, 2] : tensor<4x6xf32> to tensor<2x2xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{'merak.concat' op failed to infer returned types}}
  %0 = "merak.concat"() {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'merak.concat' op failed to infer returned types}}
  %0 = merak.concat %a, %a axis = 2 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+2 {{inputs must share element type and rank}}
  // expected-error @+1 {{'merak.concat' op failed to infer returned types}}
  %0 = merak.concat %a, %b axis = 0 : tensor<2x3xf32>, tensor<2x3xf16> -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inputs must share element type and rank}}
  // expected-error @+1 {{'merak.concat' op failed to infer returned types}}
  %0 = merak.concat %a, %b axis = 0 : tensor<2x3xf32>, tensor<3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @concat_dim_mismatch(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{input dimension 1 differs: 4 vs 3}}
  // expected-error @+1 {{'merak.concat' op failed to infer returned types}}
  %0 = merak.concat %a, %b axis = 0 : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @split_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'merak.split' op failed to infer returned types}}
  %0:2 = merak.split %a axis = -1 sizes = [1, 2] : tensor<2x3xf32> -> tensor<2x1xf32>, tensor<2x2xf32>
  return
}

// -----

func.func @split_negative_size(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{split size -1 is negative}}
  // expected-error @+1 {{'merak.split' op failed to infer returned types}}
  %0:2 = "merak.split"(%a) {axis = 1 : i64, sizes = array<i64: 4, -1>} : (tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @split_sizes_sum(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{split sizes sum to 4 but dimension 1 has size 3}}
  // expected-error @+1 {{'merak.split' op failed to infer returned types}}
  %0:2 = merak.split %a axis = 1 sizes = [2, 2] : tensor<2x3xf32> -> tensor<2x2xf32>, tensor<2x2xf32>
  return
}

// -----

func.func @split_result_count(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'merak.split' op inferred type(s) 'tensor<2x1xf32>', 'tensor<2x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'merak.split' op failed to infer returned types}}
  %0 = merak.split %a axis = 1 sizes = [1, 2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_axis(%a: tensor<4x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'merak.gather' op failed to infer returned types}}
  %0 = merak.gather %a[%i] axis = 2 : tensor<4x3xf32>, tensor<2xi64> -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_float_indices(%a: tensor<4x3xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{'merak.gather' op operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values}}
  %0 = merak.gather %a[%i] axis = 0 : tensor<4x3xf32>, tensor<2xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_wrong_result(%a: tensor<4x3xf32>, %i: tensor<2x5xi64>) {
  // expected-error @+2 {{'merak.gather' op inferred type(s) 'tensor<4x2x5xf32>' are incompatible with return type(s) of operation 'tensor<2x5x3xf32>'}}
  // expected-error @+1 {{'merak.gather' op failed to infer returned types}}
  %0 = merak.gather %a[%i] axis = 1 : tensor<4x3xf32>, tensor<2x5xi64> -> tensor<2x5x3xf32>
  return
}

// -----

func.func @gather_elements_axis(%a: tensor<4x3xf32>, %i: tensor<4x3xi64>) {
  // expected-error @+2 {{axis 5 is out of range for rank 2}}
  // expected-error @+1 {{'merak.gather_elements' op failed to infer returned types}}
  %0 = merak.gather_elements %a[%i] axis = 5 : tensor<4x3xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_elements_rank(%a: tensor<4x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{indices rank 1 differs from data rank 2}}
  // expected-error @+1 {{'merak.gather_elements' op failed to infer returned types}}
  %0 = merak.gather_elements %a[%i] axis = 0 : tensor<4x3xf32>, tensor<4xi64> -> tensor<4xf32>
  return
}

// -----

// Outside the gathered axis, indices may not be larger than the data
// (torch.gather): row 2 of the data does not exist.
func.func @gather_elements_indices_too_large(%a: tensor<2x2xf32>, %i: tensor<3x2xi64>) {
  // expected-error @+2 {{indices}}
  // expected-error @+1 {{'merak.gather_elements' op failed to infer returned types}}
  %0 = merak.gather_elements %a[%i] axis = 1 : tensor<2x2xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_axis_range(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'merak.reduce_sum' op failed to infer returned types}}
  %0 = merak.reduce_sum %a axes = [0, 2] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_axis_negative(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{'merak.reduce_max' op failed to infer returned types}}
  %0 = merak.reduce_max %a axes = [-1] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_axes_unsorted(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axes must be sorted and distinct}}
  // expected-error @+1 {{'merak.reduce_mean' op failed to infer returned types}}
  %0 = merak.reduce_mean %a axes = [1, 0] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_axes_duplicate(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axes must be sorted and distinct}}
  // expected-error @+1 {{'merak.reduce_prod' op failed to infer returned types}}
  %0 = merak.reduce_prod %a axes = [1, 1] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_keepdims_result(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'merak.reduce_min' op inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{'merak.reduce_min' op failed to infer returned types}}
  %0 = merak.reduce_min %a axes = [1] {keepdims} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_of_i1(%a: tensor<2x3xi1>) {
  // expected-error @+1 {{'merak.reduce_sum' op operand #0 must be statically shaped tensor of}}
  %0 = merak.reduce_sum %a axes = [1] : tensor<2x3xi1> -> tensor<2xi1>
  return
}

// -----

func.func @argmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 3 is out of range for rank 2}}
  // expected-error @+1 {{'merak.argmax' op failed to infer returned types}}
  %0 = merak.argmax %a axis = 3 : tensor<2x3xf32> -> tensor<2xi64>
  return
}

// -----

func.func @argmax_result_i32(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.argmax' op result #0 must be statically shaped tensor of 64-bit signless integer values}}
  %0 = merak.argmax %a axis = 1 : tensor<2x3xf32> -> tensor<2xi32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = merak.softmax %a axis = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = merak.log_softmax %a axis = -1 : tensor<2x3xf32>
  return
}

// -----

func.func @softmax_of_int(%a: tensor<2x3xi64>) {
  // expected-error @+1 {{'merak.softmax' op operand #0 must be statically shaped tensor of}}
  %0 = merak.softmax %a axis = 1 : tensor<2x3xi64>
  return
}

// -----

func.func @layer_norm_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = merak.layer_norm %a axis = 2 epsilon = 1.0e-5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.layer_norm' op epsilon must be non-negative}}
  %0 = merak.layer_norm %a axis = 1 epsilon = -1.0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.layer_norm' op result type must equal the input type}}
  %0 = merak.layer_norm %a axis = 1 epsilon = 1.0e-5 : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @layer_norm_scale_shape(%a: tensor<2x3x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'merak.layer_norm' op scale shape 'tensor<3xf32>' does not broadcast to the normalised shape}}
  %0 = merak.layer_norm %a scale %s axis = 1 epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @layer_norm_scale_element_type(%a: tensor<2x3xf32>, %s: tensor<3xf16>) {
  // expected-error @+1 {{'merak.layer_norm' op scale element type differs from the input's}}
  %0 = merak.layer_norm %a scale %s axis = 1 epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.layer_norm' op bias shape 'tensor<2x3xf32>' does not broadcast to the normalised shape}}
  %0 = merak.layer_norm %a bias %b axis = 1 epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_element_type(%a: tensor<2x3xf32>, %b: tensor<3xf64>) {
  // expected-error @+1 {{'merak.layer_norm' op bias element type differs from the input's}}
  %0 = merak.layer_norm %a bias %b axis = 1 epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<3xf64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rms_norm_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = merak.rms_norm %a axis = 2 epsilon = 1.0e-5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.rms_norm' op epsilon must be non-negative}}
  %0 = merak.rms_norm %a axis = 1 epsilon = -0.5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rms_norm_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.rms_norm' op result type must equal the input type}}
  %0 = merak.rms_norm %a axis = 1 epsilon = 1.0e-5 : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @rms_norm_scale_shape(%a: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'merak.rms_norm' op scale shape 'tensor<2xf32>' does not broadcast to the normalised shape}}
  %0 = merak.rms_norm %a scale %s axis = 1 epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rms_norm_scale_element_type(%a: tensor<2x3xbf16>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'merak.rms_norm' op scale element type differs from the input's}}
  %0 = merak.rms_norm %a scale %s axis = 1 epsilon = 1.0e-5 : (tensor<2x3xbf16>, tensor<3xf32>) -> tensor<2x3xbf16>
  return
}

// -----

func.func @batch_norm_rank(%a: tensor<3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm' op input must have rank >= 2 (N, C, ...)}}
  %0 = merak.batch_norm %a, %c, %c, %c, %c epsilon = 1.0e-5 : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @batch_norm_result(%a: tensor<2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm' op result type must equal the input type}}
  %0 = merak.batch_norm %a, %c, %c, %c, %c epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf64>
  return
}

// -----

func.func @batch_norm_channels(%a: tensor<2x3x4xf32>, %c: tensor<3xf32>, %v: tensor<4xf32>) {
  // expected-error @+1 {{'merak.batch_norm' op per-channel operands must be 'tensor<3xf32>', got 'tensor<4xf32>'}}
  %0 = merak.batch_norm %a, %c, %c, %c, %v epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @batch_norm_momentum_inference(%a: tensor<2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm' op momentum (a running-statistics update) needs training}}
  %0 = merak.batch_norm %a, %c, %c, %c, %c epsilon = 1.0e-5 {momentum = 0.9 : f64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_momentum_range(%a: tensor<2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm' op momentum must be in [0, 1], got 1.5}}
  %0 = merak.batch_norm %a, %c, %c, %c, %c epsilon = 1.0e-5 {training, momentum = 1.5 : f64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sum_squares_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.sum_squares' op result must be 'tensor<f32>', got 'tensor<1xf32>'}}
  %0 = merak.sum_squares %a : tensor<2x3xf32> -> tensor<1xf32>
  return
}

// -----

func.func @batch_norm_grad_types(%a: tensor<2x3x4xf32>, %g: tensor<2x3x5xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm_grad' op grad and input_grad must have the input's type 'tensor<2x3x4xf32>'}}
  %0:3 = merak.batch_norm_grad %a, %g, %c epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<2x3x5xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_grad_channels(%a: tensor<2x3x4xf32>, %c: tensor<3xf32>, %d: tensor<4xf32>) {
  // expected-error @+1 {{'merak.batch_norm_grad' op scale, scale_grad and bias_grad must be 'tensor<3xf32>', got 'tensor<4xf32>'}}
  %0:3 = merak.batch_norm_grad %a, %a, %c epsilon = 1.0e-5 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<4xf32>)
  return
}

// -----

func.func @batch_norm_stats_channels(%a: tensor<2x3x4xf32>, %c: tensor<3xf32>, %v: tensor<4xf32>) {
  // expected-error @+1 {{'merak.batch_norm_stats' op per-channel operands and results must be 'tensor<3xf32>', got 'tensor<4xf32>'}}
  %0:2 = merak.batch_norm_stats %a, %c, %v momentum = 0.9 : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<4xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_stats_one_value(%a: tensor<1x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm_stats' op needs two or more values per channel for the unbiased variance}}
  %0:2 = merak.batch_norm_stats %a, %c, %c momentum = 0.9 : (tensor<1x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_stats_momentum(%a: tensor<2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'merak.batch_norm_stats' op momentum must be in [0, 1], got -5.000000e-01}}
  %0:2 = merak.batch_norm_stats %a, %c, %c momentum = -0.5 : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_channel_rank(%a: tensor<2x3xf32>, %c: tensor<3xf32>, %s: tensor<1x3xf32>) {
  // expected-error @+1 {{got 'tensor<1x3xf32>'}}
  %0 = merak.batch_norm %a, %s, %c, %c, %c epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm_channel_element_type(%a: tensor<2x3xf32>, %c: tensor<3xf32>, %h: tensor<3xf16>) {
  // expected-error @+1 {{got 'tensor<3xf16>'}}
  %0 = merak.batch_norm %a, %c, %h, %c, %c epsilon = 1.0e-5 : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf16>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Contraction, convolution, pooling
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf64>) {
  // expected-error @+2 {{operand element types differ}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf64> -> tensor<2x4xf32>
  return
}

// -----

// Only bf16 operands may widen their result (to f32, not f64); f32 operands
// never narrow theirs.
func.func @matmul_narrowing_result(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{'merak.matmul' op inferred type(s) 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xbf16>'}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xbf16>
  return
}

// -----

func.func @matmul_widening_to_f64(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>) {
  // expected-error @+2 {{'merak.matmul' op inferred type(s) 'tensor<2x4xbf16>' are incompatible with return type(s) of operation 'tensor<2x4xf64>'}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<2x3xbf16>, tensor<3x4xbf16> -> tensor<2x4xf64>
  return
}

// -----

func.func @matmul_t_widening_shape(%a: tensor<3x2xbf16>, %b: tensor<3x4xbf16>) {
  // expected-error @+2 {{'merak.matmul_t' op inferred type(s) 'tensor<2x4xbf16>' are incompatible with return type(s) of operation 'tensor<4x2xf32>'}}
  // expected-error @+1 {{'merak.matmul_t' op failed to infer returned types}}
  %0 = merak.matmul_t %a, %b {transpose_lhs} : tensor<3x2xbf16>, tensor<3x4xbf16> -> tensor<4x2xf32>
  return
}

// -----

func.func @matmul_t_acc_type(%a: tensor<3x2xf32>, %b: tensor<3x4xf32>, %c: tensor<4x2xf32>) {
  // expected-error @+1 {{'merak.matmul_t' op accumulator type 'tensor<4x2xf32>' differs from the result type 'tensor<2x4xf32>'}}
  %0 = merak.matmul_t %a, %b acc %c {transpose_lhs} : tensor<3x2xf32>, tensor<3x4xf32>, tensor<4x2xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_t_acc_bf16(%a: tensor<3x2xbf16>, %b: tensor<3x4xbf16>, %c: tensor<2x4xbf16>) {
  // expected-error @+1 {{'merak.matmul_t' op an accumulated product must be f32, got 'tensor<2x4xbf16>'}}
  %0 = merak.matmul_t %a, %b acc %c {transpose_lhs} : tensor<3x2xbf16>, tensor<3x4xbf16>, tensor<2x4xbf16> -> tensor<2x4xbf16>
  return
}

// -----

func.func @matmul_rank0(%a: tensor<f32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{operands must have rank >= 1}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<f32>, tensor<3xf32> -> tensor<f32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contracting dimensions differ: 3 vs 4}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_vector_contracting(%a: tensor<3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{contracting dimensions differ: 3 vs 2}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<3xf32>, tensor<2x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x4xf32>) {
  // expected-error @+2 {{batch dimensions of 'tensor<2x2x3xf32>' and 'tensor<3x3x4xf32>' are not broadcast-compatible}}
  // expected-error @+1 {{'merak.matmul' op failed to infer returned types}}
  %0 = merak.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x4xf32> -> tensor<2x2x4xf32>
  return
}

// -----

func.func @matmul_of_i1(%a: tensor<2x2xi1>) {
  // expected-error @+1 {{'merak.matmul' op operand #0 must be statically shaped tensor of}}
  %0 = merak.matmul %a, %a : tensor<2x2xi1>, tensor<2x2xi1> -> tensor<2x2xi1>
  return
}

// -----

func.func @conv_rank(%x: tensor<1x4x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{input and weight must have rank 4}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_strides_entries(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{strides needs 2 entries, got 1}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_padding_entries(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{padding needs 4 entries, got 2}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [1, 1] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x8x8xf32>
  return
}

// -----

func.func @conv_dilations_entries(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{dilations needs 2 entries, got 3}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_groups_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{weight 'tensor<6x4x3x3xf32>' does not match 4 input channels in 2 groups}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_groups_outputs(%x: tensor<1x4x8x8xf32>, %w: tensor<5x2x3x3xf32>) {
  // expected-error @+2 {{weight 'tensor<5x2x3x3xf32>' does not match 4 input channels in 2 groups}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x4x8x8xf32>, tensor<5x2x3x3xf32>) -> tensor<1x5x6x6xf32>
  return
}

// -----

func.func @conv_groups_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{weight 'tensor<6x4x3x3xf32>' does not match 4 input channels in 0 groups}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 0 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_weight_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+2 {{weight 'tensor<6x3x3x3xf32>' does not match 4 input channels in 1 groups}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_bias_shape(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{bias must be tensor<6x...>}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w bias %b strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<4xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

// The weight must have the input's element type.
func.func @conv_weight_element_type(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf16>) {
  // expected-error @+2 {{element type}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf16>) -> tensor<1x6x6x6xf32>
  return
}

// -----

// The bias must have the input's element type.
func.func @conv_bias_element_type(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<6xf64>) {
  // expected-error @+2 {{element type}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w bias %b strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf64>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_zero_stride(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{window sizes, strides and dilations must be positive and padding non-negative}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [0, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_negative_padding(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{window sizes, strides and dilations must be positive and padding non-negative}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, -1, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x5xf32>
  return
}

// -----

func.func @conv_window_too_large(%x: tensor<1x4x4x4xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{window of extent 5 does not fit padded input of size 4}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [2, 1] groups = 1 : (tensor<1x4x4x4xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x1x2xf32>
  return
}

// -----

func.func @conv_wrong_result(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{'merak.conv2d' op inferred type(s) 'tensor<1x6x4x6xf32>' are incompatible with return type(s) of operation 'tensor<1x6x6x6xf32>'}}
  // expected-error @+1 {{'merak.conv2d' op failed to infer returned types}}
  %0 = merak.conv2d %x, %w strides = [2, 1] padding = [1, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<2x5x5xf32>) {
  // expected-error @+2 {{input must have rank 4 (NCHW)}}
  // expected-error @+1 {{'merak.max_pool2d' op failed to infer returned types}}
  %0 = merak.max_pool2d %x kernel = [2, 2] strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<2x5x5xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @pool_kernel_entries(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{kernel needs 2 entries, got 1}}
  // expected-error @+1 {{'merak.avg_pool2d' op failed to infer returned types}}
  %0 = merak.avg_pool2d %x kernel = [2] strides = [1, 1] padding = [0, 0, 0, 0] : tensor<1x1x5x5xf32> -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_dilations_entries(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{dilations needs 2 entries, got 0}}
  // expected-error @+1 {{'merak.max_pool2d' op failed to infer returned types}}
  %0 = merak.max_pool2d %x kernel = [2, 2] strides = [1, 1] padding = [0, 0, 0, 0] dilations = [] : tensor<1x1x5x5xf32> -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_padding_ge_kernel(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{padding must be smaller than the kernel}}
  // expected-error @+1 {{'merak.max_pool2d' op failed to infer returned types}}
  %0 = merak.max_pool2d %x kernel = [2, 2] strides = [1, 1] padding = [0, 0, 0, 2] dilations = [1, 1] : tensor<1x1x5x5xf32> -> tensor<1x1x4x6xf32>
  return
}

// -----

func.func @avg_pool_padding_ge_kernel(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{padding must be smaller than the kernel}}
  // expected-error @+1 {{'merak.avg_pool2d' op failed to infer returned types}}
  %0 = merak.avg_pool2d %x kernel = [3, 3] strides = [1, 1] padding = [3, 0, 0, 0] : tensor<1x1x5x5xf32> -> tensor<1x1x6x3xf32>
  return
}

// -----

func.func @pool_zero_stride(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{window sizes, strides and dilations must be positive and padding non-negative}}
  // expected-error @+1 {{'merak.avg_pool2d' op failed to infer returned types}}
  %0 = merak.avg_pool2d %x kernel = [2, 2] strides = [1, 0] padding = [0, 0, 0, 0] : tensor<1x1x5x5xf32> -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @pool_window_too_large(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{window of extent 6 does not fit padded input of size 5}}
  // expected-error @+1 {{'merak.max_pool2d' op failed to infer returned types}}
  %0 = merak.max_pool2d %x kernel = [6, 1] strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<1x1x5x5xf32> -> tensor<1x1x1x5xf32>
  return
}

// -----

func.func @pool_ceil_mode_result(%x: tensor<1x1x5x5xf32>) {
  // expected-error @+2 {{'merak.max_pool2d' op inferred type(s) 'tensor<1x1x3x3xf32>' are incompatible with return type(s) of operation 'tensor<1x1x2x2xf32>'}}
  // expected-error @+1 {{'merak.max_pool2d' op failed to infer returned types}}
  %0 = merak.max_pool2d %x kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] {ceil_mode} : tensor<1x1x5x5xf32> -> tensor<1x1x2x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

// -----

func.func @dropout_ratio_one(%x: tensor<4xf32>) {
  // expected-error @+1 {{'merak.dropout' op ratio must be in [0, 1), got 1.000000e+00}}
  %0:2 = merak.dropout %x ratio = 1.0 seed = 0 : tensor<4xf32> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

func.func @dropout_ratio_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{'merak.dropout' op ratio must be in [0, 1), got -2.500000e-01}}
  %0:2 = merak.dropout %x ratio = -0.25 seed = 0 : tensor<4xf32> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

func.func @dropout_output_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'merak.dropout' op output type must equal the input type}}
  %0:2 = merak.dropout %x ratio = 0.5 seed = 0 : tensor<4xf32> -> tensor<4xf16>, tensor<4xi1>
  return
}

// -----

func.func @dropout_mask_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{'merak.dropout' op mask shape must equal the input shape}}
  %0:2 = merak.dropout %x ratio = 0.5 seed = 0 : tensor<4xf32> -> tensor<4xf32>, tensor<2x2xi1>
  return
}

// -----

func.func @dropout_mask_not_i1(%x: tensor<4xf32>) {
  // expected-error @+1 {{'merak.dropout' op result #1 must be statically shaped tensor of 1-bit signless integer values}}
  %0:2 = merak.dropout %x ratio = 0.5 seed = 0 : tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_axis(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'merak.cross_entropy' op failed to infer returned types}}
  %0 = merak.cross_entropy %l, %t axis = 2 reduction = "mean" : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_labels_shape(%l: tensor<4x10xf32>, %t: tensor<10xi64>) {
  // expected-error @+2 {{labels 'tensor<10xi64>' must have the logits' shape without the class axis}}
  // expected-error @+1 {{'merak.cross_entropy' op failed to infer returned types}}
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" : tensor<4x10xf32>, tensor<10xi64> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_labels_rank(%l: tensor<2x5x3xf32>, %t: tensor<2x5x3xi64>) {
  // expected-error @+2 {{labels 'tensor<2x5x3xi64>' must have the logits' shape without the class axis}}
  // expected-error @+1 {{'merak.cross_entropy' op failed to infer returned types}}
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "sum" : tensor<2x5x3xf32>, tensor<2x5x3xi64> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_classes_without_group(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{classes (8) must be positive and needs a group (vocabulary parallelism)}}
  // expected-error @+1 {{'merak.cross_entropy' op failed to infer returned types}}
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" {classes = 8 : i64} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_classes(%l: tensor<4x5xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'merak.cross_entropy_grad' op classes (0) must be positive and needs a group (vocabulary parallelism)}}
  %0 = merak.cross_entropy_grad %l, %t, %g axis = 1 reduction = "mean" {classes = 0 : i64, group = "tp"} : tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
  return
}

// -----

func.func @cross_entropy_reduction(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{reduction must be mean, sum or none, got 'max'}}
  // expected-error @+1 {{'merak.cross_entropy' op failed to infer returned types}}
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "max" : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_none_result(%l: tensor<4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{'merak.cross_entropy' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{'merak.cross_entropy' op failed to infer returned types}}
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "none" : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_float_labels(%l: tensor<4x10xf32>, %t: tensor<4xf32>) {
  // expected-error @+1 {{'merak.cross_entropy' op operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values}}
  %0 = merak.cross_entropy %l, %t axis = 1 reduction = "mean" : tensor<4x10xf32>, tensor<4xf32> -> tensor<f32>
  return
}

// -----

func.func @argsort_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.argsort' op axis 2 is out of range for rank 2}}
  %0 = merak.argsort %a axis = 2 : tensor<2x3xf32> -> tensor<2x3xi64>
  return
}

// -----

func.func @argsort_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.argsort' op result shape must equal the input's}}
  %0 = merak.argsort %a axis = 1 : tensor<2x3xf32> -> tensor<2x2xi64>
  return
}

// -----

func.func @argsort_result_f32(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.argsort' op result #0 must be statically shaped tensor of 64-bit signless integer values}}
  %0 = merak.argsort %a axis = 1 : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @cumsum_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.cumsum' op axis 2 is out of range for rank 2}}
  %0 = merak.cumsum %a axis = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @linear_scan_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.linear_scan' op axis -3 is out of range for rank 2}}
  %0 = merak.linear_scan %a, %a axis = -3 : tensor<2x3xf32>
  return
}

// -----

func.func @linear_scan_types(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) {
  // expected-error @+1 {{'merak.linear_scan' op requires the same type for all operands and results}}
  %0 = "merak.linear_scan"(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @linear_scan_grad_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.linear_scan_grad' op axis 2 is out of range for rank 2}}
  %0:2 = merak.linear_scan_grad %a, %a, %a axis = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @selective_scan_ranks(%u: tensor<2x4x3xf32>, %a: tensor<4x2x1xf32>, %b: tensor<2x3x2xf32>) {
  // expected-error @+1 {{'merak.selective_scan' op expects u [B, D, T], a [D, N] and b, c [B, T, N]; got ranks 3, 3 and 3}}
  %0 = merak.selective_scan %u, %u, %a, %b, %b : tensor<2x4x3xf32>, tensor<4x2x1xf32>, tensor<2x3x2xf32>
  return
}

// -----

func.func @selective_scan_channels(%u: tensor<2x4x3xf32>, %a: tensor<5x2xf32>, %b: tensor<2x3x2xf32>) {
  // expected-error @+1 {{'merak.selective_scan' op shapes do not agree: u 'tensor<2x4x3xf32>', a 'tensor<5x2xf32>', b 'tensor<2x3x2xf32>' (expects [B, D, T], [D, N], [B, T, N])}}
  %0 = merak.selective_scan %u, %u, %a, %b, %b : tensor<2x4x3xf32>, tensor<5x2xf32>, tensor<2x3x2xf32>
  return
}

// -----

func.func @selective_scan_tokens(%u: tensor<2x4x3xf32>, %a: tensor<4x2xf32>, %b: tensor<2x5x2xf32>) {
  // expected-error @+1 {{'merak.selective_scan' op shapes do not agree}}
  %0 = merak.selective_scan %u, %u, %a, %b, %b : tensor<2x4x3xf32>, tensor<4x2xf32>, tensor<2x5x2xf32>
  return
}

// -----

func.func @selective_scan_element_types(%u: tensor<2x4x3xf32>, %a: tensor<4x2xf64>, %b: tensor<2x3x2xf32>) {
  // expected-error @+1 {{'merak.selective_scan' op expects one element type for every operand}}
  %0 = merak.selective_scan %u, %u, %a, %b, %b : tensor<2x4x3xf32>, tensor<4x2xf64>, tensor<2x3x2xf32>
  return
}

// -----

func.func @selective_scan_types(%u: tensor<2x4x3xf32>, %d: tensor<2x4x2xf32>, %a: tensor<4x2xf32>, %b: tensor<2x3x2xf32>) {
  // expected-error @+1 {{'merak.selective_scan' op failed to verify that all of {u, delta, result} have same type}}
  %0 = "merak.selective_scan"(%u, %d, %a, %b, %b) : (tensor<2x4x3xf32>, tensor<2x4x2xf32>, tensor<4x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x4x3xf32>
  return
}

// -----

func.func @selective_scan_grad_batch(%u: tensor<2x4x3xf32>, %a: tensor<4x2xf32>, %b: tensor<1x3x2xf32>) {
  // expected-error @+1 {{'merak.selective_scan_grad' op shapes do not agree}}
  %0:5 = merak.selective_scan_grad %u, %u, %a, %b, %b, %u : tensor<2x4x3xf32>, tensor<4x2xf32>, tensor<1x3x2xf32>
  return
}

// -----

func.func @conv_backward_data_grad(%g: tensor<1x4x2x2xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error @+1 {{'merak.conv2d_backward_data' op grad 'tensor<1x4x2x2xf32>' is not the conv2d result 'tensor<1x4x3x3xf32>' of this input and weight}}
  %0 = merak.conv2d_backward_data %g, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x4x2x2xf32>, tensor<4x1x3x3xf32>) -> tensor<1x2x5x5xf32>
  return
}

// -----

func.func @conv_backward_filter_grad(%x: tensor<1x2x5x5xf32>, %g: tensor<1x4x2x2xf32>) {
  // expected-error @+1 {{'merak.conv2d_backward_filter' op grad 'tensor<1x4x2x2xf32>' is not the conv2d result 'tensor<1x4x3x3xf32>' of this input and weight}}
  %0 = merak.conv2d_backward_filter %x, %g strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 2 : (tensor<1x2x5x5xf32>, tensor<1x4x2x2xf32>) -> tensor<4x1x3x3xf32>
  return
}

// -----

func.func @max_pool_grad(%x: tensor<1x1x4x4xf32>, %g: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{'merak.max_pool2d_grad' op grad 'tensor<1x1x3x3xf32>' is not the pool result 'tensor<1x1x2x2xf32>'}}
  %0 = merak.max_pool2d_grad %x, %g kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @max_pool_grad_result(%x: tensor<1x1x4x4xf32>, %g: tensor<1x1x2x2xf32>) {
  // expected-error @+1 {{'merak.max_pool2d_grad' op result type must equal the input type}}
  %0 = merak.max_pool2d_grad %x, %g kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x4x5xf32>
  return
}

// -----

func.func @avg_pool_grad(%g: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{'merak.avg_pool2d_grad' op grad 'tensor<1x1x3x3xf32>' is not the pool result 'tensor<1x1x2x2xf32>'}}
  %0 = merak.avg_pool2d_grad %g kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] : tensor<1x1x3x3xf32> -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @gather_elements_grad(%g: tensor<2x5xf32>, %i: tensor<2x5xi64>) {
  // expected-error @+1 {{'merak.gather_elements_grad' op indices dimension 1 exceeds the result's}}
  %0 = merak.gather_elements_grad %g[%i] axis = 0 : tensor<2x5xf32>, tensor<2x5xi64> -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_grad(%g: tensor<2x4xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'merak.gather_grad' op grad 'tensor<2x4xf32>' is not the gather result type of 'tensor<3x5xf32>' and 'tensor<2xi64>'}}
  %0 = merak.gather_grad %g[%i] axis = 0 : tensor<2x4xf32>, tensor<2xi64> -> tensor<3x5xf32>
  return
}

// -----

func.func @gather_grad_acc(%g: tensor<2x4xf32>, %i: tensor<2xi64>, %a: tensor<3x5xf32>) {
  // expected-error @+1 {{'merak.gather_grad' op accumulator 'tensor<3x5xf32>' is not the result type 'tensor<3x4xf32>'}}
  %0 = merak.gather_grad %g[%i] axis = 0 acc %a : tensor<2x4xf32>, tensor<2xi64>, tensor<3x5xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @gelu_grad_types(%x: tensor<4xf32>, %g: tensor<4xf64>) {
  // expected-error @+1 {{'merak.gelu_grad' op requires the same type for all operands and results}}
  %0 = "merak.gelu_grad"(%x, %g) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

func.func @softmax_grad_axis(%y: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'merak.softmax_grad' op axis 2 is out of range for rank 2}}
  %0 = merak.softmax_grad %y, %g axis = 2 : tensor<2x4xf32>
  return
}

// -----

func.func @log_softmax_grad_axis(%y: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'merak.log_softmax_grad' op axis -1 is out of range for rank 2}}
  %0 = merak.log_softmax_grad %y, %g axis = -1 : tensor<2x4xf32>
  return
}

// -----

func.func @softmax_grad_types(%y: tensor<2x4xf32>, %g: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.softmax_grad' op requires the same type for all operands and results}}
  %0 = "merak.softmax_grad"(%y, %g) {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_grad_axis(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'merak.layer_norm_grad' op axis 2 is out of range for rank 2}}
  %0:2 = merak.layer_norm_grad %x, %g axis = 2 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @layer_norm_grad_epsilon(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'merak.layer_norm_grad' op epsilon must be non-negative}}
  %0:2 = merak.layer_norm_grad %x, %g axis = 1 epsilon = -1.0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @layer_norm_grad_grad(%x: tensor<2x4xf32>, %g: tensor<2x3xf32>) {
  // expected-error @+1 {{'merak.layer_norm_grad' op grad type 'tensor<2x3xf32>' must equal the input type 'tensor<2x4xf32>'}}
  %0:2 = merak.layer_norm_grad %x, %g axis = 1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @layer_norm_grad_results(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'merak.layer_norm_grad' op result types must equal the input type 'tensor<2x4xf32>'}}
  %0:2 = merak.layer_norm_grad %x, %g axis = 1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf64>)
  return
}

// -----

func.func @layer_norm_grad_scale_type(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>, %w: tensor<4xf64>) {
  // expected-error @+1 {{'merak.layer_norm_grad' op scale element type differs from the input's}}
  %0:2 = merak.layer_norm_grad %x, %g scale %w axis = 1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf64>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @layer_norm_grad_scale_shape(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{'merak.layer_norm_grad' op scale shape 'tensor<2xf32>' does not broadcast to the normalised shape}}
  %0:2 = merak.layer_norm_grad %x, %g scale %w axis = 1 epsilon = 1.0e-5 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @cross_entropy_grad_axis(%l: tensor<4x5xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'merak.cross_entropy_grad' op axis 2 is out of range for rank 2}}
  %0 = merak.cross_entropy_grad %l, %t, %g axis = 2 reduction = "mean" : tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
  return
}

// -----

func.func @cross_entropy_grad_result(%l: tensor<4x5xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'merak.cross_entropy_grad' op result type 'tensor<4x5xf64>' must equal the logits type 'tensor<4x5xf32>'}}
  %0 = merak.cross_entropy_grad %l, %t, %g axis = 1 reduction = "mean" : tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf64>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<4x5xf32>, %t: tensor<5xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'merak.cross_entropy_grad' op labels 'tensor<5xi64>' must have the logits' shape without the class axis}}
  %0 = merak.cross_entropy_grad %l, %t, %g axis = 1 reduction = "mean" : tensor<4x5xf32>, tensor<5xi64>, tensor<f32> -> tensor<4x5xf32>
  return
}

// -----

func.func @cross_entropy_grad_reduction(%l: tensor<4x5xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'merak.cross_entropy_grad' op reduction must be mean, sum or none, got 'max'}}
  %0 = merak.cross_entropy_grad %l, %t, %g axis = 1 reduction = "max" : tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
  return
}

// -----

func.func @cross_entropy_grad_grad(%l: tensor<4x5xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'merak.cross_entropy_grad' op grad 'tensor<f32>' is not the cross_entropy result type 'tensor<4xf32>'}}
  %0 = merak.cross_entropy_grad %l, %t, %g axis = 1 reduction = "none" : tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
  return
}

// -----

func.func @unknown(%x: tensor<2xf32>) {
  // expected-error @+1 {{'merak.set_param' op 'nope' does not name a merak.param}}
  merak.set_param @nope, %x : tensor<2xf32>
  return
}

// -----

merak.param @w_sp : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @mismatch(%x: tensor<3xf32>) {
  // expected-error @+1 {{'merak.set_param' op value type 'tensor<3xf32>' does not match parameter type 'tensor<2xf32>'}}
  merak.set_param @w_sp, %x : tensor<3xf32>
  return
}

// -----

func.func @dropout_split_arity(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'merak.dropout' op batch_split must be [dim, blocks, parts], got 2 values}}
  %0:2 = merak.dropout %x ratio = 0.5 seed = 0 {batch_split = array<i64: 0, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  return
}

// -----

func.func @dropout_split_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'merak.dropout' op tp_split dimension 2 is out of range (the first 2 of rank 2 may be split)}}
  %0:2 = merak.dropout %x ratio = 0.5 seed = 0 {tp_split = array<i64: 2, 1, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  return
}

// -----

func.func @dropout_split_blocks(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'merak.dropout' op tp_split: dimension 1 (size 8) must hold 3 blocks, and parts (2) must be positive}}
  %0:2 = merak.dropout %x ratio = 0.5 seed = 0 {tp_split = array<i64: 1, 3, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  return
}
