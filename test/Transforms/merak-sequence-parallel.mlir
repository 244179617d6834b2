// RUN: merak-opt %s -split-input-file --merak-sequence-parallel=tp=2 | FileCheck %s
// RUN: merak-opt %s -split-input-file --merak-sequence-parallel=tp=1 | FileCheck %s --check-prefix=ONE
// RUN: merak-opt %s -split-input-file --merak-sequence-parallel=tp=2 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// A region's end (the all-reduce of a row-parallel Linear's partial sums)
// becomes a reduce-scatter of the 8 token rows viewed as [8, 1, 8]; the
// residual add and the layer norm run on this rank's 4 rows (the
// replicated residual cut with local_shard, the norm's scale and bias
// through tp_identity, whose gradient is summed over tp); the next
// region's start and the function's result read the all-gather, viewed
// back as [2, 4, 8].
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[V:.+]] = merak.reshape %arg1 : tensor<2x4x8xf32> to tensor<8x1x8xf32>
// CHECK-NEXT: %[[Y:.+]] = merak.reduce_scatter %[[V]] group = "tp" reduction = "sum" : tensor<8x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[H:.+]] = merak.reshape %arg0 : tensor<2x4x8xf32> to tensor<8x1x8xf32>
// CHECK-NEXT: %[[HS:.+]] = merak.local_shard %[[H]] group = "tp" : tensor<8x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[R:.+]] = merak.add %[[HS]], %[[Y]] : tensor<4x1x8xf32>, tensor<4x1x8xf32>
// CHECK-NEXT: %[[G:.+]] = merak.get_param @ln.w
// CHECK-NEXT: %[[GI:.+]] = merak.tp_identity %[[G]] : tensor<8xf32>
// CHECK-NEXT: %[[B:.+]] = merak.get_param @ln.b
// CHECK-NEXT: %[[BI:.+]] = merak.tp_identity %[[B]] : tensor<8xf32>
// CHECK-NEXT: %[[N:.+]] = merak.layer_norm %[[R]] scale %[[GI]] bias %[[BI]] axis = 2 {{.*}} -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[NA:.+]] = merak.all_gather %[[N]] group = "tp" : tensor<4x1x8xf32> -> tensor<8x1x8xf32>
// CHECK-NEXT: %[[NF:.+]] = merak.reshape %[[NA]] : tensor<8x1x8xf32> to tensor<2x4x8xf32>
// CHECK-NEXT: %[[F:.+]] = merak.tp_identity %[[NF]] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[Z:.+]] = merak.matmul %[[F]], %arg2
// CHECK-NEXT: %[[RA:.+]] = merak.all_gather %[[R]] group = "tp" : tensor<4x1x8xf32> -> tensor<8x1x8xf32>
// CHECK-NEXT: %[[RF:.+]] = merak.reshape %[[RA]] : tensor<8x1x8xf32> to tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Z]], %[[RF]]
// With tp = 1 the pass does nothing.
// ONE-LABEL: func.func @forward
// ONE-NEXT: merak.all_reduce
// ONE-NOT: reduce_scatter
merak.param @ln.w : tensor<8xf32> = dense<1.0> : tensor<8xf32>
merak.param @ln.b : tensor<8xf32> = dense<0.0> : tensor<8xf32>
func.func @forward(%h: tensor<2x4x8xf32>, %p: tensor<2x4x8xf32>, %w: tensor<8x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x8xf32>) {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %r = merak.add %h, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %g = merak.get_param @ln.w : tensor<8xf32>
  %b = merak.get_param @ln.b : tensor<8xf32>
  %n = merak.layer_norm %r scale %g bias %b axis = 2 epsilon = 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %f = merak.tp_identity %n : tensor<2x4x8xf32>
  %z = merak.matmul %f, %w : tensor<2x4x8xf32>, tensor<8x4xf32> -> tensor<2x4x4xf32>
  return %z, %r : tensor<2x4x4xf32>, tensor<2x4x8xf32>
}

// -----

