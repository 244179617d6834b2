//===- BatchNormPasses.td - BatchNorm training passes -------*- tablegen -*-===//
//
// Included by Passes.td: merak-sync-batch-norm and merak-batch-norm-stats
// (after merak-mixed-precision, before merak-attach-loss), which give a
// model's BatchNorm layers PyTorch's training semantics under dp.
//
//===----------------------------------------------------------------------===//

#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_BATCHNORMPASSES_TD
#define MERAK_DIALECT_MERAK_TRANSFORMS_BATCHNORMPASSES_TD

include "mlir/Pass/PassBase.td"

def MerakSyncBatchNorm : Pass<"merak-sync-batch-norm", "mlir::ModuleOp"> {
  let summary = "[training] Batch normalisation over the whole data-parallel batch (SyncBatchNorm)";
  let description = [{
    `merak-compile --sync-batchnorm`, with `--dp N` (N > 1): after
    merak-split-batch, every training-mode `merak.batch_norm` of `@forward`
    normalises with the mean and variance of all dp ranks' rows, as
    PyTorch's `nn.SyncBatchNorm` does: the per-channel sums of the rank's
    rows (then of the centred squares) are all-reduced over "dp" and
    divided by the global count, and the normalisation is written out
    (`(x - mean) * rsqrt(var + eps) * scale + bias`), so autodiff
    differentiates it, the all-reduce's gradient being the all-reduce of
    the gradients. With `momentum` the running statistics take the global
    batch's statistics (the variance unbiased by the global count) and the
    batch counter counts (`merak-batch-norm-stats` then sees none of these
    normalisations). Each micro-batch synchronises on its own. A mesh with
    dp = 1 is left unchanged.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The function whose normalisations synchronise">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakBatchNormStats : Pass<"merak-batch-norm-stats", "mlir::ModuleOp"> {
  let summary = "[training] Updates batch normalisation's running statistics in the forward";
  let description = [{
    For every `merak.batch_norm {training, momentum = M}` of `@forward`
    (the importer's torch-style BatchNormalization), writes PyTorch's
    update of its running statistics right after it: `merak.set_param`s
    of `M * running + (1 - M) * batch` with the batch mean and the
    unbiased batch variance (`n / (n - 1)`, n the values per channel of
    the part this program computes). The two parameters become buffers
    (`merak.kind = "buffer"`: not trained, saved in checkpoints). Runs
    after merak-split-batch, so each data-parallel rank and micro-batch
    uses its own rows (PyTorch's DDP without SyncBatchNorm; rank 0's
    buffers are the checkpoint's, as DDP broadcasts rank 0's); the
    pipeline partitioner keeps the writes in forward fragments only.
    Errors: fewer than two values per channel. Statistics that are not
    parameters get a warning and no update; momentum 0 (each batch
    replaces the statistics: torch's export of both `momentum=1.0` and
    `momentum=None`, the cumulative average) one warning for all such
    normalisations. Next to a running mean named `<prefix>.running_mean`
    it declares the int64 buffer `<prefix>.num_batches_tracked` (unless the
    file has it) and adds 1 to it per forward, as `nn.BatchNorm*` counts
    (torch's exporter drops the counter). Consumes `momentum`.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The function whose normalisations update their statistics">
  ];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

#endif // MERAK_DIALECT_MERAK_TRANSFORMS_BATCHNORMPASSES_TD
