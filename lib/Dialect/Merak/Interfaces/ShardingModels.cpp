//===- ShardingModels.cpp - the sharding rule of each merak op -----------===//
//
// One `rule` overload per op (or per op family sharing a shape), attached as
// ShardingRuleOpInterface external models (see ShardingRule.h for what a
// factor is). The rules:
//
//   elementwise (binary, where, unary, cast, dropout, broadcast, tp_identity)
//       every result dim a parallel factor; operands broadcast numpy-style
//   softmax, log_softmax, cumsum, argsort   the axis replicated (argsort's
//                               result holds positions along it: positionsIn)
//   selective_scan [B, D, T], [D, N], [B, T, N]   B, D parallel; T, N
//                               replicated
//   layer_norm, rms_norm        the normalised dims [axis, rank) replicated;
//                               a split of them is kept by summing the
//                               statistics over the ranks (NormStatistics)
//   reduce_sum                  reduced dims are reduction factors
//   reduce_mean/max/min/prod    reduced dims combined (argmax/argmin too)
//   matmul  [b.., M, K] x [b.., K, N] -> [b.., M, N]  K a reduction factor
//   transpose                   a permutation of the input's factors
//   reshape                     the common refinement of the two shapes
//   split   equal parts:        axis = [part selector (replicated), rest]
//   concat, slice, gather       the axis (sliced dims) replicated; a slice
//                               that is one of n equal parts of a dim: as
//                               split (torch.chunk exported as slices); every
//                               k-th element: [elements parallel, phase k
//                               replicated]
//   cross_entropy               class axis replicated; "none" keeps the
//                               other dims, "sum" reduces them, "mean"
//                               combines them (its divisor is the count)
//   attention (heads-first)     batch and heads parallel (a bias's where it
//                               does not broadcast); T, S, D replicated
//   conv2d [N, C, H, W] * [O, C/g, kh, kw]   N parallel; with one group O
//                               parallel and C a reduction (replicated
//                               with several); depthwise (g = C = O) C
//                               parallel; the windows replicated
//   conv2d_backward_data        the same with O and C exchanged
//   max_pool2d, avg_pool2d      N, C parallel; the windows replicated
//   batch_norm                  C parallel; in training N and the spatial
//                               dims replicated (the batch statistics)
//   gather_elements             indices and result share their dims (the
//                               data's, where the sizes agree); the data's
//                               axis replicated
//   gather_grad (scatter-add)   the indices' dims reductions; the result's
//                               axis replicated
//   (gathers and scatters: the table's axis is read or written at the
//   positions the indices hold: addressedBy)
//   gather_elements_grad        grad and indices share their dims with the
//                               result where the sizes agree; their axis a
//                               reduction, the result's replicated
//   expert_matmul  [S, K] x [E, O, K] -> [S, O]   rows S parallel, K a
//                               reduction, O parallel, the experts E
//                               replicated (chosen per row)
//   expert_matmul_grad_weight   rows S a reduction (summed per expert); K,
//                               O parallel; E replicated
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Interfaces/ShardingModels.h"

#include "NormStatistics.h"

#include "merak/Dialect/Merak/IR/MerakDialect.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
using Rule = std::optional<ShardingRule>;
using TensorFactors = ShardingRule::TensorFactors;

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

int64_t normalise(int64_t axis, Value v) {
  return axis < 0 ? axis + (int64_t)shapeOf(v).size() : axis;
}

/// Builds rules whose operands and results share factors dimension by
/// dimension, with some dimensions given their own factors.
struct RuleBuilder {
  ShardingRule rule;

  unsigned factor(int64_t size, FactorKind kind) {
    rule.factors.push_back({size, kind});
    return rule.factors.size() - 1;
  }
  /// One factor per dimension of `v`; `kindOf(d)` gives each one's kind.
  template <typename KindFn>
  SmallVector<unsigned> factorsOf(Value v, KindFn kindOf) {
    SmallVector<unsigned> fs;
    for (auto [d, size] : llvm::enumerate(shapeOf(v)))
      fs.push_back(factor(size, kindOf(d)));
    return fs;
  }
  static TensorFactors tensor(ArrayRef<unsigned> dimFactors) {
    TensorFactors t;
    for (unsigned f : dimFactors)
      t.push_back({f});
    return t;
  }
};

ShardingRule elementwiseAxis(Operation *op, int64_t axis) {
  return ShardingRule::elementwiseExcept(op, {normalise(axis, op->getResult(0))});
}

