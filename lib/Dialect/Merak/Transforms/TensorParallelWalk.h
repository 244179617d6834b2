//===- TensorParallelWalk.h - merak-tensor-parallel's regions ---*- C++ -*-===//
//
// How merak-tensor-parallel finds its regions: the seeds (column-parallel
// Linears, expert GEMMs and convolutions), the split values they derive,
// and the forward walk that propagates those splits through each op's
// sharding rule until every region is consistent (see TensorParallel.cpp
// for the whole method and TensorParallelWalk.cpp for the walk).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_DIALECT_MERAK_TRANSFORMS_TENSORPARALLELWALK_H
#define MERAK_LIB_DIALECT_MERAK_TRANSFORMS_TENSORPARALLELWALK_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/StringMap.h"

#include <memory>

namespace mlir::merak::tensor_parallel {

using Getters = llvm::StringMap<SmallVector<GetParamOp>>;

inline RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// How a value is split over tp (see the file comment); `seed` is the
/// column-parallel Linear it derives from (its union-find class is the
/// tensor-parallel region).
struct Split {
  int64_t dim = 0, blocks = 1;
  int seed = 0;
  /// Ragged blocks: their full lengths along dim (empty: `blocks` equal).
  SmallVector<int64_t> sizes = {};
  /// Ragged blocks held whole by every rank (see Seed::whole), by block;
  /// empty: none.
  SmallVector<bool, 4> whole = {};
  /// Whether `v` (the value split so) divides over `tp` ranks: each of its
  /// blocks does (ragged blocks are checked when they are made).
  bool divides(Value v, int64_t tp) const {
    return !sizes.empty() || tensorOf(v).getDimSize(dim) % (blocks * tp) == 0;
  }
  /// The local length of `dim` (full length n) on each of `tp` ranks: the
  /// whole blocks' lengths and the others' over tp.
  int64_t localSize(int64_t n, int64_t tp) const {
    if (whole.empty())
      return n / tp;
    int64_t local = 0;
    for (auto [len, w] : llvm::zip(sizes, whole))
      local += w ? len : len / tp;
    return local;
  }
  /// Where the value sits in its seed's ragged blocks: the index of
  /// sizes[0] there for a ragged value, the block it is for a plain one
  /// taken apart from them (-1: none), so that a block cut further apart
  /// (Mamba-2's x, B and C inside its xBC part) refines the seed's blocks.
  int64_t block = -1;
};

/// What a failed region asks of its seed before it is given up: equal
/// blocks (a split into equal parts) or ragged ones (parts of different
/// lengths).
struct Retry {
  int64_t blocks = 0;
  SmallVector<int64_t> sizes;
  /// With sizes: the seed's ragged block they cut apart (-1: the seed's
  /// whole output).
  int64_t block = -1;
  /// A ragged seed's block that cannot be split (a multi-query attention's
  /// one key head, cut inside the head): held whole instead (-1: none).
  int64_t whole = -1;
};

/// A weight read by one Linear only: the param, its get_param, and the
/// transpose between them (null for the [in, out] form).
struct Weight {
  ParamOp param;
  GetParamOp get;
  TransposeOp transpose;
  /// The param's dimension that is the Linear's output feature dimension:
  /// 1 for [in, out] (or an expert weight [E, out, in]), 0 through the
  /// transpose of [out, in], 2 for an expert weight [E, in, out].
  int64_t out = 1;
  /// An expert weight [E, a, b] stacked from one parameter [a, b] per
  /// expert (transformers 4.x's module per expert): `concat(reshape(W_e)
  /// [1, a, b], axis 0)`, each read only there, and `param`, `get` expert
  /// 0's. Null otherwise.
  ConcatOp stack = {};
  /// A reshape between the get_param and its one reader that keeps the
  /// split dimension leading its group (viewedDimension: a bias [C] read as
  /// [C, 1], Mamba's conv1d weight [C, 1, k] as a conv2d's [C, 1, 1, k],
  /// XLNet's [H, N, D] as [1, H, N * D]). Null otherwise.
  ReshapeOp view = {};
  int64_t outAxis() const { return transpose ? 0 : out; }
  /// Whether `view` merges the parameter's dimension `axis` with others
  /// (the viewed dimension is longer): the view's ragged blocks are then
  /// no blocks of the parameter's rows.
  bool merges(int64_t axis);
  /// The size of the weight's dimension `axis` (of the stack's [E, a, b]).
  int64_t size(int64_t axis) {
    return stack ? tensorOf(stack.getResult()).getDimSize(axis)
                 : param.getTensorType().getDimSize(axis);
  }
};

struct Seed {
  /// The Linear: a matmul, an expert_matmul or a conv2d (its input is
  /// operand 0 in each, but for `weightOnLeft`).
  Operation *matmul;
  Weight weight;
  /// Ragged blocks of its output (see Split).
  SmallVector<int64_t> sizes = {};
  /// By block of `sizes` (empty: none): the blocks every rank computes
  /// whole, the others being split over tp (the key and value heads of a
  /// fused multi-query projection, fewer than tp: GPT-BigCode's and
  /// Falcon's `[q | k | v]`, as BigCode's Megatron replicates them). Such a
  /// block's values are the same on every rank, and each rank's gradient of
  /// them is partial (the sum over its own query heads): the walk reads
  /// them without f (Walk::wholeValues), and the weight's rows are this
  /// rank's rows of the whole weight read through f
  /// (`gather(tp_identity(W), rows)`), whose gradient sums over tp what
  /// each rank's rows received.
  SmallVector<bool, 4> whole = {};
  /// A conv2d's bias, split with its output channels: a parameter, or a
  /// splat constant (rebuilt at the local size).
  std::optional<Weight> bias = std::nullopt;
  ConstantOp splatBias = {};
  int64_t blocks = 1;
  bool alive = true;
  /// `matmul(W [out, in], x [.., in, n])`: the weight is operand 0, the
  /// features are the result's rows (Mamba's dt_proj, `W @ x^T`).
  bool weightOnLeft = false;
  /// The operand that is the Linear's input.
  unsigned input() const { return weightOnLeft ? 1 : 0; }
  /// The result's split dimension: the features (the last, or the rows of
  /// `weightOnLeft`) of a Linear, the channels (1) of a convolution.
  int64_t dim() const {
    int64_t rank = tensorOf(matmul->getResult(0)).getRank();
    return isa<Conv2DOp>(matmul) ? 1 : weightOnLeft ? rank - 2 : rank - 1;
  }
};

/// A parameter split alike with a split value it meets (a column layer's
/// bias, a row-parallel layer's weight), `axis` being the param's own.
struct ParamShard {
  Weight weight;
  Operation *user;
  int64_t axis, blocks;
  int seed;
  /// Ragged blocks (a bias added before they are taken apart).
  SmallVector<int64_t> sizes = {};
  /// Those held whole (Seed::whole).
  SmallVector<bool, 4> whole = {};
  /// Whether the parameter's `axis` divides over `tp` ranks in its blocks.
  bool divides(int64_t tp) { return !sizes.empty() || weight.size(axis) % (blocks * tp) == 0; }
};

/// An op whose split factor is a reduction (a row-parallel Linear's
/// contraction): every rank holds a partial sum of its results, which the
/// rewrite sums over tp (Megatron's g).
struct Partial {
  Operation *op;
  int seed;
  /// A mean over the split factor: the sum of the ranks' means is divided
  /// by tp.
  bool mean = false;
};

/// One propagation over the function for the current seeds.
struct Walk {
  SmallVector<Seed> &seeds;
  const Getters &getters;
  DenseMap<Value, Split> split;
  llvm::EquivalenceClasses<int> regions;
  SmallVector<ParamShard> params;
  SmallVector<Partial> partials;
  /// Replicated operands of split ops that lack the split factor (a
  /// per-head norm's weight, a rotary table): each rank's gradient of such
  /// a read sums over its own part of the factor only, so the rewrite puts
  /// Megatron's f (merak.tp_identity) between the value and the op.
  SmallVector<OpOperand *> replicatedReads;
  /// A replicated operand of a split op that holds the split factor but is
  /// no parameter of its own, computed from parameters and constants only
  /// (T5's relative-position bias on the split heads, GPT-OSS's sinks
  /// concatenated to the split scores) or from inputs and constants only
  /// (BLOOM's ALiBi bias from the attention mask, on [batch * heads]):
  /// each rank reads its part (merak.local_shard, Megatron's scatter; its
  /// derivative gathers the parts' gradients over tp). An activation there
  /// (a residual stream added to a column layer's output) stops the region
  /// instead, as Megatron would not split the stream.
  struct ScatteredRead {
    OpOperand *use;
    int64_t dim, blocks;
  };
  SmallVector<ScatteredRead> scatteredReads;
  SmallVector<Operation *> columns;
  /// Norms over split features (OLMo 2's q and k norms over the whole
  /// projection): rewritten by their splitStatistics, with the local sums
  /// summed over tp.
  SmallVector<std::pair<Operation *, int>> statistics;
  /// Regions that met an op they cannot pass, with the blocks a
  /// `merak.split` of the seed's output asked for (0: none).
  DenseMap<int, Retry> failedRegions;
  /// The failed regions that stopped at an activation another region might
  /// split (a query meeting the keys): given up only after the other
  /// failures and the pruning (planRegions).
  DenseSet<int> waiting;
  /// Where two regions met at an op with different splits, the region (by
  /// its root then) and the seeds whose split disagreed with the op's first
  /// split operand: a multi-query attention's key or value projection,
  /// split inside its one head, meeting the queries split by heads.
  /// resolveFailures gives up those seeds only, and the next walk sees the
  /// rest of the region again.
  DenseMap<int, SmallVector<int>> conflicts;
  /// The slices and gathers taking a ragged split's blocks apart, with the
  /// full lengths of the split and of the whole blocks before theirs (their
  /// local start is the first over tp plus the second).
  struct RaggedCut {
    Operation *op;
    int64_t splitBefore, wholeBefore;
  };
  SmallVector<RaggedCut> raggedCuts;
  /// Values computed from a seed's whole blocks (Seed::whole), by seed:
  /// replicated, each rank's gradient of them partial. Read without f;
  /// every other value an op computing them reads takes f.
  DenseMap<Value, int> wholeValues;

