//===- TensorParallelWalk.cpp - merak-tensor-parallel's regions -----------===//
//
// The forward walk of merak-tensor-parallel (see TensorParallel.cpp): a
// seed's result is split; each op reading a split value passes it on by
// its sharding rule (propagate), or fails its region; failed regions are
// retried with the blocks a fused projection asks for, or given up, until
// the walk is consistent (planRegions, TensorParallelPlan.cpp). An
// activation a split op reads holding the split factor is split where it
// is computed when it can be
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

/// `g`'s axis, counted from the front of its data's dimensions.
int64_t gatherAxis(GatherOp g) {
  int64_t axis = g.getAxis();
  return axis < 0 ? axis + tensorOf(g.getData()).getRank() : axis;
}

/// The positions [start, start + count) that `pick` takes from its data
/// along its axis, when that is `dim` and its indices are constant and
/// consecutive (Falcon's key and value heads picked from the fused
/// projection viewed as heads); none otherwise.
std::optional<std::pair<int64_t, int64_t>> pickedRun(GatherOp pick, int64_t dim) {
  auto c = pick.getIndices().getDefiningOp<ConstantOp>();
  auto values = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
  if (gatherAxis(pick) != dim || !values || values.getNumElements() == 0)
    return std::nullopt;
  int64_t n = tensorOf(pick.getData()).getDimSize(dim), start = 0, count = 0;
  for (const APInt &x : values) {
    int64_t i = x.getSExtValue() < 0 ? x.getSExtValue() + n : x.getSExtValue();
    if (count == 0)
      start = i;
    if (i != start + count++ || i < 0 || i >= n)
      return std::nullopt;
  }
  return std::make_pair(start, count);
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

/// Appends the ranges [start, start + length) of `v` along `dim` that its
/// readers take: slices (stride 1, whole elsewhere), one split along `dim`,
/// gathers of constant consecutive positions along it (pickedRun), and the
/// same behind transposes. False for any other reader.
bool pickedRanges(Value v, int64_t dim, SmallVectorImpl<std::pair<int64_t, int64_t>> &ranges) {
  for (Operation *user : v.getUsers()) {
    if (auto cut = dyn_cast<SplitOp>(user)) {
      if (!v.hasOneUse() || (int64_t)cut.getAxis() != dim)
        return false;
      int64_t start = 0;
      for (int64_t len : cut.getSizes())
        ranges.push_back({start, len}), start += len;
    } else if (auto pick = dyn_cast<GatherOp>(user)) {
      std::optional<std::pair<int64_t, int64_t>> run = pickedRun(pick, dim);
      if (!run || pick.getData() != v)
        return false;
      ranges.push_back(*run);
    } else if (auto t = dyn_cast<TransposeOp>(user)) {
      if (!pickedRanges(t.getResult(), llvm::find(t.getPerm(), dim) - t.getPerm().begin(), ranges))
        return false;
    } else if (auto slice = dyn_cast<SliceOp>(user)) {
      ArrayRef<int64_t> in = tensorOf(v).getShape();
      for (auto [d, size] : llvm::enumerate(in)) {
        int64_t start = slice.getStarts()[d], limit = slice.getLimits()[d];
        if (slice.getStrides()[d] != 1 || ((int64_t)d != dim && (start != 0 || limit != size)))
          return false;
      }
      ranges.push_back({slice.getStarts()[dim], slice.getLimits()[dim] - slice.getStarts()[dim]});
    } else {
      return false;
    }
  }
  return true;
}

/// The parts `v` is cut into along `dim` when its readers (pickedRanges)
/// cover it exactly in contiguous ranges of different lengths (with
/// `equalToo`, of any lengths); empty otherwise.
SmallVector<int64_t> raggedParts(Value v, int64_t dim, bool equalToo = false) {
  int64_t n = tensorOf(v).getDimSize(dim);
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  if (!pickedRanges(v, dim, ranges))
    return {};
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
  int64_t axis = gatherAxis(g);
  int64_t indexRank = tensorOf(g.getIndices()).getRank();
  if (dim >= axis && dim < axis + indexRank)
    return {};
  return g;
}

void Walk::fail(int seed, int64_t whole) {
  if (!failedRegions.count(root(seed)))
    failedRegions[root(seed)].whole = whole;
}

void Walk::ask(int seed, Retry retry) {
  Retry &asked = failedRegions[root(seed)];
  if (!asked.blocks && asked.sizes.empty() && asked.whole < 0)
    asked = std::move(retry);
}

void Walk::askRetry(Operation *op, unsigned index, const ShardingRule &rule,
                    const ShardingRule::FactorSplit &fs, const Split &s) {
  // (The last that applies: ragged parts over equal ones.)
  std::optional<Retry> retry;
  // A fused projection split into equal parts: retry its seed with
  // blocks = parts so that every rank holds its share of each part.
  if (int64_t blocks = rule.blocksPastReplicated(rule.operands[index], s.dim, fs);
      blocks && s.blocks == 1)
    retry = Retry{blocks, {}};
  // A fused projection reshaped to [..., parts, n] whose parts are
  // picked by index (PyTorch's nn.MultiheadAttention: q, k, v as
  // gathers of [3, ...]): the split landed on the parts; retry the
  // seed with blocks = parts, which puts it on n.
  if (auto pick = dyn_cast<GatherOp>(op);
      pick && index == 0 && s.blocks == 1 && (int64_t)pick.getAxis() == s.dim)
    if (int64_t parts = tensorOf(pick.getData()).getDimSize(s.dim); parts > 1)
      retry = Retry{parts, {}};
  // Parts of different lengths: retry with ragged blocks; a ragged
  // seed's block cut into parts of any lengths: retry with those parts as
  // its blocks.
  if (s.blocks == 1 && isa<SliceOp, SplitOp>(op))
    if (SmallVector<int64_t> sizes = raggedParts(op->getOperand(index), s.dim, s.block >= 0);
        !sizes.empty())
      retry = Retry{0, sizes, s.block};
  if (retry)
    ask(s.seed, *retry);
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
        // Two blocks of one ragged seed split differently (the queries by
        // heads, a multi-query key inside its head): the narrower is
        // retried whole.
        const Split &o = it->second;
        if (o.seed == s.seed && s.sizes.empty() && o.sizes.empty() && s.block >= 0 &&
            o.block >= 0 && o.block != s.block) {
          ArrayRef<int64_t> sizes = seeds[s.seed].sizes;
          fail(s.seed, sizes[o.block] < sizes[s.block] ? o.block : s.block);
        }
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
  for (auto [r, rs] : newSplits) {
    split[r] = rs;
    wholeValues.erase(r); // (computed from whole blocks: split from here)
  }
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
  auto isWhole = [&](int64_t i) { return !s.whole.empty() && s.whole[i]; };
  // A part of whole blocks only is replicated (wholeValues), one with some
  // stays ragged.
  auto partOf = [&](int64_t first, int64_t count) -> std::optional<Split> {
    Split part{s.dim, 1, s.seed, {}, {}, s.block < 0 ? -1 : s.block + first};
    int64_t wholeBlocks = llvm::count_if(llvm::seq(first, first + count), isWhole);
    if (wholeBlocks == count)
      return std::nullopt;
    if (count > 1)
      part.sizes.assign(s.sizes.begin() + first, s.sizes.begin() + first + count);
    if (count > 1 && wholeBlocks)
      part.whole.assign(s.whole.begin() + first, s.whole.begin() + first + count);
    return part;
  };
  auto place = [&](Value r, std::optional<Split> part) {
    if (part)
      split[r] = *part;
    else
      wholeValues[r] = s.seed;
  };
  if (auto cut = dyn_cast<SplitOp>(op)) {
    if ((int64_t)cut.getAxis() != s.dim)
      return failure();
    SmallVector<std::optional<Split>> parts;
    int64_t start = 0;
    for (int64_t len : cut.getSizes()) {
      auto blocks = run(start, len);
      if (!blocks)
        return failure();
      parts.push_back(partOf(blocks->first, blocks->second));
      start += len;
    }
    for (auto [r, part] : llvm::zip(cut.getResults(), parts))
      place(r, part);
    return success();
  }
  // The lengths of the split and the whole blocks before block `first`.
  auto before = [&](int64_t first) {
    RaggedCut at{op, 0, 0};
    for (int64_t i = 0; i < first; ++i)
      (isWhole(i) ? at.wholeBefore : at.splitBefore) += s.sizes[i];
    return at;
  };
  if (auto pick = dyn_cast<GatherOp>(op)) {
    // Positions picked by index: whole blocks only (one picked position
    // cannot split over tp); a block still split is asked to be whole.
    std::optional<std::pair<int64_t, int64_t>> picked = pickedRun(pick, s.dim);
    auto blocks = picked ? run(picked->first, picked->second) : std::nullopt;
    if (!blocks)
      return failure();
    if (partOf(blocks->first, blocks->second)) {
      if (blocks->second == 1 && s.block >= 0)
        fail(s.seed, s.block + blocks->first);
      return failure();
    }
    raggedCuts.push_back(before(blocks->first));
    wholeValues[pick.getResult()] = s.seed;
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
  raggedCuts.push_back(before(blocks->first));
  place(slice.getResult(), partOf(blocks->first, blocks->second));
  return success();
}

LogicalResult Walk::viewRagged(ReshapeOp view, const Split &s) {
  ArrayRef<int64_t> from = tensorOf(view.getInput()).getShape(),
                    to = tensorOf(view.getResult()).getShape();
  std::optional<int64_t> at = viewedDimension(from, to, s.dim);
  if (!at)
    return failure();
  // A block of n along the leading dimension of a group is n * to / from
  // along the other's: its elements are the same run.
  SmallVector<int64_t> sizes;
  for (int64_t n : s.sizes) {
    if (n * to[*at] % from[s.dim])
      return failure();
    sizes.push_back(n * to[*at] / from[s.dim]);
  }
  split[view.getResult()] = {*at, 1, s.seed, sizes, s.whole, s.block};
  return success();
}

LogicalResult Walk::propagateRagged(Operation *op, unsigned index, const Split &s) {
  auto slice = dyn_cast<SliceOp>(op);
  auto pick = dyn_cast<GatherOp>(op);
  if (isa<SplitOp>(op) || (pick && index == 0 && pickedRun(pick, s.dim)) ||
      (slice && (slice.getStarts()[s.dim] != 0 || slice.getStrides()[s.dim] != 1 ||
                 slice.getLimits()[s.dim] != tensorOf(slice.getInput()).getDimSize(s.dim))))
    return takeRaggedApart(op, s);
  if (auto view = dyn_cast<ReshapeOp>(op))
    return viewRagged(view, s);
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
      if (*dim != it->second.dim || it->second.sizes != s.sizes || it->second.block != s.block ||
          it->second.whole != s.whole)
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
      newParams.push_back({*w, op, axis, blocks, s.seed, s.sizes, s.whole});
    } else if (auto viewed = viewedParam(v, **dim);
               viewed && !viewed->first.merges(viewed->second)) {
      newParams.push_back({viewed->first, op, viewed->second, blocks, s.seed, s.sizes, s.whole});
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
    split[r] = {dim, 1, s.seed, s.sizes, s.whole, s.block};
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
      split[s.matmul->getResult(0)] = {s.dim(), s.blocks, seedIt->second,
                                       s.sizes, s.whole,  s.sizes.empty() ? -1 : 0};
      columns.push_back(s.matmul);
      continue;
    }
    // A seed whose input is split is row-parallel in this walk only: if
    // that region fails, the next walk seeds it again (ELECTRA's q, k, v
    // read a projected embedding whose own region stops at a layer norm).
    std::optional<Split> first;
    unsigned firstIndex = 0;
    std::optional<int> wholeSeed;
    for (auto [i, v] : llvm::enumerate(op.getOperands())) {
      std::optional<int> seed;
      if (auto it = split.find(v); it != split.end()) {
        seed = it->second.seed;
        if (!first)
          first = it->second, firstIndex = i;
      } else if (auto w = wholeValues.find(v); w != wholeValues.end()) {
        seed = w->second;
        wholeSeed = wholeSeed.value_or(w->second);
      }
      if (std::optional<int> other = first ? first->seed : wholeSeed; seed && other)
        regions.unionSets(*other, *seed);
    }
    if (!first) {
      if (wholeSeed)
        carryWhole(&op, *wholeSeed);
      continue;
    }
    // One block of a ragged seed that cannot be split here (a key head cut
    // inside the head) is retried whole.
    if (failed(propagate(&op, firstIndex, *first)))
      fail(first->seed, first->sizes.empty() ? first->block : -1);
  }
}

void Walk::carryWhole(Operation *op, int seed) {
  if (op->getNumResults() == 0 || op->hasTrait<OpTrait::IsTerminator>())
    return fail(seed);
  for (Value r : op->getResults())
    wholeValues[r] = seed;
  // Each rank's gradient of the other values read here is partial too.
  for (OpOperand &use : op->getOpOperands())
    if (!wholeValues.count(use.get()) &&
        isa<FloatType>(getElementTypeOrSelf(use.get().getType())) &&
        !use.get().getDefiningOp<ConstantOp>())
      replicatedReads.push_back(&use);
}