/// Reductions over `axes` of the input (with or without kept size-1 dims).
ShardingRule reduction(Operation *op, ArrayRef<int64_t> axes, bool keepdims,
                       FactorKind reducedKind) {
  RuleBuilder b;
  Value in = op->getOperand(0);
  auto reduced = [&](int64_t d) {
    return llvm::any_of(axes, [&](int64_t a) { return normalise(a, in) == d; });
  };
  SmallVector<unsigned> fs =
      b.factorsOf(in, [&](int64_t d) { return reduced(d) ? reducedKind : FactorKind::Parallel; });
  TensorFactors result;
  for (auto [d, f] : llvm::enumerate(fs)) {
    if (!reduced(d))
      result.push_back({f});
    else if (keepdims)
      result.push_back({});
  }
  b.rule.operands.push_back(RuleBuilder::tensor(fs));
  b.rule.results.push_back(std::move(result));
  return b.rule;
}

/// Ops whose operands and results have the same dims except along `axis`,
/// where each gets a replicated factor of its own.
ShardingRule sharedExceptAxis(Operation *op, int64_t axis) {
  RuleBuilder b;
  Value first = op->getNumOperands() ? op->getOperand(0) : op->getResult(0);
  SmallVector<unsigned> shared = b.factorsOf(first, [](int64_t) { return FactorKind::Parallel; });
  auto withOwnAxis = [&](Value v) {
    TensorFactors t = RuleBuilder::tensor(shared);
    t[axis] = {b.factor(shapeOf(v)[axis], FactorKind::Replicated)};
    return t;
  };
  for (Value v : op->getOperands())
    b.rule.operands.push_back(withOwnAxis(v));
  for (Value v : op->getResults())
    b.rule.results.push_back(withOwnAxis(v));
  return b.rule;
}

//===----------------------------------------------------------------------===//
// The rules.
//===----------------------------------------------------------------------===//

// clang-format off
#define MERAK_SHARDING_ELEMENTWISE_OPS(X)                                      \
  X(AddOp) X(SubOp) X(MulOp) X(DivOp) X(PowOp) X(MaxOp) X(MinOp) X(RemOp)      \
  X(EqOp) X(NeOp) X(LtOp) X(LeOp) X(GtOp) X(GeOp) X(AndOp) X(OrOp) X(XorOp)    \
  X(BitAndOp) X(BitOrOp) X(BitXorOp) X(ShiftLeftOp) X(ShiftRightOp) X(BitNotOp) \
  X(WhereOp) X(ExpOp) X(LogOp) X(SqrtOp) X(RsqrtOp) X(TanhOp) X(ErfOp)         \
  X(SigmoidOp) X(SoftplusOp) X(ReciprocalOp) X(SinOp) X(CosOp) X(FloorOp)      \
  X(AsinOp) X(AcosOp) X(AtanOp) X(Expm1Op) X(Log1pOp)                          \
  X(CeilOp) X(ReluOp) X(NegOp) X(AbsOp) X(SignOp) X(NotOp) X(GeluOp)           \
  X(LeakyReluOp) X(ClampOp) X(CastOp) X(DropoutOp) X(BroadcastOp)              \
  X(TpIdentityOp)
// clang-format on

#define MERAK_SHARDING_ELEMENTWISE_RULE(OP)                                    \
  Rule rule(OP op) { return ShardingRule::elementwise(op); }
MERAK_SHARDING_ELEMENTWISE_OPS(MERAK_SHARDING_ELEMENTWISE_RULE)
#undef MERAK_SHARDING_ELEMENTWISE_RULE

Rule rule(SoftmaxOp op) { return elementwiseAxis(op, op.getAxis()); }
Rule rule(LogSoftmaxOp op) { return elementwiseAxis(op, op.getAxis()); }
Rule rule(CumSumOp op) { return elementwiseAxis(op, op.getAxis()); }
Rule rule(ArgSortOp op) {
  ShardingRule r = elementwiseAxis(op, op.getAxis());
  r.positionsIn.push_back({r.results[0][normalise(op.getAxis(), op.getInput())][0], 0});
  return r;
}
Rule rule(LinearScanOp op) { return elementwiseAxis(op, op.getAxis()); }

/// u, delta, result [B, D, T]; a [D, N]; b, c [B, T, N]: the batch and the
/// channels parallel (b and c are read whole by every channel), the tokens
/// (the recurrence) and the states replicated.
Rule rule(SelectiveScanOp op) {
  RuleBuilder b;
  ArrayRef<int64_t> u = shapeOf(op.getU());
  unsigned batch = b.factor(u[0], FactorKind::Parallel);
  unsigned channels = b.factor(u[1], FactorKind::Parallel);
  unsigned tokens = b.factor(u[2], FactorKind::Replicated);
  unsigned states = b.factor(shapeOf(op.getA())[1], FactorKind::Replicated);
  TensorFactors rows = RuleBuilder::tensor({batch, channels, tokens});
  TensorFactors perToken = RuleBuilder::tensor({batch, tokens, states});
  b.rule.operands = {rows, rows, RuleBuilder::tensor({channels, states}), perToken, perToken};
  b.rule.results = {rows};
  return b.rule;
}

