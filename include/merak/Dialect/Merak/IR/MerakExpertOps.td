//===- MerakExpertOps.td - Mixture-of-Experts GEMMs ----------*- tablegen -*-===//
//
// The expert GEMM of a Mixture-of-Experts layer: every row of the input
// multiplied by the weight of the expert its router chose, without
// gathering an [S, O, K] copy of the weights; and its weight gradient.
// merak-fuse-experts forms them from the exporters' gather + batched
// matmul; included from MerakOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_EXPERT_OPS_TD
#define MERAK_EXPERT_OPS_TD

def Merak_ExpertMatmulOp : Merak_Op<"expert_matmul", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Merak_IndexOperandOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Per-row GEMM with the weight of each row's expert";
  let description = [{
    With `input` `[S, K]`, `weight` `[E, O, K]` (one `[O, K]` matrix per
    expert, torch.nn.Linear's layout; `[E, K, O]` with `transpose_weight`)
    and `experts` `[S]` (integers in `[0, E)`, or `-1` for a row that
    `merak.expert_capacity` dropped: a zero row), row s of the result is

    ```
    result[s, o] = sum_k weight[experts[s], o, k] * input[s, k]
                   (transpose_weight: weight[experts[s], k, o])
    ```

    which is `matmul(gather(weight, experts, axis 0), input[:, :, None])`
    without the gathered `[S, O, K]` weights: the kernel groups the rows by
    expert and runs one GEMM per expert (a grouped GEMM). Its gradient with
    respect to `input` is `expert_matmul` of the result's gradient with
    `transpose_weight` flipped, with respect to `weight`
    `expert_matmul_grad_weight`; `experts` gets none.

    With `first` (an i64 scalar, set by merak-expert-parallel), `weight`
    holds experts `[first, first + E)` of a larger set and `experts` are
    global ids: row s uses matrix `experts[s] - first`, and a row routed to
    an expert outside that range (held by another rank) gives a zero row.
    `total_experts` (with `first`) is the number of experts of the whole
    set: the cost model expects `E / total_experts` of the rows to be this
    rank's, or of `group_rows` when set (compact rows, see
    `merak.expert_compact`: the group's rows these were taken from).

    With `shadow` `[M, O, K]` and `shadow_first` (dynamic shadowing, see
    `merak.expert_shadow_plan`; only with `first`), a row routed to
    `[shadow_first, shadow_first + M)` uses that slot of `shadow`: one
    grouped GEMM over this rank's experts and its shadow copies.

    ```mlir
    %y = merak.expert_matmul %x, %w[%e]
        : tensor<64x32xf32>, tensor<4x96x32xf32>, tensor<64xi64> -> tensor<64x96xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$weight,
                       Merak_IntTensor:$experts, Optional<TensorOf<[I64]>>:$first,
                       Optional<Merak_FloatTensor>:$shadow,
                       Optional<TensorOf<[I64]>>:$shadow_first,
                       UnitAttr:$transpose_weight, OptionalAttr<I64Attr>:$total_experts,
                       OptionalAttr<I64Attr>:$group_rows);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `[` $experts (`first` $first^ `:` type($first))? `]`
    (`shadow` $shadow^ `[` `first` $shadow_first `:` type($shadow_first) `]` `:` type($shadow))?
    (`transpose_weight` $transpose_weight^)? attr-dict
    `:` type($input) `,` type($weight) `,` type($experts) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Merak_ExpertMatmulGradWeightOp : Merak_Op<"expert_matmul_grad_weight", [Pure,
    AttrSizedOperandSegments, DeclareOpInterfaceMethods<Merak_InPlaceOpInterface>,
    DeclareOpInterfaceMethods<Merak_AccumulatingOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Gradient of merak.expert_matmul with respect to the weight";
  let description = [{
    With the forward's `input` `[S, K]` and `experts` `[S]`, and `grad` the
    gradient of its result `[S, O]`: per expert e, the sum over the rows
    routed to it (zero for an expert no row chose)

    ```
    result[e, o, k] = sum_{s : experts[s] = e} grad[s, o] * input[s, k]
                      (transpose_weight: result[e, k, o])
    ```

    The result has the weight's type `[E, O, K]` (`[E, K, O]`). With
    `first`, as for `merak.expert_matmul`: the result holds experts
    `[first, first + E)` and the rows routed elsewhere add nothing
    (`total_experts` and `group_rows` as there).

    With `acc` (the result's type; a lowering form that
    merak-fuse-grad-accumulation makes of an expert weight's gradient added
    into its accumulator) the result is `acc` plus those sums: each expert's
    GEMM accumulates into the accumulator (BLAS beta = 1), an expert no row
    chose keeps `acc`'s values. merak-plan-memory places the result in the
    accumulator's storage.

    ```mlir
    %dw = merak.expert_matmul_grad_weight %x, %dy[%e]
        : tensor<64x32xf32>, tensor<64x96xf32>, tensor<64xi64> -> tensor<4x96x32xf32>
    %da = merak.expert_matmul_grad_weight %x, %dy[%e] acc %a
        : tensor<64x32xf32>, tensor<64x96xf32>, tensor<64xi64>, tensor<4x96x32xf32>
        -> tensor<4x96x32xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$grad,
                       Merak_IntTensor:$experts, Optional<TensorOf<[I64]>>:$first,
                       Optional<Merak_FloatTensor>:$acc,
                       UnitAttr:$transpose_weight, OptionalAttr<I64Attr>:$total_experts,
                       OptionalAttr<I64Attr>:$group_rows);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `[` $experts (`first` $first^ `:` type($first))? `]` (`acc` $acc^)?
    (`transpose_weight` $transpose_weight^)? attr-dict
    `:` type($input) `,` type($grad) `,` type($experts) (`,` type($acc)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Merak_ExpertShadowPlanOp : Merak_Op<"expert_shadow_plan", [Pure]> {
  let summary = "Which hot experts to shadow this step, and the ids that route to the copies";
  let description = [{
    FasterMoE's dynamic shadowing decision, made from the expert ids of the
    whole ep group (`experts` `[parts * S]`, group rank i's rows at
    `[i * S, (i + 1) * S)`; group rank j holds experts `[j * P, (j + 1) *
    P)` of `E = parts * P`, `P = experts_per_rank`). Every rank computes
    the same plan from the same ids, so no message is needed.

    A rank's *load* is the rows it computes: its experts' rows from every
    rank. Up to M times (M the size of `slots`), the busiest rank's busiest
    expert (then the lower id) is shadowed when it has at least `min_rows`
    rows from other ranks (what the all-to-all would send its owner) and
    shadowing it lowers the busiest load; else the plan stops. A shadowed
    expert's owner sends its weights to every rank (`merak.expert_shadow`)
    and every rank computes its own rows of it, so those rows never cross
    the network. `min_rows` is where sending one expert's weights costs
    what sending its rows does. Under balanced routing nothing is
    shadowed: spreading an expert would load the other ranks more.

    - `slots` `[M]`: the shadowed experts in increasing id order, `-1` for
      the unused slots.
    - `routed` `[parts * S]`: the ids with every row of a shadowed expert
      renamed to its copy on the row's own rank, `E + i * M + j` for slot j
      on rank i. `merak.all_to_all` with `shadow_slots = M` keeps such rows
      local, and `merak.expert_matmul` with `first = E + me * M` over the
      slots' weights computes them.

    Placement changes nothing in the math: every row is multiplied by the
    same weights, and only the order in which weight gradients are summed
    differs.

    ```mlir
    %routed, %slots = merak.expert_shadow_plan %ids experts_per_rank = 2 parts = 2 min_rows = 8
        : tensor<64xi64> -> tensor<64xi64>, tensor<1xi64>
    ```
  }];
  let arguments = (ins TensorOf<[I64]>:$experts, I64Attr:$experts_per_rank, I64Attr:$parts,
                       I64Attr:$min_rows);
  let results = (outs TensorOf<[I64]>:$routed, TensorOf<[I64]>:$slots);
  let assemblyFormat = [{
    $experts `experts_per_rank` `=` $experts_per_rank `parts` `=` $parts
    `min_rows` `=` $min_rows attr-dict `:` type($experts) `->` type($routed) `,` type($slots)
  }];
  let hasVerifier = 1;
}

def Merak_ExpertPlaceOp : Merak_Op<"expert_place", [Pure]> {
  let summary = "Logical expert ids to the slots their experts occupy (dynamic placement)";
  let description = [{
    FlexMoE's dynamic expert placement. `placement` `[E]` is a permutation
    of `[0, E)`: logical expert `l` lives in slot `placement[l]` of the
    expert-parallel weights (group rank j holding slots `[j * P, (j + 1) *
    P)`). The result is `placement[experts[s]]` for every row: the ids the
    dispatch, the expert GEMMs and the shadowing plan then read.

    `placement` is a parameter (`moe.placement.<table>`, i64, initially the
    identity), one per Mixture-of-Experts layer. Between steps the trainer
    changes it (`./train --moe-rebalance-every K`): from the rows each
    expert got it computes a better placement and moves the experts'
    weights and optimizer state with it (the parameters whose `merak.shard`
    names this `table`). The math is unchanged, every row meeting the same
    weights; only the order of sums over an expert-parallel shard differs.

    `weight_rows` is the cost of moving one expert, in rows of the layer's
    all-to-all (its weights' elements over a row's); `rebalance_every` is
    the trainer's default K (`merak-compile --moe-rebalance-every`).

    ```mlir
    %placed = merak.expert_place %ids, %table table = 0 weight_rows = 192 rebalance_every = 10
        : tensor<64xi64>, tensor<8xi64> -> tensor<64xi64>
    ```
  }];
  let arguments = (ins TensorOf<[I64]>:$experts, TensorOf<[I64]>:$placement, I64Attr:$table,
                       I64Attr:$weight_rows, I64Attr:$rebalance_every);
  let results = (outs TensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $experts `,` $placement `table` `=` $table `weight_rows` `=` $weight_rows
    `rebalance_every` `=` $rebalance_every attr-dict
    `:` type($experts) `,` type($placement) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Merak_ExpertCapacityOp : Merak_Op<"expert_capacity", [Pure]> {
  let summary = "Drops the rows beyond each expert's capacity (token dropping)";
  let description = [{
    GShard's and Megatron-LM's expert capacity. `experts` `[S]` are the
    expert ids of one part of the batch (its tokens' top-k choices, ids in
    `[0, E)`, `E = experts`), `probs` `[S]` the routing weight of each
    row. Each expert keeps at most `capacity` of its rows; the result is
    `experts` with every other row's id replaced by `-1` (dropped: no expert
    computes it, and `merak.all_to_all` does not send it).

    - `policy = "probs"` (Megatron's default) keeps an expert's `capacity`
      rows of the highest probability, the lower row first among equal
      ones;
    - `policy = "position"` keeps its first `capacity` rows (GShard's and
      Megatron's "position": the earlier tokens).

    merak-moe-capacity sets `capacity = ceil(S * capacity_factor / E)`
    and zeroes the routing weight of the dropped rows, so that they add
    nothing to the layer's output. The ids carry no gradient, so neither
    do `probs` through this op. The runtime counts the dropped rows (the
    trainer's `moe_dropped` metric).

    ```mlir
    %kept = merak.expert_capacity %ids, %p experts = 4 capacity = 20 policy = "probs"
        : tensor<64xi64>, tensor<64xf32> -> tensor<64xi64>
    ```
  }];
  let arguments = (ins TensorOf<[I64]>:$experts, Merak_FloatTensor:$probs, I64Attr:$num_experts,
                       I64Attr:$capacity, StrAttr:$policy);
  let results = (outs TensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $experts `,` $probs `experts` `=` $num_experts `capacity` `=` $capacity
    `policy` `=` $policy attr-dict `:` type($experts) `,` type($probs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Merak_ExpertCompactOp : Merak_Op<"expert_compact", [Pure]> {
  let summary = "This rank's rows of the ep group, compacted (capacity-bounded buffers)";
  let description = [{
    With `experts` `[parts * S]` the ep group's routing ids (group rank i's
    rows at `[i * S, (i + 1) * S)`) and `first` the first of this rank's
    `experts_per_rank` experts, the result `[R]` lists the ids of this
    rank's rows in the group's order (rank i, then row s), then `-1` for
    the remaining places. A `merak.all_to_all` with `compact = R` moves
    the rows in the same order, so an expert GEMM over the `[R, K]` rows
    reads these ids.

    merak-expert-parallel uses it when an expert capacity
    (`merak.expert_capacity`) bounds the rows: each of the rank's experts
    takes at most `capacity` rows of each group rank, so `R = parts *
    experts_per_rank * capacity` (at most `parts * S`) holds them all,
    where the positional form needs `parts * S` rows. More rows than `R`
    stop the program.

    ```mlir
    %c = merak.expert_compact %eg, %first experts_per_rank = 2
        : tensor<64xi64>, tensor<i64> -> tensor<24xi64>
    ```
  }];
  let arguments = (ins TensorOf<[I64]>:$experts, TensorOf<[I64]>:$first,
                       I64Attr:$experts_per_rank);
  let results = (outs TensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $experts `,` $first `experts_per_rank` `=` $experts_per_rank attr-dict
    `:` type($experts) `,` type($first) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MERAK_EXPERT_OPS_TD
