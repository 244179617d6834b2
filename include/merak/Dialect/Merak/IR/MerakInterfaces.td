//===- MerakInterfaces.td - merak op interfaces ------------*- tablegen -*-===//
#ifndef MERAK_INTERFACES_TD
#define MERAK_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Merak_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op with a reverse-mode derivative rule (a vector-Jacobian product).
    Given the gradients of the op's results (null for a result that nothing
    differentiable reads), `buildVJP` emits ops at the builder's insertion
    point computing the gradient of every operand, or null for an operand
    that carries no gradient (integer indices, boolean conditions).
    Rules are attached as external models (lib/Dialect/Merak/Autodiff), one
    per op, so the autodiff pass never switches on op kinds.
  }];
  let methods = [
    InterfaceMethod<
      "Emits the operand gradients given the result gradients.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Merak_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    The arithmetic and memory traffic of one execution of the op, for the
    cost model (lib/Planner/Simulate.cpp, the planner in lib/Planner/Planner.cpp
    and the pipeline partitioner's stage balance). Every merak op has it
    (Merak_Op adds it); the defaults are those of an elementwise op: one
    FLOP per element of the largest operand or result, and every operand
    read and result written once. Ops that differ (contractions,
    normalisations, softmax and cross-entropy, views, parameter access,
    collectives) define their own in lib/Dialect/Merak/IR/MerakCost.cpp.
    The roofline time of an op is max(FLOPs / rate, bytes / bandwidth).
  }];
  let methods = [
    InterfaceMethod<
      "Floating-point (or integer) operations of one execution.",
      "int64_t", "getFlops", (ins), "",
      "return ::mlir::merak::elementwiseOpFlops($_op.getOperation(), 1);">,
    InterfaceMethod<
      "Bytes the op reads and writes in memory (operands and results).",
      "int64_t", "getBytesAccessed", (ins), "",
      "return ::mlir::merak::operandAndResultBytes($_op.getOperation());">
  ];
}

def Merak_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    How the op's dimensions follow each other when a value is split over
    ranks: its factor rule (include/merak/Dialect/Merak/Interfaces/
    ShardingRule.h). The passes that split values (merak-tensor-parallel,
    merak-split-batch; later the expert axis) propagate splits through this
    interface only, never by op kind. Rules are attached as external models
    (lib/Dialect/Merak/Interfaces/ShardingModels.cpp), one per op; an op
    without the interface stops every split that reaches it.
  }];
  let methods = [
    InterfaceMethod<
      "The op's factor rule; nullopt where this instance cannot be split "
      "(a reshape whose shapes do not line up).",
      "std::optional<::mlir::merak::ShardingRule>", "getShardingRule", (ins)>,
    InterfaceMethod<
      "After a pass gave the results their local (split) types: updates the "
      "attributes that spell result sizes (merak.split's sizes).",
      "void", "adaptToLocalTypes", (ins), "", "return;">,
    InterfaceMethod<
      "After a pass split the op's results over ranks along mesh axis `axis` "
      "(\"batch\": merak-split-batch's data-parallel ranks x micro-batches; "
      "\"tp\"): dimension `dim` of the whole is viewed as [blocks, parts, "
      "n / (blocks * parts)] and each rank holds its part of every block. Ops "
      "whose values depend on an element's position in the whole tensor "
      "(merak.dropout's mask) record it; the others ignore it.",
      "void", "recordSplit",
      (ins "::llvm::StringRef":$axis, "int64_t":$dim, "int64_t":$blocks, "int64_t":$parts),
      "", "return;">,
    InterfaceMethod<
      "Whether this instance's values depend on an element's position in "
      "the whole tensor, which recordSplit records (merak.dropout's mask, an "
      "attention's dropout): a split recordSplit cannot express (ragged "
      "blocks) must not pass it.",
      "bool", "dependsOnPosition", (ins), "", "return false;">,
    InterfaceMethod<
      "Before a pass views the op's tensors of shape `shape` as rows [N, 1, "
      "..., 1, C] (N the product of every dimension but the last; "
      "merak-sequence-parallel): restates the positions the op recorded "
      "(recordSplit) on that view, or fails where they cannot be (the op is "
      "then left whole). Ops that record none succeed.",
      "::mlir::LogicalResult", "viewAsRows", (ins "::llvm::ArrayRef<int64_t>":$shape), "",
      "return ::mlir::success();">,
    InterfaceMethod<
      "Whether a split of dimension `dim` of operand `operand`, which the "
      "rule replicates, can be kept by summing the op's statistics over the "
      "ranks instead (a layer or RMS norm over split features; "
      "splitStatistics). Its other operands holding that factor (the scale "
      "and bias) and its result are then split alike.",
      "bool", "canSplitStatistics", (ins "unsigned":$operand, "int64_t":$dim), "",
      "return false;">,
    InterfaceMethod<
      "After a pass gave the op's operands and result their local types, "
      "split over `parts` ranks on a dimension canSplitStatistics accepted: "
      "builds (at `b`'s insertion point) ops computing the op's result from "
      "local partial sums, which `sumOverRanks` makes whole (the pass's "
      "collective, whose derivative must sum over the ranks too), and "
      "returns that result; the caller replaces the op with it.",
      "::mlir::Value", "splitStatistics",
      (ins "::mlir::OpBuilder &":$b, "int64_t":$parts,
           "::llvm::function_ref<::mlir::Value(::mlir::OpBuilder &, ::mlir::Value)>":$sumOverRanks),
      "", "return {};">
  ];
}