template <typename NormOp>
Rule normRule(NormOp op) {
  int64_t rank = shapeOf(op.getResult()).size();
  SmallVector<int64_t> normalised;
  for (int64_t d = normalise(op.getAxis(), op.getResult()); d < rank; ++d)
    normalised.push_back(d);
  return ShardingRule::elementwiseExcept(op, normalised);
}
Rule rule(LayerNormOp op) { return normRule(op); }
Rule rule(RmsNormOp op) { return normRule(op); }

Rule rule(ReduceSumOp op) {
  return reduction(op, op.getAxes(), op.getKeepdims(), FactorKind::Reduction);
}
Rule rule(ReduceMeanOp op) {
  return reduction(op, op.getAxes(), op.getKeepdims(), FactorKind::Mean);
}
#define MERAK_SHARDING_COMBINED_REDUCE_RULE(OP)                                                    \
  Rule rule(OP op) { return reduction(op, op.getAxes(), op.getKeepdims(), FactorKind::Combined); }
MERAK_SHARDING_COMBINED_REDUCE_RULE(ReduceMaxOp)
MERAK_SHARDING_COMBINED_REDUCE_RULE(ReduceMinOp)
MERAK_SHARDING_COMBINED_REDUCE_RULE(ReduceProdOp)
#undef MERAK_SHARDING_COMBINED_REDUCE_RULE

Rule rule(ArgMaxOp op) {
  return reduction(op, {(int64_t)op.getAxis()}, op.getKeepdims(), FactorKind::Combined);
}
Rule rule(ArgMinOp op) {
  return reduction(op, {(int64_t)op.getAxis()}, op.getKeepdims(), FactorKind::Combined);
}

Rule rule(MatmulOp op) {
  ArrayRef<int64_t> l = shapeOf(op.getLhs()), r = shapeOf(op.getRhs()),
                    y = shapeOf(op.getResult());
  if (l.size() < 2 || r.size() < 2)
    return std::nullopt;
  RuleBuilder b;
  int64_t rank = y.size();
  SmallVector<unsigned> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(b.factor(y[d], FactorKind::Parallel));
  unsigned k = b.factor(l.back(), FactorKind::Reduction);
  auto operand = [&](ArrayRef<int64_t> s, bool isLhs) {
    TensorFactors t(s.size());
    int64_t n = s.size();
    for (int64_t d = 0; d + 2 < n; ++d) // batch dims, right-aligned
      if (s[d] != 1 || y[d + rank - n] == 1)
        t[d].push_back(dims[d + rank - n]);
    t[n - 2] = {isLhs ? dims[rank - 2] : k};
    t[n - 1] = {isLhs ? k : dims[rank - 1]};
    return t;
  };
  b.rule.operands.push_back(operand(l, true));
  b.rule.operands.push_back(operand(r, false));
  b.rule.results.push_back(RuleBuilder::tensor(dims));
  return b.rule;
}

Rule rule(TransposeOp op) { return ShardingRule::permutation(op, op.getPerm()); }
Rule rule(ReshapeOp op) { return ShardingRule::reshape(op); }

Rule rule(SplitOp op) {
  int64_t axis = op.getAxis();
  ArrayRef<int64_t> sizes = op.getSizes();
  if (sizes.empty() || !llvm::all_equal(sizes))
    return sharedExceptAxis(op, axis);
  RuleBuilder b;
  SmallVector<unsigned> shared =
      b.factorsOf(op.getResult(0), [](int64_t) { return FactorKind::Parallel; });
  TensorFactors input = RuleBuilder::tensor(shared);
  if (sizes.size() > 1)
    input[axis].insert(input[axis].begin(), b.factor(sizes.size(), FactorKind::Replicated));
  b.rule.operands.push_back(std::move(input));
  for (unsigned i = 0; i < sizes.size(); ++i)
    b.rule.results.push_back(RuleBuilder::tensor(shared));
  return b.rule;
}
Rule rule(ConcatOp op) { return sharedExceptAxis(op, normalise(op.getAxis(), op.getResult())); }

