//===- MerakNormOps.td - normalisation ops ------------------*- tablegen -*-===//
//
// Layer, RMS and batch normalisation, batch normalisation's running-
// statistics update, and the fused gradients of layer and batch
// normalisation; included from MerakOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_NORM_OPS_TD
#define MERAK_NORM_OPS_TD

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

def Merak_LayerNormOp : Merak_Op<"layer_norm", [Pure, AttrSizedOperandSegments]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Layer normalisation over dimensions [axis, rank)";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias` with the biased
    variance over dimensions `axis..rank-1`; `scale` and `bias` have the
    normalised shape (or broadcast to it).
  }];
  let arguments = (ins Merak_FloatTensor:$input, Optional<Merak_FloatTensor>:$scale,
                       Optional<Merak_FloatTensor>:$bias, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? (`bias` $bias^)? `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_RmsNormOp : Merak_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalisation over dimensions [axis, rank)";
  let description = "`x / sqrt(mean(x^2) + epsilon) * scale`.";
  let arguments = (ins Merak_FloatTensor:$input, Optional<Merak_FloatTensor>:$scale,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_BatchNormOp : Merak_Op<"batch_norm", [Pure]> {
  let summary = "Batch normalisation over NC... input, per channel (dim 1)";
  let description = [{
    With `training`, normalises with the batch statistics (biased variance)
    and ignores `mean`/`var`; otherwise uses `mean`/`var` (running stats).

    `momentum` (with `training` only, in [0, 1]) asks the training step to
    update the running statistics as PyTorch's BatchNorm does, once per
    forward (per micro-batch): `running = momentum * running + (1 -
    momentum) * batch`, the batch variance unbiased (`n / (n - 1)` times
    the population variance over the n values per channel). The importer
    sets it on a training-mode BatchNormalization whose running-statistics
    outputs are unused (as torch exports `nn.BatchNorm*`: ONNX's momentum,
    the weight of the old value, 1 - torch's); `merak-batch-norm-stats`
    writes the update, which needs `mean` and `var` to be parameter reads,
    and removes the attribute.
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$scale,
                       Merak_FloatTensor:$bias, Merak_FloatTensor:$mean,
                       Merak_FloatTensor:$var, F64Attr:$epsilon, UnitAttr:$training,
                       OptionalAttr<F64Attr>:$momentum);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $mean `,` $var `epsilon` `=` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_BatchNormStatsOp : Merak_Op<"batch_norm_stats", [Pure]> {
  let summary = "PyTorch's update of batch normalisation's running statistics";
  let description = [{
    Per channel (dim 1) over the other dimensions of `input` (n values):
    `new_mean = momentum * mean + (1 - momentum) * batch_mean` and
    `new_var = momentum * var + (1 - momentum) * batch_var * n / (n - 1)`
    (the unbiased variance), as `nn.BatchNorm*` updates its buffers in a
    training forward; `momentum` is ONNX's (the old value's weight).
    `merak-batch-norm-stats` writes the results into the running
    statistics' parameters. Needs n >= 2.
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$mean,
                       Merak_FloatTensor:$var, F64Attr:$momentum);
  let results = (outs Merak_FloatTensor:$new_mean, Merak_FloatTensor:$new_var);
  let assemblyFormat = [{
    $input `,` $mean `,` $var `momentum` `=` $momentum attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Their gradients
//===----------------------------------------------------------------------===//

def Merak_LayerNormGradOp : Merak_Op<"layer_norm_grad", [Pure]> {
  let summary = "Input gradient of layer_norm (or rms_norm) and the normalised input";
  let description = [{
    With the forward op's `input`, `scale` (absent: 1), `axis` and
    `epsilon`, and its result gradient `grad`, over dimensions
    `axis..rank-1`: `normalized` is `xhat = (x - mean) * rstd` (with `rms`,
    `x * rstd` and no mean), `rstd = 1 / sqrt(var + epsilon)` with the biased
    variance (with `rms` the mean of `x^2`), and with `g = grad * scale`,
    `input_grad = rstd * (g - mean(g) - xhat * mean(g * xhat))` (with `rms`
    no `mean(g)` term). The scale and bias gradients are reductions of
    `grad * xhat` and `grad` that the VJP rule builds from the results.

    ```mlir
    %dx, %xhat = merak.layer_norm_grad %x, %dy scale %w axis = 2 epsilon = 1.0e-05
        : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$grad,
                       Optional<Merak_FloatTensor>:$scale, I64Attr:$axis,
                       F64Attr:$epsilon, UnitAttr:$rms);
  let results = (outs Merak_FloatTensor:$input_grad, Merak_FloatTensor:$normalized);
  let assemblyFormat = [{
    $input `,` $grad (`scale` $scale^)? `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_BatchNormGradOp : Merak_Op<"batch_norm_grad", [Pure]> {
  let summary = "The gradients of training-mode batch_norm";
  let description = [{
    With the forward op's `input`, `scale` and `epsilon` and its result
    gradient `grad`, per channel (dim 1) over the other dimensions (n
    values): the batch mean m and population variance v of `input`,
    `rstd = 1 / sqrt(v + epsilon)`, `xhat = (x - m) * rstd`;
    `bias_grad = sum(grad)`, `scale_grad = sum(grad * xhat)` and
    `input_grad = scale * rstd * (grad - bias_grad / n - xhat * scale_grad / n)`.
    One kernel (a few passes over the input per channel) instead of the
    decomposed chain of reductions and elementwise ops.

    ```mlir
    %dx, %dscale, %dbias = merak.batch_norm_grad %x, %dy, %scale epsilon = 1.0e-05
        : (tensor<8x4x6x6xf32>, tensor<8x4x6x6xf32>, tensor<4xf32>) -> (tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$grad,
                       Merak_FloatTensor:$scale, F64Attr:$epsilon);
  let results = (outs Merak_FloatTensor:$input_grad, Merak_FloatTensor:$scale_grad,
                      Merak_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $grad `,` $scale `epsilon` `=` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MERAK_NORM_OPS_TD
