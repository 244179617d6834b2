// RUN: merak-opt %s -merak-raise-linear-scan -canonicalize -split-input-file | FileCheck %s

// transformers' Mamba scan, as torch.onnx unrolls it over 3 tokens: per
// token the state h = a_t * h + b_t (the mul's operands in either order)
// and the read-out h @ C_t, stacked along the last axis.
// CHECK-LABEL: func.func @mamba_scan
// CHECK-SAME: (%[[A:.*]]: tensor<2x4x3x2xf32>, %[[B:.*]]: tensor<2x4x3x2xf32>, %[[C:.*]]: tensor<2x3x2xf32>)
// CHECK-NEXT: %[[I2:.*]] = merak.constant dense<2> : tensor<i64>
// CHECK-NEXT: %[[H:.*]] = merak.linear_scan %[[A]], %[[B]] axis = 2 : tensor<2x4x3x2xf32>
// CHECK-NEXT: %[[LAST:.*]] = merak.gather %[[H]][%[[I2]]] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[CR:.*]] = merak.reshape %[[C]] : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
// CHECK-NEXT: %[[P:.*]] = merak.mul %[[H]], %[[CR]] : tensor<2x4x3x2xf32>, tensor<2x1x3x2xf32>
// CHECK-NEXT: %[[Y:.*]] = merak.reduce_sum %[[P]] axes = [3] : tensor<2x4x3x2xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT: return %[[Y]], %[[LAST]]
func.func @mamba_scan(%a: tensor<2x4x3x2xf32>, %b: tensor<2x4x3x2xf32>, %c: tensor<2x3x2xf32>)
    -> (tensor<2x4x3xf32>, tensor<2x4x2xf32>) {
  %zeros = merak.constant dense<0.0> : tensor<2x4x2xf32>
  %i0 = merak.constant dense<0> : tensor<i64>
  %i1 = merak.constant dense<1> : tensor<i64>
  %i2 = merak.constant dense<-1> : tensor<i64>
  %a0 = merak.gather %a[%i0] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %b0 = merak.gather %b[%i0] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %m0 = merak.mul %a0, %zeros : tensor<2x4x2xf32>, tensor<2x4x2xf32>
  %h0 = merak.add %m0, %b0 : tensor<2x4x2xf32>, tensor<2x4x2xf32>
  %c0 = merak.gather %c[%i0] axis = 1 : tensor<2x3x2xf32>, tensor<i64> -> tensor<2x2xf32>
  %c0r = merak.reshape %c0 : tensor<2x2xf32> to tensor<2x2x1xf32>
  %y0 = merak.matmul %h0, %c0r : tensor<2x4x2xf32>, tensor<2x2x1xf32> -> tensor<2x4x1xf32>
  %a1 = merak.gather %a[%i1] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %b1 = merak.gather %b[%i1] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %m1 = merak.mul %h0, %a1 : tensor<2x4x2xf32>, tensor<2x4x2xf32>
  %h1 = merak.add %b1, %m1 : tensor<2x4x2xf32>, tensor<2x4x2xf32>
  %c1 = merak.gather %c[%i1] axis = 1 : tensor<2x3x2xf32>, tensor<i64> -> tensor<2x2xf32>
  %c1r = merak.reshape %c1 : tensor<2x2xf32> to tensor<2x2x1xf32>
  %y1 = merak.matmul %h1, %c1r : tensor<2x4x2xf32>, tensor<2x2x1xf32> -> tensor<2x4x1xf32>
  %a2 = merak.gather %a[%i2] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %b2 = merak.gather %b[%i2] axis = 2 : tensor<2x4x3x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %m2 = merak.mul %a2, %h1 : tensor<2x4x2xf32>, tensor<2x4x2xf32>
  %h2 = merak.add %m2, %b2 : tensor<2x4x2xf32>, tensor<2x4x2xf32>
  %c2 = merak.gather %c[%i2] axis = 1 : tensor<2x3x2xf32>, tensor<i64> -> tensor<2x2xf32>
  %c2r = merak.reshape %c2 : tensor<2x2xf32> to tensor<2x2x1xf32>
  %y2 = merak.matmul %h2, %c2r : tensor<2x4x2xf32>, tensor<2x2x1xf32> -> tensor<2x4x1xf32>
  %y = merak.concat %y0, %y1, %y2 axis = 2 : tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32> -> tensor<2x4x3xf32>
  return %y, %h2 : tensor<2x4x3xf32>, tensor<2x4x2xf32>
}

// -----

