//===- ShardingPasses.td - the passes that split values ---*- tablegen -*-===//
//
// Included by Passes.td in pipeline order (after merak-record-index-limits):
// merak-split-batch and merak-tensor-parallel, which split values over
// ranks through the ops' sharding rules (ShardingRuleOpInterface).
//
//===----------------------------------------------------------------------===//

#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_SHARDINGPASSES_TD
#define MERAK_DIALECT_MERAK_TRANSFORMS_SHARDINGPASSES_TD

include "mlir/Pass/PassBase.td"

def MerakSplitBatch : Pass<"merak-split-batch", "mlir::ModuleOp"> {
  let summary = "[training] Splits the batch into `parts` by propagation: the "
                "per-rank, per-micro-batch model";
  let description = [{
    Data parallelism and micro-batching run the model on a part of the
    batch. This pass makes the model function `entry` (the imported
    `@forward`, before merak-attach-loss) compute one part: 1/`parts` of the
    rows of every input that carries the batch. It needs nothing from the
    exporter: a static-batch export, whose Reshape targets and masks spell
    the batch as a number, splits as a dynamic one does.

    The batch inputs are the token ids (the first rank-2 integer input), or
    without them every input, which must share a leading dimension; their
    dimension 0 is split, rank r holding rows [r b, (r+1) b) with b =
    batch / parts. The split then follows every value in program order
    through the op's sharding rule (ShardingRuleOpInterface, as in
    merak-tensor-parallel; the batch may sit inside a dimension, e.g. the
    batch-major or sequence-major [B*H] of heads folded into the batch):
    - a parallel factor (elementwise ops, matmul, reshape, transpose,
      attention, convolutions, ...) splits the results alike;
    - a reduction or combined factor (a sum, mean or max over the batch; a
      mean loss) leaves every part its own reduction, as PyTorch's
      DistributedDataParallel computes one replica's loss; merak-data-
      parallel and the micro-batch accumulation then average the gradients;
    - a replicated factor kept by the results (a softmax over the batch
      axis, batch normalisation's statistics) is computed per part, as DDP
      does without SyncBatchNorm;
    - positions along the batch (a merak.argsort of rows that carry it,
      and values computed from them and constants alone) are each part's
      positions of its own rows: a gather or scatter at them (the rule's
      `addressedBy` axis) reads or writes the part's rows, as a Mixture-of-
      Experts dispatch that sorts the batch's rows by expert does on each
      DDP rank; at other indices a gather along the batch is an error;
    - an operand that meets a split value but does not derive from the
      inputs (a constant mask [B, 1, T, T], a broadcast of position ids to
      [B, T], ConstantOfShape) is computed again at the local size: a
      constant keeps its first part when every part is equal, other ops are
      cloned on their operands' local versions. Another input that meets the
      batch is split too (an attention mask).
    The results, function type and the attributes that spell sizes
    (`adaptToLocalTypes`: slice limits, split sizes) follow the local types.

    Errors name the op: a batch that does not divide into `parts` (per
    block); an op without a sharding rule that a split value reaches; a
    slice, gather or concatenation along the batch (the part would need
    other ranks' rows); a batch inside a reshape that does not keep it as a
    whole factor (e.g. [B, T] to [T, B] as a flat reshape); two operands
    carrying the batch in different dimensions; a parameter or a constant
    that differs along the batch meeting it.
  }];
  let options = [
    Option<"parts", "parts", "int64_t", /*default=*/"1",
           "Parts of the batch: data-parallel ranks x micro-batches">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The model function to split">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakTensorParallel : Pass<"merak-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "[training] Megatron-LM tensor parallelism, found by graph structure";
  let description = [{
    Shards the model function `entry` (the imported `@forward`, before
    merak-attach-loss) over `tp` ranks with Megatron-LM's rule, recognising
    the layers by the structure of the graph, not by parameter names:
    - A *column-parallel* Linear is a `merak.matmul` of a replicated value by
      a 2-D parameter read nowhere else, as PyTorch exports nn.Linear
      (`transpose(get_param W) perm = [1, 0]`, W of shape [out, in]) or as a
      Gemm-like `matmul(x, get_param W)` (W of shape [in, out]). Its output
      features are split over the ranks; so are the parameters met
      elementwise with its output (its bias). Its input passes through
      `merak.tp_identity` (Megatron's f: the gradient is summed over "tp").
      So is `matmul(get_param W, x)` with W [out, in] on the left (Mamba's
      `dt_proj.weight @ x^T`): its output rows are the features.
    - The split propagates through every op by its sharding rule
      (ShardingRuleOpInterface: the op's dimensions as parallel, reduction
      and replicated factors; lib/Dialect/Merak/Interfaces): elementwise ops
      (with broadcasting; a parameter read only there is split alike, also
      through a reshape that only adds or drops dimensions of size 1),
      `reshape` (the split moves to the output dimension at the same flat
      position: splitting [B, T, C] into heads [B, T, H, C/H] splits H),
      `transpose`, `split`, `softmax` or a norm over other axes, and batched
      `matmul` over a split batch dimension (attention scores and context).
      A split reaching a replicated factor (a softmax's axis) or an op
      without a rule stops the region. A replicated float operand that such
      an op reads without the split factor (a per-head norm's weight [D]
      on split heads; not a constant) passes through `merak.tp_identity`:
      each rank's gradient of it covers the rank's heads only. One computed
      from parameters read only there, through ops that each pass the
      split on (a value read once at every step: Mamba's `A = -exp(A_log)`,
      a Swin block's relative-position bias gathered from its table), is
      split at its source: the parameters are split alike. Otherwise one
      computed from parameters and constants alone that holds the split
      factor without being a parameter read only there
      (T5's relative-position bias on the split heads, computed from its
      table; GPT-OSS's sinks concatenated to the scores), or from the
      inputs and constants alone (BLOOM's ALiBi bias from the attention
      mask, on the merged batch-and-heads dimension), is read as the
      rank's part, `merak.local_shard` (Megatron's scatter, whose
      derivative gathers the parts' gradients over tp). An activation
      holding it is split where it is computed when every op computing it
      (each value read once) passes the split on to operands without it,
      read through `merak.tp_identity` (DeepSeek-V3's rotary key head
      broadcast to the heads). A region stopped by an activation another
      region might split is given up only after the other failed regions
      and the pruning.
    - A *row-parallel* Linear is a matmul of a value split on its
      contraction dimension (a reduction factor; `reduce_sum` over the split
      axis ends a region the same way) by a parameter weight: the weight is split along
      its input features, and the matmul's output is summed over the ranks
      by `merak.all_reduce` (group "tp", sum: Megatron's g) before its bias
      (replicated) is added.
    - Convolutions likewise: an ungrouped `merak.conv2d` of a replicated
      value by a parameter weight [O, I, kh, kw] read nowhere else (and its
      bias, if any) is column-parallel on its output channels (dimension 1
      of NCHW), which propagate through batch norm (its scale, bias and
      running statistics split alike), activations and pooling; a conv2d
      reading split channels is row-parallel (weight split on I, output
      summed by `merak.all_reduce`). A depthwise convolution (one input
      and one output channel per group: MobileNet's and ConvNeXt's
      depthwise layers, Mamba's causal conv1d) keeps the channels split,
      its weight split alike and its groups the local channels; another
      grouped convolution keeps its channels replicated and stops the
      region.
    So an MLP `Linear -> activation -> Linear` becomes column -> row, a
    CNN's `Conv -> BatchNorm -> ReLU -> Conv` the same, and
    attention becomes a column-parallel QKV projection with the heads split
    (H/tp per rank), the score/softmax/context ops on local heads, and a
    row-parallel output projection. A fused QKV projection (GPT-2's c_attn,
    weight [3C, C]) whose output is split into three equal parts, or viewed
    as [..., 3, C] with q, k and v picked by index (nn.MultiheadAttention's
    in_proj), is split block-wise (`blocks = 3`): each rank holds its heads'
    rows of q, k and v. Equal parts taken by slices work the same,
    also after a transpose (Mamba's in_proj: [B, L, 2C] transposed to
    [B, 2C, L], then sliced into the hidden states and the gate).
    One whose output is cut into parts of different lengths (Phi-3's
    grouped-query `qkv_proj`: q, k, v of H * D, KV * D, KV * D rows, by
    slices or a split) is split in *ragged* blocks (`block_sizes`, each
    length divisible by tp): each rank holds its part of every block, the
    slices read the local parts (a block starting at s starts at s / tp),
    and the parts are split normally from there. A ragged split passes
    only through those slices or that split. A block that cannot split (a
    multi-query key or value head inside a fused projection, GPT-BigCode's
    c_attn; the one group of B and C of a Mamba-2 mixer) is held whole:
    every rank computes it, the weight stays whole (a remark names it) and
    each rank reads its rows of it, `gather(tp_identity(W), rows)`, and the
    values computed from such blocks alone are read without f (each rank's
    gradient of them is partial, summed by the weight's f and the input's).
    A layer or RMS norm over the split features (OLMo 2's q and k norms
    over the whole projection) keeps the split where its region is a
    Megatron block (its column Linears read one value, and its row-parallel
    ends are no wider than that value): its scale and bias are split alike
    and its statistics are summed over tp (the op's `splitStatistics`:
    local sums, `merak.all_reduce`, then `merak.tp_identity`, so that
    their gradient is summed too). A norm on a residual stream, an LM
    head's transform or a low-rank projection leaves its region
    replicated. A Linear whose input a given-up region had split is seeded
    again.
    A Linear whose values reach anything else (a softmax's axis, the
    function's result such as an LM head, an embedding) stays replicated,
    with every Linear its values met; embeddings, the residual stream's
    norms, the LM head and the loss are replicated.

    A sharded `merak.param` gets the local shard's type and a `merak.shard =
    {axis, parts, blocks}` attribute (dimension `axis` viewed as [blocks,
    parts, n / (blocks * parts)]; rank r holds part r of every block); its
    initial value stays the full tensor, from which every rank takes its
    shard at start-up. Errors: a split dimension (hidden size, heads, the
    features of a Linear) that does not divide by `tp`, naming the op and the
    sizes; and a model in which no such structure is found.

    With `vocab-parallel`, the vocabulary is split too (Megatron-LM): the
    entry's only result must be logits `matmul(x, transpose(W))` with W
    [V, C] a parameter otherwise read only by embedding lookups
    (`merak.gather W[ids] axis = 0`; GPT-2's tied `wte`). W is split on V
    (`merak.shard` axis 0, rank r holds rows [r V/tp, (r+1) V/tp)); the
    lookup becomes `ids - merak.group_rank("tp") * V/tp`, masked to the
    local rows (others read row 0 and are zeroed), then `merak.all_reduce`
    (tp, sum); the LM head gets f (`merak.tp_identity`) on x and returns
    the logits split [..., V/tp], marked `merak.vocab_parallel = "tp"`, for
    which merak-attach-loss builds the vocab-parallel cross-entropy
    (`merak.cross_entropy ... {group = "tp"}`). A V that does not divide by
    tp is padded to tp shards of ceil(V / tp) rows (`merak.shard` records
    `size = V`; the result gets `merak.vocab_classes = V`, the loss
    `classes = V`, which leaves the padding logits out). W read in any other
    way is an error; with `vocab-parallel-fallback` (merak-compile's default at --tp > 1)
    such a model keeps its vocabulary replicated instead, with a remark
    saying why. A head `matmul(x, W)` with W [C, V] read only there splits
    W on axis 1 when V divides by tp. Untied tables of the head's V rows
    are split with it; then
    every token embedding of its own (a float [N, C] table, N >= C, read
    only by lookups whose ids are a function argument through casts and
    reshapes: a text classifier's, whose head does not qualify) is split
    on its rows alone (Megatron-LM's VocabParallelEmbedding), its lookups
    rewritten the same way; position tables (computed ids) stay whole.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Tensor-parallel ranks">,
    Option<"vocabParallel", "vocab-parallel", "bool", /*default=*/"false",
           "Also split the vocabulary (Megatron-LM): the embedding table "
           "[V, C] read by a gather and by the LM head (the entry's only "
           "result, logits [..., V]) is split on V; the logits stay split and "
           "are marked merak.vocab_parallel for merak-attach-loss">,
    Option<"vocabParallelFallback", "vocab-parallel-fallback", "bool", /*default=*/"false",
           "With vocab-parallel: a model whose vocabulary cannot be split (no "
           "such LM head, or V not divisible by tp) keeps it replicated, with a "
           "remark, instead of failing">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The model function to shard">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakSequenceParallel : Pass<"merak-sequence-parallel", "mlir::ModuleOp"> {
  let summary = "[training] Megatron-LM sequence parallelism between the tensor-parallel regions";
  let description = [{
    After merak-tensor-parallel, everything between its regions (residual
    adds, layer norms, the row-parallel biases) is computed by every tp rank
    on every token. This pass splits those ops over the tokens instead
    (Korthikanti et al., "Reducing Activation Recomputation in Large
    Transformer Models"; Megatron-LM's `--sequence-parallel`):
    - A region's end, `merak.all_reduce` (tp, sum) of a value [..., C]
      whose N token rows (the product of every dimension but the last)
      divide by `tp`, becomes `merak.reduce_scatter` (tp, sum) of its
      partial sums viewed as [N, 1, ..., C] (same rank): rank r keeps token
      rows [r N/tp, (r+1) N/tp), summed.
    - Token-split values propagate in program order through every op that
      computes each token row from the same rows of its operands: by its
      sharding rule (ShardingRuleOpInterface), every result dimension but
      the last is a parallel factor, and every operand either has those
      dimensions with the same factors (then it is split alike: a
      replicated one is cut with `merak.local_shard`; the same rows in
      other dimensions, [B T, C] read as [B, T, C], are reshaped) or none
      of them (a broadcast operand such as a norm's scale or a bias, kept
      whole). An operand may also carry whole groups of rows, one per
      result row, its group factors in no result (a sum over each token's
      top-k expert rows, [N, k, C] -> [N, C]): this rank's rows hold their
      groups whole, viewed as [N/tp, k, C].
      Only ops that at most read memory are split, and a value read again
      whole must be a float. A dropout (which reads the training position)
      records its rows' place in the whole tensor
      (ShardingRuleOpInterface's viewAsRows and recordSplit), so that it
      draws the serial program's mask; one split over tp already (inside a
      block) or over the last dimension stays whole.
    - A kept operand passes through `merak.tp_identity`: each rank's
      gradient of it covers its own rows, summed over tp.
    - Anything else reading a split value (a region's start
      `merak.tp_identity`, an attention, the function's result) reads
      `merak.all_gather` (tp) of it, viewed back in its shape.
    The all-reduce of the forward becomes a reduce-scatter and an
    all-gather (the same bytes), and so does the backward's (the gradient
    of a tp all-gather is this rank's part of its replicated gradient,
    `merak.local_shard`, which folds with the all-reduce of the region's
    `tp_identity` into one reduce-scatter); the ops in between and their
    stashed activations shrink tp-fold. In a Mixture-of-Experts layer the
    router reads the gathered tokens (a top-k reshapes its rows), the
    combine is split: the expert rows' all-reduce (experts split over tp)
    becomes a reduce-scatter, the routing weights are cut, and each token's
    sum over its k rows runs on this rank's rows.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Tensor-parallel ranks">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The model function">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakExpertParallel : Pass<"merak-expert-parallel", "mlir::ModuleOp"> {
  let summary = "[training] Expert parallelism: the experts split over the ep ranks";
  let description = [{
    Splits every Mixture-of-Experts weight of the model function `entry`
    (the imported `@forward`, after merak-split-batch, before
    merak-tensor-parallel and merak-attach-loss) over the `ep` ranks of an
    expert-parallel group, Megatron-LM's way with its all-gather token
    dispatcher. The ep group is `ep` consecutive data-parallel ranks (ep
    divides dp, merak-record-mesh's `merak.mesh`); each rank holds E / ep
    experts and its own tokens. Each `merak.expert_matmul %x, %w[%e]` whose
    weight `%w` is a parameter `[E, ...]` read only by expert GEMMs becomes

    ```
    %xg = merak.all_gather %x group = "ep"        // the group's tokens
    %eg = merak.all_gather %e group = "ep"        // and their expert ids
    %first = merak.group_rank "ep" * (E / ep)     // this rank's first expert
    %yl = merak.expert_matmul %xg, %w[%eg first %first]  // rows of its experts
    %y = merak.reduce_scatter %yl group = "ep" reduction = "sum"
    ```

    The parameter gets the local `[E / ep, ...]` type and `merak.shard =
    {axis = 0, parts = ep, group = "ep"}`. Every row is computed by exactly
    one rank and is zero on the others, so the reduce-scatter returns each
    rank its rows exactly (adding zeros). Autodiff turns the reduce-scatter
    into an all-gather of the gradient and the all-gathers into
    reduce-scatters; the weight's gradient then sums the whole group's
    tokens, and merak-data-parallel averages it over the ranks holding the
    same experts ("edp", dp / ep ranks) divided by ep. The all-gathers of
    one value (the gate and up projections' input) are shared.

    `dispatcher = "alltoall"` (the default; Megatron-LM's alltoall token
    dispatcher) replaces the all-gather of `%x` and the reduce-scatter by
    `merak.all_to_all` dispatch and combine routed by `%eg`: each row goes
    only to the rank holding its expert (1/ep of the all-gather's bytes when
    routing is balanced), with the same values. `"allgather"` keeps the
    form above. Then, without chunks and with compact rows (an expert
    capacity), a dispatch of row-wise functions of one combine's rows by
    the same ids (an expert MLP's activation between its GEMMs; row-wise by
    the ops' sharding rules, every value read only there) becomes those
    functions on the combined GEMM's own rows, `dispatch(f(combine(y))) ->
    f(y)` (also through tp's all-gather and cut): one dispatch and one
    combine per expert MLP. Positional rows (ep x the tokens) keep both:
    the functions on them would cost more than the exchanges.

    `shadow = M` (alltoall only) adds FasterMoE's dynamic shadowing with M
    slots per layer: a `merak.expert_shadow_plan` of the gathered ids picks,
    every step, the experts with at least `shadow-min-rows` rows from other
    ranks (0: where one expert's weights cost what that many of its rows
    cost on the all-to-all, from the layer's GEMM shapes); their owners
    broadcast the weights (`merak.expert_shadow`), each rank computes its
    own rows of them in the same grouped `merak.expert_matmul` (its
    `shadow` operands), and the copies' weight gradients are reduced back
    to the owners. The losses equal plain expert parallelism's; the weight
    gradients are summed in another order.

    `rebalance-every = K` (> 0) adds FlexMoE's dynamic placement: each
    layer's gathered ids go through a `merak.expert_place` of a new i64
    parameter `moe.placement.<n>` (kind "frozen", the identity at first),
    and the layer's expert weights' `merak.shard` names table n, so that
    the trainer, every K steps, can permute their experts (and their
    optimizer state's) across the ep ranks to balance the rows.

    `hierarchical` marks the all-to-alls two-level (see merak.all_to_all).

    `tp = N` (> 1: the experts are replicated over the tensor-parallel
    ranks, Megatron-Core's expert-tensor-parallel size 1) gives each tp rank
    its share of every expert GEMM's rows, so that no two tp ranks compute
    (or send through the all-to-all) the same rows:

    ```
    %xl = merak.local_shard %x group = "tp"     // rows [r S/tp, (r+1) S/tp)
    %el = merak.local_shard %e group = "tp"     // their expert ids
    %wt = merak.tp_identity %w                  // weight gradient summed over tp
    %yl = merak.expert_matmul %xl, %wt[%el]     // then expert parallel as above
    %y  = merak.all_gather %yl group = "tp"     // every rank's rows again
    ```

    The ep group holds ranks of one tp coordinate, so each tp rank's rows
    meet the same tp rank's experts. A GEMM whose rows do not divide by tp
    keeps all of them, and so do all GEMMs with `rebalance-every` (the tp
    ranks' own row counts could place the replicated experts differently).

    `chunks = k` (> 1; alltoall, without shadowing: FasterMoE's smart
    scheduling, MPMoE's pipelining) splits each expert GEMM's rows into k
    equal chunks, each with its own dispatch, GEMM and combine (the
    gathered ids sliced per chunk: group rank i's rows of chunk c), all k
    dispatches first, and concatenates the combines. merak-overlap's
    `ep-overlap` then keeps chunk c + 1's all-to-all in flight under chunk
    c's GEMM. The rows are the same; each expert's weight gradient is the
    sum of k partial sums.

    Errors: E not divisible by ep, a weight that is not a parameter (or is
    read by anything else), a model without expert GEMMs, shadowing or the
    hierarchical all-to-all with the allgather dispatcher, chunks with
    shadowing, the allgather dispatcher or rows that do not divide by
    them, and (with rebalancing) an expert weight read by two layers.
  }];
  let options = [
    Option<"ep", "ep", "int64_t", /*default=*/"1", "Expert-parallel ranks">,
    Option<"tp", "tp", "int64_t", /*default=*/"1",
           "Tensor-parallel ranks: each takes its share of every expert GEMM's rows">,
    Option<"dispatcher", "dispatcher", "std::string", /*default=*/"\"alltoall\"",
           "Token dispatcher: alltoall (merak.all_to_all) or allgather">,
    Option<"shadow", "shadow", "int64_t", /*default=*/"0",
           "Dynamic shadowing: at most this many hot experts per layer (0: off)">,
    Option<"shadowMinRows", "shadow-min-rows", "int64_t", /*default=*/"0",
           "Shadow an expert with at least this many rows from other ranks (0: from the "
           "cost of its weights)">,
    Option<"hierarchical", "hierarchical", "bool", /*default=*/"false",
           "Two-level all-to-all (within nodes, then across them; merak.all_to_all "
           "hierarchical)">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "Split each expert GEMM's all-to-alls and rows into this many chunks, pipelined "
           "under ep-overlap (1: whole)">,
    Option<"rebalanceEvery", "rebalance-every", "int64_t", /*default=*/"0",
           "Dynamic placement: placement tables the trainer rebalances every this many "
           "steps (0: off)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The model function to shard">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakTpGradSumsPerStep : Pass<"merak-tp-grad-sums-per-step", "mlir::ModuleOp"> {
  let summary = "[training] Sums tp-partial parameter gradients once a step, not per micro-batch";
  let description = [{
    After merak-pipeline (and merak-split-backward), before merak-optimizer.
    A parameter that each tensor-parallel rank reads whole but uses on its
    own part of the work (sequence parallelism's norm scales and biases,
    kept through `merak.tp_identity`) gets a gradient that the backward
    sums over tp, `merak.all_reduce` (tp, sum), and then adds into its
    gradient accumulator, once per micro-batch:

    ```
    // every backward fragment that writes @pipeline.grad.w:
    %s = merak.all_reduce %g group = "tp" reduction = "sum"
    %a = merak.add(merak.get_param @pipeline.grad.w, %s)
    merak.set_param @pipeline.grad.w, %a
      -> merak.add(merak.get_param @pipeline.grad.w, %g)
    // @stage<s>_grads, the step's gradient of w (after its dp mean):
    return ..., %m, ...
      -> return ..., merak.all_reduce %m group = "tp" reduction = "sum", ...
    ```

    The sum is linear, so the step sums the accumulated parts over tp once
    (Megatron-LM all-reduces its layer-norm gradients once a step, after
    the micro-batches); canonicalization then buckets the vectors' sums.
    An accumulator is rewritten only when every fragment that writes it
    adds such a sum and `@stage<s>_grads` returns its gradient; the dp
    mean (which merak-overlap may start under the last backward) stays
    first.
  }];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

#endif // MERAK_DIALECT_MERAK_TRANSFORMS_SHARDINGPASSES_TD
