//===- MerakCollectiveOps.td - merak collective ops --------*- tablegen -*-===//
//
// Communication over one axis of the device mesh (dp, tp, pp), inserted by
// the sharding passes; included from MerakOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_COLLECTIVE_OPS_TD
#define MERAK_COLLECTIVE_OPS_TD

/// What merak.all_gather concatenates: floats, and i64 indices (the expert
/// ids that go with the tokens under expert parallelism).
def Merak_GatherableTensor : StaticShapeTensorOf<[F32, F16, BF16, F64, I64]>;
//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Merak_AllReduceOp : Merak_Op<"all_reduce", []> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Sums (or averages) tensors over the ranks of one mesh axis";
  let description = [{
    Every rank of the `group` ("dp", "tp" or "pp") passes its tensors;
    every rank gets, per operand, the elementwise sum over the group
    (`reduction = "sum"`), that sum divided by the group size ("mean"), or
    the elementwise maximum ("max"; not differentiable).
    Several operands form one bucket, communicated as one message. On a
    group of one rank (and in the reference evaluator) it is the identity.
    Canonicalization: two adjacent tp sums of vectors (rank <= 1: the
    gradients of the norm scales and biases that sequence parallelism
    sums over tp) become one bucket.
    Not `Pure`: every rank must issue the same collectives in the same
    order, so they are neither removed nor reordered.

    ```mlir
    %a, %b = merak.all_reduce %ga, %gb group = "dp" reduction = "mean"
        : tensor<64xf32>, tensor<64x64xf32> -> tensor<64xf32>, tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Merak_FloatTensor>:$inputs, StrAttr:$group,
                       StrAttr:$reduction);
  let results = (outs Variadic<Merak_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `group` `=` $group `reduction` `=` $reduction attr-dict `:`
    type($inputs) `->` type($results)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inputs, "::llvm::StringRef":$group,
                   "::llvm::StringRef":$reduction), [{
      build($_builder, $_state, inputs.getTypes(), inputs,
            $_builder.getStringAttr(group), $_builder.getStringAttr(reduction));
    }]>
  ];
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def Merak_ReduceScatterOp : Merak_Op<"reduce_scatter", []> {
  let summary = "Reduces tensors over a group and leaves each rank its part";
  let description = [{
    Every rank of `group` ("dp", "tp" or "pp") passes its tensors; per
    operand, the elementwise sum over the group (`reduction = "sum"`, or that
    sum divided by the group size: "mean") is split along the leading
    dimension into `parts` equal parts and group rank r gets part r. `parts`
    is the operand's leading dimension over the result's and must equal the
    group size at run time; the other dimensions are kept. Several operands
    form one bucket, communicated as one message. With `parts = 1` (a group
    of one rank) it is the identity; the reference evaluator runs one rank
    and rejects `parts > 1`. ZeRO (merak-data-parallel with `zero = 1`)
    reduce-scatters flattened, zero-padded gradients over "dp". Not `Pure`,
    like `merak.all_reduce`.

    ```mlir
    %a, %b = merak.reduce_scatter %ga, %gb group = "dp" reduction = "mean"
        : tensor<64xf32>, tensor<4096xf32> -> tensor<32xf32>, tensor<2048xf32>
    ```
  }];
  let arguments = (ins Variadic<Merak_FloatTensor>:$inputs, StrAttr:$group,
                       StrAttr:$reduction);
  let results = (outs Variadic<Merak_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs `group` `=` $group `reduction` `=` $reduction attr-dict `:`
    type($inputs) `->` type($results)
  }];
  let extraClassDeclaration = !strconcat([{
    /// Ranks of the group the op was built for (operand dim 0 / result dim 0).
    int64_t getParts();
  }], Merak_FlopsAndBytesCost);
  let hasVerifier = 1;
}

def Merak_AllGatherOp : Merak_Op<"all_gather", []> {
  let summary = "Concatenates every rank's tensors along the leading dimension";
  let description = [{
    Every rank of `group` passes its tensors; per operand, every rank gets
    the concatenation of all the group's operands along the leading
    dimension, in group-rank order (result dim 0 = `parts` x operand dim 0,
    `parts` the group size at run time). Several operands form one bucket,
    communicated as one message. With `parts = 1` it is the identity; the
    reference evaluator rejects `parts > 1`. ZeRO gathers the updated
    parameter shards with it; expert parallelism (merak-expert-parallel)
    the tokens of the "ep" group and their expert ids (i64). Not `Pure`.

    ```mlir
    %p = merak.all_gather %shard group = "dp" : tensor<2048xf32> -> tensor<4096xf32>
    ```
  }];
  let arguments = (ins Variadic<Merak_GatherableTensor>:$inputs, StrAttr:$group);
  let results = (outs Variadic<Merak_GatherableTensor>:$results);
  let assemblyFormat = [{
    $inputs `group` `=` $group attr-dict `:` type($inputs) `->` type($results)
  }];
  let extraClassDeclaration = !strconcat([{
    /// Ranks of the group the op was built for (result dim 0 / operand dim 0).
    int64_t getParts();
  }], Merak_FlopsAndBytesCost);
  let hasVerifier = 1;
}

def Merak_AllToAllOp : Merak_Op<"all_to_all", []> {
  let summary = "Expert parallelism's token dispatch or combine (one all-to-all)";
  let description = [{
    The rows of a Mixture-of-Experts layer travel to the rank that holds
    their expert and back. `experts` holds the group's `parts * S` global
    expert ids (group rank i's S rows at `[i * S, (i + 1) * S)`: the
    all-gather of every rank's ids), and group rank j holds experts
    `[j * experts_per_rank, (j + 1) * experts_per_rank)`.

    - Dispatch (`input` `[S, K]`, result `[parts * S, K]`): result row
      `i * S + s` is group rank i's row s when this rank holds that row's
      expert, and zero otherwise: the all-gather of the inputs with the
      rows of other ranks' experts left out.
    - Combine (`combine`; `input` `[parts * S, O]`, result `[S, O]`):
      result row s is row `me * S + s` of the rank holding that row's
      expert: the reduce-scatter (sum) of inputs that are zero outside each
      rank's experts, with the zeros left out.

    Each row crosses the network once (to one rank), where the all-gather
    moves every row to every rank. The two forms are each other's
    transpose: the gradient of a dispatch is the combine of the incoming
    gradient, and the reverse; `experts` gets none. With `parts = 1` (and
    in the reference evaluator) a dispatch zeroes the rows of no expert and
    a combine is the identity. CPU: `MPI_Alltoallv`. Not `Pure`.

    With `shadow_slots = M` (dynamic shadowing, see
    `merak.expert_shadow_plan`) the ids may also name shadow copies: an id
    `v >= parts * experts_per_rank` is slot `(v - parts *
    experts_per_rank) % M` of group rank `(v - parts * experts_per_rank) /
    M`, which is always the row's own rank, so such a row stays where it
    is (a dispatch copies it to row `me * S + s`).

    `hierarchical` (MoNTA / Tutel's 2DH): when the group spans nodes holding
    equal numbers of its ranks, the rows travel in two exchanges, first
    within each node to the rank with the destination's local index, then
    across nodes among the ranks of one local index: fewer, larger
    inter-node messages, the same result (the runtime falls back to one
    exchange on one node or uneven nodes).

    `compact = R` (with an expert capacity, see `merak.expert_compact`):
    this rank's side holds only its rows, `R` of them in the group's order
    (group rank i, then row s) and zero rows after them, instead of `parts
    * S` rows at their places: a dispatch's result and a combine's input are
    `[R, K]`. Row `i * S + s` of the positional form is row `c` of the
    compact one, c counting this rank's rows before it.

    ```mlir
    %xr = merak.all_to_all %x routed %ids group = "ep" experts_per_rank = 2
        : tensor<16x64xf32>, tensor<32xi64> -> tensor<32x64xf32>
    %y = merak.all_to_all %yr routed %ids group = "ep" combine experts_per_rank = 2
        : tensor<32x64xf32>, tensor<32xi64> -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, TensorOf<[I64]>:$experts, StrAttr:$group,
                       UnitAttr:$combine, I64Attr:$experts_per_rank,
                       DefaultValuedAttr<I64Attr, "0">:$shadow_slots, UnitAttr:$hierarchical,
                       OptionalAttr<I64Attr>:$compact);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `routed` $experts `group` `=` $group (`combine` $combine^)?
    `experts_per_rank` `=` $experts_per_rank (`shadow_slots` `=` $shadow_slots^)?
    (`hierarchical` $hierarchical^)? (`compact` `=` $compact^)? attr-dict
    `:` type($input) `,` type($experts) `->` type($result)
  }];
  let extraClassDeclaration = !strconcat([{
    /// Ranks of the group (the ids' rows over this rank's S rows).
    int64_t getParts();
    /// S: this rank's rows.
    int64_t getLocalRows();
  }], Merak_FlopsAndBytesCost);
  let hasVerifier = 1;
}

