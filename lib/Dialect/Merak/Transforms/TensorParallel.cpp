//===- TensorParallel.cpp - merak-tensor-parallel -------------------------===//
//
// Megatron-LM tensor parallelism found by graph structure (see Passes.td).
//
// A *seed* is a Linear whose input is replicated: `matmul(x, W^T)` with W a
// parameter read only there (`transpose(get_param W) perm = [1, 0]`, PyTorch's
// [out, in] layout) or `matmul(x, W)` ([in, out], Gemm-like), or the expert
// GEMM of a Mixture-of-Experts layer, `expert_matmul(x, W[e])` with W
// [E, out, in] (or [E, in, out]) read only there: every expert's matrix is
// split alike on its output features (expert tensor parallelism), or an
// ungrouped convolution `conv2d(x, W) bias b` with W [O, I, kh, kw] (and b)
// read only there, or b a splat constant (dynamo's zeros for bias=False),
// split on its output channels (dimension 1 of NCHW): a Conv -> BatchNorm ->
// ReLU -> Conv pair is a CNN's MLP; a row-parallel conv2d's bias moves
// after the sum (it would be added tp times). Splitting its
// output features over the tp ranks makes its result *split*: a value whose
// dimension `dim` is viewed as [blocks, tp, n / (blocks * tp)] and of which
// rank r holds part r of every block. A forward walk in program order
// propagates split values through each op by its sharding rule
// (ShardingRuleOpInterface, lib/Dialect/Merak/Interfaces): the split lands
// on one factor of the op; the operands holding that factor must be split
// alike, or be parameters read only there (the biases of column layers, the
// weight of a row-parallel layer, the rows of an expert's bias gathered per
// token), which are split alike, or any other float value computed from
// parameters and constants alone, of which each rank reads its part
// (merak.local_shard: a relative-position bias computed from its table);
// replicated operands without the factor get Megatron's f (each rank's
// gradient of them is partial); the results holding it are split. A split
// *reduction* factor is a row-parallel end: every rank holds a partial sum,
// summed over tp (merak.all_reduce, Megatron's g). Seeds whose values reach
// a replicated factor (a layer norm over the split axis, a softmax's axis)
// or an op without a rule (the function's results, ...) are left
// replicated, together with every seed their values met; the walk repeats
// until it is consistent. A fused QKV projection gets blocks = 3 when its
// split lands on the replicated part selector of a `merak.split` of its
// output into three equal parts, or on the parts' dimension that gathers
// pick q, k and v from (nn.MultiheadAttention's in_proj viewed as
// [..., 3, C]); one whose output is cut into parts of different lengths
// (Phi-3's GQA qkv_proj: q, k, v of H * D, KV * D, KV * D, by slices or a
// split) gets those lengths as its blocks, each split over tp: such a
// *ragged* split passes only through a bias added to it (split in the same
// blocks) and the slices (or split) that take its blocks apart, each of
// which is then split normally.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "VocabParallel.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKTENSORPARALLEL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-tensor-parallel"

using namespace mlir;
using namespace mlir::merak;

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// How a value is split over tp (see the file comment); `seed` is the
/// column-parallel Linear it derives from (its union-find class is the
/// tensor-parallel region).
struct Split {
  int64_t dim = 0, blocks = 1;
  int seed = 0;
  /// Ragged blocks: their full lengths along dim (empty: `blocks` equal).
  SmallVector<int64_t> sizes = {};
};

/// What a failed region asks of its seed before it is given up: equal
/// blocks (a split into equal parts) or ragged ones (parts of different
/// lengths).
struct Retry {
  int64_t blocks = 0;
  SmallVector<int64_t> sizes;
};