  /// The activations: values computed from both the function's inputs and
  /// parameters, which are never read in parts (see scatteredReads); read
  /// by `run` only (null: nothing is read in parts).
  const DenseSet<Value> *activations;

  Walk(SmallVector<Seed> &seeds, const Getters &getters,
       const DenseSet<Value> *activations = nullptr)
      : seeds(seeds), getters(getters), activations(activations) {
    for (unsigned i = 0; i < seeds.size(); ++i)
      regions.insert(i);
  }

  int root(int seed) { return regions.getLeaderValue(seed); }

  /// `v` read once, from a parameter read nowhere else (through a transpose
  /// [1, 0] or directly), or stacked from such parameters (Weight::stack).
  std::optional<Weight> soleParam(Value v);

  /// `v`, read once, a reshape (Weight::view) of a parameter read nowhere
  /// else, and the parameter's dimension that is `v`'s dimension `dim`.
  std::optional<std::pair<Weight, int64_t>> viewedParam(Value v, int64_t dim);

  /// An activation `v` that a split op reads, holding the split factor at
  /// `dim` (in `blocks`), split where it is computed: every op computing it
  /// (each value read once) passes the factor on to its operands, which
  /// are split the same way, until operands without it (a broadcast's
  /// input: DeepSeek-V3's one rotary key head broadcast to the heads), read
  /// through f. Appends to `splits` and `reads` on success. With `params`,
  /// a parameter read only there (Weight::view included) ends the walk up
  /// too, split alike (Mamba's A = -exp(A_log) on the split channels).
  LogicalResult splitUpstream(Value v, int64_t dim, int64_t blocks, int seed,
                              SmallVectorImpl<std::pair<Value, Split>> &splits,
                              SmallVectorImpl<OpOperand *> &reads, int depth = 0,
                              SmallVectorImpl<ParamShard> *params = nullptr);

