//===- OnnxOpsEinsum.cpp - ONNX Einsum --------------------------------------===//
//
// Einsum as the ops it is made of, operands folded left to right:
//
//   one operand   reduce_sum over the labels the output drops, transpose
//   two operands  sum each over its private labels the output drops, then
//                 A -> [batch, freeA, contracted], B -> [batch, contracted,
//                 freeB] (transpose + reshape), one batched matmul, reshape
//                 and transpose to the output's order
//
// where batch labels are in both operands and kept, contracted ones in both
// and dropped. `...` stands for the same leading-broadcast dimensions in
// every operand (sizes broadcast). The implicit output (no `->`) is the
// labels used once, alphabetically, after `...`. A label repeated within one
// operand (`ii`: a diagonal, a trace when summed) is first taken as its
// diagonal, a gather.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// Labels of one operand (or the output), `...` expanded to the characters
/// '0'.. (never letters) for its dimensions.
using Labels = std::string;

/// An operand on the way: its value and one label per dimension.
struct Term {
  Value value;
  Labels labels;
};

int64_t dimOf(const Term &t, char c) {
  return cast<RankedTensorType>(t.value.getType()).getDimSize(t.labels.find(c));
}

/// Sums `t` over its labels not in `keep`.
Term sumOut(NodeContext &n, Term t, StringRef keep) {
  SmallVector<int64_t> axes;
  Labels rest;
  for (auto [i, c] : llvm::enumerate(t.labels)) {
    if (keep.contains(c))
      rest.push_back(c);
    else
      axes.push_back(i);
  }
  if (axes.empty())
    return t;
  return {n.create<ReduceSumOp>(t.value, axes, /*keepdims=*/false), rest};
}

/// `t` with its dimensions in the order `order` (a permutation of its labels).
Term permuted(NodeContext &n, Term t, StringRef order) {
  if (t.labels == order)
    return t;
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(t.labels.find(c));
  return {n.create<TransposeOp>(t.value, perm), order.str()};
}

/// The contraction of two terms into the labels `out` (each label of `out`
/// in a or b; every other label of a and b summed).
Term contract(NodeContext &n, Term a, Term b, StringRef out) {
  a = sumOut(n, a, (b.labels + out.str()));
  b = sumOut(n, b, (a.labels + out.str()));
  Labels batch, freeA, freeB, summed;
  for (char c : a.labels) {
    bool inB = b.labels.find(c) != std::string::npos, kept = out.contains(c);
    (inB ? (kept ? batch : summed) : freeA).push_back(c);
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos)
      freeB.push_back(c);
  // Broadcast size-1 batch/contracted dims to the other operand's size.
  auto sizes = [&](const Term &t, StringRef ls, const Term &other) {
    SmallVector<int64_t> s;
    for (char c : ls)
      s.push_back(std::max(dimOf(t, c), other.labels.find(c) == std::string::npos
                                            ? int64_t(1)
                                            : dimOf(other, c)));
    return s;
  };
  auto product = [](ArrayRef<int64_t> s) {
    int64_t p = 1;
    for (int64_t v : s)
      p *= v;
    return p;
  };
  a = permuted(n, a, batch + freeA + summed);
  b = permuted(n, b, batch + summed + freeB);
  SmallVector<int64_t> bs = sizes(a, batch, b), fa = sizes(a, freeA, b), cs = sizes(a, summed, b),
                       fb = sizes(b, freeB, a);
  SmallVector<int64_t> fullA(bs), fullB(bs);
  fullA.append(fa), fullA.append(cs);
  fullB.append(cs), fullB.append(fb);
  Value av = n.broadcastTo(a.value, fullA), bv = n.broadcastTo(b.value, fullB);
  av = n.reshape(av, {product(bs), product(fa), product(cs)});
  bv = n.reshape(bv, {product(bs), product(cs), product(fb)});
  Value y = n.create<MatmulOp>(av, bv);
  SmallVector<int64_t> shape(bs);
  shape.append(fa), shape.append(fb);
  Term r{n.reshape(y, shape), batch + freeA + freeB};
  return permuted(n, r, out);
}

/// Letters in a term (its rank without `...`).
int64_t letterCount(StringRef term) {
  return llvm::count_if(term, [](char c) { return c != '.'; });
}

/// Parses a term of `rank` dimensions; `...` stands for the last `rank -
/// letters` of the `maxEllipsis` broadcast dimensions, labelled '0'.. (so
/// that shorter ellipses align to the right). nullopt on error (reported).
std::optional<Labels> parseTerm(NodeContext &n, StringRef term, int64_t rank,
                                int64_t maxEllipsis) {
  size_t dots = term.find("...");
  if (dots != StringRef::npos && term.find("...", dots + 3) != StringRef::npos) {
    (void)n.error("equation term '" + term + "' has more than one '...'");
    return std::nullopt;
  }
  int64_t e = rank - letterCount(term);
  if (e < 0 || (dots == StringRef::npos && e != 0)) {
    (void)n.error("equation term '" + term + "' does not match rank " + Twine(rank));
    return std::nullopt;
  }
  Labels out;
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t k = maxEllipsis - e; k < maxEllipsis; ++k)
        out.push_back('0' + (char)k);
      i += 2;
      continue;
    }
    if (!llvm::isAlpha(term[i])) {
      (void)n.error("equation term '" + term + "' has '" + Twine(term[i]) +
                    "' (letters and one '...' only)");
      return std::nullopt;
    }
    out.push_back(term[i]);
  }
  return out;
}

