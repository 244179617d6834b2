// RUN: rm -rf %t && mkdir -p %t/x %t/k %t/s %t/p
// RUN: merak-opt %s -merak-fuse-attention -o %t/fused.mlir
// RUN: FileCheck %s --check-prefix=FUSED --input-file %t/fused.mlir
//
// XLNet's scaled sum: q [4, 4, 16], kT [4, 16, 4], v, position scores bd.
// RUN: %python %S/Inputs/random_inputs.py %t/x 1 4x4x16 4x16x4 4x4x16 2x2x4x4
// RUN: merak-run %s --entry xlnet_scaled_sum --input %t/x/in0.npy --input %t/x/in1.npy \
// RUN:   --input %t/x/in2.npy --input %t/x/in3.npy --output-dir %t/x/ref --output-format npy
// RUN: merak-run %t/fused.mlir --entry xlnet_scaled_sum --input %t/x/in0.npy --input %t/x/in1.npy \
// RUN:   --input %t/x/in2.npy --input %t/x/in3.npy --expect %t/x/ref/output_0.npy \
// RUN:   --rtol 1e-5 --atol 1e-6 | FileCheck %s --check-prefix=XLNET
//
// More keys than queries, a bias from the tokens, sinks.
// RUN: %python %S/Inputs/random_inputs.py %t/k 2 2x2x4x16 2x2x16x6 2x2x6x16 2x1x4x6 2x2x4x1
// RUN: merak-run %s --entry more_keys_than_queries --input %t/k/in0.npy --input %t/k/in1.npy \
// RUN:   --input %t/k/in2.npy --input %t/k/in3.npy --input %t/k/in4.npy \
// RUN:   --output-dir %t/k/ref --output-format npy
// RUN: merak-run %t/fused.mlir --entry more_keys_than_queries --input %t/k/in0.npy \
// RUN:   --input %t/k/in1.npy --input %t/k/in2.npy --input %t/k/in3.npy --input %t/k/in4.npy \
// RUN:   --expect %t/k/ref/output_0.npy --rtol 1e-5 --atol 1e-6 | FileCheck %s --check-prefix=KEYS
//
// A padding mask subtracted from the scaled scores.
// RUN: %python %S/Inputs/random_inputs.py %t/s 3 2x2x4x16 2x2x16x4 2x2x4x16 --mask 2x1x4x4
// RUN: merak-run %s --entry subtracted_mask --input %t/s/in0.npy --input %t/s/in1.npy \
// RUN:   --input %t/s/in2.npy --input %t/s/in3.npy --output-dir %t/s/ref --output-format npy
// RUN: merak-run %t/fused.mlir --entry subtracted_mask --input %t/s/in0.npy --input %t/s/in1.npy \
// RUN:   --input %t/s/in2.npy --input %t/s/in3.npy --expect %t/s/ref/output_0.npy \
// RUN:   --rtol 1e-5 --atol 1e-6 | FileCheck %s --check-prefix=SUB
//
// XLNet with a padding mask: the mask subtracted outside the scale, the
// position scores added inside it (two bias terms).
// RUN: %python %S/Inputs/random_inputs.py %t/p 4 4x4x16 4x16x4 4x4x16 2x2x4x4 --mask 2x1x4x4
// RUN: merak-run %s --entry xlnet_padded --input %t/p/in0.npy --input %t/p/in1.npy \
// RUN:   --input %t/p/in2.npy --input %t/p/in3.npy --input %t/p/in4.npy \
// RUN:   --output-dir %t/p/ref --output-format npy
// RUN: merak-run %t/fused.mlir --entry xlnet_padded --input %t/p/in0.npy --input %t/p/in1.npy \
// RUN:   --input %t/p/in2.npy --input %t/p/in3.npy --input %t/p/in4.npy \
// RUN:   --expect %t/p/ref/output_0.npy --rtol 1e-5 --atol 1e-6 | FileCheck %s --check-prefix=PAD

// The forms merak-fuse-attention learned for XLNet (with and without a
// padding mask) and DeepSeek-V4 compute
// what their decomposed forms compute: each function evaluated before and
// after the pass (the reference evaluator's merak.attention), on random
// inputs. test/Transforms/merak-fuse-attention.mlir checks the rewrites.

// FUSED-COUNT-4: merak.attention
// FUSED-NOT: merak.softmax
// XLNET: output 0 '#0' matches (256 elements
// KEYS: output 0 '#0' matches (256 elements
// SUB: output 0 '#0' matches (256 elements
// PAD: output 0 '#0' matches (256 elements

