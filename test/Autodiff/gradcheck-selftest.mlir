// Tests of the checker Inputs/gradcheck.py itself: it passes correct
// gradients, and fails (exit 1) when the analytic gradients are distorted
// by a relative factor of 1e-4, by a sign, or by a permutation; when a
// parameter declared zero has a non-zero gradient; when a parameter does
// not influence the loss but is not declared zero; and on bad input.

// RUN: %python %S/Inputs/gradcheck.py %s --case 0 | FileCheck %s --check-prefix=OK
// OK: case 0: param @w 2x3: max|analytic-numeric| = {{.*}}  ok
// OK: case 0: PASS
// OK: gradcheck: all 1 cases passed

// RUN: not %python %S/Inputs/gradcheck.py %s --case 0 --corrupt-scale 1.0001 | FileCheck %s --check-prefix=FACTOR
// FACTOR: case 0: param @w 2x3: {{.*}}  FAIL
// FACTOR: case 0: FAIL
// FACTOR: gradcheck: 1 of 1 cases FAILED

// RUN: not %python %S/Inputs/gradcheck.py %s --case 0 --corrupt-scale -1 | FileCheck %s --check-prefix=SIGN
// SIGN: case 0: param @w 2x3: {{.*}}  FAIL
// SIGN: gradcheck: 1 of 1 cases FAILED

// RUN: not %python %S/Inputs/gradcheck.py %s --case 0 --corrupt-reverse | FileCheck %s --check-prefix=PERM
// PERM: case 0: param @w 2x3: {{.*}}  FAIL
// PERM: gradcheck: 1 of 1 cases FAILED

// RUN: not %python %S/Inputs/gradcheck.py %s --case 0 --zero w | FileCheck %s --check-prefix=ZERO
// ZERO: case 0: param @w 2x3: {{.*}}, exactly zero: NO  FAIL

// RUN: not %python %S/Inputs/gradcheck.py %s --case 1 | FileCheck %s --check-prefix=TRIVIAL
// TRIVIAL: case 1: param @w 3: {{.*}}  ok
// TRIVIAL: case 1: param @u 3: {{.*}} (trivial: the loss does not depend on it; use gradcheck-zero)  FAIL
// TRIVIAL: case 1: FAIL
// RUN: %python %S/Inputs/gradcheck.py %s --case 1 --zero u | FileCheck %s --check-prefix=DECLARED
// DECLARED: case 1: param @u 3: {{.*}}, exactly zero: yes  ok
// DECLARED: case 1: PASS

// RUN: not %python %S/Inputs/gradcheck.py %s --case 2 | FileCheck %s --check-prefix=NOARG
// NOARG: case 2: error: argument %i (i64) needs a `// gradcheck-arg:` value
// NOARG: case 2: FAIL

// RUN: not %python %S/Inputs/gradcheck.py %s --case 3 | FileCheck %s --check-prefix=NORULE
// NORULE: case 3: error: merak-opt --merak-autodiff failed
// NORULE: no derivative rule for 1 op kind(s) on the path to the loss: 'merak.reduce_prod' (1x)
// NORULE: case 3: FAIL

merak.param @w : tensor<2x3xf64> = dense<[[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]> : tensor<2x3xf64>
func.func @forward(%x: tensor<2x3xf64>) -> tensor<f64> {
  %w = merak.get_param @w : tensor<2x3xf64>
  %0 = merak.mul %w, %x : tensor<2x3xf64>, tensor<2x3xf64>
  %1 = merak.tanh %0 : tensor<2x3xf64>
  %l = merak.reduce_sum %1 axes = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

merak.param @w : tensor<3xf64> = dense<[0.3, -1.2, 0.7]> : tensor<3xf64>
merak.param @u : tensor<3xf64> = dense<[0.5, 0.5, 0.5]> : tensor<3xf64>
func.func @forward() -> tensor<f64> {
  %w = merak.get_param @w : tensor<3xf64>
  %0 = merak.mul %w, %w : tensor<3xf64>, tensor<3xf64>
  %l = merak.reduce_sum %0 axes = [0] : tensor<3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

merak.param @e : tensor<3x2xf64> = dense<0.5> : tensor<3x2xf64>
func.func @forward(%i: tensor<2xi64>) -> tensor<f64> {
  %e = merak.get_param @e : tensor<3x2xf64>
  %0 = merak.gather %e[%i] axis = 0 : tensor<3x2xf64>, tensor<2xi64> -> tensor<2x2xf64>
  %l = merak.reduce_sum %0 axes = [0, 1] : tensor<2x2xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

merak.param @p : tensor<3xf64> = dense<[1.5, 2.0, 0.5]> : tensor<3xf64>
func.func @forward() -> tensor<f64> {
  %p = merak.get_param @p : tensor<3xf64>
  %0 = merak.reduce_prod %p axes = [0] : tensor<3xf64> -> tensor<f64>
  return %0 : tensor<f64>
}
