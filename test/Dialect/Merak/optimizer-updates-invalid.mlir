// RUN: merak-opt %s -split-input-file -verify-diagnostics

// Verifier errors of the fused optimizer updates.

func.func @state_type(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<3xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{expects every parameter, gradient, state and result tensor to have the parameter's type 'tensor<4xf32>', got 'tensor<3xf32>'}}
  %a, %b, %c = merak.adamw_update %p, %g, %m, %p lr %lr step %s beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @lr_not_scalar(%p: tensor<4xf32>, %lr: tensor<1xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{lr must be a rank-0 tensor of 'f32', got 'tensor<1xf32>'}}
  %a, %b, %c = merak.adamw_update %p, %p, %p, %p lr %lr step %s beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @clip_type(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>, %c: tensor<f64>) {
  // expected-error @+1 {{clip must be a rank-0 tensor of 'f32', got 'tensor<f64>'}}
  %a, %b, %c2 = merak.adamw_update %p, %p, %p, %p lr %lr step %s clip %c beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @step_rank(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<2xi64>) {
  // expected-error @+1 {{step must be a rank-0 integer tensor, got 'tensor<2xi64>'}}
  %a, %b, %c = merak.adamw_update %p, %p, %p, %p lr %lr step %s beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<2xi64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @beta_range(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{beta2 must be in [0, 1), got 1}}
  %a, %b, %c = merak.adamw_update %p, %p, %p, %p lr %lr step %s beta1 = 0.9 beta2 = 1.0 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @negative_eps(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{eps must be non-negative, got -1}}
  %a, %b, %c = merak.adamw_update %p, %p, %p, %p lr %lr step %s beta1 = 0.9 beta2 = 0.999 eps = -1.0 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adan_beta(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{beta3 must be in [0, 1], got 2}}
  %a, %b, %c, %d, %e = merak.adan_update %p, %p, %p, %p, %p, %p lr %lr step %s beta1 = 0.02 beta2 = 0.08 beta3 = 2.0 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adan_result(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{expects every parameter, gradient, state and result tensor to have the parameter's type 'tensor<4xf32>', got 'tensor<2x2xf32>'}}
  %a, %b, %c, %d, %e = merak.adan_update %p, %p, %p, %p, %p, %p lr %lr step %s beta1 = 0.02 beta2 = 0.08 beta3 = 0.01 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @sgd_missing_buffer(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{expects a momentum_buffer exactly when momentum is not 0 (momentum 9.000000e-01, without a buffer)}}
  %a = merak.sgd_update %p, %p lr %lr momentum = 0.9 weight_decay = 0.0 : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_results(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{expects 2 results (the parameter and the momentum buffer), got 1}}
  %a = merak.sgd_update %p, %p momentum_buffer %p lr %lr momentum = 0.9 weight_decay = 0.0 : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{nesterov needs momentum}}
  %a = merak.sgd_update %p, %p lr %lr momentum = 0.0 weight_decay = 0.0 {nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_negative_momentum(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{momentum must be non-negative, got -5.000000e-01}}
  %a:2 = merak.sgd_update %p, %p momentum_buffer %p lr %lr momentum = -0.5 weight_decay = 0.0 : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}
