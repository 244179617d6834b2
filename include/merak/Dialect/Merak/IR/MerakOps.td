//===- MerakOps.td - merak dialect ops ---------------------*- tablegen -*-===//
//
// Ops are grouped by family: parameters and constants, shape manipulation,
// reductions, contraction and convolution, and training-specific ops;
// elementwise ops (MerakElementwiseOps.td), normalisation (MerakNormOps.td),
// collectives, attention, experts and optimizer updates have files of their
// own, included at the end.
// Every op whose result type follows from its operands and attributes
// implements InferTypeOpInterface; its `inferReturnTypes` is also its shape
// verifier.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_OPS_TD
#define MERAK_OPS_TD

include "merak/Dialect/Merak/IR/MerakBase.td"
include "merak/Dialect/Merak/IR/MerakAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def Merak_ParamOp : Merak_Op<"param", [Symbol]> {
  let summary = "A named model parameter (or buffer) with its initial value";
  let description = [{
    Declares a parameter at module level. The name is the ONNX initializer
    name (e.g. `transformer.h.0.attn.c_attn.weight`). The initial value is an
    elements attribute, normally a `dense_resource` blob so that large
    tensors never appear spelled out in textual IR.

    ```mlir
    merak.param @"h.0.w" : tensor<64x64xf32> = dense_resource<w0> : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Merak_Tensor>:$type,
                       ElementsAttr:$initial_value);
  let assemblyFormat = "$sym_name `:` $type `=` $initial_value attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = !strconcat([{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }], Merak_FlopsAndBytesCost);
}

def Merak_GetParamOp : Merak_Op<"get_param",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Reads the current value of a parameter";
  let arguments = (ins Arg<FlatSymbolRefAttr, "", [MemRead<Merak_ParamResource>]>:$name);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Merak_SetParamOp : Merak_Op<"set_param",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Replaces the value of a parameter (an optimizer update)";
  let description = [{
    Writes `value` into the parameter (or optimizer state) `name`; later
    `merak.get_param`s of it in program order read the new value, and the
    value persists across calls of the training step.
  }];
  let arguments = (ins Arg<FlatSymbolRefAttr, "", [MemWrite<Merak_ParamResource>]>:$name,
                       Merak_Tensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

def Merak_ConstantOp : Merak_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "A constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Merak_ReshapeOp : Merak_Op<"reshape", [Pure, Merak_AutocastKeepsInput,
    Merak_ForwardsElements]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Row-major reshape to the result type's shape";
  let arguments = (ins Merak_Tensor:$input);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Merak_BroadcastOp : Merak_Op<"broadcast", [Pure, Merak_ForwardsElements]> {
  let summary = "Numpy broadcast to the result type's shape";
  let arguments = (ins Merak_Tensor:$input);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Merak_TransposeOp : Merak_Op<"transpose", [Pure, InferTypeOpAdaptor,
    Merak_AutocastKeepsInput, Merak_ForwardsElements]> {
  let summary = "Permutes dimensions: result dim i is input dim perm[i]";
  let arguments = (ins Merak_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$input `perm` `=` $perm attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

def Merak_SliceOp : Merak_Op<"slice", [Pure, InferTypeOpAdaptor, Merak_ForwardsElements]> {
  let summary = "Static strided slice";
  let description = [{
    One entry per dimension. For a positive stride the elements
    `start, start+stride, ... < limit` with `0 <= start, limit <= dim`; for a
    negative stride `start, start+stride, ... > limit` with
    `-1 <= start, limit < dim` (-1: before the first element).
  }];
  let arguments = (ins Merak_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `limits` `=` $limits `strides` `=` $strides
    attr-dict `:` type($input) `to` type($result)
  }];
  let hasFolder = 1;
}

def Merak_ConcatOp : Merak_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "Concatenates along an axis";
  let arguments = (ins Variadic<Merak_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$inputs `axis` `=` $axis attr-dict `:` type($inputs) `->` type($result)";
  let hasFolder = 1;
}

def Merak_SplitOp : Merak_Op<"split", [Pure, InferTypeOpAdaptor, Merak_AutocastKeepsInput]> {
  let summary = "Splits along an axis into pieces of the given sizes";
  let arguments = (ins Merak_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Merak_Tensor>:$results);
  let assemblyFormat = [{
    $input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:` type($input) `->` type($results)
  }];
}