/// The parts `v` is cut into along `dim` when its readers are slices (stride
/// 1, whole elsewhere) covering it exactly in contiguous ranges of
/// different lengths, or one split along `dim` with different sizes; empty
/// otherwise.
SmallVector<int64_t> raggedParts(Value v, int64_t dim) {
  int64_t n = tensorOf(v).getDimSize(dim);
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  for (Operation *user : v.getUsers()) {
    if (auto cut = dyn_cast<SplitOp>(user)) {
      if (!v.hasOneUse() || (int64_t)cut.getAxis() != dim)
        return {};
      int64_t start = 0;
      for (int64_t len : cut.getSizes())
        ranges.push_back({start, len}), start += len;
      continue;
    }
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice)
      return {};
    ArrayRef<int64_t> in = tensorOf(v).getShape();
    for (auto [d, size] : llvm::enumerate(in)) {
      int64_t start = slice.getStarts()[d], limit = slice.getLimits()[d];
      if (slice.getStrides()[d] != 1 || ((int64_t)d != dim && (start != 0 || limit != size)))
        return {};
    }
    ranges.push_back({slice.getStarts()[dim], slice.getLimits()[dim] - slice.getStarts()[dim]});
  }
  llvm::sort(ranges);
  SmallVector<int64_t> sizes;
  int64_t at = 0;
  for (auto [start, len] : ranges) {
    if (start != at || len <= 0)
      return {};
    sizes.push_back(len);
    at += len;
  }
  if (at != n || sizes.size() < 2 || llvm::all_equal(sizes))
    return {};
  return sizes;
}

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
  int64_t outAxis() const { return transpose ? 0 : out; }
};

struct Seed {
  /// The Linear: a matmul, an expert_matmul or a conv2d (its input is
  /// operand 0 in each).
  Operation *matmul;
  Weight weight;
  /// Ragged blocks of its output (see Split).
  SmallVector<int64_t> sizes = {};
  /// A conv2d's bias, split with its output channels: a parameter, or a
  /// splat constant (rebuilt at the local size).
  std::optional<Weight> bias = std::nullopt;
  ConstantOp splatBias = {};
  int64_t blocks = 1;
  bool alive = true;
  /// The result's split dimension: the features (the last) of a Linear,
  /// the channels (1) of a convolution.
  int64_t dim() const {
    return isa<Conv2DOp>(matmul) ? 1 : tensorOf(matmul->getResult(0)).getRank() - 1;
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
};

/// An op whose split factor is a reduction (a row-parallel Linear's
/// contraction): every rank holds a partial sum of its results, which the
/// rewrite sums over tp (Megatron's g).
struct Partial {
  Operation *op;
  int seed;
};

/// One propagation over the function for the current seeds.
struct Walk {
  SmallVector<Seed> &seeds;
  const llvm::StringMap<SmallVector<GetParamOp>> &getters;
  DenseMap<Value, Split> split;
  llvm::EquivalenceClasses<int> regions;
  SmallVector<ParamShard> params;
  SmallVector<Partial> partials;
  /// Replicated operands of split ops that lack the split factor (a
  /// per-head norm's weight, a rotary table): each rank's gradient of such
  /// a read sums over its own part of the factor only, so the rewrite puts
  /// Megatron's f (merak.tp_identity) between the value and the op.
  SmallVector<OpOperand *> replicatedReads;
  /// Replicated operands of split ops that hold the split factor but are
  /// no parameter of their own, computed from parameters and constants
  /// only (T5's relative-position bias on the split heads, GPT-OSS's sinks
  /// concatenated to the split scores), with the dimension: each rank
  /// reads its part (merak.local_shard, Megatron's scatter; its derivative
  /// gathers the parts' gradients over tp). An activation there (a
  /// residual stream added to a column layer's output) stops the region
  /// instead, as Megatron would not split the stream.
  SmallVector<std::pair<OpOperand *, int64_t>> scatteredReads;
  SmallVector<Operation *> columns;
  /// Regions that met an op they cannot pass, with the blocks a
  /// `merak.split` of the seed's output asked for (0: none).
  DenseMap<int, Retry> failedRegions;
  /// The slices taking a ragged split's blocks apart, with their block's
  /// full start (their local start is that over tp).
  SmallVector<std::pair<SliceOp, int64_t>> raggedSlices;

  /// The values computed from the function's inputs (activations), which
  /// are never read in parts (see scatteredReads).
  const DenseSet<Value> *fromInputs;

  Walk(SmallVector<Seed> &seeds, const llvm::StringMap<SmallVector<GetParamOp>> &getters,
       const DenseSet<Value> *fromInputs = nullptr)
      : seeds(seeds), getters(getters), fromInputs(fromInputs) {
    for (unsigned i = 0; i < seeds.size(); ++i)
      regions.insert(i);
  }

  int root(int seed) { return regions.getLeaderValue(seed); }

