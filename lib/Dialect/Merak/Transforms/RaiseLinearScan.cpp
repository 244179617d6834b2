//===- RaiseLinearScan.cpp - merak-raise-linear-scan ----------------------===//
//
// PyTorch's reference path of a selective scan (transformers' Mamba and
// Jamba without their CUDA kernels) loops over the tokens. Every exporter
// unrolls that loop: one multiply and one add per token for the state, and
// one read-out per token. Two rewrites give the loop back as whole-tensor
// ops (g(X, i, d) is a gather of the constant index i along dim d):
//
//   s_0 = add(mul(g(A, 0, d), zeros), g(B, 0, d))
//   s_i = add(mul(g(A, i, d), s_{i-1}), g(B, i, d))           for i < n
//     -> H = linear_scan(A, B, axis = d); each s_i -> g(H, i, d)
//   (the operands of each mul and add in either order; A and B sliced to
//   [0, n) along d when the chain stops before their end)
//
//   concat(y_0, ..., y_{n-1}, axis = r - 1), with every
//   y_i = matmul(g(H, i, r - 1), reshape(g(C, i, r - 2)))  of type [.., M, 1]
//   (H [.., M, T, K], C [.., T, K], the same leading dims)
//     -> reduce_sum(mul(H, reshape(C, [.., 1, T, K])), axes = [r])
//   (a stack of per-token matrix-vector read-outs: Mamba's `h_t @ C_t`)
//
// A layer of n tokens then takes a fixed number of ops instead of about 7 n
// (2 layers of a Mamba at 2048 tokens: 170k lines of emitted C++), and its
// gradient is merak.linear_scan_grad instead of n steps of mul and add
// gradients. The scan rounds each product before the add, as the chain
// did; the read-out's sums run in the reduction's order instead of the
// GEMM's (float rounding, not the math, differs).
//
// With fuse-selective-scan (the default), a third rewrite (FuseSelectiveScan
// below) makes Mamba's whole scan, as the two above leave it, one
// merak.selective_scan:
//
//   reduce_sum(mul(linear_scan(exp(mul(A4, dt4)), mul(mul(dt4, B4), u4),
//                              axis = 2), C4), axes = [3])
//     -> selective_scan(u, dt, A, B, C)
//
// so that the [B, D, T, N] decay, input and states are never stored.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKRAISELINEARSCAN
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
/// `g(source, index, axis)`: a gather of one constant index along `axis`.
struct Step {
  Value source;
  int64_t axis = 0, index = 0;
};

/// The step `v` reads, if it is a gather of a constant scalar index.
std::optional<Step> stepOf(Value v) {
  auto gather = v ? v.getDefiningOp<GatherOp>() : GatherOp();
  DenseIntElementsAttr index;
  if (!gather || !matchPattern(gather.getIndices(), m_Constant(&index)) ||
      cast<ShapedType>(index.getType()).getRank() != 0)
    return std::nullopt;
  auto data = cast<RankedTensorType>(gather.getData().getType());
  int64_t axis = gather.getAxis() < 0 ? gather.getAxis() + data.getRank() : gather.getAxis();
  int64_t i = (*index.getValues<APInt>().begin()).getSExtValue();
  if (i < 0)
    i += data.getDimSize(axis);
  return Step{gather.getData(), axis, i};
}

bool isStep(std::optional<Step> s, Value source, int64_t axis, int64_t index) {
  return s && s->source == source && s->axis == axis && s->index == index;
}

bool isZeros(Value v) {
  DenseFPElementsAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.isSplat() &&
         attr.getSplatValue<APFloat>().isZero();
}

/// The other operand of a binary op than `v` (null if `v` is neither).
template <typename OpTy> Value otherOperand(OpTy op, Value v) {
  if (op.getLhs() == v)
    return op.getRhs();
  return op.getRhs() == v ? op.getLhs() : Value();
}

/// `v` sliced to [0, n) along `axis` (itself when it has n there).
Value prefix(PatternRewriter &rewriter, Location loc, Value v, int64_t axis, int64_t n) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getDimSize(axis) == n)
    return v;
  SmallVector<int64_t> starts(type.getRank(), 0), limits(type.getShape()),
      strides(type.getRank(), 1);
  limits[axis] = n;
  return SliceOp::create(rewriter, loc, v, starts, limits, strides);
}