// A Linear that tensor parallelism left replicated computes its rows only;
// its weight passes through tp_identity (each rank's gradient covers its
// rows). A dropout on the rows records where they lie in the whole tensor
// (tp_split on the rows view), so that it draws the serial mask.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[W:.+]] = merak.tp_identity %arg1 : tensor<8x6xf32>
// CHECK-NEXT: merak.reshape %arg0
// CHECK-NEXT: %[[Y:.+]] = merak.reduce_scatter
// CHECK-NEXT: %[[M:.+]] = merak.matmul %[[Y]], %[[W]] : tensor<4x1x8xf32>, tensor<8x6xf32> -> tensor<4x1x6xf32>
// CHECK-NEXT: %[[D:.+]], %{{.+}} = merak.dropout %[[M]] ratio = {{.*}} {tp_split = array<i64: 0, 1, 2>} : tensor<4x1x6xf32> -> tensor<4x1x6xf32>, tensor<4x1x6xi1>
// CHECK-NEXT: %[[DA:.+]] = merak.all_gather %[[D]]
// CHECK-NEXT: %[[DF:.+]] = merak.reshape %[[DA]] : tensor<8x1x6xf32> to tensor<2x4x6xf32>
// CHECK-NEXT: return %[[DF]]
func.func @forward(%p: tensor<2x4x8xf32>, %w: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %m = merak.matmul %y, %w : tensor<2x4x8xf32>, tensor<8x6xf32> -> tensor<2x4x6xf32>
  %d, %k = merak.dropout %m ratio = 0.1 seed = 3 : tensor<2x4x6xf32> -> tensor<2x4x6xf32>, tensor<2x4x6xi1>
  return %d : tensor<2x4x6xf32>
}

// -----

// A dropout whose batch was split on dimension 1 (a sequence-first [T, B, C]
// layout, 2 of 4 batch parts here) restates that split on the rows [T x B]:
// dimension 0 in 4 blocks (the T rows before the batch dimension). One split
// over tp already (inside a block) stays whole and reads the gathered rows.
// CHECK-LABEL: func.func @forward
// CHECK: merak.dropout %{{.+}} ratio = {{.*}} {batch_split = array<i64: 0, 4, 4>, tp_split = array<i64: 0, 1, 2>} : tensor<4x1x8xf32>
// CHECK: %[[G:.+]] = merak.all_gather
// CHECK-NEXT: %[[GF:.+]] = merak.reshape %[[G]] : tensor<8x1x8xf32> to tensor<4x2x8xf32>
// CHECK-NEXT: merak.dropout %[[GF]] ratio = {{.*}} {tp_split = array<i64: 2, 1, 2>} : tensor<4x2x8xf32>
func.func @forward(%p: tensor<4x2x8xf32>) -> (tensor<4x2x8xf32>, tensor<4x2x8xf32>) {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<4x2x8xf32> -> tensor<4x2x8xf32>
  %d, %k = merak.dropout %y ratio = 0.1 seed = 3 {batch_split = array<i64: 1, 1, 4>} : tensor<4x2x8xf32> -> tensor<4x2x8xf32>, tensor<4x2x8xi1>
  %e, %l = merak.dropout %y ratio = 0.1 seed = 4 {tp_split = array<i64: 2, 1, 2>} : tensor<4x2x8xf32> -> tensor<4x2x8xf32>, tensor<4x2x8xi1>
  return %d, %e : tensor<4x2x8xf32>, tensor<4x2x8xf32>
}

// -----

// Left as they are: an end whose rows (3) do not divide by tp (a remark
// says so), and one whose only reader cannot be split (a softmax over the
// rows' axis).
// REMARK: remark: merak-sequence-parallel: 3 token rows per micro-batch do not divide by tp=2: this block's neighbours stay replicated
// REMARK-NOT: remark
// CHECK-LABEL: func.func @forward
// CHECK-NOT: reduce_scatter
// CHECK: merak.all_reduce %arg0
// CHECK: merak.all_reduce %arg1
// CHECK-NOT: reduce_scatter
func.func @forward(%p: tensor<1x3x8xf32>, %q: tensor<2x4x8xf32>) -> (tensor<1x3x8xf32>, tensor<2x4x8xf32>) {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<1x3x8xf32> -> tensor<1x3x8xf32>
  %e = merak.exp %y : tensor<1x3x8xf32>
  %z = merak.all_reduce %q group = "tp" reduction = "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %s = merak.softmax %z axis = 1 : tensor<2x4x8xf32>
  return %e, %s : tensor<1x3x8xf32>, tensor<2x4x8xf32>
}

// -----