  /// `v` = gather(data, indices), read once, whose dimension `dim` is one of
  /// the data's (not an index dimension); null otherwise.
  GatherOp gatheredRows(Value v, int64_t dim);

  /// Propagates the split `s` of `op`'s operand `index` through the op's
  /// sharding rule: every operand holding the split factor must be split
  /// alike or be a parameter read only here (then split alike), the
  /// results holding it are split, and a split reduction factor leaves
  /// partial sums.
  LogicalResult propagate(Operation *op, unsigned index, Split s);

  /// Records that `seed`'s region failed, with what it asks of the seed,
  /// unless an earlier failure of the region asked something already (the
  /// first cut of a fused projection, Falcon's query slice, explains the
  /// picks after it).
  void ask(int seed, Retry retry);

  /// Records that `seed`'s region failed, unless it has failed already in
  /// this walk, asking for its ragged block `whole` to be held whole (-1:
  /// nothing).
  void fail(int seed, int64_t whole = -1);

  /// Split `s` of `op`'s operand `index` landed on a replicated factor
  /// (fs): records in failedRegions the blocks the seed may retry with
  /// (equal parts of a fused projection, or ragged ones), if any.
  void askRetry(Operation *op, unsigned index, const ShardingRule &rule,
                const ShardingRule::FactorSplit &fs, const Split &s);