def Merak_ExpertShadowOp : Merak_Op<"expert_shadow", []> {
  let summary = "Dynamic shadowing: hot experts' weights to every rank, or their gradients back";
  let description = [{
    FasterMoE's shadowing. `slots` `[M]` (from `merak.expert_shadow_plan`)
    names the experts shadowed this step (`-1`: an unused slot); group
    rank j of the `parts` ranks holds experts `[j * E, (j + 1) * E)`, its
    weight being `[E, ...]`.

    - Broadcast (`input` `[E, ...]`, result `[M, ...]`): result slot j is
      the weight of expert `slots[j]`, sent by its owner to every rank of
      the group; an unused slot is zero.
    - Reduce (`reduce`; `input` `[M, ...]`, result `[E, ...]`): the group's
      sum of slot j lands on expert `slots[j]` of its owner; the rows of
      experts not shadowed are zero.

    The two are each other's transpose (the gradient of one is the other
    of the incoming gradient; `slots` gets none). With one rank both copy
    the slots. CPU: one `MPI_Bcast` per used slot, one `MPI_Allreduce`.
    Not `Pure`.

    ```mlir
    %ws = merak.expert_shadow %w, %slots group = "ep" parts = 2
        : tensor<2x96x32xf32>, tensor<1xi64> -> tensor<1x96x32xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, TensorOf<[I64]>:$slots, StrAttr:$group,
                       UnitAttr:$reduce, I64Attr:$parts);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $slots `group` `=` $group (`reduce` $reduce^)? `parts` `=` $parts attr-dict
    `:` type($input) `,` type($slots) `->` type($result)
  }];
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let hasVerifier = 1;
}

def Merak_LocalShardOp : Merak_Op<"local_shard", [Pure]> {
  let summary = "This rank's part of a replicated tensor (no communication)";
  let description = [{
    Splits `input` along its leading dimension into `parts` equal parts
    (operand dim 0 / result dim 0, the size of `group` at run time) and
    returns part r on group rank r: the same part of a replicated value that
    `merak.reduce_scatter` leaves to the rank. ZeRO reads the shard of a
    parameter it updates with it; sequence parallelism a rank's token rows;
    expert parallelism with tp a rank's share of an expert GEMM's rows and
    their (i64) expert ids. With `parts = 1` it is the identity; the reference evaluator rejects
    `parts > 1`. Canonicalization: the part of a sum over the group
    (`local_shard(all_reduce(x) {sum})`, possibly through a reshape that
    keeps the leading split) is `reduce_scatter(x)`.

    ```mlir
    %s = merak.local_shard %flat group = "dp" : tensor<4096xf32> -> tensor<2048xf32>
    ```
  }];
  let arguments = (ins Merak_GatherableTensor:$input, StrAttr:$group);
  let results = (outs Merak_GatherableTensor:$result);
  let assemblyFormat = "$input `group` `=` $group attr-dict `:` type($input) `->` type($result)";
  let extraClassDeclaration = !strconcat([{
    /// Ranks of the group (operand dim 0 / result dim 0).
    int64_t getParts();
  }], Merak_FlopsAndBytesCost);
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def Merak_GroupRankOp : Merak_Op<"group_rank", []> {
  let summary = "This rank's coordinate along a mesh axis, as an i64 scalar";
  let description = [{
    The rank of the calling process within `group` ("dp", "tp" or "pp"),
    read from the runtime's communicator: 0 in a serial program, on a group
    of one rank and in the reference evaluator. Vocabulary parallelism
    shifts the token ids of an embedding lookup by `-rank * (local rows)`
    with it. Not `Pure`, so that nothing folds it to the evaluator's 0.

    ```mlir
    %r = merak.group_rank group = "tp" : tensor<i64>
    ```
  }];
  let arguments = (ins StrAttr:$group);
  let results = (outs TensorOf<[I64]>:$result);
  let assemblyFormat = "`group` `=` $group attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Merak_TpIdentityOp : Merak_Op<"tp_identity", [Pure, SameOperandsAndResultType]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Megatron's f: identity forward, gradient summed over \"tp\" backward";
  let description = [{
    Marks the (replicated) input of a column-parallel block of tensor
    parallelism. The forward is the identity (a view: it emits no code);
    its derivative (VJP) sums the incoming gradient over the tensor-parallel
    group (`merak.all_reduce ... group = "tp" reduction = "sum"`), because
    every rank's column shard contributes a part of the input's gradient.
    Its partner g is `merak.all_reduce` (tp, sum) on the output of the
    row-parallel matmul, whose VJP is the identity.

    ```mlir
    %x1 = merak.tp_identity %x : tensor<4x16x64xf32>
    ```

    Canonicalization moves it above a reshape or broadcast read by it
    alone, `tp_identity(broadcast(x)) -> broadcast(tp_identity(x))`: the
    same gradient (both are linear), summed at x's size. A Mixture-of-
    Experts layer's expert rows, each token repeated for its top-k experts,
    so sum k times fewer bytes.
  }];
  let arguments = (ins Merak_FloatTensor:$input);
  let results = (outs Merak_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Started collectives (merak-overlap)
//===----------------------------------------------------------------------===//

def Merak_RequestType : TypeDef<Merak_Dialect, "Request"> {
  let mnemonic = "request";
  let summary = "A started collective, completed by merak.wait";
  let description = [{
    The result of `merak.all_reduce_start`, `merak.reduce_scatter_start` and
    `merak.all_gather_start`: a collective in flight. Its only use is the
    `merak.wait` (in the same block) that completes it and yields the
    collective's results, so that no value of the collective can be read
    before it completed.
  }];
}

class Merak_CollectiveStartOp<string mnemonic> : Merak_Op<mnemonic, []> {
  let results = (outs Merak_RequestType:$request);
  let extraClassDeclaration = [{
    /// The types the completing merak.wait yields.
    ::llvm::SmallVector<::mlir::Type> getCompletedTypes();
    /// The merak.wait that completes this collective (verified to exist).
    WaitOp getWait();
  }];
  let hasVerifier = 1;
}

def Merak_AllReduceStartOp : Merak_CollectiveStartOp<"all_reduce_start"> {
  let summary = "Starts a merak.all_reduce; merak.wait yields its results";
  let description = [{
    The non-blocking form of `merak.all_reduce` (same `group`, `reduction`
    and bucket of operands): the operands are read here, the reduced tensors
    are the results of the `merak.wait` of the returned request. Between the
    two the program computes while the collective is in flight.
    merak-overlap builds it. Not `Pure`: every rank starts the same
    collectives in the same order.

    ```mlir
    %r = merak.all_reduce_start %ga, %gb group = "dp" reduction = "mean"
        : tensor<64xf32>, tensor<64x64xf32>
    ...
    %a, %b = merak.wait %r : tensor<64xf32>, tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Merak_FloatTensor>:$inputs, StrAttr:$group,
                       StrAttr:$reduction);
  let assemblyFormat = [{
    $inputs `group` `=` $group `reduction` `=` $reduction attr-dict `:` type($inputs)
  }];
}

