// RUN: merak-opt %s -split-input-file -merak-drop-unused-params | FileCheck %s

// merak-drop-unused-params erases merak.param symbols that no
// merak.get_param reads.

// CHECK-LABEL: module
// CHECK-NOT: merak.param @unused
// CHECK: merak.param @h.0.weight : tensor<2xf32>
// CHECK-NOT: merak.param @unused
// CHECK: merak.param @bias : tensor<2xf32>
// CHECK-NOT: merak.param @unused
// CHECK-LABEL: func.func @forward
merak.param @"h.0.weight" : tensor<2xf32> = dense<1.0> : tensor<2xf32>
merak.param @unused : tensor<4xi64> = dense<[1, 2, 3, 4]> : tensor<4xi64>
merak.param @bias : tensor<2xf32> = dense<0.0> : tensor<2xf32>
merak.param @unused_too : tensor<f32> = dense<0.0> : tensor<f32>

func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = merak.get_param @"h.0.weight" : tensor<2xf32>
  %b = merak.get_param @bias : tensor<2xf32>
  %0 = merak.mul %x, %w : tensor<2xf32>, tensor<2xf32>
  %1 = merak.add %0, %b : tensor<2xf32>, tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// A read in any function keeps the parameter, even a read whose value is
// unused (dead reads are removed by canonicalisation, not by this pass).
// CHECK-LABEL: module
// CHECK-DAG: merak.param @read_in_helper
// CHECK-DAG: merak.param @read_but_dead
// CHECK-NOT: merak.param
// CHECK-LABEL: func.func @helper
merak.param @read_in_helper : tensor<3xf32> = dense<1.0> : tensor<3xf32>
merak.param @read_but_dead : tensor<3xf32> = dense<2.0> : tensor<3xf32>
merak.param @never_read : tensor<3xf32> = dense<3.0> : tensor<3xf32>

func.func @helper() -> tensor<3xf32> {
  %0 = merak.get_param @read_in_helper : tensor<3xf32>
  return %0 : tensor<3xf32>
}

func.func @forward(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = merak.get_param @read_but_dead : tensor<3xf32>
  return %x : tensor<3xf32>
}

// -----

// A module whose parameters are all unused loses all of them; functions
// and other symbols stay.
// CHECK-LABEL: module
// CHECK-NOT: merak.param
// CHECK: func.func @forward
// CHECK-NOT: merak.param
merak.param @a : tensor<1xf32> = dense<1.0> : tensor<1xf32>
merak.param @b : tensor<1xi1> = dense<true> : tensor<1xi1>

func.func @forward(%x: tensor<1xf32>) -> tensor<1xf32> {
  return %x : tensor<1xf32>
}