  /// A ragged split passes through the ops that take its blocks apart (a
  /// split or slices into runs of whole blocks, stride 1: a run of one
  /// block is split normally from there, a longer one stays ragged) and
  /// through ops whose sharding rule keeps the whole split dimension as one
  /// parallel factor (a bias added, an activation, transposes and reshapes
  /// that keep the dimension, a depthwise convolution over its channels):
  /// their other operands holding the factor are split alike, or are
  /// parameters read only there (views included), split in the same blocks.
  LogicalResult propagateRagged(Operation *op, unsigned index, const Split &s);

  /// A concatenation of split values along their split dimension (Qwen3-Next
  /// regroups its per-head q, k and v into one [q | k | v] for the conv1d):
  /// split in blocks, one per part (ragged when their lengths differ), as
  /// if one projection had computed them.
  LogicalResult joinParts(ConcatOp cat, const Split &s);

  /// For `propagateRagged`: a split or slice cutting the ragged `s` into
  /// runs of whole blocks, or a gather picking whole blocks held whole
  /// (Falcon's key and value heads by index).
  LogicalResult takeRaggedApart(Operation *op, const Split &s);

  /// For `propagateRagged`: a reshape that keeps the split dimension
  /// leading its group (viewedDimension) carries the blocks in its own
  /// units (the fused projection's [q | k | v] features viewed as heads).
  LogicalResult viewRagged(ReshapeOp view, const Split &s);

  /// `op` reads values of whole blocks (wholeValues) and no split one: its
  /// results are such values too, or its region fails where they would
  /// leave the walk's reach (the function's results).
  void carryWhole(Operation *op, int seed);

  /// One propagation in program order from the alive seeds.
  void run(func::FuncOp fn);
};

/// Dimension `dim` of shape `from` in shape `to` (a reshape of it), for a
/// split: the two shapes fall into groups, the shortest runs of dimensions
/// with equal products ([H, N, D] to [H, N * D]: {H} {N, D}), and when
/// `dim` leads its group the dimension leading the same group in `to` is
/// returned. Cutting either leader into k equal parts cuts the group's
/// elements into the same k runs, so a parameter split there is its view
/// split there. None for a dimension inside a group, one of size 1, or
/// dynamic sizes.
std::optional<int64_t> viewedDimension(ArrayRef<int64_t> from, ArrayRef<int64_t> to, int64_t dim);

/// The regions of `seeds` over `tp` ranks: walks, and retries or gives up
/// failed regions (setting the seeds' blocks, sizes and `alive`), until
/// every surviving region is consistent and worth its communication; the
/// last walk, whose `split`, `params`, ... the rewrite applies.
std::unique_ptr<Walk> planRegions(func::FuncOp fn, SmallVector<Seed> &seeds, const Getters &getters,
                                  int64_t tp);

} // namespace mlir::merak::tensor_parallel

#endif
