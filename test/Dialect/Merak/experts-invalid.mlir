// RUN: merak-opt %s -split-input-file -verify-diagnostics

func.func @rank(%x: tensor<4x3xf32>, %w: tensor<2x3xf32>, %e: tensor<4xi64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects input [S, K], result [S, O], weight [E, O, K] and experts [S], got ranks 2, 2, 2 and 1}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<4x3xf32>, tensor<2x3xf32>, tensor<4xi64> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

func.func @rows(%x: tensor<4x3xf32>, %w: tensor<2x5x3xf32>, %e: tensor<3xi64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{input, result and experts must have the same rows, got 4, 4 and 3}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<4x3xf32>, tensor<2x5x3xf32>, tensor<3xi64> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

func.func @features(%x: tensor<4x3xf32>, %w: tensor<2x5x3xf32>, %e: tensor<4xi64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{weight 'tensor<2x5x3xf32>' does not match input [4, 3] and result [4, 5]: expected [E, 3, 5] (transpose_weight)}}
  %y = merak.expert_matmul %x, %w[%e] transpose_weight : tensor<4x3xf32>, tensor<2x5x3xf32>, tensor<4xi64> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

func.func @types(%x: tensor<4x3xf64>, %w: tensor<2x5x3xf32>, %e: tensor<4xi64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{input, result and weight must have one element type}}
  %y = merak.expert_matmul %x, %w[%e] : tensor<4x3xf64>, tensor<2x5x3xf32>, tensor<4xi64> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

func.func @grad_weight(%x: tensor<4x3xf32>, %g: tensor<4x5xf32>, %e: tensor<4xi64>) -> tensor<2x3x5xf32> {
  // expected-error @+1 {{result 'tensor<2x3x5xf32>' does not match input [4, 3] and grad [4, 5]: expected [E, 5, 3]}}
  %dw = merak.expert_matmul_grad_weight %x, %g[%e] : tensor<4x3xf32>, tensor<4x5xf32>, tensor<4xi64> -> tensor<2x3x5xf32>
  return %dw : tensor<2x3x5xf32>
}

// -----

// An accumulator has the result's type.
func.func @grad_weight_acc(%x: tensor<4x3xf32>, %g: tensor<4x5xf32>, %e: tensor<4xi64>, %a: tensor<2x3x5xf32>) -> tensor<2x5x3xf32> {
  // expected-error @+1 {{acc type 'tensor<2x3x5xf32>' must equal the result type 'tensor<2x5x3xf32>'}}
  %dw = merak.expert_matmul_grad_weight %x, %g[%e] acc %a : tensor<4x3xf32>, tensor<4x5xf32>, tensor<4xi64>, tensor<2x3x5xf32> -> tensor<2x5x3xf32>
  return %dw : tensor<2x5x3xf32>
}