/// g(v, i, axis).
Value gatherStep(PatternRewriter &rewriter, Location loc, Value v, int64_t i, int64_t axis) {
  auto i64 = RankedTensorType::get({}, rewriter.getI64Type());
  Value index =
      ConstantOp::create(rewriter, loc, DenseElementsAttr::get(i64, rewriter.getI64IntegerAttr(i)));
  return GatherOp::create(rewriter, loc, v, index, axis);
}

/// One state of the chain: s = add(mul(g(A, i, d), prev), g(B, i, d)).
struct ChainStep {
  AddOp add;
  MulOp mul;
};

/// The unrolled recurrence, matched from its first state.
struct RaiseLinearScan : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  /// For add = s_i and `prev` = s_{i-1} (zeros at i = 0): its mul, and the
  /// decay A, input B and axis d (set by step 0, checked by the others).
  static std::optional<ChainStep> match(AddOp add, Value prev, int64_t i, Value &a, Value &b,
                                        int64_t &axis) {
    auto type = add.getType();
    for (int side = 0; side < 2; ++side) {
      auto mul = (side ? add.getRhs() : add.getLhs()).getDefiningOp<MulOp>();
      Value inputValue = side ? add.getLhs() : add.getRhs();
      std::optional<Step> input = stepOf(inputValue);
      Value decay = mul ? otherOperand(mul, prev) : Value();
      std::optional<Step> decayStep = stepOf(decay);
      // Every operand of the state's type (no broadcast), token i of both.
      if (!mul || !input || !decayStep || !mul->hasOneUse() || mul.getType() != type ||
          decay.getType() != type || inputValue.getType() != type ||
          input->source.getType() != decayStep->source.getType() ||
          decayStep->axis != input->axis || decayStep->index != i || input->index != i)
        continue;
      if (i == 0) {
        a = decayStep->source;
        b = input->source;
        axis = input->axis;
      } else if (decayStep->source != a || input->source != b || input->axis != axis) {
        continue;
      }
      return ChainStep{add, mul};
    }
    return std::nullopt;
  }

  LogicalResult matchAndRewrite(AddOp head, PatternRewriter &rewriter) const override {
    auto type = head.getType();
    if (!isa<FloatType>(type.getElementType()))
      return failure();
    Value zeros;
    for (Value operand : {head.getLhs(), head.getRhs()})
      if (auto mul = operand.getDefiningOp<MulOp>())
        for (Value m : {mul.getLhs(), mul.getRhs()})
          if (isZeros(m) && m.getType() == type)
            zeros = m;
    Value a, b;
    int64_t axis = 0;
    std::optional<ChainStep> first = zeros ? match(head, zeros, 0, a, b, axis) : std::nullopt;
    if (!first)
      return failure();
    SmallVector<ChainStep> chain{*first};
    int64_t length = cast<RankedTensorType>(a.getType()).getDimSize(axis);
    while ((int64_t)chain.size() < length) {
      Value state = chain.back().add;
      std::optional<ChainStep> next;
      for (Operation *user : state.getUsers()) {
        auto mul = dyn_cast<MulOp>(user);
        auto add = mul && mul->hasOneUse() ? dyn_cast<AddOp>(*mul->user_begin()) : AddOp();
        if (add && (next = match(add, state, chain.size(), a, b, axis)))
          break;
      }
      if (!next)
        break;
      chain.push_back(*next);
    }
    if (chain.size() < 2)
      return rewriter.notifyMatchFailure(head, "a single step");

    Location loc = head.getLoc();
    int64_t n = chain.size();
    rewriter.setInsertionPoint(head);
    Value states = LinearScanOp::create(rewriter, loc, prefix(rewriter, loc, a, axis, n),
                                        prefix(rewriter, loc, b, axis, n), axis);
    for (int64_t i = n - 1; i >= 0; --i) {
      rewriter.setInsertionPoint(chain[i].add);
      rewriter.replaceOp(chain[i].add,
                         gatherStep(rewriter, chain[i].add.getLoc(), states, i, axis));
      rewriter.eraseOp(chain[i].mul);
    }
    return success();
  }
};

