// RUN: not merak-opt --merak-autodiff %s 2>&1 | FileCheck %s

// A @forward without a body (an external declaration) has no loss to
// differentiate: the pass must reject it with an error naming @forward
// rather than read the terminator of its empty body. (`not` fails on a
// crash, so a crash fails this test.)
// CHECK: error: {{.*}}@forward
// CHECK-NOT: Stack dump

merak.param @p : tensor<3xf64> = dense<[0.5, -1.0, 1.5]> : tensor<3xf64>
func.func private @forward(tensor<3xf64>) -> tensor<f64>