def Merak_ReduceScatterStartOp : Merak_CollectiveStartOp<"reduce_scatter_start"> {
  let summary = "Starts a merak.reduce_scatter; merak.wait yields its results";
  let description = [{
    The non-blocking form of `merak.reduce_scatter` over `parts` ranks
    (each operand's leading dimension divides by `parts`; the wait yields
    tensors with it divided by `parts`).

    ```mlir
    %r = merak.reduce_scatter_start %g group = "dp" reduction = "mean" parts = 2
        : tensor<4096xf32>
    %p = merak.wait %r : tensor<2048xf32>
    ```
  }];
  let arguments = (ins Variadic<Merak_FloatTensor>:$inputs, StrAttr:$group,
                       StrAttr:$reduction, I64Attr:$parts);
  let assemblyFormat = [{
    $inputs `group` `=` $group `reduction` `=` $reduction `parts` `=` $parts attr-dict
    `:` type($inputs)
  }];
}

def Merak_AllGatherStartOp : Merak_CollectiveStartOp<"all_gather_start"> {
  let summary = "Starts a merak.all_gather; merak.wait yields its results";
  let description = [{
    The non-blocking form of `merak.all_gather` over `parts` ranks (the wait
    yields tensors with the leading dimension multiplied by `parts`).

    ```mlir
    %r = merak.all_gather_start %shard group = "dp" parts = 2 : tensor<2048xf32>
    %p = merak.wait %r : tensor<4096xf32>
    ```
  }];
  let arguments = (ins Variadic<Merak_GatherableTensor>:$inputs, StrAttr:$group, I64Attr:$parts);
  let assemblyFormat = [{
    $inputs `group` `=` $group `parts` `=` $parts attr-dict `:` type($inputs)
  }];
}