  /// `v` read once, from a parameter read nowhere else (through a transpose
  /// [1, 0] or directly).
  std::optional<Weight> soleParam(Value v) {
    Weight w;
    if (!v.hasOneUse())
      return std::nullopt;
    if (auto t = v.getDefiningOp<TransposeOp>()) {
      if (t.getPerm() != ArrayRef<int64_t>{1, 0})
        return std::nullopt;
      w.transpose = t;
      v = t.getInput();
      if (!v.hasOneUse())
        return std::nullopt;
    }
    w.get = v.getDefiningOp<GetParamOp>();
    if (!w.get)
      return std::nullopt;
    auto it = getters.find(w.get.getName());
    if (it == getters.end() || it->second.size() != 1)
      return std::nullopt;
    w.param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(w.get, w.get.getNameAttr());
    if (!w.param || !isa<FloatType>(w.param.getTensorType().getElementType()))
      return std::nullopt;
    return w;
  }

  /// `v` = gather(data, indices), read once, whose dimension `dim` is one of
  /// the data's (not an index dimension); null otherwise.
  GatherOp gatheredRows(Value v, int64_t dim) {
    auto g = v.getDefiningOp<GatherOp>();
    if (!g || !v.hasOneUse())
      return {};
    int64_t axis = g.getAxis() < 0 ? g.getAxis() + tensorOf(g.getData()).getRank() : g.getAxis();
    int64_t indexRank = tensorOf(g.getIndices()).getRank();
    if (dim >= axis && dim < axis + indexRank)
      return {};
    return g;
  }

  /// Propagates the split `s` of `op`'s operand `index` through the op's
  /// sharding rule: every operand holding the split factor must be split
  /// alike or be a parameter read only here (then split alike), the
  /// results holding it are split, and a split reduction factor leaves
  /// partial sums.
  LogicalResult propagate(Operation *op, unsigned index, Split s) {
    if (!s.sizes.empty())
      return propagateRagged(op, index, s);
    auto iface = dyn_cast<ShardingRuleOpInterface>(op);
    std::optional<ShardingRule> rule =
        iface ? iface.getShardingRule() : std::optional<ShardingRule>();
    if (!rule)
      return failure();
    const ShardingRule::TensorFactors &from = rule->operands[index];
    std::optional<ShardingRule::FactorSplit> fs = rule->locate(from, s.dim, s.blocks);
    if (!fs)
      return failure();
    FactorKind kind = rule->factors[fs->factor].kind;
    if (kind == FactorKind::Replicated) {
      // A fused projection split into equal parts: retry its seed with
      // blocks = parts so that every rank holds its share of each part.
      if (int64_t blocks = rule->blocksPastReplicated(from, s.dim, *fs); blocks && s.blocks == 1)
        failedRegions[root(s.seed)] = {blocks, {}};
      // A fused projection reshaped to [..., parts, n] whose parts are
      // picked by index (PyTorch's nn.MultiheadAttention: q, k, v as
      // gathers of [3, ...]): the split landed on the parts; retry the
      // seed with blocks = parts, which puts it on n.
      if (auto pick = dyn_cast<GatherOp>(op);
          pick && index == 0 && s.blocks == 1 && pick.getAxis() == s.dim)
        if (int64_t parts = tensorOf(pick.getData()).getDimSize(s.dim); parts > 1)
          failedRegions[root(s.seed)] = {parts, {}};
      // Parts of different lengths: retry with ragged blocks.
      if (s.blocks == 1 && isa<SliceOp, SplitOp>(op))
        if (SmallVector<int64_t> sizes = raggedParts(op->getOperand(index), s.dim); !sizes.empty())
          failedRegions[root(s.seed)] = {0, sizes};
      return failure();
    }
    if (kind == FactorKind::Combined) // a mean or max over the split axis
      return failure();
    SmallVector<ParamShard> newParams;
    SmallVector<std::pair<Value, Split>> newGathered;
    SmallVector<OpOperand *> newReads;
    SmallVector<std::pair<OpOperand *, int64_t>> newScattered;
    for (auto [use, factors] : llvm::zip(op->getOpOperands(), rule->operands)) {
      Value v = use.get();
      auto where = rule->find(factors, *fs);
      auto it = split.find(v);
      if (it != split.end()) {
        if (!where || it->second.dim != where->first || it->second.blocks != where->second ||
            !it->second.sizes.empty())
          return failure();
        continue;
      }
      if (!where) {
        if (kind == FactorKind::Parallel && isa<FloatType>(getElementTypeOrSelf(v.getType())) &&
            !v.getDefiningOp<ConstantOp>())
          newReads.push_back(&use);
        continue;
      }
      int64_t dim = where->first;
      // A parameter row chosen per token (an expert's bias, gather(b [E, O],
      // experts)): the parameter is split on the matching dimension and the
      // gathered rows with it.
      GatherOp rows = gatheredRows(v, dim);
      std::optional<Weight> w = soleParam(rows ? rows.getData() : v);
      if (!w && kind == FactorKind::Parallel && where->second == 1 && fromInputs &&
          !fromInputs->contains(v) && isa<FloatType>(getElementTypeOrSelf(v.getType()))) {
        newScattered.push_back({&use, dim});
        continue;
      }
      if (!w)
        return failure();
      if (rows) {
        int64_t indexRank = tensorOf(rows.getIndices()).getRank();
        newGathered.push_back({rows.getResult(), {dim, where->second, s.seed, {}}});
        dim = dim < (int64_t)rows.getAxis() ? dim : dim - indexRank + 1;
      }
      int64_t axis = w->transpose ? w->transpose.getPerm()[dim] : dim;
      newParams.push_back({*w, op, axis, where->second, s.seed});
    }
    SmallVector<std::pair<Value, Split>> results;
    for (auto [r, factors] : llvm::zip(op->getResults(), rule->results)) {
      if (auto where = rule->find(factors, *fs))
        results.push_back({r, {where->first, where->second, s.seed}});
      else if (kind == FactorKind::Parallel)
        return failure();
    }
    params.append(newParams);
    replicatedReads.append(newReads);
    scatteredReads.append(newScattered);
    for (auto [r, rs] : newGathered)
      split[r] = rs;
    for (auto [r, rs] : results)
      split[r] = rs;
    if (kind == FactorKind::Reduction)
      partials.push_back({op, s.seed});
    return success();
  }