/// Part j of `n` equal parts of a dimension of `size` (stride 1): the
/// number of parts, or 0.
int64_t equalPartOf(int64_t start, int64_t limit, int64_t stride, int64_t size) {
  int64_t part = limit - start;
  if (stride != 1 || part <= 0 || part == size || size % part || start % part)
    return 0;
  return size / part;
}

Rule rule(SliceOp op) {
  RuleBuilder b;
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  TensorFactors input, result;
  for (unsigned d = 0; d < in.size(); ++d) {
    int64_t start = op.getStarts()[d], limit = op.getLimits()[d], stride = op.getStrides()[d];
    bool whole = start == 0 && limit == in[d] && stride == 1;
    // One of n equal parts (torch.chunk as TorchScript exports it): like a
    // split, [part selector (replicated), the part].
    if (int64_t parts = equalPartOf(start, limit, stride, in[d])) {
      unsigned f = b.factor(out[d], FactorKind::Parallel);
      input.push_back({b.factor(parts, FactorKind::Replicated), f});
      result.push_back({f});
      continue;
    }
    // Every stride-th element (x[..., 1::2], an interleaved gate/up):
    // [the elements, the phase (replicated)].
    if (stride > 1 && start < stride && in[d] % stride == 0 && out[d] * stride == in[d]) {
      unsigned f = b.factor(out[d], FactorKind::Parallel);
      input.push_back({f, b.factor(stride, FactorKind::Replicated)});
      result.push_back({f});
      continue;
    }
    unsigned f = b.factor(in[d], whole ? FactorKind::Parallel : FactorKind::Replicated);
    input.push_back({f});
    result.push_back({whole ? f : b.factor(out[d], FactorKind::Replicated)});
  }
  b.rule.operands.push_back(std::move(input));
  b.rule.results.push_back(std::move(result));
  return b.rule;
}

/// The factors of a gather-like op: one per dimension of `table` (its
/// `axis` replicated), one of `indexKind` per dimension of `indices`, and
/// the indexed tensor's: table[:axis] + indices + table[axis + 1:].
struct IndexedAxis {
  SmallVector<unsigned> table, indices, indexed;
};
IndexedAxis indexedAxis(RuleBuilder &b, Value table, int64_t axis, Value indices,
                        FactorKind indexKind) {
  IndexedAxis f;
  f.table = b.factorsOf(table, [](int64_t) { return FactorKind::Parallel; });
  b.rule.factors[f.table[axis]].kind = FactorKind::Replicated;
  f.indices = b.factorsOf(indices, [&](int64_t) { return indexKind; });
  f.indexed.assign(f.table.begin(), f.table.begin() + axis);
  f.indexed.append(f.indices);
  f.indexed.append(f.table.begin() + axis + 1, f.table.end());
  return f;
}

Rule rule(GatherOp op) {
  RuleBuilder b;
  IndexedAxis f = indexedAxis(b, op.getData(), normalise(op.getAxis(), op.getData()),
                              op.getIndices(), FactorKind::Parallel);
  b.rule.operands = {RuleBuilder::tensor(f.table), RuleBuilder::tensor(f.indices)};
  b.rule.results = {RuleBuilder::tensor(f.indexed)};
  b.rule.addressedBy.push_back({f.table[normalise(op.getAxis(), op.getData())], 1});
  return b.rule;
}

Rule rule(CrossEntropyOp op) {
  if (op.getGroup())
    return std::nullopt; // already vocabulary-parallel
  RuleBuilder b;
  int64_t axis = normalise(op.getAxis(), op.getLogits());
  StringRef reduction = op.getReduction();
  FactorKind rows = reduction == "none"  ? FactorKind::Parallel
                    : reduction == "sum" ? FactorKind::Reduction
                                         : FactorKind::Combined;
  SmallVector<unsigned> logits = b.factorsOf(op.getLogits(), [&](int64_t d) {
    return d == axis ? FactorKind::Replicated : rows;
  });
  SmallVector<unsigned> labels(logits);
  labels.erase(labels.begin() + axis);
  b.rule.operands = {RuleBuilder::tensor(logits), RuleBuilder::tensor(labels)};
  b.rule.results = {reduction == "none" ? RuleBuilder::tensor(labels) : TensorFactors{}};
  return b.rule;
}

