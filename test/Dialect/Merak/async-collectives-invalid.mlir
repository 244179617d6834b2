// RUN: merak-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// Verifier errors of the started collectives and merak.wait.

func.func @never_waited(%a: tensor<8xf32>) {
  // expected-error @+1 {{request must have exactly one use, a merak.wait}}
  %r = merak.all_reduce_start %a group = "dp" reduction = "sum" : tensor<8xf32>
  return
}

// -----

func.func @waited_twice(%a: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{request must have exactly one use, a merak.wait}}
  %r = merak.all_reduce_start %a group = "dp" reduction = "sum" : tensor<8xf32>
  %x = merak.wait %r : tensor<8xf32>
  %y = merak.wait %r : tensor<8xf32>
  return %x, %y : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @bad_group(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{group must be "dp", "tp", "pp", "ep" or "edp", got "world"}}
  %r = merak.all_reduce_start %a group = "world" reduction = "sum" : tensor<8xf32>
  %x = merak.wait %r : tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

func.func @bad_reduction(%a: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{reduction must be "sum" or "mean", got "max"}}
  %r = merak.reduce_scatter_start %a group = "dp" reduction = "max" parts = 2 : tensor<8xf32>
  %x = merak.wait %r : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

func.func @not_divisible(%a: tensor<7xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{operand leading dimension 7 does not divide by parts = 2}}
  %r = merak.reduce_scatter_start %a group = "dp" reduction = "sum" parts = 2 : tensor<7xf32>
  %x = merak.wait %r : tensor<3xf32>
  return %x : tensor<3xf32>
}

// -----

func.func @mixed_elements(%a: tensor<8xf32>, %b: tensor<8xf64>) -> (tensor<8xf32>, tensor<8xf64>) {
  // expected-error @+1 {{operands of one bucket must share an element type}}
  %r = merak.all_reduce_start %a, %b group = "dp" reduction = "sum" : tensor<8xf32>, tensor<8xf64>
  %x:2 = merak.wait %r : tensor<8xf32>, tensor<8xf64>
  return %x#0, %x#1 : tensor<8xf32>, tensor<8xf64>
}

// -----

func.func @wrong_type(%a: tensor<8xf32>) -> tensor<16xf32> {
  %r = merak.all_gather_start %a group = "dp" parts = 2 : tensor<8xf32>
  // expected-error @+1 {{result 0 has type 'tensor<8xf32>', but the collective yields 'tensor<16xf32>'}}
  %x = merak.wait %r : tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @wrong_count(%a: tensor<8xf32>) -> tensor<8xf32> {
  %r = merak.all_reduce_start %a group = "dp" reduction = "sum" : tensor<8xf32>
  // expected-error @+1 {{yields 2 results, but its collective has 1 operands}}
  %x:2 = merak.wait %r : tensor<8xf32>, tensor<8xf32>
  return %x#0 : tensor<8xf32>
}

// -----

func.func @not_from_a_start(%r: !merak.request) -> tensor<8xf32> {
  // expected-error @+1 {{request must come from a merak collective start op}}
  %x = merak.wait %r : tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

func.func @other_block(%a: tensor<8xf32>) {
  // expected-error @+1 {{the merak.wait must be in the same block}}
  %r = merak.all_reduce_start %a group = "dp" reduction = "sum" : tensor<8xf32>
  "test.region"() ({
    %x = merak.wait %r : tensor<8xf32>
    "test.use"(%x) : (tensor<8xf32>) -> ()
  }) : () -> ()
  return
}
