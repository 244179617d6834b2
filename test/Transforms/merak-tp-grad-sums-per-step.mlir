// RUN: merak-opt %s -split-input-file --merak-tp-grad-sums-per-step | FileCheck %s

// Two micro-batch fragments add tp sums of @w's gradient into its
// accumulator: the sums go, and @stage0_grads sums the step's gradient
// once (after its dp mean). @v's accumulator is also written without a tp
// sum (in the weight fragment), so its sums stay; @u's gradient is not a
// tp sum at all.
// CHECK-LABEL: func.func @stage0_backward
// CHECK-NOT: merak.all_reduce %arg0
// CHECK: %[[A:.+]] = merak.add %{{.+}}, %arg0 : tensor<8xf32>, tensor<8xf32>
// CHECK-NEXT: merak.set_param @pipeline.grad.w, %[[A]]
// CHECK: %[[S:.+]] = merak.all_reduce %arg1 group = "tp" reduction = "sum"
// CHECK: merak.add %{{.+}}, %[[S]]
// CHECK-NEXT: merak.set_param @pipeline.grad.v
// CHECK-LABEL: func.func @stage0_backward_weight
// CHECK-NOT: all_reduce
// CHECK-LABEL: func.func @stage0_grads
// CHECK: %[[M:[0-9]+]]:3 = merak.all_reduce %{{.+}} group = "dp" reduction = "mean"
// CHECK-NEXT: %[[T:.+]] = merak.all_reduce %[[M]]#0 group = "tp" reduction = "sum"
// CHECK-NEXT: return %[[T]], %[[M]]#1, %[[M]]#2 :
merak.param @pipeline.grad.w : tensor<8xf32> = dense<0.0> : tensor<8xf32> {merak.kind = "scratch"}
merak.param @pipeline.grad.v : tensor<8xf32> = dense<0.0> : tensor<8xf32> {merak.kind = "scratch"}
merak.param @pipeline.grad.u : tensor<8xf32> = dense<0.0> : tensor<8xf32> {merak.kind = "scratch"}
func.func @stage0_backward(%gw: tensor<8xf32>, %gv: tensor<8xf32>) attributes {merak.fragment = {kind = "backward", stage = 0 : i64}} {
  %sw = merak.all_reduce %gw group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %aw = merak.get_param @pipeline.grad.w : tensor<8xf32>
  %nw = merak.add %aw, %sw : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.w, %nw : tensor<8xf32>
  %sv = merak.all_reduce %gv group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %av = merak.get_param @pipeline.grad.v : tensor<8xf32>
  %nv = merak.add %av, %sv : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.v, %nv : tensor<8xf32>
  return
}
func.func @stage0_backward_weight(%gv: tensor<8xf32>, %gu: tensor<8xf32>) attributes {merak.fragment = {kind = "backward_weight", stage = 0 : i64}} {
  %av = merak.get_param @pipeline.grad.v : tensor<8xf32>
  %nv = merak.add %av, %gv : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.v, %nv : tensor<8xf32>
  %au = merak.get_param @pipeline.grad.u : tensor<8xf32>
  %nu = merak.add %gu, %au : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.u, %nu : tensor<8xf32>
  return
}
func.func @stage0_grads() -> (tensor<8xf32> {merak.name = "grad:w"}, tensor<8xf32> {merak.name = "grad:v"}, tensor<8xf32> {merak.name = "grad:u"}) attributes {merak.update = "stage0_update"} {
  %w = merak.get_param @pipeline.grad.w : tensor<8xf32>
  %v = merak.get_param @pipeline.grad.v : tensor<8xf32>
  %u = merak.get_param @pipeline.grad.u : tensor<8xf32>
  %m:3 = merak.all_reduce %w, %v, %u group = "dp" reduction = "mean" : tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  return %m#0, %m#1, %m#2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A weight held by two stages (tied, ALBERT's shared layers across a
// pipeline): both stages' sums go and both @stage<s>_grads sum the step's
// gradient (the runtime has added the holders' accumulators by then). @x is
// written by stage 1, whose @stage1_grads does not return it: left as is.
// CHECK-LABEL: func.func @stage0_backward
// CHECK-NOT: all_reduce
// CHECK-LABEL: func.func @stage1_backward
// CHECK-NOT: all_reduce %arg0
// CHECK: merak.all_reduce %arg1 group = "tp"
// CHECK-LABEL: func.func @stage0_grads
// CHECK-NEXT: %[[G0:.+]] = merak.get_param @pipeline.grad.t
// CHECK-NEXT: %[[S0:.+]] = merak.all_reduce %[[G0]] group = "tp" reduction = "sum"
// CHECK-NEXT: return %[[S0]]
// CHECK-LABEL: func.func @stage1_grads
// CHECK-NEXT: %[[G1:.+]] = merak.get_param @pipeline.grad.t
// CHECK-NEXT: %[[S1:.+]] = merak.all_reduce %[[G1]] group = "tp" reduction = "sum"
// CHECK-NEXT: return %[[S1]]
merak.param @pipeline.grad.t : tensor<8xf32> = dense<0.0> : tensor<8xf32> {merak.kind = "scratch"}
merak.param @pipeline.grad.x : tensor<8xf32> = dense<0.0> : tensor<8xf32> {merak.kind = "scratch"}
func.func @stage0_backward(%g: tensor<8xf32>) attributes {merak.fragment = {kind = "backward", stage = 0 : i64}} {
  %s = merak.all_reduce %g group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %a = merak.get_param @pipeline.grad.t : tensor<8xf32>
  %n = merak.add %a, %s : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.t, %n : tensor<8xf32>
  return
}
func.func @stage1_backward(%g: tensor<8xf32>, %h: tensor<8xf32>) attributes {merak.fragment = {kind = "backward", stage = 1 : i64}} {
  %s = merak.all_reduce %g group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %a = merak.get_param @pipeline.grad.t : tensor<8xf32>
  %n = merak.add %s, %a : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.t, %n : tensor<8xf32>
  %sx = merak.all_reduce %h group = "tp" reduction = "sum" : tensor<8xf32> -> tensor<8xf32>
  %ax = merak.get_param @pipeline.grad.x : tensor<8xf32>
  %nx = merak.add %ax, %sx : tensor<8xf32>, tensor<8xf32>
  merak.set_param @pipeline.grad.x, %nx : tensor<8xf32>
  return
}
func.func @stage0_grads() -> (tensor<8xf32> {merak.name = "grad:t"}) attributes {merak.update = "stage0_update"} {
  %t = merak.get_param @pipeline.grad.t : tensor<8xf32>
  return %t : tensor<8xf32>
}
func.func @stage1_grads() -> (tensor<8xf32> {merak.name = "grad:t"}) attributes {merak.update = "stage1_update"} {
  %t = merak.get_param @pipeline.grad.t : tensor<8xf32>
  return %t : tensor<8xf32>
}