Rule rule(AttentionOp op) {
  if (op.getSeqMajor())
    return std::nullopt;
  RuleBuilder b;
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  int64_t lead = q.size() - 2;
  SmallVector<unsigned> batch;
  for (int64_t d = 0; d < lead; ++d)
    batch.push_back(b.factor(q[d], FactorKind::Parallel));
  auto withTail = [&](Value v, unsigned tailDims) {
    TensorFactors t = RuleBuilder::tensor(batch);
    ArrayRef<int64_t> s = shapeOf(v);
    for (unsigned d = lead; d < lead + tailDims; ++d)
      t.push_back({b.factor(s[d], FactorKind::Replicated)});
    return t;
  };
  for (Value v : {op.getQuery(), op.getKey(), op.getValue()})
    b.rule.operands.push_back(withTail(v, 2));
  if (Value bias = op.getBias()) { // a broadcast (size-1) dim has no factor
    TensorFactors t = withTail(bias, 2);
    for (int64_t d = 0; d < lead; ++d)
      if (shapeOf(bias)[d] != q[d])
        t[d].clear();
    b.rule.operands.push_back(std::move(t));
  }
  b.rule.results = {withTail(op.getResult(), 2), withTail(op.getLse(), 1)};
  return b.rule;
}

/// Windowed NCHW ops: the batch and channel factors given, every other
/// dimension a replicated factor of its own.
struct WindowRule {
  RuleBuilder b;
  /// A replicated factor per dimension of `v` from `from` on.
  TensorFactors ownFrom(Value v, unsigned from, TensorFactors lead) {
    ArrayRef<int64_t> s = shapeOf(v);
    for (unsigned d = from; d < s.size(); ++d)
      lead.push_back({b.factor(s[d], FactorKind::Replicated)});
    return lead;
  }
};

/// A depthwise convolution: one input and one output channel per group
/// (Mamba's causal conv1d, MobileNet's depthwise layers).
bool depthwise(int64_t groups, int64_t channels, ArrayRef<int64_t> weight) {
  return groups > 1 && groups == channels && weight[0] == channels && weight[1] == 1;
}

/// A depthwise conv2d or its input gradient: `x`'s channels (dim 1), the
/// weight's dim 0, the bias and the result's channels one parallel factor.
Rule depthwiseRule(Value x, Value weight, Value bias, Value result) {
  WindowRule w;
  unsigned n = w.b.factor(shapeOf(x)[0], FactorKind::Parallel);
  unsigned c = w.b.factor(shapeOf(x)[1], FactorKind::Parallel);
  w.b.rule.operands.push_back(w.ownFrom(x, 2, {{n}, {c}}));
  w.b.rule.operands.push_back(w.ownFrom(weight, 1, {{c}}));
  if (bias)
    w.b.rule.operands.push_back({{c}});
  w.b.rule.results.push_back(w.ownFrom(result, 2, {{n}, {c}}));
  return w.b.rule;
}

Rule rule(Conv2DOp op) {
  ArrayRef<int64_t> in = shapeOf(op.getInput()), wt = shapeOf(op.getWeight());
  if (depthwise(op.getGroups(), in[1], wt))
    return depthwiseRule(op.getInput(), op.getWeight(), op.getBias(), op.getResult());
  WindowRule w;
  bool grouped = op.getGroups() != 1;
  unsigned n = w.b.factor(in[0], FactorKind::Parallel);
  unsigned o = w.b.factor(wt[0], grouped ? FactorKind::Replicated : FactorKind::Parallel);
  unsigned c = w.b.factor(in[1], grouped ? FactorKind::Replicated : FactorKind::Reduction);
  unsigned wc = grouped ? w.b.factor(wt[1], FactorKind::Replicated) : c;
  w.b.rule.operands.push_back(w.ownFrom(op.getInput(), 2, {{n}, {c}}));
  w.b.rule.operands.push_back(w.ownFrom(op.getWeight(), 2, {{o}, {wc}}));
  if (op.getBias())
    w.b.rule.operands.push_back({{o}});
  w.b.rule.results.push_back(w.ownFrom(op.getResult(), 2, {{n}, {o}}));
  return w.b.rule;
}

Rule rule(Conv2DBackwardDataOp op) {
  ArrayRef<int64_t> g = shapeOf(op.getGrad()), wt = shapeOf(op.getWeight());
  if (depthwise(op.getGroups(), g[1], wt))
    return depthwiseRule(op.getGrad(), op.getWeight(), Value(), op.getResult());
  WindowRule w;
  bool grouped = op.getGroups() != 1;
  unsigned n = w.b.factor(g[0], FactorKind::Parallel);
  unsigned o = w.b.factor(g[1], grouped ? FactorKind::Replicated : FactorKind::Reduction);
  unsigned c = w.b.factor(wt[1], grouped ? FactorKind::Replicated : FactorKind::Parallel);
  unsigned wo = grouped ? w.b.factor(wt[0], FactorKind::Replicated) : o;
  unsigned rc = grouped ? w.b.factor(shapeOf(op.getResult())[1], FactorKind::Replicated) : c;
  w.b.rule.operands.push_back(w.ownFrom(op.getGrad(), 2, {{n}, {o}}));
  w.b.rule.operands.push_back(w.ownFrom(op.getWeight(), 2, {{wo}, {c}}));
  w.b.rule.results.push_back(w.ownFrom(op.getResult(), 2, {{n}, {rc}}));
  return w.b.rule;
}

