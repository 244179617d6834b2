//===- Passes.td - merak dialect passes --------------------*- tablegen -*-===//
#ifndef MERAK_TRANSFORMS_PASSES_TD
#define MERAK_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// The passes in the order merak-compile runs them (lib/Pipelines), phase by
// phase; each summary starts with its phase ([import], [training], ...).

//===----------------------------------------------------------------------===//
// Phase import: the clean-up after the ONNX importer (merak-import-cleanup).
//===----------------------------------------------------------------------===//

def MerakFoldConstants : Pass<"merak-fold-constants", "mlir::ModuleOp"> {
  let summary = "[import] Evaluates merak ops whose operands are all constants";
  let description = [{
    Runs the reference evaluator on every merak op whose operands are
    constants and whose results have at most `max-elements` elements, and
    replaces it with `merak.constant`s. This is how shape-arithmetic
    subgraphs of exported models (Shape, Gather, Concat, Range, ...) fold to
    static values. Parameters are not constants and are never folded.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"65536",
           "Largest result (in elements) that is folded">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakFuseDecomposed : Pass<"merak-fuse-decomposed", "mlir::ModuleOp"> {
  let summary = "[import] Recognises decomposed LayerNorm, RMSNorm, GELU, expm1 and log1p and fuses them";
  let description = [{
    Older exports (opset 13 and below) spell LayerNorm as
    ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (then Mul/Add with the affine
    parameters) and exact GELU as Div/Erf/Add/Mul/Mul. This pass rewrites
    those subgraphs into `merak.layer_norm` (absorbing the scale and bias)
    and `merak.gelu`, so that opset-13 and opset-17 exports reach the same
    IR and later phases can use fused kernels and backward rules. Only exact
    matches are rewritten: the normalised axes must be trailing, the
    constants must be 2, 1, 0.5 and sqrt(2) (to f32 precision), and
    intermediate values must have no other users.

    Both torch exporters write `torch.expm1` as `Exp(x) - 1` and
    `torch.log1p` as `Log(x + 1)` (ONNX has neither op); near 0 those lose
    the digits the 1 covers. They become `merak.expm1` and `merak.log1p`
    (the constant exactly 1), which compute what the module computes.
  }];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakRaiseLinearScan : Pass<"merak-raise-linear-scan", "mlir::ModuleOp"> {
  let summary = "[import] Raises a scan unrolled per token (Mamba's selective scan) to merak.linear_scan, and fuses Mamba's to merak.selective_scan";
  let description = [{
    PyTorch's reference path of a selective scan (transformers' Mamba and
    Jamba without their CUDA kernels) loops over the tokens, and every
    exporter unrolls the loop: per token a multiply and an add for the
    state `h_t = a_t * h_{t-1} + b_t`, and a read-out `h_t @ C_t`. This
    pass makes the chain of states one `merak.linear_scan` of the whole
    `a` and `b` (each state a gather of its result), and a concat of the
    per-token read-outs one product and sum over the whole tensors. A
    layer then takes a fixed number of ops instead of several per token,
    and its gradient is one `merak.linear_scan_grad`.

    With `fuse-selective-scan` (the default) a scan in the form Mamba's
    reference path leaves it, `linear_scan(exp(A4 * dt4), dt4 * B4 * u4)`
    over [B, D, T, N] read out as `reduce_sum(H * C4)` over N, becomes one
    `merak.selective_scan(u, dt, A, B, C)`, whose kernels keep one row's N
    states at a time instead of the four [B, D, T, N] tensors (and its
    gradient, `merak.selective_scan_grad`, recomputes them).

    Only exact chains are raised: every step reads token i of the same two
    tensors along the same axis, without broadcasting, from a zero state;
    a chain of fewer steps than the axis holds scans a slice. Anything
    else stays as exported.
  }];
  let options = [
    Option<"fuseSelectiveScan", "fuse-selective-scan", "bool", /*default=*/"true",
           "Fuse the scan of Mamba's reference form and its read-out into merak.selective_scan">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakFuseExperts : Pass<"merak-fuse-experts", "mlir::ModuleOp"> {
  let summary = "[import] Forms grouped expert GEMMs (merak.expert_matmul) of MoE layers";
  let description = [{
    A Mixture-of-Experts layer exported with static shapes (transformers'
    `batched_mm` experts, both exporters) multiplies every (token, choice)
    row by its expert's weight through a gather of the weights:
    `matmul(gather(w [E, O, K], experts [S]), x [S, K, 1])`, or
    `matmul(x [S, 1, K], gather(w [E, K, O], experts [S]))`. That gathers
    an `[S, O, K]` copy of the weights (terabytes at Mixtral's sizes) and
    its gradient scatters one back. This pass rewrites the pair into
    `merak.expert_matmul` (reshapes around it), which groups the rows by
    expert and runs one GEMM per expert; its gradient is
    `merak.expert_matmul_grad_weight`. The gather is erased when nothing
    else reads it. Expert indices must lie in `[0, E)` (the kernels stop
    the program otherwise, where the gather would have wrapped a negative
    one).
  }];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakDropUnusedParams : Pass<"merak-drop-unused-params", "mlir::ModuleOp"> {
  let summary = "[import] Erases merak.param symbols that nothing reads";
  let description = [{
    After folding and canonicalisation some initializers (e.g. ONNX
    constants used only by shape arithmetic) are no longer read. This pass
    erases their `merak.param` symbols so they neither train nor take memory.
  }];
}

//===----------------------------------------------------------------------===//
// Phase training (and shard, pipeline, recompute, schedule): the training step.
//===----------------------------------------------------------------------===//

def MerakRecordMesh : Pass<"merak-record-mesh", "mlir::ModuleOp"> {
  let summary = "[training] Records the device mesh (#merak.mesh) on the module";
  let description = [{
    Sets `merak.mesh = #merak.mesh<dp = D, tp = T, pp = P>` on the module
    when the mesh has more than one rank (a serial module has none): the
    program writer puts it into the manifest, which the runtime checks
    against the processes it was started with.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", /*default=*/"1", "Data-parallel ranks">,
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Tensor-parallel ranks">,
    Option<"pp", "pp", "int64_t", /*default=*/"1", "Pipeline ranks">,
    Option<"ep", "ep", "int64_t", /*default=*/"1",
           "Expert-parallel ranks, folded into dp (must divide it)">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakRecordIndexLimits : Pass<"merak-record-index-limits", "mlir::ModuleOp"> {
  let summary = "[training] Records the range of the model's integer inputs (token ids)";
  let description = [{
    For every integer argument of `entry` (the imported `@forward`, before
    merak-tensor-parallel splits the tables), follows its uses through ops
    that forward elements (reshape, transpose, slice, broadcast) to the ops
    that read it as indices (IndexOperandOpInterface: gather, gather_elements,
    cross_entropy) and sets `merak.index_limit = N` on the argument, N the
    smallest bound found (an embedding table's rows: the vocabulary). The
    program writer puts it into the manifest, and the training program checks
    the data against it when it opens the file, naming the file, the offset
    and the value of the first id out of range. merak-attach-loss sets the
    labels' limit (the classes of the logits).
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The model function">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

// The sharding passes (the batch, tensor parallelism): ShardingPasses.td.
include "merak/Dialect/Merak/Transforms/ShardingPasses.td"

def MerakFuseAttention : Pass<"merak-fuse-attention", "mlir::ModuleOp"> {
  let summary = "[training] Replaces the exporter's decomposed attention by merak.attention";
  let description = [{
    PyTorch exports scaled dot-product attention as `matmul(q, k^T)`, a
    scalar scale, a mask (`where` with a large negative fill, or an added
    bias) and `matmul(softmax(...), v)`, which materialises the T x S scores
    (and, in training, keeps them and the probabilities for the backward).
    This pass rewrites that chain into one `merak.attention` (whose
    gradient, `merak.attention_grad`, recomputes the probabilities from the
    saved log-sum-exp), so that both targets run it streamed: memory linear
    in T, and the CUDA target's flash-attention kernel.

    The mask must be a compile-time constant that is the same for every
    batch and head: a `merak.constant` or a parameter matching a `frozen`
    glob (its initial value; a trainable mask could change), possibly
    sliced, compared with a scalar, negated or cast. It is fused when it
    keeps exactly the keys `c <= r` of query row `r` (causal), the keys
    `r - w < c <= r` (a sliding window of w), the keys `|r - c| < w` (a
    band: ModernBERT's local layers, a window without causal), or all
    keys; a masked score
    must be a fill (or additive bias) of at most -1e4. Stacked masks
    (GPT-Neo's layer mask under the model's causal one) intersect.
    Regroupings of the leading dims between the products and the softmax
    (BLOOM's `[B * H, T, S]` products, masked at `[B, H, T, S]`) are read
    through; the fused op works at q's dims. Keys and values with size-1
    head dims that the products broadcast (multi-query: Falcon's) are
    broadcast for it. Soft-capping of the
    scaled scores before the mask (`mul(tanh(div(s, c)), c)`, Gemma 2) is
    taken in too. With `cpu-forms`, any other additive term of the scores
    that broadcasts to them without growing (`S` last, other dims, `T`
    too, 1 or the scores') becomes the fused op's `bias` operand, whose gradient the
    fused backward returns: T5's learned relative-position bias (inside
    its decoder's constant causal mask, `where(mask, b, fill)`, which
    becomes `causal`), constant ALiBi slopes (BLOOM's, per key:
    `[B * H, 1, S]`), masks that differ between batches, XLNet's shifted
    position scores. A bias added to the regrouped scores is regrouped to
    q's dims; a scalar scale applied to the sum of the scores and a bias
    (XLNet's `(ac + bd + ef) * scale`; no mask inside it) becomes the fused
    op's and scales the bias too; an added constant 0 (XLNet's `ef`
    without segments) is dropped; a subtracted term is a negated bias, and
    several terms sum into one bias (XLNet's padding mask, subtracted
    outside its scale, and its position scores inside it). Windows,
    soft-capping, biases and head dims other than 16, 32, 64 and 128
    (Phi-2's 80, Phi-3's 96, Gemma's 256) only with `cpu-forms` (the CUDA
    kernels have none of them); so are value heads of another width than
    the query and key heads (multi-head latent attention: DeepSeek-V3's
    192 and 128), where the narrower side is padded with zero columns
    (which change no score and no output column) and the fused output is
    sliced back to the value width. torch's SDPA NaN guard
    (`where(isnan(p), 0, p)` after the softmax) goes with it. With
    `cpu-forms`, a `merak.dropout` on the probabilities (Hugging Face's
    attention dropout) whose mask nothing else reads becomes the fused
    op's `dropout` and `seed`, with the splits it recorded: the kernels
    draw its mask again, forward and backward. Attention sinks (GPT-OSS: a
    learned logit per head concatenated to every row's scores before the
    softmax, optionally less the row maximum, and its column sliced off
    after it) fuse on both targets: the fused result times
    `sigmoid(lse - sink)`, the share of the row the sink leaves to the
    keys, whose gradient reaches the sinks and, through
    `merak.attention_grad`'s `lse_grad`, the scores.
    Fused only for float32 self-attention (as many keys as queries; with
    `cpu-forms` also more or fewer keys, without a causal mask or a window:
    DeepSeek-V4's compressed keys after its sliding ones) with a
    head dimension equal for key and value (without `cpu-forms`: 16, 32,
    64 or 128, the CUDA kernel's), a nonzero scale and intermediates without other
    users; anything else (padding masks shaped [B, 1, 1, S]) stays
    decomposed. Runs after merak-tensor-parallel (which
    shards the decomposed form's heads) and before merak-attach-loss.
  }];
  let options = [
    ListOption<"frozen", "frozen", "std::string",
               "Globs of parameters that do not train (masks read from them are constants)">,
    Option<"cpuForms", "cpu-forms", "bool", /*default=*/"true",
           "Also fuse what only the CPU kernels implement: sliding windows and bands, "
           "soft-capping, score biases, probability dropout and any head "
           "dimension (off for the CUDA target)">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakMixedPrecision : Pass<"merak-mixed-precision", "mlir::ModuleOp"> {
  let summary = "[training] bf16 GEMMs (float32 accumulation) with float32 master weights";
  let description = [{
    With `precision=bf16`, every float32 `merak.matmul` becomes
    `cast(matmul(cast(a, bf16), cast(b, bf16)), f32)` (a transpose feeding
    an operand moves below its cast, so merak-fold-transposes still folds
    it). Run before autodiff (the training pipeline runs it after
    merak-fuse-attention): the matmul VJP then computes the backward's GEMMs
    on bf16 operands too, the backward keeps the bf16 copies of the GEMM
    inputs (half their memory), and the cast's VJP gives the float32
    parameters float32 gradients, so accumulation, clipping, the dp
    reduction and the optimizer (state and master weights) stay float32.
    Then bf16 activations: the GEMM's bf16 result flows on in bf16 through
    the ops torch.autocast runs in its input's dtype -- a bias add (the
    parameter operand, possibly reshaped or broadcast, is cast to bf16, as
    autocast's addmm), `merak.gelu`, reshapes, transposes and splits -- the
    widening cast moving below each, and `merak.attention` when its query,
    key and value all arrive in bf16 (its lse stays float32); a narrowing of
    a widened value is the value itself; it stops at every other op (layer
    norm, softmax, the loss, a residual add whose other operand is a float32
    activation). So an MLP's hidden activations go from GEMM to GEMM in
    bf16 (GELU's input kept for the backward in bf16), attention runs from
    the QKV projection to the output projection in bf16, and everything else
    stays float32: torch.autocast(bfloat16)'s policy. A GEMM whose bf16
    result is then only widened (the LM head) gives its float32
    accumulation directly (a bf16 x bf16 -> f32 `merak.matmul`), as do,
    through the cast's VJP, the weight-gradient GEMMs of the bf16 weight
    copies.
    The kernels: bf16 tensor cores with float32 accumulation on CUDA
    (cuBLASLt); on CPU the operands are widened to float32 and the result
    rounded once. Matmuls whose VJP would reduce over broadcast batch
    dimensions (neither a rank-2 right operand nor equal batch dims) and
    `merak.attention` stay float32. `precision=fp32` changes nothing.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"", "fp32 or bf16">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

// The BatchNorm passes (merak-sync-batch-norm, merak-batch-norm-stats):
// BatchNormPasses.td.
include "merak/Dialect/Merak/Transforms/BatchNormPasses.td"

def MerakAttachLoss : Pass<"merak-attach-loss", "mlir::ModuleOp"> {
  let summary = "[training] Adds func.func @loss computing the training loss of @forward";
  let description = [{
    Clones `@forward` into `@loss`, which returns one scalar:
    - `loss=cross-entropy`: the mean cross-entropy of the logits output
      (`logits=NAME` by `merak.name`, default the first result; the class
      axis is the last) against integer labels: `labels=next-token` adds an
      argument `labels` shaped like the logits without the class axis (the
      data loader supplies the next token of every input position), and
      `labels=NAME` uses that graph input instead. Labels of -100 (PyTorch's
      `ignore_index`: padding) are skipped, the mean taken over the others;
      `merak.ignore_index` on the labels records it for ./train. With
      `global-mean` (merak-compile sets it when dp x micro-batches > 1) the
      mean is over the counted labels of the whole step: the piece's mean
      times its count over an argument `label_count` (the step's count over
      dp x micro-batches, which ./train fills), so that averaging the pieces
      gives the serial program's loss and gradients with padding too.
    - `loss=model-output`: the model already returns the loss; its first
      result (or `logits=NAME`) must be a scalar.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"cross-entropy\"",
           "cross-entropy or model-output">,
    Option<"logits", "logits", "std::string", /*default=*/"\"\"",
           "Name of the logits (or loss) output; default: the first">,
    Option<"labels", "labels", "std::string", /*default=*/"\"next-token\"",
           "next-token, or the name of a graph input holding the labels">,
    Option<"globalMean", "global-mean", "bool", /*default=*/"false",
           "The mean over the whole step's counted labels (argument label_count)">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

// The Mixture-of-Experts training passes (load-balancing loss, expert
// capacity): MoePasses.td.
include "merak/Dialect/Merak/Transforms/MoePasses.td"

def MerakFreezeGradientless : Pass<"merak-freeze-gradientless", "mlir::ModuleOp"> {
  let summary = "[training] Freezes the parameters the loss gives no gradient";
  let description = [{
    A parameter that reaches the loss only through values without a
    derivative (TopK's or ArgMax's indices, comparisons, integer casts:
    DeepSeek's sparse-attention indexer) gets no gradient. PyTorch leaves
    its `.grad` None, and its optimizers skip such a parameter: no update,
    no weight decay, no state. This pass finds them with a trial reverse
    sweep of `@<entry>` (DifferentiableOpInterface, as merak-autodiff and
    merak-pipeline build it; the trial is discarded) and marks each
    `merak.kind = "frozen"`, with one remark naming them, so that every
    later pass (serial or pipelined) and the manifest treat them as the
    `frozen` globs' parameters. When the trial fails (an op without a
    derivative rule), it changes nothing: merak-autodiff or merak-pipeline
    reports the error.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"loss\"",
           "Function whose first result is the loss">,
    ListOption<"frozen", "frozen", "std::string",
               "Glob patterns of parameters already frozen">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

def MerakAutodiff : Pass<"merak-autodiff", "mlir::ModuleOp"> {
  let summary = "[training] Reverse-mode differentiation of a scalar loss w.r.t. all parameters";
  let description = [{
    For `func.func @<entry>` whose first result is a scalar floating-point
    loss, adds `func.func @<entry>_grad` with the same arguments returning
    the loss followed by the gradient of every trainable `merak.param` (in
    module order; `merak.name = "grad:<param>"`); parameters matching a
    `frozen` glob get none. The backward ops are built by each
    op's DifferentiableOpInterface rule in reverse order; gradients of
    values read several times (and of parameters read through several
    `merak.get_param`, i.e. tied weights) accumulate. An op on the path from
    a parameter to the loss without a rule is an error naming it.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "Function to differentiate">,
    ListOption<"frozen", "frozen", "std::string",
               "Glob patterns of parameters that do not train (no gradient "
               "is returned for them), e.g. buffers such as causal masks">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

def MerakDataParallel : Pass<"merak-data-parallel", "mlir::ModuleOp"> {
  let summary = "[training] Averages gradients and the loss over the data-parallel ranks";
  let description = [{
    Data parallelism: each of the `dp` ranks runs `@loss_grad` on its own
    slice of the global batch (the program was imported with the per-rank
    batch), so its loss and gradients are means over its own tokens. This
    pass averages them over the `dp` group with `merak.all_reduce` (mean), so
    that every rank holds the serial program's loss and gradients and the
    optimizer update that follows is the serial one. Gradients are grouped
    into buckets of about `bucket-bytes` bytes, in the order the backward
    pass finishes them (the last-computed first), each bucket placed right
    after its last member is computed, so that a later overlap phase can run
    it under the remaining backward. With `dp` = 1 it does nothing.

    With `zero = 1` (ZeRO stage 1) each gradient is instead flattened,
    zero-padded to a multiple of `dp` elements and reduce-scattered
    (`merak.reduce_scatter`, "dp", mean; bucketed alike): @loss_grad returns
    this rank's part of every averaged gradient, its result marked
    `merak.zero = {parts, shape}` (layout in MerakOps.h), and
    merak-optimizer updates only that part of the parameter and of its state
    and all-gathers the updated parameter.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", /*default=*/"1", "Data-parallel ranks">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 * 1024 * 1024",
           "Gradient bytes per all-reduce bucket">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage: 0 (all-reduce gradients) or 1 (reduce-scatter them; the "
           "optimizer state is sharded over dp)">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakPipeline : Pass<"merak-pipeline", "mlir::ModuleOp"> {
  let summary = "[training] Cuts @loss into pipeline stages and builds their fragments";
  let description = [{
    Partitions `@loss` (one micro-batch) into `pp` contiguous stages and
    builds, per stage s, `@stage<s>_forward` (data inputs and the activations
    crossing the previous cut -> the activations crossing the next cut, or
    the loss), `@stage<s>_backward` (the same inputs plus the cotangents of
    the outputs -> the cotangents of the input activations; it recomputes the
    forward and adds the parameter gradients into zero-initialised params
    `pipeline.grad.<param>` of kind "scratch": zeroed before every step, not
    checkpointed) and `@stage<s>_grads` (the accumulated
    gradients of the parameters the stage reads, averaged over "dp"; marked
    `merak.update`, so merak-optimizer builds `@stage<s>_update` from it).
    Ops computed from constants and parameters only are cloned into every
    stage that needs them; the rest are cut in program order at "cut
    points": where the fewest floating-point values cross (every crossing
    value is forwarded explicitly, skip connections and masks included),
    among the positions with a trainable parameter read on both sides when
    there are any (so that no stage is left with only the loss). The cuts
    balance estimated forward FLOPs (matmul 2MNK, others their elements)
    and, among choices within 5% of the best balance, send the fewest
    bytes, unless `boundaries` lists pp-1 cut-point indices. A parameter read by
    several stages (tied embeddings) is held by each; only its first holder
    counts it in the gradient norm (`merak.norm_skip`). A vocabulary-split
    tied embedding (merak-tensor-parallel `vocab-parallel`) is such a
    parameter too: each tp rank's stages hold the same [V/tp, C] shard, and
    the runtime sums their gradient accumulators over the stages (over
    "pp", so per tp rank). The choice is the
    module attribute `merak.pipeline`. After merak-tensor-parallel, stages
    hold local shards and the tp collectives (`merak.tp_identity`,
    `merak.all_reduce`), which each stage's backward differentiates with
    their VJP rules; accumulators of sharded parameters are local.
    With `zero = 1` (and dp > 1) `@stage<s>_grads` flattens, pads and
    reduce-scatters the accumulated gradients over "dp" (mean) as
    merak-data-parallel does, so that merak-optimizer updates this rank's
    ZeRO parts of them.
    With `virtual-stages` v > 1 (interleaved 1F1B) the pp stages are model
    chunks run by pp / v ranks, model stage k on rank k mod (pp / v): the
    fragments stay per model stage, but `@stage<r>_grads` exists per rank r
    over the parameters of all its chunks (one update and one gradient norm
    part per rank; a tied copy counted by the lowest rank holding it), and
    `merak.pipeline` records `virtual_stages`.
  }];
  let options = [
    Option<"pp", "pp", "int64_t", /*default=*/"1",
           "Pipeline stages (model stages: ranks x virtual-stages)">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Model chunks per pipeline rank (interleaved 1F1B)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Micro-batches per step (the backward seeds the loss with 1/microbatches)">,
    Option<"dp", "dp", "int64_t", /*default=*/"1", "Data-parallel ranks (gradients averaged)">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage: 1 reduce-scatters the stage gradients over dp (each result "
           "this rank's part, marked merak.zero) instead of all-reducing them">,
    ListOption<"boundaries", "boundaries", "int64_t",
               "Cut-point indices ending stages 0..pp-2 (default: balanced)">,
    ListOption<"frozen", "frozen", "std::string", "Globs of parameters that do not train">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

def MerakRecompute : Pass<"merak-recompute", "mlir::ModuleOp"> {
  let summary = "[training] Chooses what each pipeline stage's backward recomputes";
  let description = [{
    Runs after merak-pipeline (whose backward fragments recompute the whole
    forward from the stage inputs) and before merak-optimizer. Per stage,
    `mode` decides which forward values the backward recomputes; every
    other activation the reverse sweep (or a recomputed op) reads is
    stashed: `@stage<s>_forward` returns it as a result named "stash:i",
    `@stage<s>_backward` takes it as an argument of the same name (after
    the cotangents), and the backward's now dead copies of the forward are
    erased. Modes: `none` (nothing recomputed), `full` (merak-pipeline's
    program unchanged: only stage inputs are kept), `selective`
    (Korthikanti et al.: only the attention core is recomputed: a softmax
    fed through elementwise ops by a batched matmul of two activations,
    QK^T, and the ops from it to the batched matmul it feeds, dropout and
    probs x V; or a fused `merak.attention`, recomputed from its stashed
    q, k, v), `stage-aware` (Merak: per stage, the first of none,
    selective and full whose estimated memory fits `memory-per-device`
    bytes: (stage-input + stash bytes per micro-batch) x the micro-batches
    the `schedule` keeps in flight on the stage (1F1B: min(m, S - s);
    GPipe: m) + the stage's parameter bytes x (2 + `optimizer-slots`):
    weights, gradient accumulators, optimizer state; an error names the
    stage when even full does not fit). Under `schedule`
    shifted-critical-path the last stage's mode is none whatever the mode,
    and on the others the `fwd-keep` micro-batches (the last
    min(m, S - s - 1)) and the one recomputed ahead of its gradient hold
    none's stash: min(held, kept + 1) of the held micro-batches count at
    none's bytes. Ops that depend on no argument
    (parameter reads, transposed weights, constant masks) are always
    recomputed. The choice per stage, the stashed bytes per micro-batch
    (stage inputs included) and the estimate are recorded in
    `merak.pipeline` as `recompute`, `stash_bytes` and `memory_estimate`.
    Under `schedule` shifted-critical-path the last stage recomputes
    nothing, and stage s keeps (`fwd-keep`) its last min(m, S - s - 1)
    micro-batches, or fewer when that is what fits `memory-per-device`
    (the most that fit; with stage-aware, per mode from none to full):
    recorded as `scp_kept`, which the schedule follows.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"full\"",
           "none, full, selective or stage-aware">,
    Option<"memoryPerDevice", "memory-per-device", "int64_t", /*default=*/"0",
           "Memory budget per device in bytes (stage-aware)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "The pipeline schedule (in-flight micro-batches per stage)">,
    Option<"optimizerSlots", "optimizer-slots", "int64_t", /*default=*/"2",
           "Optimizer state tensors per parameter (AdamW 2, SGD with momentum 1)">,
    Option<"castCache", "cast-cache", "bool", /*default=*/"true",
           "Count the bf16 copies merak-cache-param-casts keeps of the weights the "
           "forward casts">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

def MerakSplitBackward : Pass<"merak-split-backward", "mlir::ModuleOp"> {
  let summary = "[training] Splits pipeline backward fragments for zero-bubble and shifted-critical-path schedules";
  let description = [{
    Runs after merak-recompute and before merak-optimizer, on the fragments
    of merak-pipeline, when `schedule` needs the backward in parts:

    * `zb-h1`, `zb-h2` (zero bubble): `@stage<s>_backward` keeps what the
      input gradients (its "cot:i" results) need (B); every other op (the
      weight gradients and their accumulation) moves into
      `@stage<s>_backward_weight` (W), which the schedule runs later. W
      takes the arguments it reads under their own names and the values B
      computed for it as "wstash:i" (B returns them).
    * `shifted-critical-path` (Merak), on every stage but the last:
      `@stage<s>_recompute` (R) holds the ops of the backward that do not
      depend on the incoming gradients ("cot:i" arguments) but on the stage
      inputs or stashed activations: the recomputed forward, which the
      schedule runs while the gradient is still in flight. R returns what
      the rest of the backward reads as "rstash:i"; `@stage<s>_backward`
      takes them as arguments. `@stage<s>_forward_keep` is the forward that
      also returns those values (R's ops cloned after the forward's;
      common subexpressions elimination merges them with the forward's), so
      the final micro-batches of a stage need no recomputation.

    Ops that depend on no argument (parameter reads, constants, transposed
    weights) are cloned into each part that reads them, never carried.
    Reads of gradient accumulators never move into R or the forward.
    Other schedules: no change.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "The pipeline schedule">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

def MerakOptimizer : Pass<"merak-optimizer", "mlir::ModuleOp"> {
  let summary = "[training] Builds @train_step: loss, gradients and the optimizer update";
  let description = [{
    From `@loss_grad` (merak-autodiff), builds `func.func @train_step` with
    the same arguments plus `step` (tensor<i64>, from 0), returning the loss,
    the global gradient norm (before clipping) and the learning rate used.
    After the gradients it clips them to `clip-norm` (global L2 norm, as
    torch.nn.utils.clip_grad_norm_; 0 disables), computes the learning rate
    of the schedule at `step` (both as rank-0 ops), and updates every
    trainable parameter with one fused update op (`merak.sgd_update`,
    `merak.adamw_update` or `merak.adan_update`: the clip coefficient, the
    learning rate and `step` are its rank-0 operands, the hyper-parameters
    its attributes) whose results `merak.set_param` writes back (state
    first, then the parameter). Optimizer state lives in new `merak.param`s named
    `optimizer.<optimizer>.<slot>.<parameter>`, initialised to zeros, so
    checkpoints carry it by name.
    - sgd: PyTorch's SGD (momentum, nesterov, weight decay added to the
      gradient).
    - adamw: PyTorch's AdamW (decoupled weight decay, bias-corrected moments).
    - adan: Xie et al., Algorithm 1: m and v (on gradient differences) and n,
      `theta = (theta - eta / (sqrt(n) + eps) * (m + (1 - beta2) v)) /
      (1 + weight_decay * eta)`, the previous gradient equal to the current
      one at step 0. Betas follow the paper's convention (defaults 0.02,
      0.08, 0.01).
    Schedules: constant; linear-warmup (lr * min(1, (step+1)/warmup-steps));
    cosine (linear warm-up, then cosine decay to min-lr at total-steps).

    ZeRO stage 1: a gradient result marked `merak.zero` (merak-data-parallel
    with `zero = 1`) is this dp rank's part of the flattened, padded,
    averaged gradient. Its parameter is flattened and padded alike and
    `merak.local_shard` takes this rank's part; the state of that parameter
    is a local part too (`merak.zero` on the state `merak.param`, so
    checkpoints gather the full tensor), the update runs on the parts, and
    the updated parts are gathered with `merak.all_gather` ("dp", in buckets
    of about `bucket-bytes`), un-padded and written back whole. The squared
    norms of the parts are summed over "dp" for the global gradient norm.
    For a tensor-parallel shard the parts split the local shard: its state
    carries both `merak.shard` and `merak.zero` (whose shape is the local
    shard's), and its parts' squared norms are summed over "dp", then over
    "tp" with the other shards.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"", "sgd, adamw or adan">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Peak learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"-1", "First beta (default: 0.9 adamw, 0.02 adan)">,
    Option<"beta2", "beta2", "double", /*default=*/"-1", "Second beta (default: 0.999 adamw, 0.08 adan)">,
    Option<"beta3", "beta3", "double", /*default=*/"0.01", "Adan's third beta">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "Weight decay (default: 0.01 adamw, 0 sgd and adan)">,
    Option<"momentum", "momentum", "double", /*default=*/"0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0", "Global gradient-norm clip (0: off)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"constant\"",
           "constant, linear-warmup or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0", "Warm-up steps">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0", "Steps of the cosine schedule">,
    Option<"minLr", "min-lr", "double", /*default=*/"0", "Final learning rate of the cosine schedule">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 * 1024 * 1024",
           "ZeRO: parameter bytes per all-gather bucket of updated parts">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect", "::mlir::func::FuncDialect"];
}

def MerakCacheParamCasts : Pass<"merak-cache-param-casts", "mlir::ModuleOp"> {
  let summary = "[training] Casts a pipeline stage's weights to bf16 once a step, not per micro-batch";
  let description = [{
    In a pipelined program (merak.pipeline), every `merak.cast` of a
    parameter's storage to a narrower float type (merak-mixed-precision's
    bf16 weights) in a micro-batch fragment (forward, backward and the parts
    of a split backward) reads a cache parameter
    `pipeline.cast.<type>.<name>` instead (kind "scratch": never saved),
    which a new fragment `@stage<s>_prepare` (merak.fragment kind
    "prepare") writes; the runner calls it at the start of every step,
    after the previous update. So a stage casts each weight once a step, as
    Megatron-LM keeps bf16 weights beside its float32 master copy, instead
    of once per fragment and micro-batch. The values are bitwise the same.
    Update fragments keep their casts, as do the casts of a parameter some
    micro-batch fragment writes (it changes within the step). Without
    merak.pipeline it does nothing.
  }];
}

def MerakRecordSchedule : Pass<"merak-record-schedule", "mlir::ModuleOp"> {
  let summary = "[training] Records the pipeline schedule on the merak.pipeline plan";
  let description = [{
    Sets merak.pipeline's "schedule" (and "virtual_stages" when there is
    more than one model chunk per stage), which the schedule printer
    (--compile-to=schedule), the simulator and the program writer read.
    Without merak.pipeline it does nothing.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved, zb-h1, zb-h2 or shifted-critical-path">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Model chunks per pipeline stage (interleaved 1F1B)">
  ];
}

//===----------------------------------------------------------------------===//
// Phase overlap: collectives under computation.
//===----------------------------------------------------------------------===//

def MerakOverlap : Pass<"merak-overlap", "mlir::ModuleOp"> {
  let summary = "[overlap] Overlaps collectives with computation (started collectives and waits)";
  let description = [{
    Turns the collectives of every function into a start
    (`merak.all_reduce_start`, `merak.reduce_scatter_start`,
    `merak.all_gather_start`) and a `merak.wait`, placed within their block:
    the start right after the last of its operands is computed (and after
    the previous start, so that every rank starts the collectives in the
    program's order), the wait right before the first op that reads one of
    its results (the op itself, when the use is nested in a region). The
    ops in between run while the collective is in flight. One walk over the
    block computes every position (linear in ops and uses).

    `dp-overlap` (default on) does this for the "dp" collectives: the
    gradient buckets merak-data-parallel places right after their last
    gradient (last-computed first) then run under the rest of the backward
    and complete before the optimizer reads them; ZeRO's reduce-scatters
    and all-gathers alike. In a pipeline (interleaved too; not ZeRO) the
    all-reduce of a stage's gradient accumulators moves out of
    `@stage<s>_update` into `@stage<s>_backward_last` (or
    `_backward_weight_last` under zero bubble), a copy of the stage's last
    accumulating fragment that the runtime runs for its last micro-batch:
    there each accumulator update is followed by its bucket's all-reduce
    (buckets of about `bucket-bytes` in the order the accumulators become
    final) and the reduced values are written back at the end, so the
    buckets travel under the rest of that backward.

    `tp-overlap = sub-pipeline` (Merak's sub-pipelined tensor parallelism,
    at the granularity of one matmul): a "tp" all-reduce of one operand
    produced by a `merak.matmul` (used only there) whose lhs has rank >= 2
    and whose rhs is 2-D (Megatron's row-parallel output in the forward, the
    column-parallel input gradient in the backward) is split in two halves
    along the lhs's leading (batch) dimension, or, when the batch is 1, the
    next one (sequence): matmul A, start A, matmul B, start B, wait A,
    wait B, concat, so that half A's all-reduce runs under half B's matmul.
    Rows of a matmul are independent, so the result is the same. A matmul
    with a single row is left whole with a remark; a "tp" all-reduce of
    anything else stays one started collective. `none` (default)
    leaves the "tp" collectives blocking. "pp" collectives stay blocking.

    `ep-overlap` starts the flat "ep" all-to-alls early and waits for them
    late (`merak.all_to_all_start`; a hierarchical one stays blocking):
    with merak-expert-parallel's `chunks`, whose dispatches all precede the
    chunks' expert GEMMs, chunk i + 1's rows travel while chunk i's GEMM
    runs and chunk i's combine while chunk i + 1's does, forward and
    backward.
  }];
  let options = [
    Option<"tpOverlap", "tp-overlap", "std::string", /*default=*/"\"none\"",
           "none or sub-pipeline">,
    Option<"dpOverlap", "dp-overlap", "bool", /*default=*/"true",
           "Start the \"dp\" collectives early and wait for them late">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "Bucket size of a pipeline stage's gradient all-reduces (bytes)">,
    Option<"epOverlap", "ep-overlap", "bool", /*default=*/"false",
           "Start the flat \"ep\" all-to-alls early and wait for them late">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakGradReducePrecision : Pass<"merak-grad-reduce-precision", "mlir::ModuleOp"> {
  let summary = "[overlap] Reduces data-parallel gradients in bf16 (half the bytes on the wire)";
  let description = [{
    With `precision=bf16`, every "dp" mean reduction of float32 tensors
    (`merak.all_reduce`, `merak.reduce_scatter` and their started forms with
    the `merak.wait` that completes them) communicates bf16: each operand is
    cast to bf16 before the collective and each result cast back to float32
    after it (after the wait). The sum is formed in float and rounded to bf16
    at every combining step (NCCL's bf16 sum; on the CPU runtime a
    user-defined MPI operation), and the mean's division by the group size
    is exact for power-of-two groups. So the parameters' gradients lose bf16
    rounding once before and once after the sum, while accumulation over
    micro-batches, clipping and the optimizer stay float32 (master weights,
    float32 state). Megatron-LM's `--grad-reduce-in-bf16`, DeepSpeed's
    `communication_data_type`. A reduction whose operands are all scalars
    (the reported loss) stays float32, as do "tp" and "pp" collectives and
    sums (the clipping norm).

    merak-compile runs it right after merak-overlap, when every gradient
    reduction exists (data parallel, ZeRO, pipeline stages) and has its
    final place, so the casts sit next to the collective: the narrowing
    right before the start, the widening right after the wait.
    `precision=fp32` changes nothing.

    ```mlir
    %r = merak.all_reduce_start %g group = "dp" reduction = "mean" : tensor<64xf32>
    %a = merak.wait %r : tensor<64xf32>
    // becomes
    %h = merak.cast %g : tensor<64xf32> to tensor<64xbf16>
    %r = merak.all_reduce_start %h group = "dp" reduction = "mean" : tensor<64xbf16>
    %w = merak.wait %r : tensor<64xbf16>
    %a = merak.cast %w : tensor<64xbf16> to tensor<64xf32>
    ```
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"", "fp32 or bf16">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

// The lower and emit phases (memory plan, EmitC host code): LowerPasses.td.
include "merak/Dialect/Merak/Transforms/LowerPasses.td"

#endif
