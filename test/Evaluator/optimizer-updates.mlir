// RUN: rm -rf %t && mkdir -p %t && %python %S/Inputs/optimizer_updates.py %t
// RUN: merak-run %s --input %t/in0.npy --input %t/in1.npy --input %t/in2.npy --input %t/in3.npy \
// RUN:   --input %t/in4.npy --input %t/in5.npy --input %t/in6.npy \
// RUN:   --expect %t/out0.npy --expect %t/out1.npy --expect %t/out2.npy --rtol 2e-6 --atol 1e-7 | FileCheck %s

// Two steps of each fused update (weight decay 0.1, clip coefficient 0.8,
// zero initial state) against torch.optim.AdamW, torch.optim.SGD (Nesterov
// momentum 0.9) and Adan's Algorithm 1 (Inputs/optimizer_updates.py). The
// second AdamW step checks the bias correction of t = step + 1 = 2.

// CHECK: output 0 '#0' matches (6 elements
// CHECK: output 1 '#1' matches (6 elements
// CHECK: output 2 '#2' matches (6 elements
func.func @forward(%p: tensor<6xf32>, %g0: tensor<6xf32>, %g1: tensor<6xf32>, %lr: tensor<f32>,
                   %c: tensor<f32>, %s0: tensor<i64>, %s1: tensor<i64>)
    -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
  %z = merak.constant dense<0.0> : tensor<6xf32>
  %a1, %m1, %v1 = merak.adamw_update %p, %g0, %z, %z lr %lr step %s0 clip %c
      beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.1
      : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<f32>, tensor<i64>,
         tensor<f32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
  %a2, %m2, %v2 = merak.adamw_update %a1, %g1, %m1, %v1 lr %lr step %s1 clip %c
      beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.1
      : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<f32>, tensor<i64>,
         tensor<f32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
  %s1p:2 = merak.sgd_update %p, %g0 momentum_buffer %z lr %lr clip %c momentum = 0.9
      weight_decay = 0.1 {nesterov}
      : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<f32>, tensor<f32>) -> (tensor<6xf32>, tensor<6xf32>)
  %s2p:2 = merak.sgd_update %s1p#0, %g1 momentum_buffer %s1p#1 lr %lr clip %c momentum = 0.9
      weight_decay = 0.1 {nesterov}
      : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<f32>, tensor<f32>) -> (tensor<6xf32>, tensor<6xf32>)
  %d1:5 = merak.adan_update %p, %g0, %z, %z, %z, %z lr %lr step %s0 clip %c
      beta1 = 0.02 beta2 = 0.08 beta3 = 0.01 eps = 1.0e-8 weight_decay = 0.1
      : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>,
         tensor<f32>, tensor<i64>, tensor<f32>)
      -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
  %d2:5 = merak.adan_update %d1#0, %g1, %d1#1, %d1#2, %d1#3, %d1#4 lr %lr step %s1 clip %c
      beta1 = 0.02 beta2 = 0.08 beta3 = 0.01 eps = 1.0e-8 weight_decay = 0.1
      : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>,
         tensor<f32>, tensor<i64>, tensor<f32>)
      -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
  return %a2, %s2p#0, %d2#0 : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
}
