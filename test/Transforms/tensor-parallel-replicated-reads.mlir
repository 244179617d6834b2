// RUN: merak-opt %s -merak-tensor-parallel=tp=2 | FileCheck %s
// RUN: merak-opt %s -merak-tensor-parallel=tp=2 -merak-autodiff | FileCheck %s --check-prefix=GRAD

// Qwen3-style per-head RMSNorm of the queries (its weight [D] is shared by
// every head): the heads split over tp, the weight stays whole on each
// rank, and each rank's gradient of it sums over its own heads only. The
// weight's read by the split norm goes through Megatron's f
// (merak.tp_identity), whose derivative sums that gradient over tp; the
// constant scale needs none.
// CHECK-DAG: merak.param @qn.weight : tensor<4xf32> = dense<{{.*}}> : tensor<4xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: merak.tp_identity %arg0 : tensor<1x4x8xf32>
// CHECK: %[[W:.*]] = merak.get_param @qn.weight : tensor<4xf32>
// CHECK-NEXT: %[[FW:.*]] = merak.tp_identity %[[W]] : tensor<4xf32>
// CHECK-NOT: merak.tp_identity
// CHECK: merak.rms_norm %{{.*}} scale %[[FW]] axis = 3 {{.*}} : (tensor<1x4x1x4xf32>, tensor<4xf32>) -> tensor<1x4x1x4xf32>
// CHECK-NEXT: merak.mul %{{.*}}, %{{.*}} : tensor<1x4x1x4xf32>, tensor<f32>
// CHECK: merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<1x4x8xf32>

// The norm weight's gradient is the tp sum of the ranks' parts.
// GRAD-LABEL: func.func @forward_grad
// GRAD: %[[G:.*]] = merak.all_reduce %{{.*}} group = "tp" reduction = "sum" : tensor<4xf32> -> tensor<4xf32>
// GRAD: return {{.*}}%[[G]]
merak.param @q.weight : tensor<8x8xf32> = dense<0.125> : tensor<8x8xf32>
merak.param @qn.weight : tensor<4xf32> = dense<1.0> : tensor<4xf32>
merak.param @o.weight : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
  %scale = merak.constant dense<5.000000e-01> : tensor<f32>
  %wq = merak.get_param @q.weight : tensor<8x8xf32>
  %wn = merak.get_param @qn.weight : tensor<4xf32>
  %wo = merak.get_param @o.weight : tensor<8x8xf32>
  %tq = merak.transpose %wq perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %q0 = merak.matmul %x, %tq : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %q1 = merak.reshape %q0 : tensor<1x4x8xf32> to tensor<1x4x2x4xf32>
  %q2 = merak.rms_norm %q1 scale %wn axis = 3 epsilon = 1.0e-06 : (tensor<1x4x2x4xf32>, tensor<4xf32>) -> tensor<1x4x2x4xf32>
  %q3 = merak.mul %q2, %scale : tensor<1x4x2x4xf32>, tensor<f32>
  %y = merak.reshape %q3 : tensor<1x4x2x4xf32> to tensor<1x4x8xf32>
  %to = merak.transpose %wo perm = [1, 0] : tensor<8x8xf32> to tensor<8x8xf32>
  %o = merak.matmul %y, %to : tensor<1x4x8xf32>, tensor<8x8xf32> -> tensor<1x4x8xf32>
  %l = merak.reduce_sum %o axes = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
