//===- MerakOps.h - merak dialect ops ---------------------------*- C++ -*-===//
#ifndef MERAK_DIALECT_MERAK_IR_MERAKOPS_H
#define MERAK_DIALECT_MERAK_IR_MERAKOPS_H

#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "merak/Dialect/Merak/Interfaces/ShardingRule.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

namespace mlir::merak {
/// CostOpInterface's defaults: `perElement` FLOPs per element of the
/// largest operand or result, and the bytes of every operand and result.
int64_t elementwiseOpFlops(Operation *op, int64_t perElement);
int64_t operandAndResultBytes(Operation *op);
} // namespace mlir::merak

#include "merak/Dialect/Merak/IR/MerakInterfaces.h.inc"

/// The elementwise binary ops and the reductions, each with its kind: the
/// one list the evaluator (Bin::KIND) and the lowering (Binary::KIND,
/// Reduce::KIND) expand, as X(Op, KIND).
#define MERAK_BINARY_OP_KINDS(X)                                               \
  X(AddOp, Add) X(SubOp, Sub) X(MulOp, Mul) X(DivOp, Div) X(PowOp, Pow)        \
  X(MaxOp, Max) X(MinOp, Min) X(RemOp, Rem) X(EqOp, Eq) X(NeOp, Ne)            \
  X(LtOp, Lt) X(LeOp, Le) X(GtOp, Gt) X(GeOp, Ge) X(AndOp, And) X(OrOp, Or)    \
  X(XorOp, Xor) X(BitAndOp, BitAnd) X(BitOrOp, BitOr) X(BitXorOp, BitXor)      \
  X(ShiftLeftOp, ShiftLeft) X(ShiftRightOp, ShiftRight)
#define MERAK_REDUCE_OP_KINDS(X)                                               \
  X(ReduceSumOp, Sum) X(ReduceMeanOp, Mean) X(ReduceMaxOp, Max)                \
  X(ReduceMinOp, Min) X(ReduceProdOp, Prod)

namespace mlir::merak {
/// Op traits of merak-mixed-precision's autocast policy (MerakBase.td).
template <typename ConcreteType>
class AutocastKeepsInput : public OpTrait::TraitBase<ConcreteType, AutocastKeepsInput> {};
template <typename ConcreteType>
class AutocastBinary : public OpTrait::TraitBase<ConcreteType, AutocastBinary> {};
/// The result's elements are elements of operand 0 (MerakBase.td).
template <typename ConcreteType>
class ForwardsElements : public OpTrait::TraitBase<ConcreteType, ForwardsElements> {};
} // namespace mlir::merak

namespace mlir::merak {
/// The side-effect resource of parameter state (get_param / set_param).
struct ParamResource : public SideEffects::Resource::Base<ParamResource> {
  StringRef getName() final { return "merak.param"; }
};
/// The side-effect resource of the training position (the step, this
/// rank's batch part and tensor-parallel rank) that merak.dropout reads.
struct TrainingPositionResource : public SideEffects::Resource::Base<TrainingPositionResource> {
  StringRef getName() final { return "merak.training_position"; }
};
} // namespace mlir::merak

#define GET_TYPEDEF_CLASSES
#include "merak/Dialect/Merak/IR/MerakOpsTypes.h.inc"

namespace mlir::merak {
/// `[1, 2, 3]`: the spelling of integer-list attribute parameters.
void printI64List(AsmPrinter &printer, ArrayRef<int64_t> values);
FailureOr<SmallVector<int64_t>> parseI64List(AsmParser &parser);
} // namespace mlir::merak

#define GET_ATTRDEF_CLASSES
#include "merak/Dialect/Merak/IR/MerakOpsAttrs.h.inc"

#define GET_OP_CLASSES
#include "merak/Dialect/Merak/IR/MerakOps.h.inc"