/// The per-token read-outs y_i = matmul(g(H, i, r - 1), reshape(g(C, i, r - 2)))
/// stacked by a concat along r - 1.
struct RaiseStackedReadout : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp concat, PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(concat.getType());
    int64_t r = type.getRank(), n = concat.getInputs().size();
    int64_t axis = concat.getAxis() < 0 ? concat.getAxis() + r : concat.getAxis();
    if (n < 2 || r < 2 || axis != r - 1 || type.getDimSize(axis) != n ||
        !isa<FloatType>(type.getElementType()))
      return failure();
    // H [.., M, T, K] and C [.., T, K] with the same leading dims, every
    // reshape g(C, i) [.., K] -> [.., K, 1] (so every y_i is [.., M, 1]).
    Value h, c;
    SmallVector<int64_t> column;
    for (auto [i, y] : llvm::enumerate(concat.getInputs())) {
      auto matmul = y.getDefiningOp<MatmulOp>();
      auto reshape = matmul ? matmul.getRhs().getDefiningOp<ReshapeOp>() : ReshapeOp();
      if (!reshape || !y.hasOneUse())
        return failure();
      std::optional<Step> state = stepOf(matmul.getLhs());
      std::optional<Step> read = stepOf(reshape.getInput());
      if (i == 0 && state && read) {
        h = state->source;
        c = read->source;
        auto hType = cast<RankedTensorType>(h.getType());
        auto cType = cast<RankedTensorType>(c.getType());
        if (hType.getRank() != r + 1 || cType.getRank() != r ||
            hType.getElementType() != type.getElementType() ||
            cType.getElementType() != type.getElementType() ||
            hType.getShape().take_front(r - 2) != cType.getShape().take_front(r - 2))
          return failure();
        column.assign(cType.getShape().begin(), cType.getShape().end() - 2);
        column.append({cType.getDimSize(r - 1), 1});
      }
      if (!isStep(state, h, r - 1, i) || !isStep(read, c, r - 2, i) ||
          reshape.getType().getShape() != ArrayRef<int64_t>(column))
        return failure();
    }
    ArrayRef<int64_t> cs = cast<RankedTensorType>(c.getType()).getShape();
    Location loc = concat.getLoc();
    Value states = prefix(rewriter, loc, h, r - 1, n);
    Value read = prefix(rewriter, loc, c, r - 2, n);
    SmallVector<int64_t> spread(cs.take_front(r - 2));
    spread.append({1, n, cs[r - 1]});
    read = ReshapeOp::create(rewriter, loc, RankedTensorType::get(spread, type.getElementType()),
                             read);
    Value product = MulOp::create(rewriter, loc, states, read);
    rewriter.replaceOpWithNewOp<ReduceSumOp>(concat, product, ArrayRef<int64_t>{r},
                                             /*keepdims=*/false);
    return success();
  }
};

/// `v` seen through reshapes (the exporters' unsqueezes of one value).
Value throughReshapes(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  return v;
}

/// The same tensor: one value, or reshapes of one value to one type.
bool sameTensor(Value v, Value w) {
  return v == w || (v.getType() == w.getType() && throughReshapes(v) == throughReshapes(w));
}

bool hasShape(Value v, ArrayRef<int64_t> shape) {
  return cast<RankedTensorType>(v.getType()).getShape() == shape;
}

/// The operands of a selective scan in the [B, D, T, N] broadcast form.
struct DiscretisedScan {
  Value u, delta, a, b;
};