  /// A ragged split passes only through the ops that take its blocks
  /// apart: a slice of one block (stride 1, whole elsewhere) or a split
  /// into exactly its blocks; their results are split normally. Before
  /// that, a bias may be added (a fused QKV projection with a bias): a
  /// [n] parameter read only there, split in the same blocks.
  LogicalResult propagateRagged(Operation *op, unsigned index, const Split &s) {
    if (auto add = dyn_cast<AddOp>(op)) {
      Value x = op->getOperand(index), b = op->getOperand(1 - index);
      RankedTensorType bt = tensorOf(b);
      int64_t n = tensorOf(x).getDimSize(s.dim);
      std::optional<Weight> w = soleParam(b);
      if (!w || w->transpose || bt.getRank() != 1 || bt.getDimSize(0) != n ||
          s.dim != tensorOf(x).getRank() - 1 || tensorOf(add.getResult()) != tensorOf(x))
        return failure();
      params.push_back({*w, op, 0, (int64_t)s.sizes.size(), s.seed, s.sizes});
      split[add.getResult()] = s;
      return success();
    }
    Split part{s.dim, 1, s.seed, {}};
    if (auto cut = dyn_cast<SplitOp>(op)) {
      if ((int64_t)cut.getAxis() != s.dim || cut.getSizes() != ArrayRef<int64_t>(s.sizes))
        return failure();
      for (Value r : cut.getResults())
        split[r] = part;
      return success();
    }
    auto slice = dyn_cast<SliceOp>(op);
    if (!slice || raggedParts(slice.getInput(), s.dim) != s.sizes)
      return failure();
    raggedSlices.push_back({slice, slice.getStarts()[s.dim]});
    split[slice.getResult()] = part;
    return success();
  }

  void run(func::FuncOp fn) {
    DenseMap<Operation *, int> seedOf;
    for (auto [i, s] : llvm::enumerate(seeds))
      if (s.alive)
        seedOf[s.matmul] = i;
    for (Operation &op : fn.getBody().front()) {
      auto seedIt = seedOf.find(&op);
      if (seedIt != seedOf.end() && !split.count(op.getOperand(0))) {
        Seed &s = seeds[seedIt->second];
        split[s.matmul->getResult(0)] = {s.dim(), s.blocks, seedIt->second, s.sizes};
        columns.push_back(s.matmul);
        continue;
      }
      // A seed whose input is split is row-parallel in this walk only: if
      // that region fails, the next walk seeds it again (ELECTRA's q, k, v
      // read a projected embedding whose own region stops at a layer norm).
      std::optional<Split> first;
      unsigned firstIndex = 0;
      for (auto [i, v] : llvm::enumerate(op.getOperands()))
        if (auto it = split.find(v); it != split.end()) {
          if (!first)
            first = it->second, firstIndex = i;
          else
            regions.unionSets(first->seed, it->second.seed);
        }
      if (!first)
        continue;
      if (failed(propagate(&op, firstIndex, *first)) && !failedRegions.count(root(first->seed)))
        failedRegions[root(first->seed)] = {};
    }
  }
};

struct MerakTensorParallelPass
    : merak::impl::MerakTensorParallelBase<MerakTensorParallelPass> {
  using Base::Base;

  RankedTensorType local(RankedTensorType t, int64_t dim) {
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] /= tp;
    return RankedTensorType::get(shape, t.getElementType());
  }

