//===- FuseAttention.cpp - merak-fuse-attention ---------------------------===//
//
// Finds the exporter's spelling of scaled dot-product attention,
//
//   s = matmul(q, kT)                    q [..., T, D], kT [..., D, S]
//                                        (q or kT may be mul(x, c) | div(x, c)
//                                        themselves: nn.MultiheadAttention)
//   s = mul(s, c) | div(s, c)            optional, c a scalar constant
//   s = mul(tanh(div(s, cap)), cap)      optional soft-capping (Gemma 2)
//   s = where(mask, s, fill) | where(mask, fill, s) | add(s, bias)
//                                        optional, constant masks (stacked
//                                        ones, GPT-Neo's, intersect)
//   s = add(s, b) | add(s, where(mask, b, fill)) | sub(s, b)
//                                        optional (cpu-forms), a bias b
//                                        (T5's learned relative positions,
//                                        a constant ALiBi, [..., T or 1, S]),
//                                        inside or outside the masks
//   s = reshape(s)                       optional, between any of these:
//                                        only the leading dims regrouped
//                                        (BLOOM's [B * H, T, S] products;
//                                        a bias added after it is regrouped
//                                        to q's dims)
//   s = add(s, 0)                        optional, between any of these
//   s = mul(s, c) | div(s, c)            optional, outside an add (a bias
//                                        or an added 0): XLNet's
//                                        (ac + bd + ef) * c; c scales the
//                                        bias too (no mask inside it,
//                                        whose fill it would scale)
//   s = concat(s, sink), last axis       optional attention sinks (GPT-OSS),
//   s = sub(s, reduce_max(s))            sink [..., T, 1] a logit per row;
//   p = softmax(s, last axis)            the max subtracted or not (softmax
//   p = slice(p, last axis [0, S))       is shift-invariant); the sinks' column
//                                        dropped after the softmax
//   p = where(ne(p, p), 0, p)            optional (torch's SDPA: NaN rows to 0)
//   p = dropout(p, ratio, seed)          optional (cpu-forms), its mask unread
//   p = reshape(p)                       optional, leading dims regrouped
//   o = matmul(p, v)                     v [..., S, D]; kT and v may have
//                                        size-1 head dims (multi-query:
//                                        Falcon's), the products broadcast
//
// and replaces it with merak.attention(q, broadcast(transpose(kT)),
// broadcast(v)) at q's leading dims; with sinks its result times
// sigmoid(lse - sink), each row's share of the softmax that the sink does
// not take (exp(lse) / (exp(lse) + exp(sink))): the gradient reaches the
// sinks and, through attention_grad's lse_grad, the scores. The mask must
// be a compile-time constant (read through merak.broadcast, at its own
// size, not the batch's): what the reference evaluator computes from
// merak.constants and frozen parameters' initial values (slices,
// comparisons, the index functions masks are built with; within 2^26
// elements and 2^30 operations per pass), the
// same for every batch and head; it is accepted when it keeps exactly the
// keys c <= r of row r (causal), the keys r - w < c <= r (a sliding window),
// the keys |r - c| < w (a band, ModernBERT's local layers: a window without
// causal) or every key (no mask). Windows, soft-capping and computed biases only
// with the `cpu-forms` option (the CUDA kernels have none of them). A bias
// must broadcast to the scores without growing ([T, S] last, other dims 1
// or the scores'); it becomes the fused op's bias operand, trained through
// its gradient. A masked score is a
// fill <= -1e4 (or an additive bias <= -1e4); exp underflows to 0 in
// float32 there, which is what the fused op computes.
//
// Fused only where the one op serves both targets: float32, as many keys as
// queries (unless cpu-forms, without a causal mask or a window: DeepSeek-V4's
// compressed keys after its sliding ones), a head dim equal for key and
// value (16, 32, 64 or 128, the CUDA
// kernel's, unless cpu-forms: Phi-2's 80, Gemma's 256, and value heads of
// another width than the query/key heads, multi-head latent attention's,
// padded with zero columns to the wider one), a nonzero scale,
// intermediates with no other users. Everything else (other masks, other
// head dims on CUDA) stays decomposed. A dropout on the probabilities
// becomes the fused op's `dropout` and `seed` (and the splits it recorded):
// the kernels draw its mask again, forward and backward, so the fused form
// computes what the decomposed one does.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "FuseAttention.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/Evaluator.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/GlobPattern.h"

#include <cmath>
#include <deque>
#include <map>

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFUSEATTENTION
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-fuse-attention"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// A compile-time constant tensor's values (row-major), as doubles.
struct ConstTensor {
  SmallVector<int64_t> shape;
  std::vector<double> values;
};

