//===- MoePasses.td - Mixture-of-Experts training passes ---*- tablegen -*-===//
//
// Included by Passes.td: merak-moe-capacity (after merak-split-batch,
// before merak-expert-parallel) and merak-moe-aux-loss (after
// merak-attach-loss), which change a Mixture-of-Experts model's training
// step (its expert layers are found from their merak.expert_matmul).
//
//===----------------------------------------------------------------------===//

#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_MOEPASSES_TD
#define MERAK_DIALECT_MERAK_TRANSFORMS_MOEPASSES_TD

include "mlir/Pass/PassBase.td"

def MerakMoeAuxLoss : Pass<"merak-moe-aux-loss", "mlir::ModuleOp"> {
  let summary = "[training] Adds the MoE load-balancing loss (Switch / transformers) to @loss";
  let description = [{
    `merak-compile --moe-aux-loss COEF`: to the loss of `@loss`
    (merak-attach-loss) adds `COEF * E * sum_e f[e] P[e]` over the
    Mixture-of-Experts layers, as transformers' `load_balancing_loss_func`
    computes it over all layers together: `f[e]` the share of the layers'
    top-k choices that went to expert e (a count, no gradient), `P[e]` the
    mean over the layers' tokens of the router's softmax probability of e
    (the gradient reaches the routers through it). A layer is found from
    its `merak.expert_matmul`s: their expert indices derive from the top-k
    (`merak.gather_elements` of the indices) of a `[tokens, E]` score
    tensor, the router's probabilities (a softmax over the experts) or its
    logits (then their softmax is taken). Errors: no MoE layer, a router
    that is not found, layers with different E. Under data parallelism and
    micro-batching each part computes it over its own tokens (as
    Megatron-LM and DeepSpeed do).
  }];
  let options = [
    Option<"coefficient", "coefficient", "double", /*default=*/"0.01",
           "The loss coefficient (transformers' router_aux_loss_coef)">,
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakMoeCapacity : Pass<"merak-moe-capacity", "mlir::ModuleOp"> {
  let summary = "[training] Expert capacity: the rows beyond it are dropped (token dropping)";
  let description = [{
    `merak-compile --moe-capacity-factor C [--moe-drop-policy P]`: every
    Mixture-of-Experts layer of `entry` (its `merak.expert_matmul`s, which
    share their expert ids `[S]`: S rows, one per token and top-k choice)
    lets each of its E experts take at most `ceil(S * C / E)` rows, as
    Megatron-LM's `--moe-expert-capacity-factor` and DeepSpeed's capacity
    factor do; the other rows are dropped:

    ```
    %kept = merak.expert_capacity %ids, reshape(%w) experts = E capacity = ceil(S C / E)
    expert_matmul(%x, %W[%kept])                     // every GEMM of the layer
    %w' = %w * cast(ne(%kept, -1))                   // the rows' routing weights
    mul(%rows, %w')                                  // where the layer weights its rows
    ```

    `%w` is the routing weight the layer multiplies its expert rows by (a
    `merak.mul` of a value computed from the layer's expert GEMMs by an
    `[S]` or `[S, 1]` value computed from neither, as transformers'
    `batched_mm` experts write it). A dropped row is computed by no expert
    and sent by no all-to-all, and its weight is zero: it adds nothing to
    the layer's output and gets no gradient (a token whose every choice is
    dropped passes through the residual connection only). The drop
    `policy` is `probs` (keep each expert's rows of the highest routing
    weight; Megatron's default) or `position` (keep its first rows).

    Run after merak-split-batch: S is one part's rows (one data-parallel
    rank's micro-batch), so the capacity is per part as in Megatron and
    DeepSpeed, and `--dp N` equals the serial program with `--microbatches
    N`. Errors: a capacity factor <= 0, an unknown policy, no MoE layer, a
    layer whose routing weight is not found.
  }];
  let options = [
    Option<"capacityFactor", "capacity-factor", "double", /*default=*/"1.0",
           "Each expert's capacity in rows, over S / E">,
    Option<"policy", "drop-policy", "std::string", /*default=*/"\"probs\"",
           "probs (drop an expert's rows of the lowest routing weight) or position "
           "(drop its last rows)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The model function">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

#endif // MERAK_DIALECT_MERAK_TRANSFORMS_MOEPASSES_TD