namespace mlir::merak {

/// Discardable attribute on `merak.param`: what the parameter is for the
/// generated program and its checkpoints: "state" (optimizer state, set by
/// merak-optimizer), "hparam" (a run-time hyper-parameter), "frozen" (a
/// buffer a pass added that is never trained, e.g. merak-expert-parallel's
/// placement tables) or "buffer" (a model parameter the forward updates and
/// the optimizer never trains: BatchNorm's running statistics, set by
/// merak-batch-norm-stats). Absent: a model parameter, trainable when the
/// training step writes it, frozen otherwise.
constexpr llvm::StringLiteral kKindAttr = "merak.kind";

/// Checks a dropout mask's recorded splits (merak.dropout's, or an
/// attention's on its probabilities) on a local tensor of `shape`: each
/// `[dim, blocks, parts]` with dim < `splittable` (the dims a pass may
/// split) and `blocks` dividing that dim; errors are emitted on `op`.
LogicalResult verifyDropoutSplits(Operation *op, ArrayRef<int64_t> shape, int64_t splittable,
                                  std::optional<ArrayRef<int64_t>> batchSplit,
                                  std::optional<ArrayRef<int64_t>> tpSplit);

/// The names of the module's parameters of kind "frozen" or "buffer" (a
/// value the forward updates, such as BatchNorm's running statistics):
/// autodiff and the pipeline's cut give them no gradient.
llvm::StringSet<> frozenParamNames(ModuleOp module);

/// The parameters that do not train: frozenParamNames' and those matching
/// one of the `--frozen` globs (merak-autodiff, merak-pipeline and
/// merak-freeze-gradientless read them alike).
class FrozenParams {
public:
  /// Fails on a bad glob, with it and why in `error`.
  static FailureOr<FrozenParams> get(ModuleOp module, ArrayRef<std::string> globs,
                                     std::string &error);
  bool contains(StringRef name) const;

private:
  llvm::StringSet<> kinds;
  /// The globs' text, which llvm::GlobPattern refers to: on the heap, so
  /// that copying or moving a FrozenParams keeps it in place (shared).
  std::shared_ptr<const std::vector<std::string>> patterns;
  SmallVector<llvm::GlobPattern> globs;
};

/// The kind "buffer" (kKindAttr): a parameter the forward updates.
constexpr llvm::StringLiteral kBufferKind = "buffer";
/// Whether `param` has kind "buffer".
bool isBuffer(ParamOp param);

/// The parameter holding merak.expert_place's table `table`:
/// "moe.placement.<table>".
inline std::string placementParamName(int64_t table) {
  return "moe.placement." + std::to_string(table);
}

/// Discardable attribute on `merak.param` (set by merak-tensor-parallel, and
/// copied to optimizer state): the parameter is sharded over the "tp" group.
/// `#merak.shard<axis = A, blocks = B, parts = P>`: dimension A of the full tensor is
/// viewed as [B, P, n / (B * P)] and tp rank r holds part r of every block
/// (B = 1 for a plain split; B = 3 for a fused QKV weight). The param's type
/// is the local shard's; its initial value keeps the full (global) tensor.
constexpr llvm::StringLiteral kShardAttr = "merak.shard";
/// Module attribute: the device mesh (#merak.mesh, merak-record-mesh).
constexpr llvm::StringLiteral kMeshAttr = "merak.mesh";
/// The module's mesh; (1, 1, 1) without merak.mesh.
struct DeviceMesh {
  int64_t dp = 1, tp = 1, pp = 1;
  /// Expert parallelism, folded into dp (divides it; adds no ranks).
  int64_t ep = 1;
};
DeviceMesh getMesh(ModuleOp module);
/// The groups a collective may name: the mesh axes "dp", "tp", "pp", and
/// under expert parallelism "ep" (the ranks splitting the experts) and
/// "edp" (the ranks holding the same experts).
inline bool isMeshGroup(llvm::StringRef g) {
  return g == "dp" || g == "tp" || g == "pp" || g == "ep" || g == "edp";
}
/// isMeshGroup's names, for diagnostics.
constexpr llvm::StringLiteral kMeshGroups = "\"dp\", \"tp\", \"pp\", \"ep\" or \"edp\"";
/// On a @forward result: the logits are split over this group ("tp") on
/// their last (class) axis -- merak-tensor-parallel's vocabulary
/// parallelism; merak-attach-loss builds the vocab-parallel cross-entropy.
constexpr llvm::StringLiteral kVocabParallelAttr = "merak.vocab_parallel";
/// On an integer argument of @forward/@loss: the exclusive upper bound of
/// its values (merak-record-index-limits; the manifest's index_limit).
constexpr llvm::StringLiteral kIndexLimitAttr = "merak.index_limit";
/// On the labels argument of @loss: the label value the loss skips
/// (PyTorch's ignore_index, -100; the manifest's ignore_index).
constexpr llvm::StringLiteral kIgnoreIndexAttr = "merak.ignore_index";
/// PyTorch's cross-entropy default ignore_index: padded positions' label.
constexpr int64_t kTorchIgnoreIndex = -100;
/// The argument merak-attach-loss's `global-mean` adds: the step's count of
/// labels other than the ignore_index over its dp x micro-batch pieces
/// (f32 scalar; the manifest's input role of the same name, ./train fills it).
constexpr llvm::StringLiteral kLabelCountInput = "label_count";
/// On such a result, when the vocabulary was padded to divide by tp: the
/// real number of classes (the columns at global index >= it are padding).
constexpr llvm::StringLiteral kVocabClassesAttr = "merak.vocab_classes";

/// The shard layout of kShardAttr.
struct ShardLayout {
  int64_t axis = 0, parts = 1, blocks = 1;
  /// The full tensor's length of `axis` when the local shards were padded
  /// to divide it (vocabulary parallelism: V rows in tp shards of
  /// ceil(V / tp), the last one padded with zero rows); 0: parts * local.
  int64_t size = 0;
  /// The group whose ranks hold the parts: "tp", or "ep" (an expert weight
  /// split on its expert axis by merak-expert-parallel).
  std::string group = "tp";
  /// The merak.expert_place table ordering the expert axis (dynamic
  /// placement), or -1.
  int64_t placement = -1;
  /// The full lengths of the blocks along `axis` when they differ (a fused
  /// GQA projection's q, k and v); empty: `blocks` equal blocks.
  SmallVector<int64_t> blockSizes = {};
};

/// The layout on `op`, if it has a well-formed kShardAttr.
std::optional<ShardLayout> getShardLayout(Operation *op);
void setShardLayout(Operation *op, const ShardLayout &layout);
/// `local` with dimension `axis` multiplied by `parts` (or `size`, when
/// padded): the full tensor's type.
RankedTensorType globalShardType(RankedTensorType local, const ShardLayout &layout);

/// Discardable attribute of ZeRO stage 1 (merak-data-parallel `zero = 1`,
/// merak-optimizer), `#merak.zero<parts = P, shape = [...]>`: a tensor of
/// `shape` (N elements) flattened, zero-padded to P * S elements, S =
/// ceil(N / P), and split into P parts of S; dp rank r holds elements
/// [r * S, (r + 1) * S). On a `merak.param` (optimizer state) the type is
/// the local tensor<S x elem> and the initial value is local too (zeros);
/// checkpoints hold the full tensor of `shape`. On a result of @loss_grad:
/// that gradient is this rank's part, averaged over "dp".
constexpr llvm::StringLiteral kZeroAttr = "merak.zero";

/// The layout of kZeroAttr.
struct ZeroLayout {
  int64_t parts = 1;
  SmallVector<int64_t> shape;
  /// Elements of the full tensor and of one part.
  int64_t numElements() const;
  int64_t partSize() const { return (numElements() + parts - 1) / parts; }
};
/// The layout a kZeroAttr value spells, if it is well-formed.
std::optional<ZeroLayout> getZeroLayout(Attribute attr);
/// The layout of `op`'s kZeroAttr, if any.
std::optional<ZeroLayout> getZeroLayout(Operation *op);
Attribute zeroLayoutAttr(MLIRContext *ctx, const ZeroLayout &layout);
/// `full` flattened and zero-padded to parts * ceil(N / parts) elements
/// (merak.reshape, then merak.concat with zeros when N does not divide).
Value buildZeroFlatten(OpBuilder &b, Location loc, Value full, int64_t parts);
/// Whether `param` is an expert weight split over "ep" (merak-expert-parallel).
bool isExpertShard(Operation *param);
/// The data-parallel mean of gradients `grads` (one bucket, one message):
/// over "dp" (merak.all_reduce, mean), or for expert shards (`expert`) over
/// "edp", the dp / ep ranks holding the same experts (no message when that
/// is one rank), divided by `ep` (each rank of an ep group computed its
/// experts' gradient over the whole group's tokens).
SmallVector<Value> buildGradientMean(OpBuilder &b, Location loc, ValueRange grads, bool expert,
                                     int64_t dp, int64_t ep);
/// ZeRO-1's form of buildGradientMean: each gradient flattened and padded
/// to `parts` parts (buildZeroFlatten), reduce-scattered (mean) over "dp"
/// or, for expert shards, over "edp" and divided by `ep`; this rank's
/// parts, in order.
SmallVector<Value> buildZeroGradientMean(OpBuilder &b, Location loc, ValueRange grads,
                                         bool expert, int64_t parts, int64_t ep);
/// Each of `values` times the scalar `factor` (in its element type).
SmallVector<Value> buildScaled(OpBuilder &b, Location loc, ValueRange values, double factor);
/// The inverse of buildZeroFlatten: the first N elements of `padded`
/// reshaped to `fullType`.
Value buildZeroUnflatten(OpBuilder &b, Location loc, Value padded, RankedTensorType fullType);

/// Numpy broadcast of two static shapes; failure when incompatible.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);

/// True when `from` numpy-broadcasts to exactly `to`.
bool isBroadcastableTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to);

/// Number of elements of a static shape, or failure on overflow of int64.
FailureOr<int64_t> checkedNumElements(ArrayRef<int64_t> shape);

/// Whether `v` is a ranked tensor of floating-point elements (what autodiff
/// differentiates and the pipeline partitioner counts as an activation).
inline bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

} // namespace mlir::merak

#endif