class AttentionFuser {
public:
  AttentionFuser(ModuleOp module, ArrayRef<llvm::GlobPattern> frozen, bool cpuForms)
      : module(module), frozen(frozen), cpuForms(cpuForms) {}

  /// Rewrites the attention ending in `pv` (probs x V) if it matches.
  bool tryFuse(MatmulOp pv);

private:
  ModuleOp module;
  ArrayRef<llvm::GlobPattern> frozen;
  bool cpuForms; // windows, soft-capping, biases, dropout, any head dim (the CPU kernels only)

  bool isFrozen(StringRef name) const {
    return llvm::any_of(frozen, [&](const llvm::GlobPattern &g) { return g.match(name); });
  }
  /// How a constant mask is read: keep where nonzero or where zero (a
  /// where's condition), or an additive mask (0 keeps, <= kMaskedFill hides).
  enum class MaskReading { KeepNonzero, KeepZero, Additive };
  /// What constant `v` read as `reading` lets a [t, s] score matrix see:
  /// failure when `v` is not a constant, nullopt when it is not a mask the
  /// kernels apply (memoised per value: every layer's mask is one value).
  FailureOr<std::optional<MaskKind>> maskOf(Value v, MaskReading reading, int64_t t, int64_t s);
  std::map<std::tuple<const HostTensor *, int, int64_t, int64_t>, std::optional<MaskKind>> masks;
  // The steps of tryFuse, each peeling one op off the scores (into chain).
  std::optional<MaskKind> peelMask(Value &x, SmallVectorImpl<Operation *> &chain);
  std::optional<MaskKind> peelBias(Value &x, SmallVectorImpl<Operation *> &chain, Value &bias,
                                   bool &negated);
  double peelSoftcap(Value &x, SmallVectorImpl<Operation *> &chain);
  std::optional<double> peelScale(Value &x, SmallVectorImpl<Operation *> &chain);
  std::optional<double> peelOuterScale(Value &x, SmallVectorImpl<Operation *> &chain);
  bool peelZeroAdd(Value &x, SmallVectorImpl<Operation *> &chain);
  /// The value of `v` when everything it is computed from is constant
  /// (constants, frozen parameters), evaluated op by op with the reference
  /// evaluator within a budget of elements: masks that transformers builds
  /// from the input's shape (ones_like, index functions, comparisons)
  /// larger than the importer's folding limit.
  /// Values are numbered by structure: a constant or frozen parameter by its
  /// (uniqued) attribute, an op by its name, attributes, type and its
  /// operands' values, so that the mask every layer builds alike from the
  /// same constants is evaluated once.
  const HostTensor *evaluated(Value v, int depth = 0);
  const HostTensor *evaluatedUncached(Value v, int depth);
  std::deque<HostTensor> evaluatedStore; // stable addresses
  llvm::DenseMap<Value, const HostTensor *> evaluatedValues; // null: not constant
  llvm::DenseMap<Attribute, const HostTensor *> evaluatedAttrs;
  std::map<std::tuple<const void *, const void *, const void *, std::vector<const HostTensor *>>,
           const HostTensor *>
      evaluatedOps;
  int64_t evaluatedElements = 0, evaluatedFlops = 0;
  bool withinWork(Operation *op);
  /// The value of every element of `v` when it is a constant with one.
  std::optional<double> splat(Value v) {
    const HostTensor *h = evaluated(v);
    if (!h || h->size() == 0)
      return std::nullopt;
    double first = h->getAsDouble(0);
    for (int64_t i = 1; i < h->size(); ++i)
      if (h->getAsDouble(i) != first)
        return std::nullopt;
    return first;
  }
};

/// True while the probe's arithmetic stays small (2^30 operations over the
/// pass): masks are elementwise work on [B, 1, T, S]; a large contraction
/// of frozen weights is not a mask and would be slow to evaluate.
bool AttentionFuser::withinWork(Operation *op) {
  constexpr int64_t kWork = int64_t(1) << 30;
  auto cost = dyn_cast<CostOpInterface>(op);
  int64_t flops = cost ? cost.getFlops() : kWork;
  if (flops < 0 || evaluatedFlops + flops > kWork)
    return false;
  evaluatedFlops += flops;
  return true;
}

const HostTensor *AttentionFuser::evaluated(Value v, int depth) {
  if (auto it = evaluatedValues.find(v); it != evaluatedValues.end())
    return it->second;
  const HostTensor *h = evaluatedUncached(v, depth);
  evaluatedValues[v] = h;
  return h;
}

