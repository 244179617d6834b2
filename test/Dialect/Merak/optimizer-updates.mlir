// RUN: merak-opt %s | merak-opt | FileCheck %s

// The fused optimizer updates print and parse back (round trip).

// CHECK-LABEL: func.func @adamw
// CHECK: merak.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} clip %{{.*}} beta1 = 9.000000e-01 beta2 = 0.99899999999999999 eps = 1.000000e-08 weight_decay = 1.000000e-02 : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
func.func @adamw(%p: tensor<4x2xf32>, %g: tensor<4x2xf32>, %m: tensor<4x2xf32>, %v: tensor<4x2xf32>,
                 %lr: tensor<f32>, %step: tensor<i64>, %c: tensor<f32>)
    -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) {
  %p1, %m1, %v1 = merak.adamw_update %p, %g, %m, %v lr %lr step %step clip %c
      beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.01
      : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>,
         tensor<i64>, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  return %p1, %m1, %v1 : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}

// CHECK-LABEL: func.func @adan
// CHECK: merak.adan_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} beta1 = 2.000000e-02 beta2 = 8.000000e-02 beta3 = 1.000000e-02 eps = 1.000000e-08 weight_decay = 0.000000e+00 : (tensor<3xf64>
func.func @adan(%p: tensor<3xf64>, %g: tensor<3xf64>, %lr: tensor<f64>, %step: tensor<i64>) -> tensor<3xf64> {
  %p1, %m1, %d1, %n1, %g1 = merak.adan_update %p, %g, %p, %p, %p, %p lr %lr step %step
      beta1 = 0.02 beta2 = 0.08 beta3 = 0.01 eps = 1.0e-8 weight_decay = 0.0
      : (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>,
         tensor<f64>, tensor<i64>) -> (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>)
  return %p1 : tensor<3xf64>
}

// CHECK-LABEL: func.func @sgd
// CHECK: merak.sgd_update %{{.*}}, %{{.*}} lr %{{.*}} momentum = 0.000000e+00 weight_decay = 0.000000e+00 : (tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK: merak.sgd_update %{{.*}}, %{{.*}} momentum_buffer %{{.*}} lr %{{.*}} clip %{{.*}} momentum = 9.000000e-01 weight_decay = 1.000000e-01 {nesterov} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
func.func @sgd(%p: tensor<3xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %lr: tensor<f32>, %c: tensor<f32>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %p1 = merak.sgd_update %p, %g lr %lr momentum = 0.0 weight_decay = 0.0
      : (tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %p2:2 = merak.sgd_update %p, %g momentum_buffer %b lr %lr clip %c momentum = 0.9
      weight_decay = 0.1 {nesterov}
      : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %p1, %p2#0, %p2#1 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