template <typename PoolOp>
Rule poolRule(PoolOp op) {
  WindowRule w;
  ArrayRef<int64_t> in = shapeOf(op.getInput());
  unsigned n = w.b.factor(in[0], FactorKind::Parallel);
  unsigned c = w.b.factor(in[1], FactorKind::Parallel);
  w.b.rule.operands.push_back(w.ownFrom(op.getInput(), 2, {{n}, {c}}));
  w.b.rule.results.push_back(w.ownFrom(op.getResult(), 2, {{n}, {c}}));
  return w.b.rule;
}
Rule rule(MaxPool2DOp op) { return poolRule(op); }
Rule rule(AvgPool2DOp op) { return poolRule(op); }

Rule rule(BatchNormOp op) {
  RuleBuilder b;
  bool statistics = op.getTraining();
  SmallVector<unsigned> dims = b.factorsOf(op.getInput(), [&](int64_t d) {
    return d == 1 || !statistics ? FactorKind::Parallel : FactorKind::Replicated;
  });
  TensorFactors input = RuleBuilder::tensor(dims);
  b.rule.operands.push_back(input);
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    b.rule.operands.push_back({{dims[1]}});
  b.rule.results.push_back(std::move(input));
  return b.rule;
}

Rule rule(GatherElementsOp op) {
  RuleBuilder b;
  int64_t axis = normalise(op.getAxis(), op.getData());
  ArrayRef<int64_t> data = shapeOf(op.getData()), indices = shapeOf(op.getIndices());
  TensorFactors d, i;
  for (unsigned k = 0; k < data.size(); ++k) {
    bool shared = (int64_t)k != axis && data[k] == indices[k];
    unsigned fi = b.factor(indices[k], (int64_t)k == axis || shared ? FactorKind::Parallel
                                                                     : FactorKind::Replicated);
    i.push_back({fi});
    d.push_back({shared ? fi : b.factor(data[k], FactorKind::Replicated)});
  }
  b.rule.addressedBy.push_back({d[axis][0], 1});
  b.rule.operands = {std::move(d), i};
  b.rule.results = {std::move(i)};
  return b.rule;
}

Rule rule(GatherElementsGradOp op) {
  RuleBuilder b; // the scatter-add of grad (shaped like indices) into zeros
  int64_t axis = normalise(op.getAxis(), op.getResult());
  ArrayRef<int64_t> data = shapeOf(op.getResult()), indices = shapeOf(op.getIndices());
  TensorFactors d, i;
  for (unsigned k = 0; k < data.size(); ++k) {
    bool shared = (int64_t)k != axis && data[k] == indices[k];
    // Along the axis every element of grad lands somewhere in the result's
    // axis: split there, each part scatters a partial sum.
    unsigned fi = b.factor(indices[k], (int64_t)k == axis ? FactorKind::Reduction
                                       : shared           ? FactorKind::Parallel
                                                          : FactorKind::Replicated);
    i.push_back({fi});
    d.push_back({shared ? fi : b.factor(data[k], FactorKind::Replicated)});
  }
  b.rule.addressedBy.push_back({d[axis][0], 1});
  b.rule.operands = {i, i};
  b.rule.results = {std::move(d)};
  return b.rule;
}

Rule rule(GatherGradOp op) {
  // The accumulating form (a lowering form, made after sharding, like
  // matmul_t's) has none: split on its reduced rows, every part would add
  // the accumulator once.
  if (op.getAcc())
    return std::nullopt;
  RuleBuilder b; // the scatter-add of grad (gather's result) into the table
  IndexedAxis f = indexedAxis(b, op.getResult(), normalise(op.getAxis(), op.getResult()),
                              op.getIndices(), FactorKind::Reduction);
  b.rule.operands = {RuleBuilder::tensor(f.indexed), RuleBuilder::tensor(f.indices)};
  b.rule.results = {RuleBuilder::tensor(f.table)};
  b.rule.addressedBy.push_back({f.table[normalise(op.getAxis(), op.getResult())], 1});
  return b.rule;
}