const HostTensor *AttentionFuser::evaluatedUncached(Value v, int depth) {
  constexpr int kMaxDepth = 64;
  constexpr int64_t kBudget = int64_t(1) << 26; // elements, over one pass
  Operation *def = v.getDefiningOp();
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!def || !type || depth > kMaxDepth)
    return nullptr;
  auto keep = [&](HostTensor t) -> const HostTensor * {
    evaluatedElements += t.size();
    evaluatedStore.push_back(std::move(t));
    return &evaluatedStore.back();
  };
  auto fromAttr = [&](ElementsAttr attr) -> const HostTensor * {
    auto [it, inserted] = evaluatedAttrs.try_emplace(attr, nullptr);
    if (inserted && evaluatedElements + type.getNumElements() <= kBudget)
      if (auto h = HostTensor::fromAttr(attr); succeeded(h))
        it->second = keep(std::move(*h));
    return it->second;
  };
  if (auto c = dyn_cast<ConstantOp>(def))
    return fromAttr(c.getValue());
  if (auto get = dyn_cast<GetParamOp>(def)) {
    auto param = module.lookupSymbol<ParamOp>(get.getNameAttr());
    return param && isFrozen(param.getSymName()) ? fromAttr(param.getInitialValue()) : nullptr;
  }
  if (!isPure(def) || def->getNumResults() != 1 || def->getNumRegions() != 0)
    return nullptr;
  std::vector<const HostTensor *> operands;
  for (Value operand : def->getOperands()) {
    const HostTensor *h = evaluated(operand, depth + 1);
    if (!h)
      return nullptr;
    operands.push_back(h);
  }
  auto key = std::make_tuple(def->getName().getAsOpaquePointer(),
                             def->getAttrDictionary().getAsOpaquePointer(),
                             type.getAsOpaquePointer(), operands);
  if (auto it = evaluatedOps.find(key); it != evaluatedOps.end())
    return it->second;
  const HostTensor *value = nullptr;
  SmallVector<HostTensor> results;
  // A probe: an op the evaluator lacks (or an error in it) means "not a
  // constant", not a diagnostic for the user.
  ScopedDiagnosticHandler quiet(def->getContext(), [](Diagnostic &) { return success(); });
  if (evaluatedElements + type.getNumElements() <= kBudget && withinWork(def) &&
      succeeded(evaluateOp(def, ArrayRef<const HostTensor *>(operands), results)) &&
      results.size() == 1)
    value = keep(std::move(results[0]));
  evaluatedOps[key] = value;
  return value;
}

/// What a constant keep-mask (nonzero: attend) lets query row r see, for a
/// [T, S] score matrix: every key, the causal keys c <= r, or (when
/// `windows`) a sliding window r - w < c <= r or a band |r - c| < w; nullopt
/// for anything else,
/// or when it differs between batch and head slices.
std::optional<MaskKind> maskKindOf(const ConstTensor &keep, int64_t t, int64_t s,
                                   bool windows) {
  int64_t rank = keep.shape.size();
  if (rank < 2 || keep.shape[rank - 2] != t || keep.shape[rank - 1] != s)
    return std::nullopt;
  // Every [T, S] slice (one per batch and head) must be the first one.
  int64_t slice = t * s, slices = (int64_t)keep.values.size() / slice;
  for (int64_t i = 1; i < slices; ++i)
    for (int64_t e = 0; e < slice; ++e)
      if ((keep.values[i * slice + e] != 0) != (keep.values[e] != 0))
        return std::nullopt;
  auto kept = [&](int64_t r, int64_t c) { return keep.values[r * s + c] != 0; };
  // The window is what the last row keeps; w >= T is plain causal. A
  // band's is what the first row keeps.
  int64_t w = 0, band = 0;
  for (int64_t c = 0; c < s && t > 0; ++c) {
    w += kept(t - 1, c);
    band += kept(0, c);
  }
  bool all = true, causal = t == s, window = t == s && w > 0, banded = t == s && band > 0;
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < s; ++c) {
      bool k = kept(r, c);
      all &= k;
      causal &= k == (c <= r);
      window &= k == (c <= r && c > r - w);
      banded &= k == (c < r + band && c > r - band);
    }
  if (all)
    return MaskKind{};
  if (causal)
    return MaskKind{true, 0};
  if (window && windows)
    return MaskKind{true, w};
  if (banded && windows)
    return MaskKind{false, band};
  return std::nullopt;
}

/// A fill at or below this hides a score (PyTorch's masks use -inf or the
/// dtype's minimum; HF's older models -1e4 or -1e9).
constexpr double kMaskedFill = -1e4;

