// RUN: merak-opt %s -merak-record-mesh="dp=2 tp=4 pp=2" | FileCheck %s
// RUN: merak-opt %s -merak-record-mesh | FileCheck %s --check-prefix=SERIAL
// RUN: not merak-opt %s -merak-record-mesh="dp=0" 2>&1 | FileCheck %s --check-prefix=BAD

// The mesh is a typed module attribute; a serial program has none.
// CHECK: module attributes {merak.mesh = #merak.mesh<dp = 2, tp = 4, pp = 2>}
// SERIAL: module {
// SERIAL-NOT: merak.mesh
// BAD: merak-record-mesh: dp, tp and pp must be at least 1
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
