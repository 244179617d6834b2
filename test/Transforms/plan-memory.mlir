// RUN: merak-opt --merak-plan-memory --split-input-file --verify-diagnostics %s | FileCheck %s

// Liveness: the argument dies at the add, so the mul reuses its bytes; the
// reshape is a view of the mul (no offset) and keeps it alive until the last
// set_param; the exp reuses the add's bytes. A result in parameter storage
// gets a slot of its own. Zero-initialised parameters go last.

// CHECK-LABEL: module attributes
// CHECK-SAME: merak.consts_bytes = 0 : i64, merak.params_bytes = 128 : i64, merak.params_init_bytes = 64 : i64
// CHECK: merak.param @m {{.*}} {merak.offset = 64 : i64}
// CHECK: merak.param @w {{.*}} {merak.offset = 0 : i64}
// CHECK: func.func @train_step(%arg0: tensor<4x4xf32> {merak.offset = 0 : i64})
// CHECK-SAME: merak.arena_bytes = 192 : i64, merak.result_offsets = array<i64: 128, 0>
// CHECK: merak.get_param @w : tensor<4x4xf32>
// CHECK-NEXT: merak.add {{.*}} {merak.offsets = array<i64: 64>}
// CHECK-NEXT: merak.mul {{.*}} {merak.offsets = array<i64: 0>}
// CHECK-NEXT: merak.reshape
// CHECK-NOT: merak.offsets
// CHECK-SAME: tensor<16xf32>
// CHECK-NEXT: merak.exp {{.*}} {merak.offsets = array<i64: 64>}
// CHECK-NEXT: merak.reduce_sum {{.*}} {merak.offsets = array<i64: 128>}
merak.param @m : tensor<4x4xf32> = dense<0.0> : tensor<4x4xf32>
merak.param @w : tensor<4x4xf32> = dense<1.0> : tensor<4x4xf32>
func.func @train_step(%x: tensor<4x4xf32>) -> (tensor<f32>, tensor<4x4xf32>) {
  %w = merak.get_param @w : tensor<4x4xf32>
  %a = merak.add %x, %w : tensor<4x4xf32>, tensor<4x4xf32>
  %b = merak.mul %a, %a : tensor<4x4xf32>, tensor<4x4xf32>
  %r = merak.reshape %b : tensor<4x4xf32> to tensor<16xf32>
  %c = merak.exp %r : tensor<16xf32>
  %s = merak.reduce_sum %c axes = [0] : tensor<16xf32> -> tensor<f32>
  merak.set_param @w, %b : tensor<4x4xf32>
  merak.set_param @m, %b : tensor<4x4xf32>
  %m = merak.get_param @m : tensor<4x4xf32>
  return %s, %m : tensor<f32>, tensor<4x4xf32>
}

// -----

// A parameter read after it was written keeps a private copy; one read only
// before the write does not.
// CHECK: merak.param @q
// CHECK: merak.get_param @p {merak.copy, merak.offsets = array<i64: 64>}
// CHECK: merak.get_param @q : tensor<4xf32>
// CHECK-NOT: merak.copy
// CHECK: return
merak.param @p : tensor<4xf32> = dense<1.0> : tensor<4xf32>
merak.param @q : tensor<4xf32> = dense<2.0> : tensor<4xf32>
func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %p = merak.get_param @p : tensor<4xf32>
  %q = merak.get_param @q : tensor<4xf32>
  %a = merak.add %x, %q : tensor<4xf32>, tensor<4xf32>
  merak.set_param @p, %a : tensor<4xf32>
  merak.set_param @q, %a : tensor<4xf32>
  %b = merak.mul %p, %a : tensor<4xf32>, tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// expected-error @+1 {{merak-plan-memory: no function @train_step}}
module {
  func.func @other() {
    return
  }
}

// -----

merak.param @h : tensor<4xf16> = dense<1.0> : tensor<4xf16>
func.func @train_step() -> tensor<4xf16> {
  // expected-error @+1 {{merak-plan-memory: element type 'f16' is not supported by code generation (f32, f64, bf16, i64, i32, i1)}}
  %h = merak.get_param @h : tensor<4xf16>
  return %h : tensor<4xf16>
}