/// The factors of the expert GEMMs: rows S, input features K, output
/// features O, experts E (indexed by `experts`: replicated).
struct ExpertFactors {
  unsigned s, k, o, e;
  TensorFactors weight(bool transposed) const {
    return RuleBuilder::tensor(transposed ? ArrayRef<unsigned>{e, k, o}
                                          : ArrayRef<unsigned>{e, o, k});
  }
};
ExpertFactors expertFactors(RuleBuilder &b, Value input, int64_t outFeatures, int64_t experts,
                            FactorKind rows, FactorKind inFeatures) {
  ArrayRef<int64_t> x = shapeOf(input);
  return {b.factor(x[0], rows), b.factor(x[1], inFeatures),
          b.factor(outFeatures, FactorKind::Parallel),
          b.factor(experts, FactorKind::Replicated)};
}

Rule rule(ExpertMatmulOp op) {
  RuleBuilder b;
  ExpertFactors f =
      expertFactors(b, op.getInput(), shapeOf(op.getResult())[1], shapeOf(op.getWeight())[0],
                    FactorKind::Parallel, FactorKind::Reduction);
  b.rule.operands = {RuleBuilder::tensor({f.s, f.k}), f.weight(op.getTransposeWeight()),
                     RuleBuilder::tensor({f.s})};
  if (op.getFirst())
    b.rule.operands.push_back(RuleBuilder::tensor({}));
  b.rule.results = {RuleBuilder::tensor({f.s, f.o})};
  return b.rule;
}

Rule rule(ExpertMatmulGradWeightOp op) {
  if (op.getAcc()) // as gather_grad's accumulating form
    return std::nullopt;
  RuleBuilder b; // the rows are summed into each expert's gradient
  ExpertFactors f =
      expertFactors(b, op.getInput(), shapeOf(op.getGrad())[1], shapeOf(op.getResult())[0],
                    FactorKind::Reduction, FactorKind::Parallel);
  b.rule.operands = {RuleBuilder::tensor({f.s, f.k}), RuleBuilder::tensor({f.s, f.o}),
                     RuleBuilder::tensor({f.s})};
  if (op.getFirst())
    b.rule.operands.push_back(RuleBuilder::tensor({}));
  b.rule.results = {f.weight(op.getTransposeWeight())};
  return b.rule;
}

// clang-format off
#define MERAK_SHARDING_OPS(X)                                                  \
  MERAK_SHARDING_ELEMENTWISE_OPS(X)                                            \
  X(SoftmaxOp) X(LogSoftmaxOp) X(CumSumOp) X(LinearScanOp) X(LayerNormOp)     \
  X(RmsNormOp) X(SelectiveScanOp)                                              \
  X(ReduceSumOp) X(ReduceMeanOp) X(ReduceMaxOp) X(ReduceMinOp) X(ReduceProdOp) \
  X(ArgMaxOp) X(ArgMinOp) X(ArgSortOp) X(MatmulOp) X(TransposeOp) X(ReshapeOp) \
  X(SplitOp) X(ConcatOp) X(SliceOp) X(GatherOp) X(CrossEntropyOp)              \
  X(AttentionOp)                                                               \
  X(Conv2DOp) X(Conv2DBackwardDataOp) X(MaxPool2DOp) X(AvgPool2DOp)            \
  X(BatchNormOp) X(GatherElementsOp) X(GatherElementsGradOp) X(GatherGradOp)   \
  X(ExpertMatmulOp)                                                            \
  X(ExpertMatmulGradWeightOp)
// clang-format on

