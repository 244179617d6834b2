// RUN: merak-opt %s -merak-batch-norm-stats -merak-attach-loss="loss=model-output" -merak-pipeline="pp=1 microbatches=2" -merak-recompute="mode=none" | FileCheck %s
// RUN: merak-opt %s -merak-batch-norm-stats -merak-attach-loss="loss=model-output" -merak-pipeline="pp=1 microbatches=2" -merak-recompute="mode=full" | FileCheck %s

// Pipelined (one stage, two micro-batches): the forward fragment writes
// the statistics and counts the batch (the counter's update reads
// parameters and constants alone, and still lands in the fragment), the
// backward does not repeat the writes (once per micro-batch), and the
// buffers get no gradient accumulator.
// CHECK-NOT: pipeline.grad.bn
// CHECK: merak.param @bn.num_batches_tracked : tensor<i64> = dense<0> : tensor<i64> {merak.kind = "buffer"}
// CHECK-LABEL: func.func @stage0_forward
// CHECK: merak.set_param @bn.running_mean
// CHECK: merak.set_param @bn.running_var
// CHECK: merak.set_param @bn.num_batches_tracked, %{{.*}} : tensor<i64>
// CHECK-LABEL: func.func @stage0_backward
// CHECK-NOT: merak.set_param @bn
// CHECK: merak.set_param @pipeline.grad.w
// CHECK-NOT: merak.set_param @bn
// CHECK: return
// (merak-recompute pairs the forward's other ops with the backward's copy.)
merak.param @w : tensor<3xf32> = dense<1.0> : tensor<3xf32>
merak.param @bn.running_mean : tensor<3xf32> = dense<0.0> : tensor<3xf32>
merak.param @bn.running_var : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @forward(%x: tensor<2x3x2xf32>) -> tensor<f32> {
  %w = merak.get_param @w : tensor<3xf32>
  %m = merak.get_param @bn.running_mean : tensor<3xf32>
  %v = merak.get_param @bn.running_var : tensor<3xf32>
  %y = merak.batch_norm %x, %w, %w, %m, %v epsilon = 1.0e-5 {training, momentum = 0.9 : f64} : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
  %t = merak.tanh %y : tensor<2x3x2xf32>
  %l = merak.reduce_mean %t axes = [0, 1, 2] : tensor<2x3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

