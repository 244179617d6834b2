// RUN: rm -rf %t && mkdir -p %t
// RUN: merak-opt --merak-autodiff %s -o %t/grad.mlir
// RUN: %python -c "import numpy as np; \
// RUN:   [np.save('%t/' + n + '.npy', np.array(v, np.float64)) for n, v in [ \
// RUN:     ('loss', 9.5), ('x', [0, 0.5, 0.5, 0]), ('a', [3, 1, 3]), ('b', [0, 2, 0]), \
// RUN:     ('r', [0, 1, 0]), ('c', [1, 1, 1, 0]), ('y', [[0, 0.5, 0.5], [1, 1, 1]])]]"
// RUN: merak-run %t/grad.mlir --entry forward_grad --expect %t/loss.npy --expect %t/x.npy \
// RUN:   --expect %t/a.npy --expect %t/b.npy --expect %t/r.npy --expect %t/c.npy --expect %t/y.npy \
// RUN:   --rtol 0 --atol 1e-15 | FileCheck %s

// Where the functions are not differentiable, the rules follow documented
// conventions, checked here against exact values (finite differences do
// not apply):
//  * reduce_max / reduce_min share the gradient evenly among the elements
//    equal to the extremum;
//  * elementwise max / min give it all to the left operand on ties;
//  * relu passes nothing at 0; clamp passes it at the bounds (PyTorch).
//
// loss = reduce_max(x) + sum(max(a, b)) + 2 sum(min(a, b)) + sum(relu(r))
//        + sum(clamp(c, -1, 1)) + sum(reduce_min(y, axis 1) * [1, 3])
//      = 3 + 2 + 2 * 0.5 + 1 + 1.5 + 1 = 9.5

// CHECK: output 0 'loss' matches
// CHECK: output 1 'grad:x' matches
// CHECK: output 2 'grad:a' matches
// CHECK: output 3 'grad:b' matches
// CHECK: output 4 'grad:r' matches
// CHECK: output 5 'grad:c' matches
// CHECK: output 6 'grad:y' matches

merak.param @x : tensor<4xf64> = dense<[1.0, 3.0, 3.0, 2.0]> : tensor<4xf64>
merak.param @a : tensor<3xf64> = dense<[1.0, 2.0, -1.0]> : tensor<3xf64>
merak.param @b : tensor<3xf64> = dense<[1.0, 0.5, -1.0]> : tensor<3xf64>
merak.param @r : tensor<3xf64> = dense<[0.0, 1.0, -1.0]> : tensor<3xf64>
merak.param @c : tensor<4xf64> = dense<[-1.0, 1.0, 0.5, 2.0]> : tensor<4xf64>
merak.param @y : tensor<2x3xf64> = dense<[[2.0, 1.0, 1.0], [0.0, 0.0, 0.0]]> : tensor<2x3xf64>
func.func @forward() -> tensor<f64> {
  %x = merak.get_param @x : tensor<4xf64>
  %a = merak.get_param @a : tensor<3xf64>
  %b = merak.get_param @b : tensor<3xf64>
  %r = merak.get_param @r : tensor<3xf64>
  %c = merak.get_param @c : tensor<4xf64>
  %y = merak.get_param @y : tensor<2x3xf64>
  %two = merak.constant dense<2.0> : tensor<f64>
  %w = merak.constant dense<[[1.0], [3.0]]> : tensor<2x1xf64>
  %0 = merak.reduce_max %x axes = [0] : tensor<4xf64> -> tensor<f64>
  %1 = merak.max %a, %b : tensor<3xf64>, tensor<3xf64>
  %2 = merak.reduce_sum %1 axes = [0] : tensor<3xf64> -> tensor<f64>
  %3 = merak.min %a, %b : tensor<3xf64>, tensor<3xf64>
  %4 = merak.reduce_sum %3 axes = [0] : tensor<3xf64> -> tensor<f64>
  %5 = merak.mul %4, %two : tensor<f64>, tensor<f64>
  %6 = merak.relu %r : tensor<3xf64>
  %7 = merak.reduce_sum %6 axes = [0] : tensor<3xf64> -> tensor<f64>
  %8 = merak.clamp %c {min = -1.0 : f64, max = 1.0 : f64} : tensor<4xf64>
  %9 = merak.reduce_sum %8 axes = [0] : tensor<4xf64> -> tensor<f64>
  %10 = merak.reduce_min %y axes = [1] {keepdims} : tensor<2x3xf64> -> tensor<2x1xf64>
  %11 = merak.mul %10, %w : tensor<2x1xf64>, tensor<2x1xf64>
  %12 = merak.reduce_sum %11 axes = [0, 1] : tensor<2x1xf64> -> tensor<f64>
  %13 = merak.add %0, %2 : tensor<f64>, tensor<f64>
  %14 = merak.add %13, %5 : tensor<f64>, tensor<f64>
  %15 = merak.add %14, %7 : tensor<f64>, tensor<f64>
  %16 = merak.add %15, %9 : tensor<f64>, tensor<f64>
  %loss = merak.add %16, %12 : tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}
