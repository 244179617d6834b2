//===- LowerPasses.td - memory plan and code generation ----*- tablegen -*-===//
//
// Included by Passes.td: the last two phases merak-compile runs, lower
// (merak-fold-transposes, the memory plans) and emit (merak-to-emitc).
//
//===----------------------------------------------------------------------===//

#ifndef MERAK_DIALECT_MERAK_TRANSFORMS_LOWERPASSES_TD
#define MERAK_DIALECT_MERAK_TRANSFORMS_LOWERPASSES_TD

include "mlir/Pass/PassBase.td"
//===----------------------------------------------------------------------===//
// Phase lower: the memory plan.
//===----------------------------------------------------------------------===//

def MerakFuseGemmSums : Pass<"merak-fuse-gemm-sums", "mlir::ModuleOp"> {
  let summary = "[lower] Sums of short-contraction products become one product";
  let description = [{
    Right before merak-fold-transposes: a sum (a tree of `merak.add`s of
    one 2-D type, each read only by the next) of two or more 2-D
    `merak.matmul`s read by nothing else becomes one product over the
    concatenated contraction dimension,

    ```mlir
    %p1 = merak.matmul %a1, %b1 : tensor<4x2xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
    %p2 = merak.matmul %a2, %b2 : tensor<4x2xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
    %s = merak.add %p1, %p2 : tensor<4x8xf32>, tensor<4x8xf32>
    // becomes
    %a = merak.concat %a1, %a2 axis = 1 : ... -> tensor<4x4xf32>
    %b = merak.concat %b1, %b2 axis = 0 : ... -> tensor<4x8xf32>
    %s = merak.matmul %a, %b : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    ```

    the sum's other terms added to it. A side whose every operand is a
    transpose is joined before transposing (`concat(x_i^T, axis = 1) =
    concat(x_i, axis = 0)^T`), which merak-fold-transposes then reads in
    place. It applies when the copies (K (M + N) elements for a joined
    contraction K) are at most a quarter of the k - 1 products' M x N
    outputs saved: a recurrent layer's weight gradient, the sum over the
    time steps of `h_t^T g_t` contracted over the batch (for an LSTM of
    width 256 at batch 8: 128 GEMMs with K = 8, each writing 1 MB, and 127
    adds, become one GEMM with K = 1024), not the sum of a few micro-batches'
    token-long products. The sum's order changes (last bits).
  }];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakFoldTransposes : Pass<"merak-fold-transposes", "mlir::ModuleOp"> {
  let summary = "[lower] Lets matmuls read transposed operands instead of copies";
  let description = [{
    Right before code generation: a `merak.matmul` of f32 or bf16
    operands of rank >= 2 fed by a `merak.transpose` that only swaps the
    last two dimensions becomes `merak.matmul_t` reading the transpose's
    input with `transpose_lhs` / `transpose_rhs`; the transpose is erased
    when nothing else reads it. The GEMM then reads the operand transposed
    (BLAS trans flags) instead of the program materialising the copy:
    weights in every linear layer's forward (x W^T), activations and
    weights in their gradients (x^T g, g W). Then a product whose only
    reader is such a transpose is computed in the transposed layout,
    `(a b)^T = b^T a^T`: `transpose(matmul_t(a, b) {ta, tb})` becomes
    `matmul_t(b, a) {!tb, !ta}` (operands of equal rank), so a weight's
    gradient `(x^T g)^T` is the GEMM `g^T x` with no copy. One walk over
    the ops for each rewrite.

    Likewise for attention: a `merak.attention` whose query, key and value
    are all transposes swapping dims rank-3 and rank-2 (the heads transpose
    `[..., T, H, D] -> [..., H, T, D]` after the projection's reshape) reads
    the transposes' inputs with `seq_major` and gives its result in that
    layout (a heads transpose of the result becomes the result itself;
    another reader gets one transpose back), and a `merak.attention_grad`
    whose query, key, value, result and incoming gradient are such
    transposes does the same for its gradients. Both runtimes read these
    layouts in place (strided rows: the CPU's GEMMs with a leading dimension
    of H * D), so no copy is made on either side.
  }];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakFuseGradAccumulation : Pass<"merak-fuse-grad-accumulation", "mlir::ModuleOp"> {
  let summary = "[lower] Weight-gradient GEMMs and embedding scatters accumulate into their accumulators";
  let description = [{
    Right after merak-fold-transposes: a `merak.add` of a parameter's
    storage (`merak.get_param`, a micro-batch gradient accumulator
    `pipeline.grad.<w>` or any other stored tensor) and a float32
    `merak.matmul` / `merak.matmul_t` read by nothing else becomes one
    `merak.matmul_t` with the stored tensor as its accumulator:

    ```mlir
    %a = merak.get_param @pipeline.grad.w : tensor<8x4xf32>
    %g = merak.matmul_t %x, %dy {transpose_lhs} : ... -> tensor<8x4xf32>
    %s = merak.add %a, %g : tensor<8x4xf32>, tensor<8x4xf32>
    merak.set_param @pipeline.grad.w, %s : tensor<8x4xf32>
    // becomes
    %s = merak.matmul_t %x, %dy acc %a {transpose_lhs} : ... -> tensor<8x4xf32>
    merak.set_param @pipeline.grad.w, %s : tensor<8x4xf32>
    ```

    merak-plan-memory then lets the GEMM write the accumulator's storage in
    place (BLAS / cuBLASLt beta = 1): no product buffer, no separate add,
    no copy back (Megatron-LM's gradient-accumulation fusion). A bf16 GEMM
    with a float32 result (merak-mixed-precision's weight gradients)
    accumulates in float32 the same way. The sums' order changes: the GEMM
    adds its product's partial sums into the accumulator as it goes (on
    the CPU, per the BLAS's blocks of the contracted dimension), so the
    accumulator differs from `acc + product` in the last bits.

    An embedding's gradient (`merak.gather_grad`, float32) added into its
    accumulator becomes `merak.gather_grad ... acc` the same way (any op
    with an accumulating form, AccumulatingOpInterface): in place, it adds
    the rows its indices reach and leaves the others, instead of clearing a
    table-sized buffer, scattering into it and adding the whole table (for
    GPT-2's 50257 x 768 table, 154 MB written and 463 MB moved per
    micro-batch for 8 x 1024 tokens' 25 MB of rows). On the CPU each row's
    sum is rounded, then added, as before: bit for bit the unfused result
    (but for the sign of a zero on rows no index reaches); on CUDA each
    contribution is added into the accumulator by atomics, in no fixed
    order, as the unfused scatter's repeated indices already were. A tied
    weight's two gradients (an embedding's scatter and the head's GEMM,
    summed) both accumulate when both can, one after the other. An expert
    weight's gradient (`merak.expert_matmul_grad_weight`, Mixture-of-Experts)
    becomes `... acc` too: each expert's GEMM accumulates (beta = 1), an
    expert no row chose keeps its values (before: an `[E, O, K]` buffer
    written, zeros for such experts, then added). One walk over the adds. `merak-compile --grad-accumulation-fusion off` leaves
    the adds.
  }];
  let dependentDialects = ["::mlir::merak::MerakDialect"];
}

def MerakPlanMemory : Pass<"merak-plan-memory", "mlir::ModuleOp"> {
  let summary = "[lower] Static memory plan: a liveness-based arena, parameter and constant storage";
  let description = [{
    Plans the memory of the function `entry` for code generation, in three
    regions (see runtime/include/merak_rt/program.h), every buffer 64-byte
    aligned:
    - the arena: every function argument, op result and returned value gets
      an arena offset; buffers whose live ranges (definition to last use, in
      program order) do not overlap share bytes. `merak.reshape` results
      alias their operand (a view), so an alias group lives as long as its
      longest-lived member. A result is placed before the op's dying operands
      are freed (kernels never write over their inputs). Placement is
      best-fit over a coalescing free list, O(n log n) in the number of
      buffers. Returned values get their own slots, live to the end. A
      `!merak.request` gets no buffer: a started collective reads its
      operands at the start and writes its results at its `merak.wait`.
    - parameter storage: every `merak.param` (model parameters, optimizer
      state, hyper-parameters) in declaration order, those whose initial
      value is all zeros last (the program zero-fills them rather than carry
      their bytes); tensor-parallel shards (`merak.shard`) that do not start
      at zero sit between the two (each rank copies its shard out of the full
      tensor carried in the data). `merak.params_init_bytes` is where the
      parameters copied as they are end.
    - constants: every `merak.constant` of the entry function.
    Results: `merak.offsets` (one arena offset per result, -1 for results
    that live in parameter or constant storage) on ops, `merak.offset` on
    arguments, `merak.result_offsets` and `merak.arena_bytes` (the peak) on
    the function; `merak.offset` on params (parameter storage) and on
    constants (constant storage), `merak.params_bytes` and
    `merak.consts_bytes` on the module.

    A `merak.get_param` whose value (or a view of it) is still used after a
    `merak.set_param` of the same parameter is marked `merak.copy`: it gets
    an arena buffer holding a copy, so the update cannot change it.

    Updates in place: a result of a fused optimizer update (the new
    parameter or state) is written into its old value's buffer, marked by
    `merak.in_place` (per result, the operand index or -1) and given no
    offset of its own, when that operand is not an argument, a constant or a
    view and nothing reads its buffer after the update: an arena value with
    no later use, or a parameter's storage (a `merak.get_param` not copied)
    that no read of the parameter outlives and that only `merak.set_param`s
    of this result write (which then copy nothing). ZeRO's local parts are
    updated in place in the arena, and their state in parameter storage.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"train_step\"",
           "The function to plan">
  ];
}

def MerakPlanPipelineMemory : Pass<"merak-plan-pipeline-memory", "mlir::ModuleOp"> {
  let summary = "[lower] merak-plan-memory for every fragment of a pipelined module";
  let description = [{
    The memory plan of a module cut by merak-pipeline: every fragment
    (@stage<s>_forward, _backward, _update and the parts of a split
    backward, in the order of pipelineFragments) gets its own arena plan as
    merak-plan-memory makes it, and the module one parameter and one
    constant storage shared by the fragments.
  }];
}

//===----------------------------------------------------------------------===//
// Phase emit: EmitC host code.
//===----------------------------------------------------------------------===//

def MerakToEmitC : Pass<"merak-to-emitc", "mlir::ModuleOp"> {
  let summary = "[emit] Lowers a planned function to EmitC calls into the CPU runtime";
  let description = [{
    Replaces the module's contents by an `emitc.func @merak_train_step(A, P,
    C)` (the three memory regions of runtime/include/merak_rt/program.h)
    holding, for every op of the function `entry` planned by
    merak-plan-memory, one `emitc.call_opaque` of the runtime kernel with its
    semantics (runtime/include/merak_rt/ops.h): buffer pointers are the
    region bases plus planned offsets (`emitc.add`), shapes and attributes
    are `Dims{rank, {...}}` literals. `merak.reshape` emits nothing (a view),
    `merak.set_param` copies into parameter storage, and returned values in
    parameter or constant storage are copied to their result slots. Before
    each kernel an `opMark(i)` call lets the runtime trace ops.
    `mlir::emitc::translateToCpp` turns the result into C++.
    Ops without a kernel on the target are reported together, by name.

    `target=cuda` emits the same calls qualified as `gpu::` (the GPU ABI of
    runtime/include/merak_rt/cuda/ops.h: the same entry points on device
    pointers); conv2d, pooling and tensor-parallel cross entropy have no
    CUDA kernel yet and are reported.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"train_step\"",
           "The planned function to lower">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The runtime ABI to call: cpu (merak::rt::cpu) or cuda (merak::rt::gpu)">
  ];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

def MerakSplitEmitCFunctions : Pass<"merak-split-emitc-functions", "mlir::ModuleOp"> {
  let summary = "[emit] Splits long EmitC functions into static parts the host compiler handles in linear time";
  let description = [{
    Every `emitc.func` with more than `max-calls` calls becomes a sequence
    of `static` functions `<name>_part<k>` of at most `max-calls` calls each,
    with the original function's arguments, which the original calls in
    order. The calls run in the same order with the same arguments: the
    program does not change.

    Why: the host C++ compiler's time grows faster than linearly in the
    size of one function. transformers' Mamba unrolls its scan per token:
    a 2-layer Mamba at sequence 2048 is one step function of 170k lines,
    which clang -O0 compiles in about 220 s, against 15 s in parts of about
    a thousand lines.

    A value that one part defines and a later part reads is the pointer
    arithmetic merak-to-emitc emits (`emitc.literal`, `emitc.add`,
    `emitc.subscript` and `emitc.load` of a region base or of the pipeline
    fragment's IO table, which no kernel writes): the later part computes it
    again from the arguments. A function holding any other op outside
    calls is left whole.
  }];
  let options = [
    Option<"maxCalls", "max-calls", "int64_t", /*default=*/"500",
           "The most calls of one part (at least 1)">
  ];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

#endif // MERAK_DIALECT_MERAK_TRANSFORMS_LOWERPASSES_TD
