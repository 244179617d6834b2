// RUN: merak-opt --merak-plan-memory --merak-to-emitc=target=cuda --verify-diagnostics %s
// RUN: merak-opt --merak-plan-memory --merak-to-emitc %s | FileCheck %s --check-prefix=CPU
// CPU: call_opaque "conv2d"
// CPU: call_opaque "maxPool2d"
// CPU: call_opaque "selectiveScan"
// CPU: call_opaque "selectiveScanGrad"

// Ops without a CUDA kernel (convolution, pooling, Mamba's fused scan) are
// named, all at once; the CPU target lowers the same module.
// expected-error @+1 {{merak-to-emitc: no CUDA kernel for merak.conv2d, merak.max_pool2d, merak.selective_scan, merak.selective_scan_grad}}
func.func @train_step(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %u: tensor<2x4x3xf32>,
                      %a: tensor<4x2xf32>, %b: tensor<2x3x2xf32>)
    -> (tensor<1x6x3x3xf32>, tensor<2x4x3xf32>, tensor<4x2xf32>) {
  %c = merak.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  %p = merak.max_pool2d %c kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<1x6x6x6xf32> -> tensor<1x6x3x3xf32>
  %y = merak.selective_scan %u, %u, %a, %b, %b : tensor<2x4x3xf32>, tensor<4x2xf32>, tensor<2x3x2xf32>
  %g:5 = merak.selective_scan_grad %u, %u, %a, %b, %b, %y : tensor<2x4x3xf32>, tensor<4x2xf32>, tensor<2x3x2xf32>
  return %p, %g#0, %g#2 : tensor<1x6x3x3xf32>, tensor<2x4x3xf32>, tensor<4x2xf32>
}
