// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/a.npy', np.arange(4, dtype=np.float32))"

// One process is a group of one rank: built for one part, ZeRO's
// collectives are the identity.
// RUN: merak-run %s --entry one_part --input %t/a.npy --expect %t/a.npy | FileCheck %s
// CHECK: output 0 '#0' matches (4 elements
func.func @one_part(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = merak.reduce_scatter %a group = "dp" reduction = "mean" : tensor<4xf32> -> tensor<4xf32>
  %l = merak.local_shard %r group = "dp" : tensor<4xf32> -> tensor<4xf32>
  %g = merak.all_gather %l group = "dp" : tensor<4xf32> -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// Built for two ranks, they are an error naming the op.
// RUN: not merak-run %s --entry two_parts --input %t/a.npy 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: 'merak.reduce_scatter' op splits over 2 ranks; the reference evaluator runs one
func.func @two_parts(%a: tensor<4xf32>) -> tensor<2xf32> {
  %r = merak.reduce_scatter %a group = "dp" reduction = "mean" : tensor<4xf32> -> tensor<2xf32>
  return %r : tensor<2xf32>
}