  /// This rank's part of the replicated `x` along `dim` (inserted after
  /// x's definition): merak.local_shard splits the leading dimension, so
  /// `dim` is moved there and back by transposes.
  Value localPart(OpBuilder &b, Value x, int64_t dim) {
    OpBuilder::InsertionGuard guard(b);
    if (Operation *def = x.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(x).getOwner());
    Location loc = x.getLoc();
    RankedTensorType t = tensorOf(x);
    SmallVector<int64_t> perm = {dim}, back(t.getRank());
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim)
        perm.push_back(d);
    for (auto [i, d] : llvm::enumerate(perm))
      back[d] = i;
    auto permuted = [&](RankedTensorType in, ArrayRef<int64_t> p) {
      SmallVector<int64_t> shape;
      for (int64_t d : p)
        shape.push_back(in.getDimSize(d));
      return RankedTensorType::get(shape, in.getElementType());
    };
    Value v = x;
    if (dim != 0)
      v = TransposeOp::create(b, loc, permuted(t, perm), v, perm);
    v = LocalShardOp::create(b, loc, local(tensorOf(v), 0), v, "tp");
    if (dim != 0)
      v = TransposeOp::create(b, loc, permuted(tensorOf(v), back), v, back);
    return v;
  }

  /// Splits `w`'s param along `axis` and retypes its reads.
  void shardParam(ParamOp param, GetParamOp get, TransposeOp transpose, int64_t axis,
                  int64_t blocks, ArrayRef<int64_t> sizes = {}) {
    auto type = local(param.getTensorType(), axis);
    param.setTypeAttr(TypeAttr::get(type));
    ShardLayout layout{axis, tp, blocks};
    layout.blockSizes.assign(sizes.begin(), sizes.end());
    setShardLayout(param, layout);
    get.getResult().setType(type);
    if (transpose) {
      int64_t at = llvm::find(transpose.getPerm(), axis) - transpose.getPerm().begin();
      transpose.getResult().setType(local(tensorOf(transpose.getResult()), at));
    }
  }

  /// findVocabHead, and by default (`vocab-parallel-fallback`, not asked
  /// for explicitly) only a head at least as wide as its input (V >= C: an
  /// LM head, not a classifier of a few classes, where the split's
  /// all-reduces would cost more than the rows it saves).
  FailureOr<VocabHead> findDefaultVocabHead(func::FuncOp fn,
                                            const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                                            std::string &why) {
    FailureOr<VocabHead> head = findVocabHead(fn, getters, tp, why);
    if (failed(head) || !vocabParallelFallback)
      return head;
    ArrayRef<int64_t> shape = head->weight.getTensorType().getShape();
    int64_t v = shape[head->axis], c = shape[1 - head->axis];
    if (v >= c)
      return head;
    why = ("the head '" + head->weight.getSymName() + "' has fewer classes (" + Twine(v) +
           ") than input features (" + Twine(c) +
           "): a classifier, which --vocab-parallel splits only when asked")
              .str();
    return failure();
  }

  /// Vocabulary parallelism (VocabParallel.h): the LM head with its
  /// tables, then token embeddings of their own. Every check comes before
  /// the first change: with `vocab-parallel-fallback` a model whose head
  /// does not qualify keeps it replicated (with a remark).
  LogicalResult splitVocabulary(func::FuncOp fn,
                                const llvm::StringMap<SmallVector<GetParamOp>> &getters) {
    std::string why;
    FailureOr<VocabHead> head = findDefaultVocabHead(fn, getters, why);
    if (failed(head) && !vocabParallelFallback)
      return fn.emitError("merak-tensor-parallel: vocab-parallel: ") << why;
    if (succeeded(head))
      merak::splitVocabulary(fn, *head, getters, tp);
    SmallVector<ParamOp> tables = findTokenTables(getters);
    splitTokenTables(tables, getters, tp);
    if (failed(head)) {
      InFlightDiagnostic d =
          fn.emitRemark("merak-tensor-parallel: the ")
          << (tables.empty() ? "embedding, LM head and loss stay replicated (no vocabulary "
                               "parallelism): "
                             : "LM head and loss stay replicated: ")
          << why;
      if (!tables.empty())
        d << "; only " << describeTables(tables) << " split on their rows";
    }
    return success();
  }

  /// "the token embedding(s) 'a', 'b'".
  static std::string describeTables(ArrayRef<ParamOp> tables) {
    std::string out = "the token embedding(s) ";
    for (ParamOp t : tables)
      out += (out.back() == '\'' ? ", '" : "'") + t.getSymName().str() + "'";
    return out;
  }

  /// With no Linear pair to shard: only the vocabulary (a recurrent LM's
  /// head, a text classifier's token embedding), with a warning; an error
  /// naming both reasons when there is none.
  LogicalResult splitVocabularyOnly(func::FuncOp fn,
                                    const llvm::StringMap<SmallVector<GetParamOp>> &getters) {
    std::string why = "--vocab-parallel=false";
    FailureOr<VocabHead> head =
        vocabParallel ? findDefaultVocabHead(fn, getters, why) : FailureOr<VocabHead>(failure());
    int64_t lookups = 0;
    if (succeeded(head)) {
      merak::splitVocabulary(fn, *head, getters, tp);
      lookups = head->lookups.size();
    }
    SmallVector<ParamOp> tables = vocabParallel ? findTokenTables(getters) : SmallVector<ParamOp>();
    // An explicit --vocab-parallel whose head does not qualify is an error,
    // as with a pair (below: with no table either, both reasons).
    if (failed(head) && !tables.empty() && !vocabParallelFallback)
      return fn.emitError("merak-tensor-parallel: vocab-parallel: ") << why;
    splitTokenTables(tables, getters, tp);
    if (failed(head) && tables.empty())
      return fn.emitError("merak-tensor-parallel: found no structure to shard over tp=")
             << (int64_t)tp << ": no Linear -> ... -> Linear pair (an MLP, attention "
             << "projections around a head split, or convolutions Conv -> ... -> Conv) whose "
                "intermediate values only pass "
             << "through ops whose sharding rule keeps the split (elementwise ops, "
             << "reshapes, transposes, splits, softmax, batched matmuls, ...), and no "
                "vocabulary to split ("
             << why << ")";
    InFlightDiagnostic d =
        fn.emitWarning("merak-tensor-parallel: no Linear -> ... -> Linear pair to shard over tp=")
        << (int64_t)tp << ": only the vocabulary is split (";
    if (succeeded(head)) {
      d << "the LM head '" << head->weight.getSymName() << "'"
        << (head->bias ? " and its bias" : "");
      for (ParamOp table : head->tables)
        d << ", the embedding '" << table.getSymName() << "'";
      if (lookups)
        d << ", " << lookups << " embedding lookup(s)";
      d << ", the cross-entropy" << (tables.empty() ? "" : ", ");
    }
    if (!tables.empty())
      d << describeTables(tables);
    d << "); every other layer is computed whole on each tp rank";
    if (failed(head))
      d << " (the LM head and loss stay replicated: " << why << ")";
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError("merak-tensor-parallel: tp must be positive");
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-tensor-parallel: no single-block function @") << entry;
      return signalPassFailure();
    }
    llvm::StringMap<SmallVector<GetParamOp>> getters;
    bool written = false;
    module.walk([&](Operation *op) {
      if (auto get = dyn_cast<GetParamOp>(op))
        getters[get.getName()].push_back(get);
      written |= isa<SetParamOp>(op);
    });
    if (written) {
      module.emitError("merak-tensor-parallel: runs on the model before training "
                       "(found merak.set_param)");
      return signalPassFailure();
    }

    // Seeds: every Linear with a weight of its own.
    SmallVector<Seed> seeds;
    {
      Walk probe(seeds, getters);
      fn.walk([&](MatmulOp mm) {
        if (tensorOf(mm.getRhs()).getRank() != 2 || tensorOf(mm.getLhs()).getRank() < 2)
          return;
        if (std::optional<Weight> w = probe.soleParam(mm.getRhs()))
          seeds.push_back({mm, *w, {}});
      });
      fn.walk([&](ExpertMatmulOp em) {
        if (em.getFirst()) // split over "ep" already (experts replicated over tp)
          return;
        std::optional<Weight> w = probe.soleParam(em.getWeight());
        if (!w || w->transpose)
          return;
        w->out = em.getTransposeWeight() ? 2 : 1;
        seeds.push_back({em, *w, {}});
      });
      fn.walk([&](Conv2DOp conv) {
        if (conv.getGroups() != 1)
          return;
        std::optional<Weight> w = probe.soleParam(conv.getWeight());
        std::optional<Weight> bias;
        ConstantOp splat;
        if (Value b = conv.getBias()) {
          splat = b.getDefiningOp<ConstantOp>();
          if (splat && !cast<ElementsAttr>(splat.getValue()).isSplat())
            splat = {};
          if (!splat && !(bias = probe.soleParam(b)))
            return;
        }
        if (!w || w->transpose || (bias && bias->transpose))
          return;
        w->out = 0; // [O, I, kh, kw]
        if (bias)
          bias->out = 0;
        seeds.push_back({conv, *w, {}, bias, splat});
      });
    }

    DenseSet<Value> fromInputs(fn.getArguments().begin(), fn.getArguments().end());
    for (Operation &op : fn.getBody().front())
      if (llvm::any_of(op.getOperands(), [&](Value v) { return fromInputs.contains(v); }))
        fromInputs.insert(op.result_begin(), op.result_end());
    // Propagate until every surviving region is consistent.
    std::unique_ptr<Walk> walk;
    while (true) {
      walk = std::make_unique<Walk>(seeds, getters, &fromInputs);
      walk->run(fn);
      if (walk->failedRegions.empty())
        break;
      for (auto &[region, retry] : walk->failedRegions) {
        SmallVector<int> members;
        for (int m : walk->regions.members(region))
          members.push_back(m);
        Seed *only = members.size() == 1 ? &seeds[members[0]] : nullptr;
        if (only && only->blocks == 1 && retry.blocks > 1) {
          only->blocks = retry.blocks;
          continue;
        }
        // Ragged blocks, when each divides over tp.
        if (only && only->blocks == 1 && !retry.sizes.empty() &&
            llvm::all_of(retry.sizes, [&](int64_t n) { return n % tp == 0; })) {
          only->sizes = retry.sizes;
          only->blocks = retry.sizes.size();
          continue;
        }
        for (int m : members)
          seeds[m].alive = false;
      }
    }
    // A region without a row-parallel end would only add communication.
    DenseMap<int, int> rowsOf;
    for (Partial &p : walk->partials)
      ++rowsOf[walk->root(p.seed)];
    bool changed = false;
    for (auto [i, s] : llvm::enumerate(seeds))
      if (s.alive && !rowsOf.count(walk->root(i)))
        s.alive = false, changed = true;
    if (changed) {
      walk = std::make_unique<Walk>(seeds, getters, &fromInputs);
      walk->run(fn);
    }
    if (walk->columns.empty()) {
      // Only the vocabulary, if it splits (a recurrent net's LM head).
      if (failed(splitVocabularyOnly(fn, getters)))
        signalPassFailure();
      return;
    }

    LLVM_DEBUG(llvm::dbgs() << "merak-tensor-parallel: " << walk->columns.size()
                            << " column-parallel Linears, " << walk->partials.size()
                            << " partial sums (row-parallel ends), " << walk->params.size()
                            << " parameters split alike, " << walk->split.size()
                            << " split values\n");
    // Sizes: every split dimension divides into blocks * tp parts.
    bool ok = true;
    auto name = [&](int seed) { return seeds[walk->root(seed)].weight.param.getSymName(); };
    const int64_t parts = tp;
    for (Operation &op : fn.getBody().front()) {
      for (Value r : op.getResults()) {
        auto it = walk->split.find(r);
        if (!ok || it == walk->split.end())
          continue;
        int64_t n = tensorOf(r).getDimSize(it->second.dim), blocks = it->second.blocks;
        if (n % (blocks * parts) == 0 || !it->second.sizes.empty()) // ragged: checked above
          continue;
        InFlightDiagnostic d = op.emitError("merak-tensor-parallel: dimension ")
                               << it->second.dim << " of this result (size " << n;
        if (blocks > 1)
          d << " = " << blocks << " blocks of " << n / blocks;
        d << (isa<ReshapeOp>(op) ? ", e.g. the attention heads" : "")
          << ") does not divide by tp=" << parts
          << (blocks > 1 ? " in each block" : "") << " (the tensor-parallel block of '"
          << name(it->second.seed) << "')";
        ok = false;
      }
    }
    for (ParamShard &p : walk->params) {
      int64_t n = p.weight.param.getTensorType().getDimSize(p.axis);
      if (ok && p.sizes.empty() && n % (p.blocks * tp) != 0) { // ragged: checked above
        p.user->emitError("merak-tensor-parallel: dimension ")
            << p.axis << " of '" << p.weight.param.getSymName() << "' (" << n
            << ") does not divide by tp=" << parts;
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();

    // Rewrite: local types, sharded params, f and g.
    for (Operation &op : fn.getBody().front()) {
      auto iface = dyn_cast<ShardingRuleOpInterface>(op);
      for (Value r : op.getResults())
        if (auto it = walk->split.find(r); it != walk->split.end()) {
          r.setType(local(tensorOf(r), it->second.dim));
          if (iface && it->second.sizes.empty())
            iface.recordSplit("tp", it->second.dim, it->second.blocks, tp);
        }
      if (iface && llvm::any_of(op.getOperands(), [&](Value v) { return walk->split.count(v); }))
        iface.adaptToLocalTypes();
    }
    // A ragged block's slice starts at its block's full start over tp.
    for (auto [slice, start] : walk->raggedSlices) {
      int64_t dim = walk->split.lookup(slice.getInput()).dim;
      SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
      starts[dim] = start / tp;
      limits[dim] = starts[dim] + tensorOf(slice.getResult()).getDimSize(dim);
      slice.setStarts(starts);
      slice.setLimits(limits);
    }
    OpBuilder b(&getContext());
    DenseMap<Value, Value> fOf;
    auto fFor = [&](Value x, Location loc) {
      Value &f = fOf[x];
      if (!f) {
        if (Operation *def = x.getDefiningOp())
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointToStart(&fn.getBody().front());
        f = TpIdentityOp::create(b, loc, x);
      }
      return f;
    };
    for (OpOperand *use : walk->replicatedReads)
      use->set(fFor(use->get(), use->getOwner()->getLoc()));
    DenseMap<std::pair<Value, int64_t>, Value> partOf;
    for (auto [use, dim] : walk->scatteredReads) {
      Value &part = partOf[{use->get(), dim}];
      if (!part)
        part = localPart(b, use->get(), dim);
      use->set(part);
    }
    for (Operation *mm : walk->columns) {
      Seed &s = *llvm::find_if(seeds, [&](Seed &x) { return x.matmul == mm; });
      shardParam(s.weight.param, s.weight.get, s.weight.transpose, s.weight.outAxis(), s.blocks,
                 s.sizes);
      if (s.bias)
        shardParam(s.bias->param, s.bias->get, TransposeOp(), 0, s.blocks, s.sizes);
      if (s.splatBias) {
        auto attr = cast<ElementsAttr>(s.splatBias.getValue());
        auto type = local(tensorOf(s.splatBias.getResult()), 0);
        b.setInsertionPoint(mm);
        mm->setOperand(
            2, ConstantOp::create(b, mm->getLoc(),
                                  SplatElementsAttr::get(type, attr.getSplatValue<Attribute>())));
      }
      mm->setOperand(0, fFor(mm->getOperand(0), mm->getLoc()));
    }
    for (ParamShard &p : walk->params)
      shardParam(p.weight.param, p.weight.get, p.weight.transpose, p.axis, p.blocks, p.sizes);
    for (Partial &p : walk->partials) {
      // A row-parallel conv2d's bias is added once, after the sum.
      Value bias;
      if (auto conv = dyn_cast<Conv2DOp>(p.op); conv && conv.getBias()) {
        bias = conv.getBias();
        conv.getBiasMutable().clear();
      }
      b.setInsertionPointAfter(p.op);
      auto g = AllReduceOp::create(b, p.op->getLoc(), p.op->getResults(), "tp", "sum");
      SmallVector<Value> sums(g.getResults());
      if (bias) { // [O] -> [O, 1, 1], broadcast over NCHW
        auto bt = tensorOf(bias);
        auto shaped = RankedTensorType::get({bt.getDimSize(0), 1, 1}, bt.getElementType());
        Value column = ReshapeOp::create(b, p.op->getLoc(), shaped, bias);
        sums[0] = AddOp::create(b, p.op->getLoc(), sums[0].getType(), sums[0], column);
      }
      for (auto [partial, sum] : llvm::zip(p.op->getResults(), sums))
        partial.replaceAllUsesExcept(sum, g);
    }
    if (vocabParallel && failed(splitVocabulary(fn, getters)))
      return signalPassFailure();
  }
};
} // namespace
