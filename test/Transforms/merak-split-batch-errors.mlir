// RUN: merak-opt %s -split-input-file -merak-split-batch=parts=2 -verify-diagnostics

// A slice of the first row: a part would need another part's rows.
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<1x3xf32> {
  // expected-error @+1 {{merak-split-batch: 'merak.slice': selects along the batch (dimension 0 of operand #0) or mixes it with other axes: a part of the batch would need the rows of others}}
  %y = merak.slice %x starts = [0, 0] limits = [1, 3] strides = [1, 1] : tensor<4x3xf32> to tensor<1x3xf32>
  return %y : tensor<1x3xf32>
}

// -----

// A flat reshape of [B, T] to [T, B]: the batch does not stay a whole factor.
func.func @forward(%x: tensor<4x6xf32> {merak.name = "x"}) -> tensor<6x4xf32> {
  // expected-error @+1 {{merak-split-batch: 'merak.reshape': selects along the batch (dimension 0 of operand #0) or mixes it with other axes: a part of the batch would need the rows of others}}
  %y = merak.reshape %x : tensor<4x6xf32> to tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

// -----

// An imported op (its location names the ONNX node): a note names it, with
// its types.
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<3x4xf32> {
  // expected-error @unknown {{merak-split-batch: 'merak.reshape': selects along the batch}}
  // expected-note @unknown {{the ONNX node 'node_view_4': 'tensor<4x3xf32>' -> 'tensor<3x4xf32>'}}
  %y = merak.reshape %x : tensor<4x3xf32> to tensor<3x4xf32> loc("node_view_4")
  return %y : tensor<3x4xf32>
}

// -----

// The batch meets a weight of its size.
merak.param @p : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<4x3xf32> {
  %p = merak.get_param @p : tensor<4x3xf32>
  // expected-error @+1 {{merak-split-batch: 'merak.add': meets the batch with the parameter 'p'}}
  %y = merak.add %x, %p : tensor<4x3xf32>, tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A constant whose rows differ along the batch.
func.func @forward(%x: tensor<4x2xf32> {merak.name = "x"}) -> tensor<4x2xf32> {
  %c = merak.constant dense<[[1.0], [2.0], [3.0], [4.0]]> : tensor<4x1xf32>
  // expected-error @+1 {{merak-split-batch: 'merak.mul': meets the batch with a constant whose parts along dimension 0 differ}}
  %y = merak.mul %x, %c : tensor<4x2xf32>, tensor<4x1xf32>
  return %y : tensor<4x2xf32>
}

// -----

// An op without a sharding rule.
func.func @forward(%x: tensor<4x2xf32> {merak.name = "x"}) -> tensor<4x2xf32> {
  // expected-error @+1 {{merak-split-batch: 'merak.all_reduce': operand #0 carries the batch, and this op has no sharding rule to follow it}}
  %y = merak.all_reduce %x group = "dp" reduction = "sum" : tensor<4x2xf32> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A batch that does not divide.
// expected-error @+1 {{merak-split-batch: the batch of input #0 (3) does not divide into 2 parts (data-parallel ranks x micro-batches)}}
func.func @forward(%x: tensor<3x2xf32> {merak.name = "x"}) -> tensor<3x2xf32> {
  %y = merak.relu %x : tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// A reshape that cuts across the parts: rank r holds elements [6r, 6r + 6)
// of the flat [12], which are not whole rows of [3, 4].
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<3x4xf32> {
  %a = merak.reshape %x : tensor<4x3xf32> to tensor<12xf32>
  // expected-error @+1 {{merak-split-batch: 'merak.reshape': dimension 0 of this result (size 3) does not divide into 2 parts}}
  %b = merak.reshape %a : tensor<12xf32> to tensor<3x4xf32>
  return %b : tensor<3x4xf32>
}

// -----

// The batch of two inputs meets crosswise (an outer product over the batch).
func.func @forward(%x: tensor<4xf32> {merak.name = "x"}, %y: tensor<4xf32> {merak.name = "y"}) -> tensor<4x4xf32> {
  %a = merak.reshape %x : tensor<4xf32> to tensor<4x1xf32>
  // expected-error @+1 {{merak-split-batch: 'merak.mul': operands #0 and #1 carry the batch in different dimensions}}
  %b = merak.mul %a, %y : tensor<4x1xf32>, tensor<4xf32>
  return %b : tensor<4x4xf32>
}

// -----

// A value of constants only that meets the batch: no part can compute it
// from its own rows (its row indices differ), and evaluated, its parts
// differ too (rows 0-1 of the padding mask are kept, rows 2-3 hidden), so
// the first reason stands.
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<4x3xf32> {
  %b = merak.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %len = merak.constant dense<3> : tensor<i64>
  %row = merak.mul %b, %len : tensor<4x1xi64>, tensor<i64>
  %t = merak.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  %flat = merak.add %row, %t : tensor<4x1xi64>, tensor<1x3xi64>
  %pad = merak.constant dense<[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]> : tensor<12xf32>
  %m = merak.gather %pad[%flat] axis = 0 : tensor<12xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
  // expected-error @+1 {{merak-split-batch: 'merak.mul': meets the batch with a constant whose parts along dimension 0 differ}}
  %y = merak.mul %x, %m : tensor<4x3xf32>, tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A gather along the batch at indices that are not positions along it (the
// experts chosen, not a sort of the rows): a part could need others' rows.
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<4x3xf32> {
  %k = merak.argmax %x axis = 1 : tensor<4x3xf32> -> tensor<4xi64>
  // expected-error @+1 {{merak-split-batch: 'merak.gather': operands #0 and #1 carry the batch in different dimensions}}
  %r = merak.gather %x[%k] axis = 0 : tensor<4x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

// -----

// A scatter at the batch's token ids (an embedding's gradient) sums into the
// table: the result is each part's partial sum, not its rows, so it cannot
// meet the batch.
func.func @forward(%x: tensor<4x3xf32> {merak.name = "x"}) -> tensor<4x3xf32> {
  %k = merak.argmax %x axis = 1 : tensor<4x3xf32> -> tensor<4xi64>
  %s = merak.gather_grad %x[%k] axis = 0 : tensor<4x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  // expected-error @+1 {{merak-split-batch: 'merak.add': meets the batch with a value of 'merak.gather_grad' that cannot be computed at the local batch}}
  %y = merak.add %x, %s : tensor<4x3xf32>, tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
