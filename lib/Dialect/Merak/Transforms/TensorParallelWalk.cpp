//===- TensorParallelWalk.cpp - merak-tensor-parallel's regions -----------===//
//
// The forward walk of merak-tensor-parallel (see TensorParallel.cpp): a
// seed's result is split; each op reading a split value passes it on by
// its sharding rule (propagate), or fails its region; failed regions are
// retried with the blocks a fused projection asks for, or given up, until
// the walk is consistent (planRegions). An activation a split op reads
// holding the split factor is split where it is computed when it can be
// (splitUpstream: back to a broadcast's input, read through f). A region
// that stopped at such an activation waits: it is given up only after the
// other failures and the pruning, which may seed the Linear whose split it
// needs. A seed whose input is split is row-parallel in that walk only:
// if the region splitting its input fails, the next walk seeds it again
// (ELECTRA's q, k and v read a projected embedding whose own region stops
// at a layer norm).
//
//===----------------------------------------------------------------------===//
#include "TensorParallelWalk.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::tensor_parallel;

namespace {
/// A constant with one value everywhere: every part of it is the same.
bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && cast<ElementsAttr>(c.getValue()).isSplat();
}

/// Whether `op` reducing a split axis of `kind` needs the axis whole: a max
/// or product over it. A mean is a partial sum scaled by 1/tp (float values
/// only).
bool needsWholeAxis(Operation *op, FactorKind kind) {
  if (kind == FactorKind::Combined)
    return true;
  return kind == FactorKind::Mean && !llvm::all_of(op->getResultTypes(), [](Type t) {
           return isa<FloatType>(getElementTypeOrSelf(t));
         });
}

/// The parts `v` is cut into along `dim` when its readers are slices (stride
/// 1, whole elsewhere) covering it exactly in contiguous ranges of
/// different lengths, or one split along `dim` with different sizes (with
/// `equalToo`, of any lengths); empty otherwise.
SmallVector<int64_t> raggedParts(Value v, int64_t dim, bool equalToo = false) {
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
  if (at != n || sizes.size() < 2 || (!equalToo && llvm::all_equal(sizes)))
    return {};
  return sizes;
}

/// The number of elements of `v`'s tensor.
int64_t elements(Value v) { return tensorOf(v).getNumElements(); }
} // namespace

std::optional<int64_t> tensor_parallel::viewedDimension(ArrayRef<int64_t> from,
                                                        ArrayRef<int64_t> to, int64_t dim) {
  if (from[dim] == 1 || ShapedType::isDynamicShape(from) || ShapedType::isDynamicShape(to))
    return std::nullopt;
  size_t i = 0, j = 0;
  while (true) {
    while (i < from.size() && from[i] == 1)
      ++i;
    while (j < to.size() && to[j] == 1)
      ++j;
    if (i == from.size() || j == to.size() || (int64_t)i > dim)
      return std::nullopt;
    if ((int64_t)i == dim)
      return j;
    // Past this group: its products meet.
    int64_t p = from[i++], q = to[j++];
    while (p != q) {
      if (p < q && i < from.size())
        p *= from[i++];
      else if (q < p && j < to.size())
        q *= to[j++];
      else
        return std::nullopt;
    }
  }
}

bool Weight::merges(int64_t axis) {
  if (!view)
    return false;
  RankedTensorType viewed = tensorOf(view.getResult());
  std::optional<int64_t> at =
      viewedDimension(tensorOf(view.getInput()).getShape(), viewed.getShape(), axis);
  return !at || viewed.getDimSize(*at) != size(axis);
}

std::optional<std::pair<Weight, int64_t>> Walk::viewedParam(Value v, int64_t dim) {
  auto view = v.getDefiningOp<ReshapeOp>();
  if (!view || !v.hasOneUse())
    return std::nullopt;
  std::optional<Weight> w = soleParam(view.getInput());
  if (!w || w->transpose || w->stack)
    return std::nullopt;
  std::optional<int64_t> axis =
      viewedDimension(tensorOf(v).getShape(), tensorOf(view.getInput()).getShape(), dim);
  if (!axis)
    return std::nullopt;
  w->view = view;
  return std::make_pair(*w, *axis);
}