// A chain of 2 steps over an axis of 3 scans the first 2 tokens.
// CHECK-LABEL: func.func @prefix
// CHECK-DAG: %[[AS:.*]] = merak.slice %arg0 starts = [0, 0] limits = [2, 4] strides = [1, 1] : tensor<3x4xf32> to tensor<2x4xf32>
// CHECK-DAG: %[[BS:.*]] = merak.slice %arg1 starts = [0, 0] limits = [2, 4] strides = [1, 1] : tensor<3x4xf32> to tensor<2x4xf32>
// CHECK: %[[H:.*]] = merak.linear_scan %[[AS]], %[[BS]] axis = 0 : tensor<2x4xf32>
// CHECK: merak.gather %[[H]]
// CHECK-NOT: merak.add
// CHECK: return
func.func @prefix(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<4xf32> {
  %zeros = merak.constant dense<0.0> : tensor<4xf32>
  %i0 = merak.constant dense<0> : tensor<i64>
  %i1 = merak.constant dense<1> : tensor<i64>
  %a0 = merak.gather %a[%i0] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %b0 = merak.gather %b[%i0] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %m0 = merak.mul %zeros, %a0 : tensor<4xf32>, tensor<4xf32>
  %h0 = merak.add %b0, %m0 : tensor<4xf32>, tensor<4xf32>
  %a1 = merak.gather %a[%i1] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %b1 = merak.gather %b[%i1] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %m1 = merak.mul %a1, %h0 : tensor<4xf32>, tensor<4xf32>
  %h1 = merak.add %m1, %b1 : tensor<4xf32>, tensor<4xf32>
  return %h1 : tensor<4xf32>
}

// -----

// Not a scan: the second step reads token 2 (not 1) of the decay, the
// state starts from a value that is not zero, or the input broadcasts.
// CHECK-LABEL: func.func @not_scans
// CHECK-NOT: merak.linear_scan
// CHECK: return
func.func @not_scans(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>, %s: tensor<4xf32>, %v: tensor<1xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zeros = merak.constant dense<0.0> : tensor<4xf32>
  %i0 = merak.constant dense<0> : tensor<i64>
  %i1 = merak.constant dense<1> : tensor<i64>
  %i2 = merak.constant dense<2> : tensor<i64>
  %a0 = merak.gather %a[%i0] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %b0 = merak.gather %b[%i0] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %m0 = merak.mul %a0, %zeros : tensor<4xf32>, tensor<4xf32>
  %h0 = merak.add %m0, %b0 : tensor<4xf32>, tensor<4xf32>
  %a2 = merak.gather %a[%i2] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %b1 = merak.gather %b[%i1] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %m1 = merak.mul %a2, %h0 : tensor<4xf32>, tensor<4xf32>
  %h1 = merak.add %m1, %b1 : tensor<4xf32>, tensor<4xf32>
  // From %s.
  %n0 = merak.mul %a0, %s : tensor<4xf32>, tensor<4xf32>
  %g0 = merak.add %n0, %b0 : tensor<4xf32>, tensor<4xf32>
  %a1 = merak.gather %a[%i1] axis = 0 : tensor<3x4xf32>, tensor<i64> -> tensor<4xf32>
  %n1 = merak.mul %a1, %g0 : tensor<4xf32>, tensor<4xf32>
  %g1 = merak.add %n1, %b1 : tensor<4xf32>, tensor<4xf32>
  // A broadcast input.
  %q0 = merak.mul %a0, %zeros : tensor<4xf32>, tensor<4xf32>
  %k0 = merak.add %q0, %v : tensor<4xf32>, tensor<1xf32>
  %k1m = merak.mul %a1, %k0 : tensor<4xf32>, tensor<4xf32>
  %k1 = merak.add %k1m, %v : tensor<4xf32>, tensor<1xf32>
  return %h1, %g1, %k1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Read-outs stacked out of token order stay as they are.
// CHECK-LABEL: func.func @readout_out_of_order
// CHECK-NOT: merak.reduce_sum
// CHECK: merak.concat
func.func @readout_out_of_order(%h: tensor<2x4x2x2xf32>, %c: tensor<2x2x2xf32>) -> tensor<2x4x2xf32> {
  %i0 = merak.constant dense<0> : tensor<i64>
  %i1 = merak.constant dense<1> : tensor<i64>
  %h0 = merak.gather %h[%i0] axis = 2 : tensor<2x4x2x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %c0 = merak.gather %c[%i0] axis = 1 : tensor<2x2x2xf32>, tensor<i64> -> tensor<2x2xf32>
  %c0r = merak.reshape %c0 : tensor<2x2xf32> to tensor<2x2x1xf32>
  %y0 = merak.matmul %h0, %c0r : tensor<2x4x2xf32>, tensor<2x2x1xf32> -> tensor<2x4x1xf32>
  %h1 = merak.gather %h[%i1] axis = 2 : tensor<2x4x2x2xf32>, tensor<i64> -> tensor<2x4x2xf32>
  %c1 = merak.gather %c[%i1] axis = 1 : tensor<2x2x2xf32>, tensor<i64> -> tensor<2x2xf32>
  %c1r = merak.reshape %c1 : tensor<2x2xf32> to tensor<2x2x1xf32>
  %y1 = merak.matmul %h1, %c1r : tensor<2x4x2xf32>, tensor<2x2x1xf32> -> tensor<2x4x1xf32>
  %y = merak.concat %y1, %y0 axis = 2 : tensor<2x4x1xf32>, tensor<2x4x1xf32> -> tensor<2x4x2xf32>
  return %y : tensor<2x4x2xf32>
}

// -----

// The discretised scan and its read-out as the patterns above leave
// transformers' Mamba (u, dt [B, D, T] = [2, 4, 3], A [D, N] = [4, 2],
// B, C [B, T, N]; the exporters' unsqueezes of dt, one per use, the decay's
// and the input's mul operands in their other order): one
// merak.selective_scan of the unsqueezed values.
// CHECK-LABEL: func.func @fused_selective_scan
// CHECK-SAME: (%[[U:.*]]: tensor<2x4x3xf32>, %[[DT:.*]]: tensor<2x4x3xf32>, %[[A:.*]]: tensor<4x2xf32>, %[[B:.*]]: tensor<2x3x2xf32>, %[[C:.*]]: tensor<2x3x2xf32>)
// CHECK-NEXT: %[[Y:.*]] = merak.selective_scan %[[U]], %[[DT]], %[[A]], %[[B]], %[[C]] : tensor<2x4x3xf32>, tensor<4x2xf32>, tensor<2x3x2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @fused_selective_scan(%u: tensor<2x4x3xf32>, %dt: tensor<2x4x3xf32>, %a: tensor<4x2xf32>,
                                %b: tensor<2x3x2xf32>, %c: tensor<2x3x2xf32>) -> tensor<2x4x3xf32> {
  %a4 = merak.reshape %a : tensor<4x2xf32> to tensor<1x4x1x2xf32>
  %dt4 = merak.reshape %dt : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %z = merak.mul %dt4, %a4 : tensor<2x4x3x1xf32>, tensor<1x4x1x2xf32>
  %decay = merak.exp %z : tensor<2x4x3x2xf32>
  %dt4b = merak.reshape %dt : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %b4 = merak.reshape %b : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
  %db = merak.mul %b4, %dt4b : tensor<2x1x3x2xf32>, tensor<2x4x3x1xf32>
  %u4 = merak.reshape %u : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %in = merak.mul %u4, %db : tensor<2x4x3x1xf32>, tensor<2x4x3x2xf32>
  %h = merak.linear_scan %decay, %in axis = 2 : tensor<2x4x3x2xf32>
  %c4 = merak.reshape %c : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
  %p = merak.mul %c4, %h : tensor<2x1x3x2xf32>, tensor<2x4x3x2xf32>
  %y = merak.reduce_sum %p axes = [3] : tensor<2x4x3x2xf32> -> tensor<2x4x3xf32>
  return %y : tensor<2x4x3xf32>
}

// -----

// Not fused: the states are also returned (they would be computed twice),
// and the input's delta is not the decay's (a different tensor).
// CHECK-LABEL: func.func @not_fused
// CHECK-COUNT-2: merak.linear_scan
// CHECK-NOT: merak.selective_scan
func.func @not_fused(%u: tensor<2x4x3xf32>, %dt: tensor<2x4x3xf32>, %dt2: tensor<2x4x3xf32>,
                     %a: tensor<4x2xf32>, %b: tensor<2x3x2xf32>, %c: tensor<2x3x2xf32>)
    -> (tensor<2x4x3xf32>, tensor<2x4x3x2xf32>, tensor<2x4x3xf32>) {
  %a4 = merak.reshape %a : tensor<4x2xf32> to tensor<1x4x1x2xf32>
  %dt4 = merak.reshape %dt : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %z = merak.mul %a4, %dt4 : tensor<1x4x1x2xf32>, tensor<2x4x3x1xf32>
  %decay = merak.exp %z : tensor<2x4x3x2xf32>
  %b4 = merak.reshape %b : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
  %db = merak.mul %dt4, %b4 : tensor<2x4x3x1xf32>, tensor<2x1x3x2xf32>
  %u4 = merak.reshape %u : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %in = merak.mul %db, %u4 : tensor<2x4x3x2xf32>, tensor<2x4x3x1xf32>
  %h = merak.linear_scan %decay, %in axis = 2 : tensor<2x4x3x2xf32>
  %c4 = merak.reshape %c : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
  %p = merak.mul %h, %c4 : tensor<2x4x3x2xf32>, tensor<2x1x3x2xf32>
  %y = merak.reduce_sum %p axes = [3] : tensor<2x4x3x2xf32> -> tensor<2x4x3xf32>
  %dt24 = merak.reshape %dt2 : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %db2 = merak.mul %dt24, %b4 : tensor<2x4x3x1xf32>, tensor<2x1x3x2xf32>
  %in2 = merak.mul %db2, %u4 : tensor<2x4x3x2xf32>, tensor<2x4x3x1xf32>
  %h2 = merak.linear_scan %decay, %in2 axis = 2 : tensor<2x4x3x2xf32>
  %p2 = merak.mul %h2, %c4 : tensor<2x4x3x2xf32>, tensor<2x1x3x2xf32>
  %y2 = merak.reduce_sum %p2 axes = [3] : tensor<2x4x3x2xf32> -> tensor<2x4x3xf32>
  return %y, %h, %y2 : tensor<2x4x3xf32>, tensor<2x4x3x2xf32>, tensor<2x4x3xf32>
}