def Merak_IndexOperandOpInterface : OpInterface<"IndexOperandOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op that reads an integer operand as indices into another one (the
    rows of an embedding table, the classes of logits). merak-record-index-
    limits follows the program's integer inputs to these ops, so that the
    training program rejects an out-of-range token id or label when it
    opens the data, naming the file and the position.
  }];
  let methods = [
    InterfaceMethod<
      "The exclusive upper bound of the values of operand `operandIndex` "
      "(indices are >= 0 below it), or nullopt where the op sets none.",
      "std::optional<int64_t>", "getIndexLimit", (ins "unsigned":$operandIndex)>
  ];
}

def Merak_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op whose result may be written into the buffer of one of its
    operands: a fused optimizer update's new parameter and state (the old
    values' storage), an accumulation into a parameter's storage (a
    gradient accumulator's `merak.add`, or a `merak.matmul_t` with an
    accumulator). The op only names the candidates; merak-plan-memory
    grants each one where the operand's buffer is read by nothing after the
    op (and, for a parameter's storage, the result is only written back to
    that parameter), and records the grant in `merak.in_place`. The
    generated code then reads and writes the same buffer, so the op's
    kernel must allow its result to alias that operand element for
    element.
  }];
  let methods = [
    InterfaceMethod<
      "The (result, operand) pairs that may share a buffer.",
      "::llvm::SmallVector<std::pair<unsigned, unsigned>>", "getInPlaceCandidates", (ins)>
  ];
}

def Merak_AccumulatingOpInterface : OpInterface<"AccumulatingOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op that has a form adding its result into an accumulator it is given
    (`acc + result`, computed by the op's own kernel): a GEMM with BLAS beta
    = 1 (`merak.matmul_t ... acc`), an embedding's scatter-add that updates
    only the rows it reaches (`merak.gather_grad ... acc`).
    merak-fuse-grad-accumulation turns `merak.add(get_param @a, op)` into
    that form; merak-plan-memory then places the result in the
    accumulator's storage (InPlaceOpInterface).
  }];
  let methods = [
    InterfaceMethod<
      "Whether this op can take an accumulator of its result type: float32, "
      "no accumulator yet, and the op's own conditions.",
      "bool", "canAccumulate", (ins)>,
    InterfaceMethod<
      "Builds, at `b`, the op's accumulating form adding into `acc` (its "
      "result type); returns its result.",
      "::mlir::Value", "buildAccumulating", (ins "::mlir::OpBuilder &":$b, "::mlir::Value":$acc)>
  ];
}

#endif