FailureOr<std::optional<MaskKind>>
AttentionFuser::maskOf(Value v, MaskReading reading, int64_t t, int64_t s) {
  // A mask broadcast to the batch (canonicalize's broadcast(where(c, 0,
  // -inf)) at [B, 1, T, S]) is read at its own size: the scores broadcast
  // it anyway.
  while (auto bc = v.getDefiningOp<BroadcastOp>())
    v = bc.getInput();
  const HostTensor *h = evaluated(v);
  if (!h)
    return failure();
  auto key = std::make_tuple(h, (int)reading, t, s);
  if (auto it = masks.find(key); it != masks.end())
    return it->second;
  ConstTensor keep{SmallVector<int64_t>(h->getShape()), std::vector<double>(h->size())};
  bool isFloat = h->isFloat(), mask = true;
  for (int64_t i = 0; mask && i < h->size(); ++i) {
    double x = isFloat ? h->f()[i] : (double)h->i()[i];
    if (reading == MaskReading::Additive)
      mask = x == 0 || x <= kMaskedFill; // else a real bias (ALiBi, relative positions)
    keep.values[i] = reading == MaskReading::KeepNonzero ? x != 0 : x == 0;
  }
  std::optional<MaskKind> kind = mask ? maskKindOf(keep, t, s, cpuForms) : std::nullopt;
  masks[key] = kind;
  return kind;
}


/// The softmax whose probabilities `probs` are, directly or behind the NaN
/// guard `where(ne(p, p), 0, p)` (torch's SDPA decomposition zeroes the
/// rows a mask hides completely; the masks fused here hide none, so the
/// guard is the identity); the guard's ops are appended to `chain` and
/// `guarded` says whether there was one.
SoftmaxOp softmaxOf(Value probs, SmallVectorImpl<Operation *> &chain, bool &guarded,
                    llvm::function_ref<std::optional<double>(Value)> splat) {
  guarded = false;
  if (auto sm = probs.getDefiningOp<SoftmaxOp>())
    return sm->hasOneUse() ? sm : SoftmaxOp();
  auto where = probs.getDefiningOp<WhereOp>();
  if (!where || !probs.hasOneUse())
    return {};
  Value p = where.getRhs();
  auto sm = p.getDefiningOp<SoftmaxOp>();
  auto isNan = where.getCondition().getDefiningOp<NeOp>();
  std::optional<double> fill = splat(where.getLhs());
  if (!sm || !isNan || isNan.getLhs() != p || isNan.getRhs() != p || !fill || *fill != 0 ||
      !isNan->hasOneUse() ||
      llvm::any_of(p.getUsers(), [&](Operation *u) { return u != where && u != isNan; }))
    return {};
  chain.append({where, isNan});
  guarded = true;
  return sm;
}

/// True when `v` is an op's result that nothing else reads (an
/// intermediate the rewrite may erase).
bool single(Value v) { return v.getDefiningOp() && v.hasOneUse(); }

/// Peels `x = mul(y, c) | mul(c, y) | div(y, c)` with c a scalar constant:
/// x becomes y and the factor (c or 1 / c) is returned; 1 when x is not
/// such a product; nullopt when its factor is 0 or not finite.
std::optional<double> AttentionFuser::peelScale(Value &x, SmallVectorImpl<Operation *> &chain) {
  Operation *op = x.getDefiningOp();
  if (!op || !isa<MulOp, DivOp>(op) || !single(x))
    return 1.0;
  bool isDiv = isa<DivOp>(op);
  for (int side = 0; side < (isDiv ? 1 : 2); ++side) {
    Value other = op->getOperand(1 - side);
    auto c = splat(other);
    if (!c || cast<RankedTensorType>(other.getType()).getNumElements() != 1 ||
        op->getOperand(side).getType() != x.getType())
      continue;
    double factor = isDiv ? 1.0 / *c : *c;
    if (factor == 0 || !std::isfinite(factor))
      return std::nullopt;
    chain.push_back(op);
    x = op->getOperand(side);
    return factor;
  }
  return 1.0;
}

/// Peels a scale applied outside a sum of the scores (XLNet's
/// `(ac + bd + ef) * scale`): `x = mul(y, c) | div(y, c)` with y an add;
/// x becomes y and the factor is returned; nullopt when x is no such
/// product (or its factor is 0 or not finite).
std::optional<double> AttentionFuser::peelOuterScale(Value &x,
                                                     SmallVectorImpl<Operation *> &chain) {
  Value y = x;
  SmallVector<Operation *> peeled;
  std::optional<double> factor = peelScale(y, peeled);
  if (!factor || y == x || !y.getDefiningOp<AddOp>())
    return std::nullopt;
  chain.append(peeled);
  x = y;
  return *factor;
}