/// Takes the diagonal of every label repeated within `t` (`ii` -> `i`):
/// the two dimensions moved last, merged, and gathered at k * (n + 1).
Term diagonals(NodeContext &n, Term t) {
  for (size_t i = 0; i < t.labels.size(); ++i) {
    size_t j = t.labels.find(t.labels[i], i + 1);
    if (j == std::string::npos)
      continue;
    char c = t.labels[i];
    Labels order;
    for (size_t k = 0; k < t.labels.size(); ++k)
      if (k != i && k != j)
        order.push_back(t.labels[k]);
    SmallVector<int64_t> perm;
    for (size_t k = 0; k < t.labels.size(); ++k)
      if (k != i && k != j)
        perm.push_back(k);
    perm.append({(int64_t)i, (int64_t)j});
    auto type = cast<RankedTensorType>(t.value.getType());
    int64_t d = type.getDimSize(i);
    if (type.getDimSize(j) != d) {
      (void)n.error("label '" + Twine(c) + "' has sizes " + Twine(d) + " and " +
                    Twine(type.getDimSize(j)) + " in one term");
      return t;
    }
    Value moved = n.create<TransposeOp>(t.value, perm);
    SmallVector<int64_t> merged;
    for (int64_t k : ArrayRef<int64_t>(perm).drop_back(2))
      merged.push_back(type.getDimSize(k));
    merged.push_back(d * d);
    HostTensor idx(RankedTensorType::get({d}, n.builder().getI64Type()));
    for (int64_t k = 0; k < d; ++k)
      idx.i()[k] = k * (d + 1);
    Value diag = n.create<GatherOp>(n.reshape(moved, merged), n.constant(idx),
                                    (int64_t)merged.size() - 1);
    order.push_back(c);
    return diagonals(n, {diag, order});
  }
  return t;
}

LogicalResult einsum(NodeContext &n) {
  std::string eq = n.getString("equation", "");
  eq.erase(llvm::remove_if(eq, [](char c) { return c == ' '; }), eq.end());
  StringRef eqRef(eq);
  auto [lhs, rhs] = eqRef.split("->");
  bool explicitOut = eqRef.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if ((unsigned)terms.size() != n.numInputs())
    return n.error("equation '" + eq + "' has " + Twine(terms.size()) + " terms for " +
                   Twine(n.numInputs()) + " inputs");
  int64_t maxEllipsis = 0;
  for (auto [i, term] : llvm::enumerate(terms))
    if (term.contains("..."))
      maxEllipsis = std::max(maxEllipsis, n.inputType(i).getRank() - letterCount(term));
  SmallVector<Term> ops;
  std::map<char, int> count; // uses per label, repeats within a term too
  for (auto [i, term] : llvm::enumerate(terms)) {
    auto labels = parseTerm(n, term, n.inputType(i).getRank(), maxEllipsis);
    if (!labels)
      return failure();
    for (char c : *labels)
      ++count[c];
    ops.push_back(diagonals(n, {n.input(i), *labels}));
    if (n.hasFailed())
      return failure();
  }
  Labels out;
  if (explicitOut) {
    bool dots = rhs.contains("...");
    auto parsed = parseTerm(n, rhs, letterCount(rhs) + (dots ? maxEllipsis : 0), maxEllipsis);
    if (!parsed)
      return failure();
    out = *parsed;
  } else {
    for (int64_t k = 0; k < maxEllipsis; ++k)
      out.push_back('0' + (char)k);
    for (auto [c, k] : count)
      if (llvm::isAlpha(c) && k == 1)
        out.push_back(c);
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out.find(out[i], i + 1) != std::string::npos)
      return n.error("output label '" + Twine(out[i]) + "' appears twice");
  for (char c : out)
    if (llvm::none_of(ops, [&](const Term &t) { return t.labels.find(c) != std::string::npos; }))
      return n.error("output label '" + Twine(c) + "' is in no input");
  // Fold left to right, keeping what later operands or the output need.
  Term acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    Labels keep = out;
    for (size_t j = i + 1; j < ops.size(); ++j)
      keep += ops[j].labels;
    Labels next;
    for (char c : acc.labels + ops[i].labels)
      if (keep.find(c) != std::string::npos && next.find(c) == std::string::npos)
        next.push_back(c);
    acc = contract(n, acc, ops[i], next);
    if (n.hasFailed())
      return failure();
  }
  acc = permuted(n, sumOut(n, acc, out), out);
  n.setOutputs(acc.value);
  return success();
}

} // namespace

void onnx_import::registerEinsumOps(OpRegistry &r) {
  r.add("Einsum", 12, einsum);
  r.sameAs("Einsum", 28, 12); // bfloat16
}