def Merak_GatherOp : Merak_Op<"gather", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Merak_IndexOperandOpInterface>]> {
  let summary = "Takes slices of `data` along `axis` at `indices` (embedding lookup)";
  let description = [{
    ONNX Gather: `result[i..., j..., k...] = data[i..., indices[j...], k...]`
    with `axis` = rank of `i...`. Negative indices count from the end; an
    index out of range is an error at run time.

    Folds to a splat when `data` is a splat constant and `indices` are
    computed from constants alone (transformers' padding mask, all true,
    looked up at `b * T + t`): the same value for every index the program
    can run with.
  }];
  let arguments = (ins Merak_Tensor:$data, Merak_IntTensor:$indices, I64Attr:$axis);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = [{
    $data `[` $indices `]` `axis` `=` $axis attr-dict `:` type($data) `,` type($indices) `->` type($result)
  }];
  let hasFolder = 1;
}

def Merak_GatherGradOp : Merak_Op<"gather_grad", [Pure,
    DeclareOpInterfaceMethods<Merak_InPlaceOpInterface>,
    DeclareOpInterfaceMethods<Merak_AccumulatingOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsAndBytesCost;
  let summary = "Gradient of gather: scatter-add of `grad` into zeros (or an accumulator)";
  let description = [{
    The adjoint of `merak.gather` with the same `axis`: the result (the
    data's type) is zero except that every slice of `grad` is added at its
    index, so repeated indices (an embedding row used twice) accumulate.

    With `acc` (the result's type; a lowering form that
    merak-fuse-grad-accumulation makes of an embedding's gradient added
    into its accumulator) the result is `acc` plus that scatter: each row
    an index reaches gets the row's sum (rounded to the element type) added
    once (the CUDA kernel adds each slice by atomics instead, as it
    accumulates repeated indices), the other rows are `acc`'s.
    merak-plan-memory may place the result
    in the accumulator's storage, so only the rows the indices reach are
    read and written, not the whole table.

    ```mlir
    %g = merak.gather_grad %dy[%ids] axis = 0 acc %a
        : tensor<4x8x16xf32>, tensor<4x8xi64>, tensor<100x16xf32> -> tensor<100x16xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$grad, Merak_IntTensor:$indices, I64Attr:$axis,
                       Optional<Merak_FloatTensor>:$acc);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `[` $indices `]` `axis` `=` $axis (`acc` $acc^)? attr-dict `:` type($grad) `,`
    type($indices) (`,` type($acc)^)? `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$grad, "::mlir::Value":$indices,
                   "int64_t":$axis), [{
      build($_builder, $_state, result, grad, indices, axis, ::mlir::Value());
    }]>
  ];
  let hasVerifier = 1;
}

def Merak_GatherElementsOp : Merak_Op<"gather_elements", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Merak_IndexOperandOpInterface>]> {
  let summary = "Takes elements along an axis (torch.gather / take_along_axis)";
  let arguments = (ins Merak_Tensor:$data, Merak_IntTensor:$indices, I64Attr:$axis);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = [{
    $data `[` $indices `]` `axis` `=` $axis attr-dict `:` type($data) `,` type($indices) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

class Merak_ReduceOp<string mnemonic, string summaryText>
    : Merak_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = summaryText;
  let description = "Reduces over the sorted, distinct `axes`; with "
                    "`keepdims` the reduced dimensions stay with size 1.";
  let arguments = (ins Merak_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs Merak_NumericTensor:$result);
  let assemblyFormat = "$input `axes` `=` $axes attr-dict `:` type($input) `->` type($result)";
}

def Merak_ReduceSumOp : Merak_ReduceOp<"reduce_sum", "Sum reduction">;

def Merak_SumSquaresOp : Merak_Op<"sum_squares", [Pure]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "The sum of the squares of all elements (a scalar)";
  let description = [{
    `sum(x * x)` over every element, accumulated in double (in an order
    that depends only on the element count), as one pass over `input`:
    merak-optimizer's squared gradient norms.
  }];
  let arguments = (ins Merak_FloatTensor:$input);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}
def Merak_ReduceMeanOp : Merak_ReduceOp<"reduce_mean", "Mean reduction">;
def Merak_ReduceMaxOp : Merak_ReduceOp<"reduce_max", "Max reduction">;
def Merak_ReduceMinOp : Merak_ReduceOp<"reduce_min", "Min reduction">;
def Merak_ReduceProdOp : Merak_ReduceOp<"reduce_prod", "Product reduction">;

class Merak_ArgOp<string mnemonic, string which>
    : Merak_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "Index of the " # which # " along an axis";
  let description = "The first such index, or the last with "
                    "`select_last_index`; i64 result.";
  let arguments = (ins Merak_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$keepdims, UnitAttr:$select_last_index);
  let results = (outs StaticShapeTensorOf<[I64]>:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)";
}
def Merak_ArgMaxOp : Merak_ArgOp<"argmax", "maximum">;
def Merak_ArgMinOp : Merak_ArgOp<"argmin", "minimum">;