/// Peels `x = add(y, 0) | add(0, y)` with 0 a constant that does not grow
/// y (XLNet's segment term `ef = 0` when no segments are given): y + 0 is
/// y, so x becomes y.
bool AttentionFuser::peelZeroAdd(Value &x, SmallVectorImpl<Operation *> &chain) {
  auto add = x.getDefiningOp<AddOp>();
  if (!add || !single(x))
    return false;
  for (int side = 0; side < 2; ++side) {
    std::optional<double> zero = splat(add->getOperand(1 - side));
    if (!zero || *zero != 0 || add->getOperand(side).getType() != x.getType())
      continue;
    chain.push_back(add);
    x = add->getOperand(side);
    return true;
  }
  return false;
}

/// Peels the mask off the scores `x` (`where(mask, x, fill)`,
/// `where(mask, fill, x)` or `add(x, bias)`): the kind of mask (none when x
/// has none), or nullopt when it is one the kernels cannot apply.
std::optional<MaskKind> AttentionFuser::peelMask(Value &x, SmallVectorImpl<Operation *> &chain) {
  auto scoresType = cast<RankedTensorType>(x.getType());
  int64_t t = scoresType.getDimSize(scoresType.getRank() - 2),
          s = scoresType.getDimSize(scoresType.getRank() - 1);
  if (auto where = x.getDefiningOp<WhereOp>(); where && single(x)) {
    std::optional<double> fillL = splat(where.getLhs()), fillR = splat(where.getRhs());
    bool keepWhenTrue = fillR && *fillR <= kMaskedFill && where.getLhs().getType() == scoresType;
    bool keepWhenFalse = fillL && *fillL <= kMaskedFill && where.getRhs().getType() == scoresType;
    if (!keepWhenTrue && !keepWhenFalse)
      return std::nullopt;
    auto kind = maskOf(where.getCondition(),
                       keepWhenTrue ? MaskReading::KeepNonzero : MaskReading::KeepZero, t, s);
    if (failed(kind) || !*kind)
      return std::nullopt;
    chain.push_back(where);
    x = keepWhenTrue ? where.getLhs() : where.getRhs();
    return *kind;
  }
  auto add = x.getDefiningOp<AddOp>();
  if (!add || !single(x))
    return MaskKind{};
  for (int side = 0; side < 2; ++side) {
    Value scores = add->getOperand(side);
    if (scores.getType() != scoresType)
      continue;
    auto kind = maskOf(add->getOperand(1 - side), MaskReading::Additive, t, s);
    if (failed(kind))
      continue;
    if (*kind) {
      chain.push_back(add);
      x = scores;
    }
    return *kind;
  }
  return std::nullopt; // an add of something that is not a constant mask
}

/// True when `b` can be merak.attention's bias for the scores `scores`:
/// float32, the same rank, S last, each other dim (T too: ALiBi's bias per
/// key) 1 or the scores'.
static bool fitsAsBias(Value b, RankedTensorType scores) {
  auto t = dyn_cast<RankedTensorType>(b.getType());
  if (!t || !t.getElementType().isF32() || t.getRank() != scores.getRank())
    return false;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.getDimSize(d) != scores.getDimSize(d) && (d == t.getRank() - 1 || t.getDimSize(d) != 1))
      return false;
  return true;
}

/// What two stacked masks keep together (GPT-Neo's layer mask under the
/// model's causal mask): causal if either is, within the narrower window
/// (a band under a causal mask is a causal window).
static MaskKind intersect(MaskKind a, MaskKind b) {
  int64_t w = !a.window || !b.window ? std::max(a.window, b.window) : std::min(a.window, b.window);
  return MaskKind{a.causal || b.causal, w};
}

/// Peels `x = reshape(y)` that regroups only the leading (batch, head)
/// dims of scores or probabilities (BLOOM's [B * H, T, S] <-> [B, H, T, S]):
/// row-major order, so every [T, S] block stays where it was.
static bool peelLeadingReshape(Value &x, SmallVectorImpl<Operation *> &chain) {
  auto reshape = x.getDefiningOp<ReshapeOp>();
  if (!reshape || !single(x))
    return false;
  auto in = cast<RankedTensorType>(reshape.getInput().getType());
  auto out = cast<RankedTensorType>(x.getType());
  if (in.getRank() < 3 || out.getRank() < 3 ||
      in.getShape().take_back(2) != out.getShape().take_back(2))
    return false;
  chain.push_back(reshape);
  x = reshape.getInput();
  return true;
}

