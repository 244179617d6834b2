// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/a.npy', np.arange(4, dtype=np.float32)); np.save('%t/e.npy', np.exp(np.arange(4, dtype=np.float32)) * 2)"

// One process is a group of one rank: a started collective's wait yields
// its operands, even when they are dead (and their buffers reused) by then.
// RUN: merak-run %s --entry started --input %t/a.npy --expect %t/e.npy | FileCheck %s
// CHECK: output 0 '#0' matches (4 elements
func.func @started(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = merak.exp %a : tensor<4xf32>
  %r = merak.all_reduce_start %e group = "dp" reduction = "mean" : tensor<4xf32>
  %s = merak.reduce_scatter_start %e group = "dp" reduction = "sum" parts = 1 : tensor<4xf32>
  %x = merak.wait %r : tensor<4xf32>
  %y = merak.wait %s : tensor<4xf32>
  %z = merak.add %x, %y : tensor<4xf32>, tensor<4xf32>
  return %z : tensor<4xf32>
}

// Built for two ranks: an error naming the op.
// RUN: not merak-run %s --entry two_parts --input %t/a.npy 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: 'merak.all_gather_start' op splits over 2 ranks; the reference evaluator runs one
func.func @two_parts(%a: tensor<4xf32>) -> tensor<8xf32> {
  %r = merak.all_gather_start %a group = "dp" parts = 2 : tensor<4xf32>
  %x = merak.wait %r : tensor<8xf32>
  return %x : tensor<8xf32>
}
