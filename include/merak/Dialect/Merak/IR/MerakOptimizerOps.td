//===- MerakOptimizerOps.td - fused optimizer updates ------*- tablegen -*-===//
//
// One op per parameter and optimizer step, built by merak-optimizer: the
// whole elementwise update (clipping scale, moving averages, bias
// correction, weight decay, the parameter step) of one parameter in one
// kernel instead of a dozen elementwise ops; included from MerakOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_OPTIMIZER_OPS_TD
#define MERAK_OPTIMIZER_OPS_TD
//===----------------------------------------------------------------------===//
// Fused optimizer updates
//===----------------------------------------------------------------------===//

// Common pieces: `param`, `grad` and the state tensors have one type (the
// parameter's, or its ZeRO part's), the results have it too; `lr` and `clip`
// are rank-0 tensors of the parameter's element type, `step` a rank-0 i64
// (the training step, counted from 0). The ops are `Pure`: they only compute
// the new values, which merak-optimizer writes with `merak.set_param`.
class Merak_OptimizerUpdateOp<string mnemonic, list<Trait> traits = []>
    : Merak_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Merak_InPlaceOpInterface>])> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let hasVerifier = 1;
}

def Merak_AdamWUpdateOp : Merak_OptimizerUpdateOp<"adamw_update"> {
  let summary = "One AdamW step of one parameter (torch.optim.AdamW)";
  let description = [{
    With `G = grad * clip` (`grad` when `clip` is absent), `t = step + 1`,
    the bias corrections `bc1 = 1 - beta1^t`, `bc2 = 1 - beta2^t` and the
    step size `lr / bc1` computed in double (as torch.optim's Python floats)
    and rounded to the element type, and every other operation in the
    element type, in this order:

    ```
    exp_avg'    = beta1 * exp_avg + (1 - beta1) * G
    exp_avg_sq' = beta2 * exp_avg_sq + (1 - beta2) * (G * G)
    denom       = sqrt(exp_avg_sq') / sqrt(bc2) + eps
    param'      = param * (1 - lr * weight_decay) - (lr / bc1) * (exp_avg' / denom)
    ```

    The results are the new parameter and state; results may share the
    operands' buffers (an update in place) when nothing else reads them.

    ```mlir
    %p1, %m1, %v1 = merak.adamw_update %p, %g, %m, %v lr %lr step %step clip %c
        beta1 = 9.000000e-01 beta2 = 9.990000e-01 eps = 1.000000e-08
        weight_decay = 1.000000e-02
        : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<f32>,
           tensor<i64>, tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$param, Merak_FloatTensor:$grad,
                       Merak_FloatTensor:$exp_avg, Merak_FloatTensor:$exp_avg_sq,
                       Merak_FloatTensor:$lr, StaticShapeTensorOf<[I64]>:$step,
                       Optional<Merak_FloatTensor>:$clip,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let results = (outs Merak_FloatTensor:$new_param, Merak_FloatTensor:$new_exp_avg,
                      Merak_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `lr` $lr `step` $step
    (`clip` $clip^)? `beta1` `=` $beta1 `beta2` `=` $beta2 `eps` `=` $eps
    `weight_decay` `=` $weight_decay attr-dict `:` functional-type(operands, results)
  }];
}

def Merak_AdanUpdateOp : Merak_OptimizerUpdateOp<"adan_update"> {
  let summary = "One Adan step of one parameter (Xie et al. 2022, Algorithm 1)";
  let description = [{
    Adan with the paper's conventions (`beta1`, `beta2`, `beta3` are the
    weights of the new term, 0.02 / 0.08 / 0.01 by default), m0 = g0,
    v0 = 0, n0 = g0^2 and the proximal weight decay. With `G = grad * clip`
    and `first` = (`step` == 0), every operation in the element type:

    ```
    diff         = G - prev_grad
    exp_avg'     = first ? G     : (1 - beta1) * exp_avg + beta1 * G
    exp_avg_diff'= first ? G * 0 : (1 - beta2) * exp_avg_diff + beta2 * diff
    u            = G + (1 - beta2) * diff
    exp_avg_sq'  = first ? G * G : (1 - beta3) * exp_avg_sq + beta3 * (u * u)
    eta          = lr / (sqrt(exp_avg_sq') + eps)
    param'       = (param - eta * (exp_avg' + (1 - beta2) * exp_avg_diff'))
                   / (1 + weight_decay * lr)
    prev_grad'   = G
    ```

    ```mlir
    %p1, %m1, %d1, %n1, %g1 = merak.adan_update %p, %g, %m, %d, %n, %prev lr %lr step %step
        beta1 = 2.000000e-02 beta2 = 8.000000e-02 beta3 = 0.01 eps = 1.000000e-08
        weight_decay = 0.000000e+00 : (...) -> (...)
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$param, Merak_FloatTensor:$grad,
                       Merak_FloatTensor:$exp_avg, Merak_FloatTensor:$exp_avg_diff,
                       Merak_FloatTensor:$exp_avg_sq, Merak_FloatTensor:$prev_grad,
                       Merak_FloatTensor:$lr, StaticShapeTensorOf<[I64]>:$step,
                       Optional<Merak_FloatTensor>:$clip,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$beta3, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let results = (outs Merak_FloatTensor:$new_param, Merak_FloatTensor:$new_exp_avg,
                      Merak_FloatTensor:$new_exp_avg_diff,
                      Merak_FloatTensor:$new_exp_avg_sq,
                      Merak_FloatTensor:$new_prev_grad);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_diff `,` $exp_avg_sq `,` $prev_grad
    `lr` $lr `step` $step (`clip` $clip^)? `beta1` `=` $beta1 `beta2` `=` $beta2
    `beta3` `=` $beta3 `eps` `=` $eps `weight_decay` `=` $weight_decay attr-dict
    `:` functional-type(operands, results)
  }];
}

def Merak_SgdUpdateOp : Merak_OptimizerUpdateOp<"sgd_update",
    [AttrSizedOperandSegments]> {
  let summary = "One SGD step of one parameter (torch.optim.SGD, dampening 0)";
  let description = [{
    With `G = grad * clip`, every operation in the element type:

    ```
    d          = G + weight_decay * param        (G when weight_decay is 0)
    buf'       = momentum * momentum_buffer + d   (with momentum_buffer)
    direction  = nesterov ? d + momentum * buf' : buf'   (d without a buffer)
    param'     = param - lr * direction
    ```

    `momentum_buffer` is present exactly when `momentum` is not 0; then the
    second result is the new buffer.

    ```mlir
    %p1, %b1 = merak.sgd_update %p, %g momentum_buffer %b lr %lr momentum = 9.000000e-01
        weight_decay = 0.000000e+00 {nesterov} : (...) -> (tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$param, Merak_FloatTensor:$grad,
                       Optional<Merak_FloatTensor>:$momentum_buffer,
                       Merak_FloatTensor:$lr, Optional<Merak_FloatTensor>:$clip,
                       F64Attr:$momentum, F64Attr:$weight_decay, UnitAttr:$nesterov);
  let results = (outs Variadic<Merak_FloatTensor>:$results);
  let assemblyFormat = [{
    $param `,` $grad (`momentum_buffer` $momentum_buffer^)? `lr` $lr (`clip` $clip^)?
    `momentum` `=` $momentum `weight_decay` `=` $weight_decay attr-dict
    `:` functional-type(operands, results)
  }];
}

#endif // MERAK_OPTIMIZER_OPS_TD
