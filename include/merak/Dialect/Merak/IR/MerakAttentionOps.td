//===- MerakAttentionOps.td - fused attention ops -----------*- tablegen -*-===//
//
// Scaled dot-product attention as one op and its gradient, formed by
// merak-fuse-attention from the exporter's decomposition (matmul, scale,
// mask, softmax, matmul); included from MerakOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_ATTENTION_OPS_TD
#define MERAK_ATTENTION_OPS_TD

// Attention-probability dropout (merak.dropout's ratio, seed and splits).
defvar Merak_AttentionDropoutArgs = (ins DefaultValuedAttr<F64Attr, "0.0">:$dropout,
    DefaultValuedAttr<I64Attr, "0">:$seed, OptionalAttr<DenseI64ArrayAttr>:$batch_split,
    OptionalAttr<DenseI64ArrayAttr>:$tp_split);

def Merak_AttentionOp : Merak_Op<"attention", [AlwaysSpeculatable,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>, Merak_AutocastKeepsInput]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Fused (causal) scaled dot-product attention";
  let description = [{
    Over the leading (batch, head) dimensions of `query` `[..., T, D]`,
    `key` `[..., S, D]` and `value` `[..., S, D]`, per query row r:

    ```
    result[r] = sum_c softmax_c(scale * query[r] . key[c]) value[c]
    lse[r]    = log sum_c exp(scale * query[r] . key[c])
    ```

    where with `causal` (then S = T) the sums run over the keys c <= r
    only, and with a `window` w > 0 as well (a sliding window: Mistral's,
    Gemma 2's local layers) over the keys r - w < c <= r only. A `window`
    without `causal` is a band on both sides of the query: the keys
    |r - c| < w (ModernBERT's local layers). A `softcap`
    c > 0 (Gemma 2's logit soft-capping) replaces every score s by
    c * tanh(s / c) before the softmax. An optional `bias` (T5's learned
    relative-position bias: trainable, unlike the masks above) is added to
    every (capped) score before the softmax: `[..., T, S]` in the
    heads-first order whatever the layout, each leading dimension 1
    (broadcast) or the scores' own, of the query's element type; T may be
    1 too (a bias per key, the same for every query row: BLOOM's ALiBi).
    `lse` (`[..., T]`) is what the backward needs to
    recompute the probabilities without storing them: the T x S scores are
    never a tensor, so the memory of attention is linear in T. The element
    type is float32, or bf16 with a float32 `lse` (merak-mixed-precision:
    every product and statistic in float32, the result rounded once);
    float64 is accepted for the reference evaluator's gradient checks.

    With `dropout` p > 0 (attention-probability dropout, which
    merak-fuse-attention takes in from a `merak.dropout` between the softmax
    and the product with the values), each probability is kept with
    merak.dropout's counter-based mask and scaled by `1 / (1 - p)` before
    the product: element i of the whole heads-first probabilities
    `[..., H, T, S]` is kept at step s when `u(k(seed, s), i) >= p`, the
    decision `merak.dropout %probs ratio = p seed = seed` makes, so the
    fused and the decomposed forms train alike. `lse` stays the
    undropped softmax's. `batch_split` and `tp_split` are merak.dropout's,
    on the probabilities' dimensions (leading ones only); the backward
    draws the same mask again instead of storing it. The op then reads the
    training position, a side effect (not folded).

    With `seq_major`, query, key, value and result are laid out
    `[..., T, H, D]` (the sequence before the heads: the projections'
    layout, `[B, T, H*D]` reshaped) instead of `[..., H, T, D]`; `lse`
    stays `[..., H, T]`. merak-fold-transposes makes this form from the
    head transposes around an attention, so that the kernels read the
    operands in place.

    ```mlir
    %o, %lse = merak.attention %q, %k, %v scale = 0.125 causal
        : tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>
        -> tensor<2x4x64x64xf32>, tensor<2x4x64xf32>
    %o2, %lse2 = merak.attention %q, %k, %v bias %b scale = 1.0
        : tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>,
          tensor<1x4x64x64xf32> -> tensor<2x4x64x64xf32>, tensor<2x4x64xf32>
    %o3, %lse3 = merak.attention %q, %k, %v scale = 0.125 causal dropout = 0.1 seed = 7
        : tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>
        -> tensor<2x4x64x64xf32>, tensor<2x4x64xf32>
    ```
  }];
  let arguments = !con((ins Merak_FloatTensor:$query, Merak_FloatTensor:$key,
                       Merak_FloatTensor:$value, Optional<Merak_FloatTensor>:$bias,
                       F64Attr:$scale, UnitAttr:$causal,
                       UnitAttr:$seq_major, DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap),
                       Merak_AttentionDropoutArgs);
  let results = (outs Merak_FloatTensor:$result, Merak_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`bias` $bias^)? `scale` `=` $scale (`causal` $causal^)?
    (`window` `=` $window^)? (`softcap` `=` $softcap^)? (`dropout` `=` $dropout^)?
    (`seed` `=` $seed^)? (`seq_major` $seq_major^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) (`,` type($bias)^)?
    `->` type($result) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Merak_AttentionGradOp : Merak_Op<"attention_grad", [AlwaysSpeculatable,
    AttrSizedOperandSegments, DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Gradients of merak.attention with respect to query, key and value";
  let description = [{
    With the forward op's operands, attributes, `result` and `lse`, and
    `grad` the gradient of its result: the probabilities
    `P = exp(cap(scale * Q K^T) - lse)` (masked when `causal`, and outside
    the `window`; cap the soft-capping) are recomputed,
    and with `Delta[r] = sum_d grad[r, d] * result[r, d]`:

    ```
    value_grad = P^T grad
    dS         = P * (grad V^T - Delta) * cap'(scale * Q K^T)
    query_grad = scale * dS K
    key_grad   = scale * dS^T Q
    ```

    With `dropout` p > 0, M the forward's mask scaled by `1 / (1 - p)`
    (drawn again from `seed`, the step and the splits), `value_grad = (P * M)^T
    grad` and `dS = P * (M * grad V^T - Delta)`: Delta still equals
    `sum_c P M (grad V^T)` through the dropped result.

    With a `bias` (added to the scores after the capping), P includes it,
    and the op has a fourth result: `bias_grad = P * (grad V^T - Delta)`,
    the gradient of every score, shaped like the scores (`[..., H, T, S]`,
    heads-first, the bias's element type); the autodiff rule sums it over
    the dimensions the bias broadcasts.

    With an `lse_grad` (the gradient of the forward's `lse`, `[..., H, T]`
    like it: a use of the log-sum-exp outside the backward, such as
    merak-fuse-attention's attention sinks, which rescale the result by
    `sigmoid(lse - sink)`), every score's gradient gains `P * lse_grad`,
    since `d lse / d s = P`: Delta above becomes `Delta - lse_grad`.

    ```mlir
    %dq, %dk, %dv = merak.attention_grad %q, %k, %v, %o, %lse, %do scale = 0.125 causal
        : tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>,
          tensor<2x4x64x64xf32>, tensor<2x4x64xf32>, tensor<2x4x64x64xf32>
        -> tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>
    ```
  }];
  let arguments = !con((ins Merak_FloatTensor:$query, Merak_FloatTensor:$key,
                       Merak_FloatTensor:$value, Merak_FloatTensor:$result,
                       Merak_FloatTensor:$lse, Merak_FloatTensor:$grad,
                       Optional<Merak_FloatTensor>:$bias,
                       Optional<Merak_FloatTensor>:$lse_grad,
                       F64Attr:$scale, UnitAttr:$causal, UnitAttr:$seq_major,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap),
                       Merak_AttentionDropoutArgs);
  let results = (outs Merak_FloatTensor:$query_grad, Merak_FloatTensor:$key_grad,
                      Merak_FloatTensor:$value_grad,
                      Optional<Merak_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result `,` $lse `,` $grad (`bias` $bias^)?
    (`lse_grad` $lse_grad^ `:` type($lse_grad))? `scale` `=` $scale
    (`causal` $causal^)? (`window` `=` $window^)? (`softcap` `=` $softcap^)?
    (`dropout` `=` $dropout^)? (`seed` `=` $seed^)? (`seq_major` $seq_major^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) `,`
    type($result) `,` type($lse) `,` type($grad) (`,` type($bias)^)? `->` type($query_grad) `,`
    type($key_grad) `,` type($value_grad) (`,` type($bias_grad)^)?
  }];
  let hasVerifier = 1;
}

#endif // MERAK_ATTENTION_OPS_TD