// The embedding's end: the position table [4, 8] (rows broadcast over the
// batch) is broadcast to the rows and cut.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.+]] = merak.reduce_scatter %{{.+}} group = "tp" reduction = "sum" : tensor<8x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[P:.+]] = merak.broadcast %arg1 : tensor<4x8xf32> to tensor<2x4x8xf32>
// CHECK-NEXT: %[[PV:.+]] = merak.reshape %[[P]] : tensor<2x4x8xf32> to tensor<8x1x8xf32>
// CHECK-NEXT: %[[PS:.+]] = merak.local_shard %[[PV]] group = "tp" : tensor<8x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[H:.+]] = merak.add %[[Y]], %[[PS]] : tensor<4x1x8xf32>, tensor<4x1x8xf32>
// CHECK-NEXT: merak.all_gather %[[H]]
func.func @forward(%p: tensor<2x4x8xf32>, %pos: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %h = merak.add %y, %pos : tensor<2x4x8xf32>, tensor<4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

// The same rows in another rank (a flattening Linear's [4, 8] read as
// [1, 4, 8]) are reshaped, not gathered.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.+]] = merak.reduce_scatter %{{.+}} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[H:.+]] = merak.add %[[Y]], %{{.+}} : tensor<2x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[HV:.+]] = merak.reshape %[[H]] : tensor<2x8xf32> to tensor<2x1x8xf32>
// CHECK-NEXT: %[[W:.+]] = merak.broadcast %[[HV]] : tensor<2x1x8xf32> to tensor<2x1x8xf32>
// CHECK-NEXT: %[[E:.+]] = merak.exp %[[W]] : tensor<2x1x8xf32>
// CHECK-NEXT: %[[G:.+]] = merak.all_gather %[[E]] group = "tp" : tensor<2x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: %[[GF:.+]] = merak.reshape %[[G]] : tensor<4x1x8xf32> to tensor<1x4x8xf32>
// CHECK-NEXT: return %[[GF]]
func.func @forward(%p: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<1x4x8xf32> {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<4x8xf32> -> tensor<4x8xf32>
  %h = merak.add %y, %b : tensor<4x8xf32>, tensor<8xf32>
  %w = merak.broadcast %h : tensor<4x8xf32> to tensor<1x4x8xf32>
  %e = merak.exp %w : tensor<1x4x8xf32>
  return %e : tensor<1x4x8xf32>
}

// -----

// A split value that an op reads without its rows (the contraction operand
// of x^T y) is read whole, gathered; its other operand stays as it is.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.+]] = merak.reduce_scatter
// CHECK-NEXT: %[[H:.+]] = merak.tanh %[[Y]] : tensor<4x8xf32>
// CHECK-NEXT: %[[G:.+]] = merak.all_gather %[[H]] group = "tp" : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[GF:.+]] = merak.reshape %[[G]] : tensor<8x8xf32> to tensor<8x8xf32>
// CHECK-NEXT: merak.matmul %arg1, %[[GF]] : tensor<6x8xf32>, tensor<8x8xf32> -> tensor<6x8xf32>
func.func @forward(%p: tensor<8x8xf32>, %x: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<8x8xf32> -> tensor<8x8xf32>
  %h = merak.tanh %y : tensor<8x8xf32>
  %m = merak.matmul %x, %h : tensor<6x8xf32>, tensor<8x8xf32> -> tensor<6x8xf32>
  return %m : tensor<6x8xf32>
}

// -----

// A Mixture-of-Experts layer's combine: the expert rows' sum over tp
// ([tokens x top-2, C]) becomes a reduce-scatter of those rows; the routing
// weights (replicated) are cut; the regrouping [8, 8] -> [4, 2, 8] and the
// sum over each token's two rows run on this rank's rows, whose groups it
// holds whole; the residual add stays split. A sum over groups that a
// rank's rows would cut (3 groups of 2 over 2 ranks) reads the gathered
// rows.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.+]] = merak.reduce_scatter %{{.+}} group = "tp" reduction = "sum" : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: merak.reshape %arg1
// CHECK-NEXT: %[[W:.+]] = merak.local_shard %{{.+}} group = "tp" : tensor<8x1xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[M:.+]] = merak.mul %[[Y]], %[[W]] : tensor<4x8xf32>, tensor<4x1xf32>
// CHECK-NEXT: %[[MV:.+]] = merak.reshape %[[M]] : tensor<4x8xf32> to tensor<4x1x8xf32>
// CHECK-NEXT: %[[G:.+]] = merak.reshape %[[MV]] : tensor<4x1x8xf32> to tensor<4x1x8xf32>
// CHECK-NEXT: %[[GV:.+]] = merak.reshape %[[G]] : tensor<4x1x8xf32> to tensor<2x2x8xf32>
// CHECK-NEXT: %[[T:.+]] = merak.reduce_sum %[[GV]] axes = [1] : tensor<2x2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[TV:.+]] = merak.reshape %[[T]] : tensor<2x8xf32> to tensor<2x1x8xf32>
// CHECK-NEXT: %[[TR:.+]] = merak.reshape %[[TV]] : tensor<2x1x8xf32> to tensor<2x1x8xf32>
// CHECK-NEXT: %[[HV:.+]] = merak.reshape %arg2 : tensor<2x2x8xf32> to tensor<4x1x8xf32>
// CHECK-NEXT: %[[HS:.+]] = merak.local_shard %[[HV]] group = "tp" : tensor<4x1x8xf32> -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[A:.+]] = merak.add %[[HS]], %[[TR]] : tensor<2x1x8xf32>, tensor<2x1x8xf32>
// CHECK-NEXT: merak.reshape %arg3
// CHECK-NEXT: %[[Z:.+]] = merak.reduce_scatter %{{.+}} group = "tp" reduction = "sum" : tensor<6x1x8xf32> -> tensor<3x1x8xf32>
// CHECK-NEXT: %[[E:.+]] = merak.exp %[[Z]]
// CHECK-NEXT: %[[EG:.+]] = merak.all_gather %[[E]]
// CHECK-NEXT: %[[EF:.+]] = merak.reshape %[[EG]] : tensor<6x1x8xf32> to tensor<3x2x8xf32>
// CHECK-NEXT: merak.reduce_sum %[[EF]] axes = [1] : tensor<3x2x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: merak.all_gather %[[A]] group = "tp" : tensor<2x1x8xf32> -> tensor<4x1x8xf32>
func.func @forward(%p: tensor<8x8xf32>, %w: tensor<8x1xf32>, %h: tensor<2x2x8xf32>, %q: tensor<3x2x8xf32>)
    -> (tensor<2x2x8xf32>, tensor<3x8xf32>) {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<8x8xf32> -> tensor<8x8xf32>
  %m = merak.mul %y, %w : tensor<8x8xf32>, tensor<8x1xf32>
  %g = merak.reshape %m : tensor<8x8xf32> to tensor<4x2x8xf32>
  %t = merak.reduce_sum %g axes = [1] : tensor<4x2x8xf32> -> tensor<4x8xf32>
  %tr = merak.reshape %t : tensor<4x8xf32> to tensor<2x2x8xf32>
  %a = merak.add %h, %tr : tensor<2x2x8xf32>, tensor<2x2x8xf32>
  %z = merak.all_reduce %q group = "tp" reduction = "sum" : tensor<3x2x8xf32> -> tensor<3x2x8xf32>
  %e = merak.exp %z : tensor<3x2x8xf32>
  %u = merak.reduce_sum %e axes = [1] : tensor<3x2x8xf32> -> tensor<3x8xf32>
  return %a, %u : tensor<2x2x8xf32>, tensor<3x8xf32>
}

// -----

// Split rows read whole under two views (a router's probabilities as
// [4, 6] and as [4, 1, 6]) are gathered once: the second view is the
// first's gather, reshaped.
// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.+]] = merak.exp
// CHECK-NEXT: %[[V:.+]] = merak.reshape %[[E]] : tensor<2x6xf32> to tensor<2x1x6xf32>
// CHECK-NEXT: merak.reshape %[[V]] : tensor<2x1x6xf32> to tensor<2x1x6xf32>
// CHECK-NEXT: %[[G:.+]] = merak.all_gather %[[E]] group = "tp" : tensor<2x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %[[GF:.+]] = merak.reshape %[[G]] : tensor<4x6xf32> to tensor<4x6xf32>
// CHECK-NEXT: %[[GV:.+]] = merak.reshape %[[GF]] : tensor<4x6xf32> to tensor<4x1x6xf32>
// CHECK-NOT: merak.all_gather
// CHECK: return %[[GF]], %[[GV]]
func.func @forward(%p: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x1x6xf32>) {
  %y = merak.all_reduce %p group = "tp" reduction = "sum" : tensor<4x6xf32> -> tensor<4x6xf32>
  %e = merak.exp %y : tensor<4x6xf32>
  %v = merak.reshape %e : tensor<4x6xf32> to tensor<4x1x6xf32>
  return %e, %v : tensor<4x6xf32>, tensor<4x1x6xf32>
}

// -----

// A sum that only region starts read (a norm's statistics summed inside a
// tensor-parallel region, then f) is no region's end: it stays an
// all-reduce rather than a reduce-scatter gathered again at once.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: merak.reduce_scatter
// CHECK: %[[S:.+]] = merak.all_reduce %arg0 group = "tp" reduction = "sum" : tensor<2x4x1xf32>
// CHECK-NEXT: merak.tp_identity %[[S]] : tensor<2x4x1xf32>
// CHECK-NOT: merak.all_gather
func.func @forward(%ss: tensor<2x4x1xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = merak.all_reduce %ss group = "tp" reduction = "sum" : tensor<2x4x1xf32> -> tensor<2x4x1xf32>
  %f = merak.tp_identity %s : tensor<2x4x1xf32>
  %r = merak.rsqrt %f : tensor<2x4x1xf32>
  %y = merak.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32>
  return %y : tensor<2x4x8xf32>
}