func.func @xlnet_scaled_sum(%q: tensor<4x4x16xf32>, %kt: tensor<4x16x4xf32>, %v: tensor<4x4x16xf32>, %bd: tensor<2x2x4x4xf32>) -> tensor<4x4x16xf32> {
  %zero = merak.constant dense<0.0> : tensor<f32>
  %scale = merak.constant dense<0.25> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<4x4x16xf32>, tensor<4x16x4xf32> -> tensor<4x4x4xf32>
  %s4 = merak.reshape %s : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %ab = merak.add %s4, %bd : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %abe = merak.add %ab, %zero : tensor<2x2x4x4xf32>, tensor<f32>
  %scaled = merak.mul %abe, %scale : tensor<2x2x4x4xf32>, tensor<f32>
  %p4 = merak.softmax %scaled axis = 3 : tensor<2x2x4x4xf32>
  %p = merak.reshape %p4 : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = merak.matmul %p, %v : tensor<4x4x4xf32>, tensor<4x4x16xf32> -> tensor<4x4x16xf32>
  return %o : tensor<4x4x16xf32>
}

func.func @more_keys_than_queries(%q: tensor<2x2x4x16xf32>, %kt: tensor<2x2x16x6xf32>, %v: tensor<2x2x6x16xf32>, %b: tensor<2x1x4x6xf32>, %sink: tensor<2x2x4x1xf32>) -> tensor<2x2x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<2x2x4x16xf32>, tensor<2x2x16x6xf32> -> tensor<2x2x4x6xf32>
  %ss = merak.mul %s, %scale : tensor<2x2x4x6xf32>, tensor<f32>
  %sb = merak.add %ss, %b : tensor<2x2x4x6xf32>, tensor<2x1x4x6xf32>
  %c = merak.concat %sb, %sink axis = 3 : tensor<2x2x4x6xf32>, tensor<2x2x4x1xf32> -> tensor<2x2x4x7xf32>
  %m = merak.reduce_max %c axes = [3] {keepdims} : tensor<2x2x4x7xf32> -> tensor<2x2x4x1xf32>
  %d = merak.sub %c, %m : tensor<2x2x4x7xf32>, tensor<2x2x4x1xf32>
  %p7 = merak.softmax %d axis = 3 : tensor<2x2x4x7xf32>
  %p = merak.slice %p7 starts = [0, 0, 0, 0] limits = [2, 2, 4, 6] strides = [1, 1, 1, 1] : tensor<2x2x4x7xf32> to tensor<2x2x4x6xf32>
  %o = merak.matmul %p, %v : tensor<2x2x4x6xf32>, tensor<2x2x6x16xf32> -> tensor<2x2x4x16xf32>
  return %o : tensor<2x2x4x16xf32>
}

func.func @subtracted_mask(%q: tensor<2x2x4x16xf32>, %kt: tensor<2x2x16x4xf32>, %v: tensor<2x2x4x16xf32>, %m: tensor<2x1x4x4xf32>) -> tensor<2x2x4x16xf32> {
  %scale = merak.constant dense<0.25> : tensor<f32>
  %big = merak.constant dense<1.0e30> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<2x2x4x16xf32>, tensor<2x2x16x4xf32> -> tensor<2x2x4x4xf32>
  %ss = merak.mul %s, %scale : tensor<2x2x4x4xf32>, tensor<f32>
  %hide = merak.mul %m, %big : tensor<2x1x4x4xf32>, tensor<f32>
  %d = merak.sub %ss, %hide : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
  %p = merak.softmax %d axis = 3 : tensor<2x2x4x4xf32>
  %o = merak.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x16xf32> -> tensor<2x2x4x16xf32>
  return %o : tensor<2x2x4x16xf32>
}

func.func @xlnet_padded(%q: tensor<4x4x16xf32>, %kt: tensor<4x16x4xf32>, %v: tensor<4x4x16xf32>, %bd: tensor<2x2x4x4xf32>, %m: tensor<2x1x4x4xf32>) -> tensor<4x4x16xf32> {
  %zero = merak.constant dense<0.0> : tensor<f32>
  %scale = merak.constant dense<0.25> : tensor<f32>
  %big = merak.constant dense<1.0e30> : tensor<f32>
  %s = merak.matmul %q, %kt : tensor<4x4x16xf32>, tensor<4x16x4xf32> -> tensor<4x4x4xf32>
  %s4 = merak.reshape %s : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %ab = merak.add %s4, %bd : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %abe = merak.add %ab, %zero : tensor<2x2x4x4xf32>, tensor<f32>
  %scaled = merak.mul %abe, %scale : tensor<2x2x4x4xf32>, tensor<f32>
  %hide = merak.mul %m, %big : tensor<2x1x4x4xf32>, tensor<f32>
  %d = merak.sub %scaled, %hide : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
  %p4 = merak.softmax %d axis = 3 : tensor<2x2x4x4xf32>
  %p = merak.reshape %p4 : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = merak.matmul %p, %v : tensor<4x4x4xf32>, tensor<4x4x16xf32> -> tensor<4x4x16xf32>
  return %o : tensor<4x4x16xf32>
}