std::optional<Weight> Walk::soleParam(Value v) {
  Weight w;
  if (!v.hasOneUse())
    return std::nullopt;
  if (auto stack = v.getDefiningOp<ConcatOp>()) {
    if (stack.getAxis() != 0 || tensorOf(v).getRank() != 3)
      return std::nullopt;
    for (Value part : stack.getInputs()) {
      auto view = part.getDefiningOp<ReshapeOp>();
      if (!view || tensorOf(part).getShape().drop_front() != tensorOf(view.getInput()).getShape())
        return std::nullopt;
      std::optional<Weight> expert = soleParam(view.getInput());
      if (!expert || expert->transpose || expert->stack || !part.hasOneUse())
        return std::nullopt;
      if (!w.param)
        w = *expert;
    }
    w.stack = stack;
    return w;
  }
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

LogicalResult Walk::splitUpstream(Value v, int64_t dim, int64_t blocks, int seed,
                                  SmallVectorImpl<std::pair<Value, Split>> &splits,
                                  SmallVectorImpl<OpOperand *> &reads, int depth,
                                  SmallVectorImpl<ParamShard> *params) {
  if (params && v.hasOneUse() && !split.count(v)) {
    Operation *user = *v.getUsers().begin();
    if (std::optional<Weight> w = soleParam(v); w && !w->stack) {
      params->push_back({*w, user, w->transpose ? w->transpose.getPerm()[dim] : dim, blocks, seed});
      return success();
    }
    if (std::optional<std::pair<Weight, int64_t>> viewed = viewedParam(v, dim)) {
      params->push_back({viewed->first, user, viewed->second, blocks, seed});
      return success();
    }
  }
  Operation *def = v.getDefiningOp();
  auto iface = dyn_cast_or_null<ShardingRuleOpInterface>(def);
  // An op reading a split value belongs to that value's region (a
  // row-parallel Linear's partial sum, say): not split here.
  if (!iface || depth > 32 || !v.hasOneUse() || def->getNumResults() != 1 || split.count(v) ||
      !isa<FloatType>(getElementTypeOrSelf(v.getType())) ||
      llvm::any_of(def->getOperands(), [&](Value x) { return split.count(x); }))
    return failure();
  std::optional<ShardingRule> rule = iface.getShardingRule();
  std::optional<ShardingRule::FactorSplit> fs =
      rule ? rule->locate(rule->results[0], dim, blocks) : std::nullopt;
  if (!fs || rule->factors[fs->factor].kind != FactorKind::Parallel)
    return failure();
  for (auto [use, factors] : llvm::zip(def->getOpOperands(), rule->operands)) {
    Value x = use.get();
    if (auto where = rule->find(factors, *fs)) {
      if (failed(splitUpstream(x, where->first, where->second, seed, splits, reads, depth + 1,
                               params)))
        return failure();
    } else if (isa<FloatType>(getElementTypeOrSelf(x.getType())) &&
               !x.getDefiningOp<ConstantOp>()) {
      reads.push_back(&use);
    }
  }
  splits.push_back({v, {dim, blocks, seed, {}}});
  return success();
}

GatherOp Walk::gatheredRows(Value v, int64_t dim) {
  auto g = v.getDefiningOp<GatherOp>();
  if (!g || !v.hasOneUse())
    return {};
  int64_t axis = g.getAxis() < 0 ? g.getAxis() + tensorOf(g.getData()).getRank() : g.getAxis();
  int64_t indexRank = tensorOf(g.getIndices()).getRank();
  if (dim >= axis && dim < axis + indexRank)
    return {};
  return g;
}

void Walk::askRetry(Operation *op, unsigned index, const ShardingRule &rule,
                    const ShardingRule::FactorSplit &fs, const Split &s) {
  // A fused projection split into equal parts: retry its seed with
  // blocks = parts so that every rank holds its share of each part.
  if (int64_t blocks = rule.blocksPastReplicated(rule.operands[index], s.dim, fs);
      blocks && s.blocks == 1)
    failedRegions[root(s.seed)] = {blocks, {}};
  // A fused projection reshaped to [..., parts, n] whose parts are
  // picked by index (PyTorch's nn.MultiheadAttention: q, k, v as
  // gathers of [3, ...]): the split landed on the parts; retry the
  // seed with blocks = parts, which puts it on n.
  if (auto pick = dyn_cast<GatherOp>(op);
      pick && index == 0 && s.blocks == 1 && (int64_t)pick.getAxis() == s.dim)
    if (int64_t parts = tensorOf(pick.getData()).getDimSize(s.dim); parts > 1)
      failedRegions[root(s.seed)] = {parts, {}};
  // Parts of different lengths: retry with ragged blocks; a ragged
  // seed's block cut into parts of any lengths: retry with those parts as
  // its blocks.
  if (s.blocks == 1 && isa<SliceOp, SplitOp>(op))
    if (SmallVector<int64_t> sizes = raggedParts(op->getOperand(index), s.dim, s.block >= 0);
        !sizes.empty())
      failedRegions[root(s.seed)] = {0, sizes, s.block};
}

LogicalResult Walk::propagate(Operation *op, unsigned index, Split s) {
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
  // A norm over the split features: split alike, its statistics summed.
  bool sums = kind == FactorKind::Replicated && iface.canSplitStatistics(index, s.dim);
  if (sums)
    kind = FactorKind::Parallel;
  if (auto cat = dyn_cast<ConcatOp>(op); cat && kind == FactorKind::Replicated)
    if (succeeded(joinParts(cat, s)))
      return success();
  if (kind == FactorKind::Replicated) {
    askRetry(op, index, *rule, *fs, s);
    return failure();
  }
  if (needsWholeAxis(op, kind))
    return failure();
  SmallVector<ParamShard> newParams;
  SmallVector<std::pair<Value, Split>> newSplits;
  SmallVector<OpOperand *> newReads;
  SmallVector<ScatteredRead> newScattered;
  for (auto [use, factors] : llvm::zip(op->getOpOperands(), rule->operands)) {
    Value v = use.get();
    auto where = rule->find(factors, *fs);
    auto it = split.find(v);
    if (it != split.end()) {
      if (!where || it->second.dim != where->first || it->second.blocks != where->second ||
          !it->second.sizes.empty()) {
        // (Two regions of one class: run() joined them at this op.)
        if (it->second.seed != s.seed && root(it->second.seed) == root(s.seed))
          conflicts[root(s.seed)].push_back(it->second.seed);
        return failure();
      }
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
    std::optional<std::pair<Weight, int64_t>> viewed;
    if (!w && !rows && (viewed = viewedParam(v, dim))) {
      newParams.push_back({viewed->first, op, viewed->second, where->second, s.seed});
      continue;
    }
    if (!w && (kind == FactorKind::Parallel || kind == FactorKind::Reduction) && activations &&
        !activations->contains(v) && isa<FloatType>(getElementTypeOrSelf(v.getType()))) {
      // Computed from parameters read only there (a row-parallel weight
      // transposed and viewed: XLNet's `o` [H, N, D] read as [N * D, H]):
      // they are split, else each rank reads its part of the whole.
      SmallVector<std::pair<Value, Split>> upSplits;
      SmallVector<OpOperand *> upReads;
      SmallVector<ParamShard> upParams;
      if (succeeded(
              splitUpstream(v, dim, where->second, s.seed, upSplits, upReads, 0, &upParams)) &&
          !upParams.empty()) {
        newSplits.append(upSplits);
        newReads.append(upReads);
        newParams.append(upParams);
        continue;
      }
      if (kind == FactorKind::Parallel) {
        newScattered.push_back({&use, dim, where->second});
        continue;
      }
    }
    if (!w && kind == FactorKind::Parallel &&
        succeeded(splitUpstream(v, dim, where->second, s.seed, newSplits, newReads)))
      continue;
    if (!w && kind == FactorKind::Parallel && isSplatConstant(v)) {
      // Equal everywhere (a folded all-true mask [B, H, T, S]): any part
      // of the right length is this rank's.
      newScattered.push_back({&use, dim, where->second});
      continue;
    }
    if (!w) {
      // Another region may split it once a failure before it is resolved.
      if (activations && activations->contains(v) && !failedRegions.count(root(s.seed)))
        waiting.insert(root(s.seed));
      return failure();
    }
    if (rows) {
      int64_t indexRank = tensorOf(rows.getIndices()).getRank();
      newSplits.push_back({rows.getResult(), {dim, where->second, s.seed, {}}});
      dim = dim < (int64_t)rows.getAxis() ? dim : dim - indexRank + 1;
    }
    int64_t axis = w->transpose ? w->transpose.getPerm()[dim] : dim;
    if (w->stack && axis == 0) // the experts (expert parallelism's axis)
      return failure();
    newParams.push_back({*w, op, axis, where->second, s.seed});
  }
  SmallVector<std::pair<Value, Split>> results;
  for (auto [r, factors] : llvm::zip(op->getResults(), rule->results)) {
    if (auto where = rule->find(factors, *fs)) {
      Split rs{where->first, where->second, s.seed};
      if (s.blocks == 1 && where->second == 1) // the same block of a ragged seed
        rs.block = s.block;
      results.push_back({r, rs});
    } else if (kind == FactorKind::Parallel) {
      return failure();
    }
  }
  params.append(newParams);
  replicatedReads.append(newReads);
  scatteredReads.append(newScattered);
  for (auto [r, rs] : newSplits)
    split[r] = rs;
  for (auto [r, rs] : results)
    split[r] = rs;
  if (kind == FactorKind::Reduction || kind == FactorKind::Mean)
    partials.push_back({op, s.seed, kind == FactorKind::Mean});
  if (sums)
    statistics.push_back({op, s.seed});
  return success();
}

LogicalResult Walk::joinParts(ConcatOp cat, const Split &s) {
  int64_t rank = tensorOf(cat.getResult()).getRank();
  int64_t axis = cat.getAxis() < 0 ? cat.getAxis() + rank : cat.getAxis();
  if (axis != s.dim || s.blocks != 1 || !s.sizes.empty())
    return failure();
  SmallVector<int64_t> sizes;
  for (Value part : cat.getInputs()) {
    auto it = split.find(part);
    if (it == split.end() || it->second.dim != axis || it->second.blocks != 1 ||
        !it->second.sizes.empty())
      return failure();
    sizes.push_back(tensorOf(part).getDimSize(axis));
  }
  Split joined{axis, (int64_t)sizes.size(), s.seed};
  if (!llvm::all_equal(sizes))
    joined.sizes = sizes;
  split[cat.getResult()] = joined;
  return success();
}

LogicalResult Walk::takeRaggedApart(Operation *op, const Split &s) {
  // The run of blocks [first, first + count) covering [start, start + len).
  auto run = [&](int64_t start, int64_t len) -> std::optional<std::pair<int64_t, int64_t>> {
    int64_t at = 0, first = -1;
    for (auto [i, n] : llvm::enumerate(s.sizes)) {
      if (at == start)
        first = i;
      at += n;
      if (first >= 0 && at == start + len)
        return std::make_pair(first, (int64_t)i + 1 - first);
    }
    return std::nullopt;
  };
  auto partOf = [&](int64_t first, int64_t count) {
    Split part{s.dim, 1, s.seed, {}, s.block < 0 ? -1 : s.block + first};
    if (count > 1)
      part.sizes.assign(s.sizes.begin() + first, s.sizes.begin() + first + count);
    return part;
  };
  if (auto cut = dyn_cast<SplitOp>(op)) {
    if ((int64_t)cut.getAxis() != s.dim)
      return failure();
    SmallVector<Split> parts;
    int64_t start = 0;
    for (int64_t len : cut.getSizes()) {
      auto blocks = run(start, len);
      if (!blocks)
        return failure();
      parts.push_back(partOf(blocks->first, blocks->second));
      start += len;
    }
    for (auto [r, part] : llvm::zip(cut.getResults(), parts))
      split[r] = part;
    return success();
  }
  auto slice = cast<SliceOp>(op);
  ArrayRef<int64_t> in = tensorOf(slice.getInput()).getShape();
  for (auto [d, size] : llvm::enumerate(in))
    if (slice.getStrides()[d] != 1 ||
        ((int64_t)d != s.dim && (slice.getStarts()[d] != 0 || slice.getLimits()[d] != size)))
      return failure();
  int64_t start = slice.getStarts()[s.dim];
  auto blocks = run(start, slice.getLimits()[s.dim] - start);
  if (!blocks)
    return failure();
  raggedSlices.push_back({slice, start});
  split[slice.getResult()] = partOf(blocks->first, blocks->second);
  return success();
}

LogicalResult Walk::propagateRagged(Operation *op, unsigned index, const Split &s) {
  auto slice = dyn_cast<SliceOp>(op);
  if (isa<SplitOp>(op) ||
      (slice && (slice.getStarts()[s.dim] != 0 || slice.getStrides()[s.dim] != 1 ||
                 slice.getLimits()[s.dim] != tensorOf(slice.getInput()).getDimSize(s.dim))))
    return takeRaggedApart(op, s);
  // Positions (a dropout mask) are recorded in equal blocks only.
  auto iface = dyn_cast<ShardingRuleOpInterface>(op);
  std::optional<ShardingRule> rule =
      iface && !iface.dependsOnPosition() ? iface.getShardingRule() : std::optional<ShardingRule>();
  std::optional<ShardingRule::FactorSplit> fs =
      rule ? rule->locate(rule->operands[index], s.dim, 1) : std::nullopt;
  if (!fs || rule->factors[fs->factor].kind != FactorKind::Parallel)
    return failure();
  // The factor is the whole dimension wherever it appears.
  auto whole =
      [&](const ShardingRule::TensorFactors &factors) -> std::optional<std::optional<int64_t>> {
    auto where = rule->find(factors, *fs);
    if (!where)
      return std::optional<int64_t>();
    if (where->second != 1 || factors[where->first].size() != 1)
      return std::nullopt;
    return std::optional<int64_t>(where->first);
  };
  SmallVector<ParamShard> newParams;
  SmallVector<OpOperand *> newReads;
  SmallVector<ScatteredRead> newScattered;
  for (auto [use, factors] : llvm::zip(op->getOpOperands(), rule->operands)) {
    Value v = use.get();
    auto dim = whole(factors);
    if (!dim)
      return failure();
    if (auto it = split.find(v); it != split.end()) {
      if (*dim != it->second.dim || it->second.sizes != s.sizes || it->second.block != s.block)
        return failure();
      continue;
    }
    if (!*dim) {
      if (isa<FloatType>(getElementTypeOrSelf(v.getType())) && !v.getDefiningOp<ConstantOp>())
        newReads.push_back(&use);
      continue;
    }
    int64_t blocks = s.sizes.size();
    if (std::optional<Weight> w = soleParam(v); w && !w->stack) {
      int64_t axis = w->transpose ? w->transpose.getPerm()[**dim] : **dim;
      newParams.push_back({*w, op, axis, blocks, s.seed, s.sizes});
    } else if (auto viewed = viewedParam(v, **dim);
               viewed && !viewed->first.merges(viewed->second)) {
      newParams.push_back({viewed->first, op, viewed->second, blocks, s.seed, s.sizes});
    } else if (isSplatConstant(v)) {
      // Equal everywhere (dynamo's zeros for a convolution without a bias):
      // any part of the right length is this rank's.
      newScattered.push_back({&use, **dim, 1});
    } else {
      return failure();
    }
  }
  SmallVector<std::pair<Value, int64_t>> results;
  for (auto [r, factors] : llvm::zip(op->getResults(), rule->results)) {
    auto dim = whole(factors);
    if (!dim || !*dim)
      return failure();
    results.push_back({r, **dim});
  }
  params.append(newParams);
  replicatedReads.append(newReads);
  scatteredReads.append(newScattered);
  for (auto [r, dim] : results)
    split[r] = {dim, 1, s.seed, s.sizes, s.block};
  return success();
}

void Walk::run(func::FuncOp fn) {
  DenseMap<Operation *, int> seedOf;
  for (auto [i, s] : llvm::enumerate(seeds))
    if (s.alive)
      seedOf[s.matmul] = i;
  for (Operation &op : fn.getBody().front()) {
    auto seedIt = seedOf.find(&op);
    if (seedIt != seedOf.end() && !split.count(op.getOperand(seeds[seedIt->second].input()))) {
      Seed &s = seeds[seedIt->second];
      split[s.matmul->getResult(0)] = {s.dim(), s.blocks, seedIt->second, s.sizes,
                                       s.sizes.empty() ? -1 : 0};
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

namespace {
/// Resolves the walk's failed regions (all of them with `waitingToo`, else
/// those that did not stop at an activation another region might split):
/// a region of one seed retries with the blocks it asked for (equal, or
/// ragged ones that divide over tp); the others' seeds are given up.
/// Whether any was resolved.
bool resolveFailures(Walk &walk, SmallVector<Seed> &seeds, int64_t tp, bool waitingToo) {
  bool changed = false;
  DenseMap<int, SmallVector<int>> conflicts; // by the region's final root
  for (auto &[region, disagreeing] : walk.conflicts)
    conflicts[walk.root(region)].append(disagreeing);
  DenseSet<int> conflicted;
  for (auto &[region, retry] : walk.failedRegions) {
    if (!waitingToo && walk.waiting.count(region))
      continue;
    changed = true;
    // Regions that met with different splits: the seeds that disagreed
    // with the op's first split operand go first (a multi-query
    // attention's key and value projections, so that its queries split by
    // heads, the one key head read whole, as Megatron-LM replicates key
    // heads fewer than tp); the others walk again.
    if (auto c = conflicts.find(walk.root(region)); c != conflicts.end()) {
      if (conflicted.insert(c->first).second)
        for (int m : c->second)
          seeds[m].alive = false;
      continue;
    }
    SmallVector<int> members;
    for (int m : walk.regions.members(region))
      members.push_back(m);
    Seed *only = members.size() == 1 ? &seeds[members[0]] : nullptr;
    if (only && only->blocks == 1 && retry.blocks > 1) {
      only->blocks = retry.blocks;
      continue;
    }
    // (Ragged blocks are in the output's units: a seed whose weight is a
    // merging view, XLNet's [H, N * D], takes none.)
    bool divides = !retry.sizes.empty() && !(only && only->weight.merges(only->weight.outAxis())) &&
                   llvm::all_of(retry.sizes, [&](int64_t n) { return n % tp == 0; });
    if (only && only->blocks == 1 && divides && retry.block < 0) {
      only->sizes = retry.sizes;
      only->blocks = retry.sizes.size();
      continue;
    }
    // One of its ragged blocks cut apart further: those parts become blocks.
    if (only && divides && retry.block >= 0 && retry.block < (int64_t)only->sizes.size() &&
        only->sizes[retry.block] == llvm::sum_of(retry.sizes)) {
      auto at = only->sizes.begin() + retry.block;
      at = only->sizes.erase(at);
      only->sizes.insert(at, retry.sizes.begin(), retry.sizes.end());
      only->blocks = only->sizes.size();
      continue;
    }
    // Parts a fused projection is cut into that do not divide by tp (GQA's
    // key heads, Mamba-2's groups): said, as pruneIndivisibleRagged does.
    if (only && !retry.sizes.empty() && !divides) {
      InFlightDiagnostic d = only->matmul->emitRemark("merak-tensor-parallel: '")
                             << only->weight.param.getSymName()
                             << "' stays whole: its parts along the split dimension (";
      llvm::interleaveComma(retry.sizes, d);
      d << ") do not all divide by tp=" << tp;
    }
    for (int m : members)
      seeds[m].alive = false;
  }
  return changed;
}

/// Gives up the consistent regions that would not pay: one without a
/// row-parallel end (it would only add communication), and one that sums
/// a norm's statistics but is not a Megatron block, whose columns read one
/// value (the block's input) and whose ends are no wider than it and do
/// not widen what they contract: such a norm on a residual stream would
/// split the stream across blocks, and one on an LM head's transform or a
/// low-rank projection would all-reduce more than it saves (the latent
/// query of DeepSeek-V3 and Mistral 4, `q_b(norm(q_a(x)))`: q_a narrows,
/// q_b widens its rank back; the heads split at q_b instead). Failed
/// regions are left to resolveFailures. Whether any was given up.
bool prune(Walk &walk, SmallVector<Seed> &seeds) {
  DenseMap<int, int64_t> widestEnd;
  DenseSet<int> widening;
  for (Partial &p : walk.partials) {
    int64_t &w = widestEnd[walk.root(p.seed)];
    w = std::max(w, elements(p.op->getResult(0)));
    // (The split activation it contracts: a weight split upstream through
    // views, XLNet's o, may hold fewer elements than the tokens' output.)
    if (llvm::any_of(p.op->getOperands(), [&](Value v) {
          return walk.split.count(v) && (!walk.activations || walk.activations->contains(v)) &&
                 elements(v) < elements(p.op->getResult(0));
        }))
      widening.insert(walk.root(p.seed));
  }
  DenseSet<Operation *> columns(walk.columns.begin(), walk.columns.end());
  DenseMap<int, Value> inputOf; // null: the columns read several values
  for (auto [i, s] : llvm::enumerate(seeds))
    if (columns.contains(s.matmul)) {
      Value input = s.matmul->getOperand(s.input());
      auto [it, fresh] = inputOf.try_emplace(walk.root(i), input);
      if (!fresh && it->second != input)
        it->second = Value();
    }
  DenseSet<int> summing;
  for (auto [op, seed] : walk.statistics)
    summing.insert(walk.root(seed));
  bool changed = false;
  for (auto [i, s] : llvm::enumerate(seeds)) {
    int root = walk.root(i);
    if (!columns.contains(s.matmul) || walk.failedRegions.count(root))
      continue;
    Value input = inputOf.lookup(root);
    bool block = input && widestEnd.lookup(root) <= elements(input) && !widening.contains(root);
    if (!widestEnd.count(root) || (summing.contains(root) && !block))
      s.alive = false, changed = true;
  }
  return changed;
}

/// Gives up the regions with ragged blocks (a fused projection whose parts
/// the walk found, or parts joined) in which a split dimension does not
/// divide by tp: the parts' heads or groups do not (Mamba-2's 2 groups at
/// tp 4), and the layer stays whole, with a remark. In a region of equal
/// blocks that is the user's error, reported after the walk. Whether any
/// was given up.
bool pruneIndivisibleRagged(Walk &walk, SmallVector<Seed> &seeds, int64_t tp) {
  DenseSet<int> ragged, indivisible;
  for (auto &[v, s] : walk.split) {
    if (!s.sizes.empty())
      ragged.insert(walk.root(s.seed));
    else if (!s.divides(v, tp))
      indivisible.insert(walk.root(s.seed));
  }
  if (ragged.empty())
    return false;
  for (ParamShard &p : walk.params)
    if (!p.divides(tp))
      indivisible.insert(walk.root(p.seed));
  bool changed = false;
  for (auto [i, s] : llvm::enumerate(seeds)) {
    int root = walk.root(i);
    if (!s.alive || !ragged.contains(root) || !indivisible.contains(root))
      continue;
    if (root == (int)i)
      s.matmul->emitRemark("merak-tensor-parallel: '")
          << s.weight.param.getSymName() << "' and its block stay whole: its parts (heads or "
          << "groups) do not divide by tp=" << tp;
    s.alive = false;
    changed = true;
  }
  return changed;
}
} // namespace

std::unique_ptr<Walk> tensor_parallel::planRegions(func::FuncOp fn, SmallVector<Seed> &seeds,
                                                   const Getters &getters, int64_t tp) {
  DenseSet<Value> fromInputs(fn.getArguments().begin(), fn.getArguments().end()), fromParams,
      activations;
  for (Operation &op : fn.getBody().front()) {
    auto reads = [&](const DenseSet<Value> &set) {
      return llvm::any_of(op.getOperands(), [&](Value v) { return set.contains(v); });
    };
    if (reads(fromInputs))
      fromInputs.insert(op.result_begin(), op.result_end());
    if (isa<GetParamOp>(op) || reads(fromParams))
      fromParams.insert(op.result_begin(), op.result_end());
    if (reads(activations) || (reads(fromInputs) && reads(fromParams)))
      activations.insert(op.result_begin(), op.result_end());
  }
  // Each round gives up or retries at least one region, so this ends. A
  // region waiting for another's split (queries meeting keys) is given up
  // only after the definite failures and the pruning, which may seed the
  // Linear it waits for (DeepSeek-V3's key heads behind the low-rank
  // query projection's region).
  while (true) {
    auto walk = std::make_unique<Walk>(seeds, getters, &activations);
    walk->run(fn);
    if (resolveFailures(*walk, seeds, tp, /*waitingToo=*/false) || prune(*walk, seeds) ||
        resolveFailures(*walk, seeds, tp, /*waitingToo=*/true) ||
        pruneIndivisibleRagged(*walk, seeds, tp))
      continue;
    walk->activations = nullptr;
    return walk;
  }
}