def Merak_AllToAllStartOp : Merak_CollectiveStartOp<"all_to_all_start"> {
  let summary = "Starts a merak.all_to_all; merak.wait yields its rows";
  let description = [{
    The non-blocking form of the flat `merak.all_to_all` (same `input`,
    routing ids, `group`, `combine`, `experts_per_rank` and
    `shadow_slots`) over `parts` ranks: the rows are packed and sent here,
    and the `merak.wait` yields them in place (a dispatch's `[parts * S,
    K]`, a combine's `[S, K]`). merak-overlap builds it (`ep-overlap`):
    merak-expert-parallel's chunked dispatches (`chunks`) are then in
    flight while the previous chunk's expert GEMM runs. With `compact = R`
    a dispatch yields `[R, K]` and a combine takes `[R, K]`.

    ```mlir
    %r = merak.all_to_all_start %x routed %ids group = "ep" experts_per_rank = 2 parts = 2
        : tensor<16x64xf32>, tensor<32xi64>
    %xr = merak.wait %r : tensor<32x64xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, TensorOf<[I64]>:$experts, StrAttr:$group,
                       UnitAttr:$combine, I64Attr:$experts_per_rank,
                       DefaultValuedAttr<I64Attr, "0">:$shadow_slots, I64Attr:$parts,
                       OptionalAttr<I64Attr>:$compact);
  let assemblyFormat = [{
    $input `routed` $experts `group` `=` $group (`combine` $combine^)?
    `experts_per_rank` `=` $experts_per_rank (`shadow_slots` `=` $shadow_slots^)?
    `parts` `=` $parts (`compact` `=` $compact^)? attr-dict `:` type($input) `,` type($experts)
  }];
}

def Merak_WaitOp : Merak_Op<"wait", []> {
  let summary = "Completes a started collective and yields its results";
  let description = [{
    Blocks until the collective that `request` started has completed on this
    rank and yields its results (one per operand of the start, typed as the
    blocking collective's results). The request must come from a start op of
    the same block, and this is its only use.

    ```mlir
    %a, %b = merak.wait %r : tensor<64xf32>, tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Merak_RequestType:$request);
  let results = (outs Variadic<Merak_FloatTensor>:$results);
  let assemblyFormat = "$request attr-dict `:` type($results)";
  let hasVerifier = 1;
}

#endif // MERAK_COLLECTIVE_OPS_TD
