//===- ShardingRule.cpp - factor rules and their common builders ---------===//
#include "merak/Dialect/Merak/Interfaces/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

int64_t normalise(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }
} // namespace

std::optional<ShardingRule::FactorSplit>
ShardingRule::locate(const TensorFactors &tensor, int64_t dim, int64_t blocks) const {
  if (dim < 0 || dim >= (int64_t)tensor.size())
    return std::nullopt;
  int64_t prefix = 1;
  for (unsigned f : tensor[dim]) {
    int64_t size = factors[f].size;
    if (prefix <= blocks && blocks < prefix * size) {
      if (blocks % prefix != 0 || size % (blocks / prefix) != 0)
        return std::nullopt;
      return FactorSplit{f, blocks / prefix};
    }
    prefix *= size;
  }
  return std::nullopt;
}

std::optional<std::pair<int64_t, int64_t>>
ShardingRule::find(const TensorFactors &tensor, FactorSplit split) const {
  for (auto [dim, dimFactors] : llvm::enumerate(tensor)) {
    int64_t prefix = 1;
    for (unsigned f : dimFactors) {
      if (f == split.factor)
        return std::pair<int64_t, int64_t>(dim, prefix * split.blocks);
      prefix *= factors[f].size;
    }
  }
  return std::nullopt;
}

int64_t ShardingRule::blocksPastReplicated(const TensorFactors &tensor, int64_t dim,
                                           FactorSplit split) const {
  if (split.blocks != 1 || factors[split.factor].kind != FactorKind::Replicated)
    return 0;
  int64_t prefix = 1;
  const DimFactors &dimFactors = tensor[dim];
  for (auto [i, f] : llvm::enumerate(dimFactors)) {
    prefix *= factors[f].size;
    if (f == split.factor)
      return i + 1 < dimFactors.size() ? prefix : 0;
  }
  return 0;
}

ShardingRule ShardingRule::elementwise(Operation *op) { return elementwiseExcept(op, {}); }

ShardingRule ShardingRule::elementwiseExcept(Operation *op, ArrayRef<int64_t> replicated) {
  ShardingRule rule;
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  int64_t rank = shape.size();
  for (auto [d, size] : llvm::enumerate(shape)) {
    bool fixed = llvm::any_of(replicated,
                              [&](int64_t r) { return normalise(r, rank) == (int64_t)d; });
    rule.factors.push_back({size, fixed ? FactorKind::Replicated : FactorKind::Parallel});
  }
  auto aligned = [&](Value v) {
    ArrayRef<int64_t> s = shapeOf(v);
    TensorFactors t(s.size());
    for (auto [d, size] : llvm::enumerate(s)) {
      int64_t r = d + rank - s.size();
      if (r >= 0 && (size != 1 || shape[r] == 1))
        t[d].push_back(r);
    }
    return t;
  };
  for (Value v : op->getOperands())
    rule.operands.push_back(aligned(v));
  for (Value v : op->getResults())
    rule.results.push_back(aligned(v));
  return rule;
}

ShardingRule ShardingRule::permutation(Operation *op, ArrayRef<int64_t> perm) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  TensorFactors operand(in.size()), result(perm.size());
  for (auto [d, size] : llvm::enumerate(in)) {
    rule.factors.push_back({size, FactorKind::Parallel});
    operand[d].push_back(d);
  }
  for (auto [i, p] : llvm::enumerate(perm))
    result[i].push_back(p);
  rule.operands.push_back(std::move(operand));
  rule.results.push_back(std::move(result));
  return rule;
}

std::optional<ShardingRule> ShardingRule::reshape(Operation *op) {
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0)), out = shapeOf(op->getResult(0));
  // The boundaries (flat strides from the major end) of both shapes.
  auto prefixes = [](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> p{1};
    for (int64_t d : shape)
      p.push_back(p.back() * d);
    return p;
  };
  SmallVector<int64_t> pin = prefixes(in), pout = prefixes(out);
  if (pin.back() != pout.back() || pin.back() == 0)
    return std::nullopt;
  ShardingRule rule;
  TensorFactors operand(in.size()), result(out.size());
  // The shapes cut into segments at the boundaries they share; each
  // segment is dims [i0, i) of the operand and [o0, o) of the result.
  // Within a segment whose boundaries each divide the next, the factors
  // are the pieces between consecutive boundaries, shared by both sides
  // ([B, T*H] -> [B, T, H]). Otherwise no piece lines up ([B, 31, 16] ->
  // [B, 16, 31]): each dimension of the segment is its own replicated
  // factor, and the segments around it still split.
  unsigned i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    unsigned i0 = i, o0 = o;
    do {
      if (o == out.size() || (i < in.size() && pin[i + 1] <= pout[o + 1]))
        ++i;
      else
        ++o;
    } while (pin[i] != pout[o]);
    SmallVector<int64_t> bounds(ArrayRef(pin).slice(i0, i - i0 + 1));
    bounds.append(pout.begin() + o0, pout.begin() + o + 1);
    llvm::sort(bounds);
    bounds.erase(llvm::unique(bounds), bounds.end());
    bool chain = llvm::all_of(llvm::seq<size_t>(1, bounds.size()),
                              [&](size_t k) { return bounds[k] % bounds[k - 1] == 0; });
    unsigned first = rule.factors.size(), end = first;
    if (chain)
      for (size_t k = 1; k < bounds.size(); ++k, ++end)
        rule.factors.push_back({bounds[k] / bounds[k - 1], FactorKind::Parallel});
    auto assign = [&](TensorFactors &t, ArrayRef<int64_t> p, unsigned d0, unsigned d1) {
      unsigned f = first;
      for (unsigned d = d0; d < d1; ++d) {
        if (p[d + 1] == p[d]) // a 1: no factor
          continue;
        if (!chain) {
          t[d].push_back(rule.factors.size());
          rule.factors.push_back({p[d + 1] / p[d], FactorKind::Replicated});
          continue;
        }
        for (; f < end && bounds[f - first + 1] <= p[d + 1]; ++f)
          t[d].push_back(f);
      }
    };
    assign(operand, pin, i0, i);
    assign(result, pout, o0, o);
  }
  rule.operands.push_back(std::move(operand));
  rule.results.push_back(std::move(result));
  return rule;
}