template <typename OpTy>
struct ShardingModel
    : ShardingRuleOpInterface::ExternalModel<ShardingModel<OpTy>, OpTy> {
  std::optional<ShardingRule> getShardingRule(Operation *op) const {
    return rule(cast<OpTy>(op));
  }
  void recordSplit(Operation *op, StringRef axis, int64_t dim, int64_t blocks,
                   int64_t parts) const {
    if constexpr (std::is_same_v<OpTy, DropoutOp>) {
      // The mask is drawn at each element's position in the whole tensor.
      auto split = DenseI64ArrayAttr::get(op->getContext(), {dim, blocks, parts});
      auto dropout = cast<DropoutOp>(op);
      axis == "tp" ? dropout.setTpSplitAttr(split) : dropout.setBatchSplitAttr(split);
    }
    if constexpr (std::is_same_v<OpTy, AttentionOp>) {
      // Its dropout's mask lies on the heads-first probabilities [..., H,
      // T, S]. `dim` is of the result ([..., H, T, D], or seq_major [..., T,
      // H, D]) or of lse ([..., H, T]); the sequence is never split, so a
      // seq_major dim rank-3 or rank-2 is the heads.
      auto attn = cast<AttentionOp>(op);
      int64_t rank = cast<RankedTensorType>(attn.getQuery().getType()).getRank();
      if (attn.getDropout().convertToDouble() == 0)
        return;
      if (attn.getSeqMajor() && (dim == rank - 3 || dim == rank - 2))
        dim = rank - 3;
      if (dim >= rank - 2)
        return;
      auto split = DenseI64ArrayAttr::get(op->getContext(), {dim, blocks, parts});
      axis == "tp" ? attn.setTpSplitAttr(split) : attn.setBatchSplitAttr(split);
    }
  }
  bool dependsOnPosition(Operation *op) const {
    if constexpr (std::is_same_v<OpTy, DropoutOp>)
      return true;
    if constexpr (std::is_same_v<OpTy, AttentionOp>)
      return cast<AttentionOp>(op).getDropout().convertToDouble() != 0;
    return false;
  }
  LogicalResult viewAsRows(Operation *op, ArrayRef<int64_t> shape) const {
    if constexpr (std::is_same_v<OpTy, DropoutOp>) {
      // The mask's positions: a split of a row dimension d (blocks b) is, on
      // the rows, a split of dimension 0 in b x (the rows before d) blocks.
      // A tensor-parallel split is on a block's features: not rows.
      auto dropout = cast<DropoutOp>(op);
      if (dropout.getTpSplit())
        return failure();
      if (std::optional<ArrayRef<int64_t>> s = dropout.getBatchSplit()) {
        int64_t dim = (*s)[0], blocks = (*s)[1];
        if (dim + 1 >= (int64_t)shape.size())
          return failure();
        for (int64_t d = 0; d < dim; ++d)
          blocks *= shape[d];
        dropout.setBatchSplitAttr(DenseI64ArrayAttr::get(op->getContext(), {0, blocks, (*s)[2]}));
      }
    }
    return success();
  }
  bool canSplitStatistics(Operation *op, unsigned operand, int64_t dim) const {
    if constexpr (std::is_same_v<OpTy, LayerNormOp> || std::is_same_v<OpTy, RmsNormOp>)
      return canSplitNormStatistics(cast<OpTy>(op).getInput(), cast<OpTy>(op).getAxis(), operand,
                                    dim);
    return false;
  }
  Value splitStatistics(Operation *op, OpBuilder &b, int64_t parts, SumOverRanks sum) const {
    if constexpr (std::is_same_v<OpTy, LayerNormOp> || std::is_same_v<OpTy, RmsNormOp>)
      return splitNormStatistics(cast<OpTy>(op), b, parts, sum);
    return {};
  }
  void adaptToLocalTypes(Operation *op) const {
    if constexpr (std::is_same_v<OpTy, Conv2DOp> || std::is_same_v<OpTy, Conv2DBackwardDataOp>) {
      // A depthwise convolution's groups are its (local) channels.
      auto conv = cast<OpTy>(op);
      int64_t channels = shapeOf(op->getOperand(0))[1];
      if (shapeOf(conv.getWeight())[1] == 1 && conv.getGroups() > channels)
        conv.setGroups(channels);
    }
    if constexpr (std::is_same_v<OpTy, SplitOp>) {
      // Sizes follow the (local) result types along the axis.
      auto split = cast<SplitOp>(op);
      SmallVector<int64_t> sizes;
      for (Value r : split.getResults())
        sizes.push_back(shapeOf(r)[split.getAxis()]);
      split.setSizes(sizes);
    }
    if constexpr (std::is_same_v<OpTy, SliceOp>) {
      // A whole dimension (a parallel factor) ends at the local extent; part
      // j of n equal parts, split in blocks of n, is the local part j.
      auto slice = cast<SliceOp>(op);
      ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(slice.getResult());
      SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
      for (unsigned d = 0; d < in.size(); ++d) {
        int64_t stride = slice.getStrides()[d];
        if (stride > 1 && out[d] * stride == in[d]) { // every stride-th element
          limits[d] = in[d];
          continue;
        }
        if (stride != 1)
          continue;
        int64_t part = limits[d] - starts[d];
        if (starts[d] == 0 && out[d] == in[d]) {
          limits[d] = in[d];
        } else if (out[d] != part && part > 0 && starts[d] % part == 0) {
          starts[d] = starts[d] / part * out[d];
          limits[d] = starts[d] + out[d];
        }
      }
      slice.setStarts(starts);
      slice.setLimits(limits);
    }
  }
};
} // namespace

void mlir::merak::registerShardingRuleExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MerakDialect *) {
#define MERAK_SHARDING_ATTACH(OP) OP::attachInterface<ShardingModel<OP>>(*ctx);
    MERAK_SHARDING_OPS(MERAK_SHARDING_ATTACH)
#undef MERAK_SHARDING_ATTACH
  });
}