/// True when the leading dims `lead` broadcast to `to` (each equal or 1).
static bool broadcastsTo(ArrayRef<int64_t> lead, ArrayRef<int64_t> to) {
  if (lead.size() != to.size())
    return false;
  for (auto [l, t] : llvm::zip_equal(lead, to))
    if (l != t && l != 1)
      return false;
  return true;
}

/// Peels a bias off the scores `x`: `add(x, b)` (either side) or
/// `sub(x, b)` (`negated`: XLNet's `score - 1e30 * mask`), b computed
/// (T5) or a constant that is not a mask (ALiBi); when an added b is
/// `where(mask, b2, fill)` with a constant
/// mask the kernels apply (read by the cond) and nothing else reads it,
/// the mask becomes the fused op's and b2 the bias. Returns the mask kind
/// (none: MaskKind{}), or nullopt when x is no such add (or cpu-forms is
/// off).
std::optional<MaskKind> AttentionFuser::peelBias(Value &x, SmallVectorImpl<Operation *> &chain,
                                                 Value &bias, bool &negated) {
  Operation *op = x.getDefiningOp();
  auto scoresType = cast<RankedTensorType>(x.getType());
  if (!isa_and_nonnull<AddOp, SubOp>(op) || !cpuForms || !single(x))
    return std::nullopt;
  bool isSub = isa<SubOp>(op);
  int64_t t = scoresType.getDimSize(scoresType.getRank() - 2),
          s = scoresType.getDimSize(scoresType.getRank() - 1);
  for (int side = 0; side < (isSub ? 1 : 2); ++side) {
    Value scores = op->getOperand(side), b = op->getOperand(1 - side);
    if (scores.getType() != scoresType || !fitsAsBias(b, scoresType))
      continue;
    chain.push_back(op);
    x = scores;
    negated = isSub;
    MaskKind kind;
    if (auto where = b.getDefiningOp<WhereOp>(); where && single(b) && !isSub) {
      std::optional<double> fill = splat(where.getRhs());
      if (fill && *fill <= kMaskedFill && where.getLhs().getType() == b.getType()) {
        auto inner = maskOf(where.getCondition(), MaskReading::KeepNonzero, t, s);
        if (succeeded(inner) && *inner) {
          chain.push_back(where);
          kind = **inner;
          b = where.getLhs();
        }
      }
    }
    bias = b;
    return kind;
  }
  return std::nullopt;
}

/// Peels Gemma 2's soft-capping off the scores `x`: mul(tanh(div(y, c)), c)
/// (either side of the mul; or tanh(mul(y, 1 / c))) becomes y; returns c,
/// or 0 when x is not soft-capped (or cpu-forms is off).
double AttentionFuser::peelSoftcap(Value &x, SmallVectorImpl<Operation *> &chain) {
  auto capMul = x.getDefiningOp<MulOp>();
  if (!capMul || !cpuForms || !single(x))
    return 0;
  for (int side = 0; side < 2; ++side) {
    auto tanh = capMul->getOperand(side).getDefiningOp<TanhOp>();
    auto c = splat(capMul->getOperand(1 - side));
    if (!tanh || !c || *c <= 0 || !single(capMul->getOperand(side)) ||
        capMul->getOperand(side).getType() != x.getType())
      continue;
    Value in = tanh.getInput();
    Operation *div = in.getDefiningOp();
    if (!div || !single(in))
      continue;
    std::optional<double> d;
    if (isa<DivOp>(div))
      d = splat(div->getOperand(1));
    else if (isa<MulOp>(div))
      if (auto r = splat(div->getOperand(1)); r && *r != 0)
        d = 1.0 / *r;
    if (!d || std::abs(*d - *c) > 1e-6 * *c || div->getOperand(0).getType() != x.getType())
      continue;
    chain.append({capMul, tanh, div});
    x = div->getOperand(0);
    return *c;
  }
  return 0;
}

/// The slice `probs = slice(p, last axis [0, S))` of all but the last
/// column of the softmax p (GPT-OSS's `probs[..., :-1]`, dropping the
/// sinks' probabilities), or null.
static SliceOp sinkColumnDropped(Value probs) {
  auto slice = probs.getDefiningOp<SliceOp>();
  if (!slice || !single(probs))
    return {};
  ArrayRef<int64_t> in = cast<RankedTensorType>(slice.getInput().getType()).getShape();
  int64_t rank = in.size();
  if (rank < 3 || in.back() < 2)
    return {};
  for (int64_t d = 0; d < rank; ++d)
    if (slice.getStarts()[d] != 0 || slice.getStrides()[d] != 1 ||
        slice.getLimits()[d] != in[d] - (d == rank - 1 ? 1 : 0))
      return {};
  return slice;
}

