// RUN: merak-opt --merak-plan-memory --merak-to-emitc=target=cuda --verify-diagnostics %s
// RUN: merak-opt --merak-plan-memory --merak-to-emitc %s | FileCheck %s --check-prefix=CPU
// CPU: call_opaque "conv2d"
// CPU: call_opaque "maxPool2d"

// Ops without a CUDA kernel (convolution, pooling) are named, all at once;
// the CPU target lowers the same module.
// expected-error @+1 {{merak-to-emitc: no CUDA kernel for merak.conv2d, merak.max_pool2d}}
func.func @train_step(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32> {
  %c = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  %p = merak.max_pool2d %c kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<1x6x6x6xf32> -> tensor<1x6x3x3xf32>
  return %p : tensor<1x6x3x3xf32>
}