/// The scan's decay exp(mul(A4, dt4)) and input mul(mul(dt4, B4), u4) (each
/// mul's operands in either order): A4, dt4, B4, u4, the shared dt4 found
/// as the operand common to both.
std::optional<DiscretisedScan> matchDiscretisation(LinearScanOp scan) {
  auto exp = scan.getDecay().getDefiningOp<ExpOp>();
  auto decay = exp ? exp.getInput().getDefiningOp<MulOp>() : MulOp();
  auto input = scan.getInput().getDefiningOp<MulOp>();
  if (!decay || !input)
    return std::nullopt;
  for (auto [innerSide, u] :
       {std::pair(input.getLhs(), input.getRhs()), std::pair(input.getRhs(), input.getLhs())}) {
    auto inner = innerSide.getDefiningOp<MulOp>();
    if (!inner)
      continue;
    for (auto [delta, a] :
         {std::pair(decay.getLhs(), decay.getRhs()), std::pair(decay.getRhs(), decay.getLhs())}) {
      if (sameTensor(delta, inner.getLhs()))
        return DiscretisedScan{u, delta, a, inner.getRhs()};
      if (sameTensor(delta, inner.getRhs()))
        return DiscretisedScan{u, delta, a, inner.getLhs()};
    }
  }
  return std::nullopt;
}

/// The discretised scan and its read-out (Mamba's reference path, as the
/// two patterns above leave it) become one merak.selective_scan:
///
///   H = linear_scan(exp(mul(A4, dt4)), mul(mul(dt4, B4), u4), axis = 2)
///   y = reduce_sum(mul(H, C4), axes = [3])         ([B, D, T, N] -> [B, D, T])
///     -> y = selective_scan(u, dt, A, B, C)
///
/// with u4, dt4 [B, D, T, 1], A4 [1, D, 1, N], B4, C4 [B, 1, T, N] (each
/// reshaped to the op's [B, D, T], [D, N] or [B, T, N]). H read by the
/// read-out alone: the [B, D, T, N] decay, input and states are then
/// never built.
struct FuseSelectiveScan : OpRewritePattern<ReduceSumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceSumOp sum, PatternRewriter &rewriter) const override {
    auto readout = sum.getInput().getDefiningOp<MulOp>();
    if (!readout || sum.getAxes() != ArrayRef<int64_t>{3}) // axes verify non-negative
      return failure();
    LinearScanOp scan;
    Value c;
    for (auto [h, other] : {std::pair(readout.getLhs(), readout.getRhs()),
                            std::pair(readout.getRhs(), readout.getLhs())})
      if ((scan = h.getDefiningOp<LinearScanOp>())) {
        c = other;
        break;
      }
    auto type = scan ? scan.getType() : RankedTensorType();
    if (!scan || !scan->hasOneUse() || type.getRank() != 4 || scan.getAxis() != 2 ||
        !(type.getElementType().isF32() || type.getElementType().isF64()))
      return failure();
    std::optional<DiscretisedScan> m = matchDiscretisation(scan);
    ArrayRef<int64_t> s = type.getShape(); // [B, D, T, N]
    int64_t batch = s[0], channels = s[1], tokens = s[2], states = s[3];
    if (!m || !hasShape(m->u, {batch, channels, tokens, 1}) ||
        !hasShape(m->delta, {batch, channels, tokens, 1}) ||
        !hasShape(m->a, {1, channels, 1, states}) || !hasShape(m->b, {batch, 1, tokens, states}) ||
        !hasShape(c, {batch, 1, tokens, states}))
      return rewriter.notifyMatchFailure(sum, "not the discretised form of a selective scan");

    Location loc = sum.getLoc();
    Type f = type.getElementType();
    auto reshaped = [&](Value v, ArrayRef<int64_t> shape) -> Value {
      return ReshapeOp::create(rewriter, loc, RankedTensorType::get(shape, f), v);
    };
    SmallVector<int64_t> rows{batch, channels, tokens}, perToken{batch, tokens, states};
    Value y = SelectiveScanOp::create(rewriter, loc, reshaped(m->u, rows), reshaped(m->delta, rows),
                                      reshaped(m->a, {channels, states}), reshaped(m->b, perToken),
                                      reshaped(c, perToken));
    if (sum.getKeepdims())
      y = reshaped(y, {batch, channels, tokens, 1});
    rewriter.replaceOp(sum, y);
    return success();
  }
};

struct MerakRaiseLinearScanPass : merak::impl::MerakRaiseLinearScanBase<MerakRaiseLinearScanPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseLinearScan, RaiseStackedReadout>(&getContext());
    if (fuseSelectiveScan)
      patterns.add<FuseSelectiveScan>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