/// Peels the sinks off the softmax's input `x`: `concat(s, sink)` along the
/// last axis, with the row maximum subtracted (`sub(c, reduce_max(c))`,
/// keepdims) or not; x becomes s and the sink logits [..., T, 1] are
/// returned (null when x is no such concat).
static Value peelSinks(Value &x, SmallVectorImpl<Operation *> &chain) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t last = type.getRank() - 1;
  Value c = x;
  SmallVector<Operation *> peeled;
  if (auto sub = x.getDefiningOp<SubOp>(); sub && single(x)) {
    auto max = sub.getRhs().getDefiningOp<ReduceMaxOp>();
    Value in = sub.getLhs();
    if (max && max.getInput() == in && single(sub.getRhs()) && max.getKeepdims() &&
        max.getAxes() == ArrayRef<int64_t>{last} && in.getType() == type &&
        llvm::all_of(in.getUsers(), [&](Operation *u) { return u == sub || u == max; })) {
      peeled.append({sub, max});
      c = in;
    }
  }
  auto cat = c.getDefiningOp<ConcatOp>();
  if (!cat || (peeled.empty() && !single(c)) || (int64_t)cat.getAxis() != last ||
      cat.getInputs().size() != 2)
    return {};
  Value scores = cat.getInputs()[0], sink = cat.getInputs()[1];
  auto st = cast<RankedTensorType>(scores.getType());
  if (cast<RankedTensorType>(sink.getType()).getDimSize(last) != 1 ||
      st.getDimSize(last) != type.getDimSize(last) - 1)
    return {};
  chain.append(peeled);
  chain.push_back(cat);
  x = scores;
  return sink;
}