def Merak_ArgSortOp : Merak_Op<"argsort", [Pure]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "The stable sorting permutation along an axis";
  let description = [{
    `result[..., i, ...]` is the position along `axis` of the i-th smallest
    element (the i-th largest with `descending`); equal elements keep their
    order, so for each row `input[result]` is sorted and ties are taken at
    the smaller position first, ONNX TopK's order. NaN ranks above every
    number. The importer takes a TopK that sorts a whole axis (or one too
    long to rank by pairs) from it: `torch.sort`, `argsort`, a Mixture-of-
    Experts dispatch that orders its rows by expert. The result holds
    integers, so nothing is differentiated through it; the sorted values
    are a gather_elements by it.

    ```mlir
    %p = merak.argsort %x axis = 0 : tensor<512xi64> -> tensor<512xi64>
    ```
  }];
  let arguments = (ins Merak_NumericTensor:$input, I64Attr:$axis, UnitAttr:$descending);
  let results = (outs StaticShapeTensorOf<[I64]>:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Merak_CumSumOp : Merak_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "Cumulative sum along an axis";
  let description = [{
    `result[..., i, ...] = sum(input[..., j, ...])` over `j <= i`, or `j < i`
    with `exclusive`; with `reverse` the sum runs from the end.
  }];
  let arguments = (ins Merak_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Merak_NumericTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Merak_LinearScanOp : Merak_Op<"linear_scan", [Pure, SameOperandsAndResultType]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "A first-order linear recurrence along an axis";
  let description = [{
    Every state along `axis` from a zero state:
    `result[..., t, ...] = decay[..., t, ...] * result[..., t - 1, ...] + input[..., t, ...]`,
    with `result[..., -1, ...] = 0`. The selective scan of state-space
    models (Mamba's `h_t = exp(dt A) * h_{t-1} + dt B x_t`), which
    PyTorch's reference path writes as one multiply and one add per
    token: merak-raise-linear-scan makes that chain this op. Its gradient
    is `merak.linear_scan_grad`, the same recurrence run backward.

    ```mlir
    %h = merak.linear_scan %a, %b axis = 2 : tensor<2x128x16x8xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$decay, Merak_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = "$decay `,` $input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Merak_LinearScanGradOp : Merak_Op<"linear_scan_grad",
                                      [Pure, SameOperandsAndResultType]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "The gradients of merak.linear_scan";
  let description = [{
    With the forward op's `decay` and `result` (h) and the result's
    gradient `grad`, the reverse recurrence along `axis`
    `g[t] = grad[t] + decay[t + 1] * g[t + 1]` (from `g[T - 1] = grad[T - 1]`)
    gives `input_grad = g` and `decay_grad[t] = g[t] * h[t - 1]`
    (0 at t = 0, where the state was zero). One pass from the end.

    ```mlir
    %da, %db = merak.linear_scan_grad %a, %h, %dh axis = 2 : tensor<2x128x16x8xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$decay, Merak_FloatTensor:$result,
                       Merak_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs Merak_FloatTensor:$decay_grad, Merak_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $decay `,` $result `,` $grad `axis` `=` $axis attr-dict `:` type($decay)
  }];
  let hasVerifier = 1;
}

def Merak_SelectiveScanOp : Merak_Op<"selective_scan", [Pure,
    AllTypesMatch<["u", "delta", "result"]>, AllTypesMatch<["b", "c"]>]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Mamba's selective scan, its states never materialised";
  let description = [{
    With `u` and `delta` [B, D, T] (batch, channels, tokens), `a` [D, N]
    (N states per channel), `b` and `c` [B, T, N], per state n:
    `h[t] = exp(delta[t] * a[n]) * h[t - 1] + (delta[t] * b[t, n]) * u[t]`
    from `h[-1] = 0`, and `result[t] = sum_n h[t, n] * c[t, n]` ([B, D, T]).
    PyTorch's reference path (transformers' Mamba, Falcon-Mamba and Jamba
    without mamba-ssm) computes the same with [B, D, T, N] tensors for the
    decay, the input and the states; merak-raise-linear-scan fuses that
    form into this op, which keeps one row's N states at a time. Its
    gradient is `merak.selective_scan_grad`, which recomputes the states.

    ```mlir
    %y = merak.selective_scan %u, %delta, %a, %b, %c
        : tensor<2x128x64xf32>, tensor<128x16xf32>, tensor<2x64x16xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$u, Merak_FloatTensor:$delta, Merak_FloatTensor:$a,
                       Merak_FloatTensor:$b, Merak_FloatTensor:$c);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $u `,` $delta `,` $a `,` $b `,` $c attr-dict `:` type($u) `,` type($a) `,` type($b)
  }];
  let hasVerifier = 1;
}

def Merak_SelectiveScanGradOp : Merak_Op<"selective_scan_grad", [Pure,
    AllTypesMatch<["u", "delta", "grad", "u_grad", "delta_grad"]>, AllTypesMatch<["a", "a_grad"]>,
    AllTypesMatch<["b", "c", "b_grad", "c_grad"]>]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "The gradients of merak.selective_scan";
  let description = [{
    With the forward op's operands and the result's gradient `grad`
    ([B, D, T]): the gradients of `u`, `delta`, `a`, `b` and `c`, each of
    its operand's type. Per (batch, channel) row it recomputes the states
    forward, then runs the reverse recurrence
    `g[t] = grad[t] * c[t] + exp(delta[t + 1] * a) * g[t + 1]` from the end;
    the sums over the channels (`b`'s and `c`'s gradients) and over the
    batch and tokens (`a`'s) run in a fixed order.

    ```mlir
    %du, %dd, %da, %db, %dc = merak.selective_scan_grad %u, %delta, %a, %b, %c, %g
        : tensor<2x128x64xf32>, tensor<128x16xf32>, tensor<2x64x16xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$u, Merak_FloatTensor:$delta, Merak_FloatTensor:$a,
                       Merak_FloatTensor:$b, Merak_FloatTensor:$c, Merak_FloatTensor:$grad);
  let results = (outs Merak_FloatTensor:$u_grad, Merak_FloatTensor:$delta_grad,
                      Merak_FloatTensor:$a_grad, Merak_FloatTensor:$b_grad,
                      Merak_FloatTensor:$c_grad);
  let assemblyFormat = [{
    $u `,` $delta `,` $a `,` $b `,` $c `,` $grad attr-dict `:` type($u) `,` type($a) `,` type($b)
  }];
  let hasVerifier = 1;
}

class Merak_SoftmaxLikeOp<string mnemonic, string summaryText>
    : Merak_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = summaryText;
  let arguments = (ins Merak_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Merak_SoftmaxOp : Merak_SoftmaxLikeOp<"softmax", "Softmax along one axis">;
def Merak_LogSoftmaxOp : Merak_SoftmaxLikeOp<"log_softmax", "Log-softmax along one axis">;

//===----------------------------------------------------------------------===//
// Contraction, convolution, pooling
//===----------------------------------------------------------------------===//

def Merak_MatmulOp : Merak_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Merak_AccumulatingOpInterface>]> {
  let extraClassDeclaration = !strconcat(Merak_FlopsCost, Merak_WideningResult);
  let summary = "numpy.matmul: batched, broadcasting batch dimensions";
  let description = [{
    Rank-1 operands follow numpy (a 1-D lhs gains a leading 1 that is then
    dropped, a 1-D rhs a trailing 1). Batch dimensions broadcast. The
    result has the operands' element type, except that bf16 operands may
    give an f32 result: the float32 accumulation written as it is, without
    rounding to bf16 (a tensor-core GEMM with an fp32 output; what
    merak-mixed-precision makes of a bf16 GEMM whose result is only used
    widened, e.g. a weight gradient).
  }];
  let arguments = (ins Merak_NumericTensor:$lhs, Merak_NumericTensor:$rhs);
  let results = (outs Merak_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

def Merak_MatmulTOp : Merak_Op<"matmul_t", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Merak_InPlaceOpInterface>,
    DeclareOpInterfaceMethods<Merak_AccumulatingOpInterface>]> {
  let extraClassDeclaration = !strconcat(Merak_FlopsCost, Merak_WideningResult);
  let summary = "matmul with operands read transposed, optionally accumulated (a lowering form)";
  let description = [{
    `merak.matmul(transpose(lhs), transpose(rhs))` where `transpose` swaps
    the last two dimensions of the operands marked `transpose_lhs` /
    `transpose_rhs`; batch dimensions broadcast as in `merak.matmul`. Both
    operands have rank >= 2. merak-fold-transposes makes it from a matmul
    fed by such transposes, right before code generation, so that the GEMM
    reads the operand transposed instead of a copy being made; other passes
    do not see it.

    With `acc` (float32, the result's type) the result is `acc + product`,
    the GEMM accumulating into the accumulator (BLAS beta = 1):
    merak-fuse-grad-accumulation makes it from a gradient accumulator's
    `merak.add`, and merak-plan-memory lets the GEMM write the
    accumulator's storage in place.

    ```mlir
    %g = merak.matmul_t %x, %dy acc %a {transpose_lhs}
        : tensor<16x8xf32>, tensor<16x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Merak_NumericTensor:$lhs, Merak_NumericTensor:$rhs,
                       Optional<Merak_FloatTensor>:$acc,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Merak_NumericTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $lhs `,` $rhs (`acc` $acc^)? attr-dict `:` type($lhs) `,` type($rhs) (`,` type($acc)^)?
    `->` type($result)
  }];
}

def Merak_Conv2DOp : Merak_Op<"conv2d", [Pure, InferTypeOpAdaptor]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "2-D convolution, NCHW input, OIHW weight, optional bias [O]";
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$weight,
                       Optional<Merak_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Merak_FloatTensor:$result);
  let description = "`padding` is [top, left, bottom, right].";
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? `strides` `=` $strides `padding` `=` $padding
    `dilations` `=` $dilations `groups` `=` $groups attr-dict `:` functional-type(operands, results)
  }];
}

class Merak_Pool2DOp<string mnemonic, string summaryText>
    : Merak_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = summaryText;
  let description = "NCHW input; `padding` is [top, left, bottom, right]; "
                    "`ceil_mode` rounds the output size up.";
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `strides` `=` $strides `padding` `=` $padding
    attr-dict `:` type($input) `->` type($result)
  }];
}
def Merak_MaxPool2DOp : Merak_Pool2DOp<"max_pool2d", "2-D max pooling"> {
  let arguments = (ins Merak_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `strides` `=` $strides `padding` `=` $padding
    `dilations` `=` $dilations attr-dict `:` type($input) `->` type($result)
  }];
}
def Merak_AvgPool2DOp : Merak_Pool2DOp<"avg_pool2d", "2-D average pooling"> {
  let arguments = (ins Merak_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
}

//===----------------------------------------------------------------------===//
// Backward ops of contraction and windows (built by the VJP rules)
//===----------------------------------------------------------------------===//

def Merak_Conv2DBackwardDataOp : Merak_Op<"conv2d_backward_data", [Pure]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Gradient of conv2d w.r.t. its input (a transposed convolution)";
  let description = [{
    With the attributes of the forward `merak.conv2d`, `grad` its result
    gradient and `weight` its weight, returns the gradient of its input (the
    result type, the input's type).
  }];
  let arguments = (ins Merak_FloatTensor:$grad, Merak_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $weight `strides` `=` $strides `padding` `=` $padding
    `dilations` `=` $dilations `groups` `=` $groups attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_Conv2DBackwardFilterOp : Merak_Op<"conv2d_backward_filter", [Pure]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Gradient of conv2d w.r.t. its weight";
  let description = [{
    With the attributes of the forward `merak.conv2d`, its `input` and the
    result gradient `grad`, returns the gradient of its weight (the result
    type, the weight's type).
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$grad,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `strides` `=` $strides `padding` `=` $padding
    `dilations` `=` $dilations `groups` `=` $groups attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_MaxPool2DGradOp : Merak_Op<"max_pool2d_grad", [Pure]> {
  let summary = "Gradient of max_pool2d: each window's gradient goes to its maximum";
  let description = [{
    With the attributes of the forward `merak.max_pool2d`, its `input` and
    the result gradient `grad`: every window adds its gradient to the
    position of its first maximum (row-major), as PyTorch does.
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$grad,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilations,
                       UnitAttr:$ceil_mode);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `kernel` `=` $kernel `strides` `=` $strides `padding` `=` $padding
    `dilations` `=` $dilations attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Merak_AvgPool2DGradOp : Merak_Op<"avg_pool2d_grad", [Pure]> {
  let summary = "Gradient of avg_pool2d: each window's gradient spread evenly";
  let arguments = (ins Merak_FloatTensor:$grad, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `kernel` `=` $kernel `strides` `=` $strides `padding` `=` $padding
    attr-dict `:` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Merak_GatherElementsGradOp : Merak_Op<"gather_elements_grad", [Pure]> {
  let summary = "Gradient of gather_elements: scatter-add into zeros";
  let arguments = (ins Merak_FloatTensor:$grad, Merak_IntTensor:$indices, I64Attr:$axis);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `[` $indices `]` `axis` `=` $axis attr-dict `:` type($grad) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused backward ops of activations, softmax and the loss (normalisation's:
// MerakNormOps.td)
// (built by the VJP rules; each is one kernel where the decomposed form was
// many elementwise and reduction ops)
//===----------------------------------------------------------------------===//

def Merak_GeluGradOp : Merak_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of gelu: grad * gelu'(input)";
  let description = [{
    With `input` the forward `merak.gelu`'s input and `grad` its result
    gradient, returns `grad * (Phi(x) + x * phi(x))` (Phi and phi the
    standard normal distribution and density), or with `approximate_tanh`
    the derivative of the tanh form: with `u = sqrt(2/pi) (x + 0.044715 x^3)`
    and `t = tanh(u)`, `grad * ((1 + t) / 2 + x (1 - t^2) sqrt(2/pi)
    (1 + 3 * 0.044715 x^2) / 2)`.

    ```mlir
    %dx = merak.gelu_grad %x, %dy {approximate_tanh} : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, Merak_FloatTensor:$grad,
                       UnitAttr:$approximate_tanh);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

class Merak_SoftmaxLikeGradOp<string mnemonic, string summaryText, string formula>
    : Merak_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = summaryText;
  let description = "With `output` the forward op's result (not its input) "
                    "and `grad` the result gradient, returns the input "
                    "gradient " # formula # ", the sum along `axis`.";
  let arguments = (ins Merak_FloatTensor:$output, Merak_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Merak_SoftmaxGradOp : Merak_SoftmaxLikeGradOp<"softmax_grad",
    "Gradient of softmax from its result", "`y * (grad - sum(grad * y))`">;
def Merak_LogSoftmaxGradOp : Merak_SoftmaxLikeGradOp<"log_softmax_grad",
    "Gradient of log_softmax from its result", "`grad - exp(y) * sum(grad)`">;

def Merak_CrossEntropyGradOp : Merak_Op<"cross_entropy_grad", [Pure]> {
  let summary = "Gradient of cross_entropy w.r.t. its logits";
  let description = [{
    With the forward `merak.cross_entropy`'s `logits`, `labels` and
    attributes, and `grad` the gradient of its result (a scalar for `mean`
    and `sum`, the labels' shape for `none`): `(softmax(logits) -
    onehot(labels)) * w` along `axis`, where `w` is `grad` (sum), `grad / n`
    with `n` the number of labels not equal to `ignore_index` (mean) or the
    element of `grad` at the label's position (none), and 0 where the label
    is `ignore_index`. With `group` (vocabulary parallelism, see
    `merak.cross_entropy`) the logits are this rank's shard of the classes:
    the softmax uses the group's max and sum of exponentials (two
    all-reduces over the group), the one-hot is the label shifted by
    -rank * (local classes), and the result is the local shard of the
    gradient. `classes` as `merak.cross_entropy`'s: padding classes get a
    zero gradient.
  }];
  let arguments = (ins Merak_FloatTensor:$logits, Merak_IntTensor:$labels,
                       Merak_FloatTensor:$grad, I64Attr:$axis, StrAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<StrAttr>:$group,
                       OptionalAttr<I64Attr>:$classes);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad `axis` `=` $axis `reduction` `=` $reduction attr-dict
    `:` type($logits) `,` type($labels) `,` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

def Merak_DropoutOp : Merak_Op<"dropout",
    [MemoryEffects<[MemRead<Merak_TrainingPositionResource>]>]> {
  let summary = "Inverted dropout with a counter-based mask per step and element";
  let description = [{
    Zeroes each element with probability `ratio` and scales the rest by
    `1 / (1 - ratio)`; also returns the keep mask. Element i of the whole
    (unsplit) tensor is kept when `u(key, i) >= ratio`, with `u` splitmix64
    of (key, i) as a double in [0, 1) and `key = k(seed, step)` for the
    training step being computed (`merak_rt/dropout_mask.h`). So the masks
    differ from step to step and from op to op (their seeds), a
    recomputation of the same step gives the same mask, and every parallel
    configuration draws the serial program's masks.

    The op reads the step (and the rank's parts below) from the running
    program: the training position, a side effect that keeps it from being
    folded. The evaluator uses the step set by its caller (merak-run
    `--steps`: 0, 1, ...; 0 otherwise).

    When a pass splits the op's values over ranks, the op records where its
    local elements lie in the whole tensor: `batch_split` (merak-split-batch:
    data-parallel ranks x micro-batches, part dp_rank * microbatches +
    micro-batch) and `tp_split` (merak-tensor-parallel, part tp_rank), each
    `[dim, blocks, parts]`: dimension `dim` of the whole is viewed as
    `[blocks, parts, n / (blocks * parts)]` and this rank holds its part of
    every block. `tp_split` applies first (it split the batch-local tensor).

    ```mlir
    %y, %m = merak.dropout %x ratio = 1.000000e-01 seed = 7
        {batch_split = array<i64: 0, 1, 4>}
        : tensor<2x16x64xf32> -> tensor<2x16x64xf32>, tensor<2x16x64xi1>
    ```
  }];
  let arguments = (ins Merak_FloatTensor:$input, F64Attr:$ratio, I64Attr:$seed,
                       OptionalAttr<DenseI64ArrayAttr>:$batch_split,
                       OptionalAttr<DenseI64ArrayAttr>:$tp_split);
  let results = (outs Merak_FloatTensor:$output, Merak_BoolTensor:$mask);
  let assemblyFormat = [{
    $input `ratio` `=` $ratio `seed` `=` $seed attr-dict `:` type($input) `->` type($output) `,` type($mask)
  }];
  let hasVerifier = 1;
}

def Merak_CrossEntropyOp : Merak_Op<"cross_entropy", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Merak_IndexOperandOpInterface>]> {
  let extraClassDeclaration = Merak_FlopsCost;
  let summary = "Fused softmax cross-entropy with integer class labels";
  let description = [{
    `logits` has the class dimension at `axis`; `labels` has the logits'
    shape without it. Per element the loss is `logsumexp(logits) -
    logits[label]`; labels equal to `ignore_index` contribute nothing.
    `reduction` is `mean` (over non-ignored elements), `sum` or `none`.

    Vocabulary-parallel (Megatron-LM) with `group = "tp"`: the class axis
    (which must be the last) of `logits` is group rank r's shard of the
    classes, [r * n, (r + 1) * n) with n the local size, and `labels` are
    global class indices. The loss is computed without gathering the
    logits: the row max is all-reduced (max) over the group, the sum of
    exponentials and the logit at the label (picked on the rank that holds
    it, 0 elsewhere) are all-reduced (sum); every rank gets the full loss.
    On a group of one rank (and in the reference evaluator) it is the
    ordinary cross-entropy.

    `classes` (only with `group`): the number of real classes when the
    class axis was padded to divide over the group (a vocabulary of V
    classes split into tp shards of ceil(V / tp)); the classes at global
    index >= `classes` are padding: left out of the softmax, their loss
    gradient is zero.
  }];
  let arguments = (ins Merak_FloatTensor:$logits, Merak_IntTensor:$labels,
                       I64Attr:$axis, StrAttr:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<StrAttr>:$group,
                       OptionalAttr<I64Attr>:$classes);
  let results = (outs Merak_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `axis` `=` $axis `reduction` `=` $reduction attr-dict
    `:` type($logits) `,` type($labels) `->` type($result)
  }];
}

include "merak/Dialect/Merak/IR/MerakElementwiseOps.td"
include "merak/Dialect/Merak/IR/MerakCollectiveOps.td"
include "merak/Dialect/Merak/IR/MerakNormOps.td"
include "merak/Dialect/Merak/IR/MerakAttentionOps.td"
include "merak/Dialect/Merak/IR/MerakExpertOps.td"
include "merak/Dialect/Merak/IR/MerakOptimizerOps.td"

#endif // MERAK_OPS_TD