bool AttentionFuser::tryFuse(MatmulOp pv) {
  SmallVector<Operation *> chain{pv};
  Value probs = pv.getLhs();
  peelLeadingReshape(probs, chain);
  auto dropout = probs.getDefiningOp<DropoutOp>();
  if (dropout) {
    if (!cpuForms || !dropout.getOutput().hasOneUse() || !dropout.getMask().use_empty())
      return false;
    chain.push_back(dropout);
    probs = dropout.getInput();
    peelLeadingReshape(probs, chain);
  }
  SliceOp sinkSlice = sinkColumnDropped(probs);
  if (sinkSlice) {
    chain.push_back(sinkSlice);
    probs = sinkSlice.getInput();
  }
  bool guarded;
  auto sm = softmaxOf(probs, chain, guarded, [&](Value v) { return splat(v); });
  if (!sm || (sinkSlice && guarded))
    return false;
  auto smType = cast<RankedTensorType>(sm.getType());
  if (smType.getRank() < 3 || !smType.getElementType().isF32() ||
      (int64_t)sm.getAxis() != smType.getRank() - 1)
    return false;
  int64_t t = smType.getDimSize(smType.getRank() - 2),
          s = smType.getDimSize(smType.getRank() - 1) - (sinkSlice ? 1 : 0);
  if (t != s && !cpuForms) // the CUDA kernel's self-attention shapes
    return false;
  chain.push_back(sm);
  Value x = sm.getInput(), sink;
  if (sinkSlice && !(sink = peelSinks(x, chain)))
    return false;
  // Peel, from the softmax back: masks (stacked ones intersect), biases
  // (a computed one inside a constant mask, T5's decoder, or alone; XLNet
  // subtracts its padding mask outside the scale and adds its position
  // scores inside it), regroupings of the leading dims (after a bias too:
  // the rewrite regroups the bias alike), additions of zero, a scale
  // outside an add (XLNet's, which then scales the biases inside it; no
  // mask inside it, whose fill it would scale), then the soft-capping, the
  // scale, the product q kT, and scales applied to q or k before it
  // (PyTorch's nn.MultiheadAttention divides q by sqrt(d)): the same
  // factor.
  MaskKind mask;
  std::optional<double> outer;
  SmallVector<BiasTerm> biases;
  for (;;) {
    Value before = x;
    if (peelLeadingReshape(x, chain) || peelZeroAdd(x, chain))
      continue;
    if (!outer && (outer = peelOuterScale(x, chain)))
      continue;
    if (std::optional<MaskKind> m = peelMask(x, chain); m && x != before) {
      if (outer)
        return false; // the chain is dropped, nothing was rewritten
      mask = intersect(mask, *m);
      continue;
    }
    auto scoresType = cast<RankedTensorType>(x.getType());
    Value bias;
    bool negated = false;
    if (std::optional<MaskKind> inner; (inner = peelBias(x, chain, bias, negated))) {
      if (outer && (inner->causal || inner->window))
        return false;
      mask = intersect(mask, *inner);
      biases.push_back({bias, scoresType, outer.value_or(1.0) * (negated ? -1.0 : 1.0)});
      continue;
    }
    break;
  }
  // Causal masks and windows are the kernels' with as many keys as
  // queries only.
  if (t != s && (mask.causal || mask.window))
    return false;
  // torch's NaN guard zeroes rows a mask hides entirely; the kernels
  // would give NaN there, which only a bias (a mask per batch) can cause.
  if (!biases.empty() && guarded)
    return false;
  double softcap = peelSoftcap(x, chain);
  std::optional<double> scale = peelScale(x, chain);
  auto qk = x.getDefiningOp<MatmulOp>();
  if (!scale || !qk || !single(x))
    return false;
  chain.push_back(qk);
  auto scoresType = cast<RankedTensorType>(qk.getType());
  int64_t rank = scoresType.getRank();
  Value q = qk.getLhs(), kT = qk.getRhs(), v = pv.getRhs();
  for (Value *operand : {&q, &kT}) {
    std::optional<double> factor = peelScale(*operand, chain);
    if (!factor)
      return false;
    *scale *= *factor;
  }
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(kT.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  if (qt.getRank() != rank || kt.getRank() != rank || vt.getRank() != rank)
    return false;
  // Keys and values may be shared by heads (multi-query: [B, 1, S, D]
  // broadcast by the products); the fused op reads them broadcast.
  ArrayRef<int64_t> batch = scoresType.getShape().drop_back(2);
  if (qt.getShape().drop_back(2) != batch || !broadcastsTo(kt.getShape().drop_back(2), batch) ||
      !broadcastsTo(vt.getShape().drop_back(2), batch) || vt.getDimSize(rank - 2) != s ||
      pv.getType().getShape().drop_back() != qt.getShape().drop_back() ||
      pv.getType().getElementType() != qt.getElementType())
    return false;
  // A dropout's recorded splits name its own dims, which must be the fused
  // op's (not regrouped).
  if (dropout && (dropout.getBatchSplitAttr() || dropout.getTpSplitAttr()) &&
      cast<RankedTensorType>(dropout.getOutput().getType()).getShape().drop_back(2) != batch)
    return false;
  // The sinks' rescaling reads lse at q's leading dims.
  if (sink) {
    SmallVector<int64_t> rows(batch);
    rows.append({t, 1});
    if (cast<RankedTensorType>(sink.getType()) !=
        RankedTensorType::get(rows, Float32Type::get(pv.getContext())))
      return false;
  }
  int64_t d = qt.getDimSize(rank - 1), dv = vt.getDimSize(rank - 1);
  if ((d != dv && !cpuForms) || (!cpuForms && !llvm::is_contained({16, 32, 64, 128}, d)) ||
      !vt.getElementType().isF32() || !qt.getElementType().isF32())
    return false;

  if (outer && softcap != 0)
    return false; // a scale outside the capping
  rewriteAttention({pv, std::move(chain), q, kT, v, std::move(biases), sink, dropout, mask,
                    outer.value_or(1.0) * *scale, softcap});
  return true;
}

struct MerakFuseAttentionPass
    : merak::impl::MerakFuseAttentionBase<MerakFuseAttentionPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerEvaluatorExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<llvm::GlobPattern> globs;
    for (const std::string &pattern : frozen) {
      auto glob = llvm::GlobPattern::create(pattern);
      if (!glob) {
        module.emitError("merak-fuse-attention: bad frozen pattern '")
            << pattern << "': " << llvm::toString(glob.takeError());
        return signalPassFailure();
      }
      globs.push_back(std::move(*glob));
    }
    SmallVector<MatmulOp> candidates;
    module.walk([&](MatmulOp mm) {
      Operation *def = mm.getLhs().getDefiningOp();
      if (isa_and_nonnull<SoftmaxOp, WhereOp, DropoutOp, ReshapeOp, SliceOp>(def))
        candidates.push_back(mm);
    });
    AttentionFuser fuser(module, globs, cpuForms);
    for (MatmulOp mm : candidates)
      fuser.tryFuse(mm);
  }
};
} // namespace
