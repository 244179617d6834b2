//===- FuseExperts.cpp - merak-fuse-experts --------------------------------===//
//
// The expert GEMMs of a Mixture-of-Experts layer as exporters write them
// (transformers' batched_mm experts: every (token, choice) row gathers its
// expert's weight and multiplies it batched) become one grouped GEMM that
// never gathers the [S, O, K] weights:
//
//   matmul(gather(w [E, O, K], e [S], axis 0), x [S, K, 1])   -> [S, O, 1]
//     => reshape(expert_matmul(reshape(x) [S, K], w[e]))
//   matmul(x [S, 1, K], gather(w [E, K, O], e [S], axis 0))   -> [S, 1, O]
//     => reshape(expert_matmul(reshape(x) [S, K], w[e] transpose_weight))
//
// The gather goes once nothing else reads it. Expert indices must be in
// [0, E): a negative one, which gather would wrap, stops the program.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFUSEEXPERTS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
/// The gathered expert weights: `gather(w [E, a, b], e [S], axis 0)` with
/// a float w.
GatherOp expertGather(Value v) {
  auto g = v.getDefiningOp<GatherOp>();
  if (!g || g.getAxis() != 0)
    return {};
  auto w = cast<RankedTensorType>(g.getData().getType());
  auto e = cast<RankedTensorType>(g.getIndices().getType());
  if (w.getRank() != 3 || e.getRank() != 1 || !isa<FloatType>(w.getElementType()))
    return {};
  return g;
}

struct FuseExpertMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp mm, PatternRewriter &rewriter) const override {
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
    auto rhs = cast<RankedTensorType>(mm.getRhs().getType());
    auto out = cast<RankedTensorType>(mm.getType());
    if (lhs.getRank() != 3 || rhs.getRank() != 3 || out.getRank() != 3 ||
        lhs.getElementType() != out.getElementType() ||
        rhs.getElementType() != out.getElementType())
      return failure();
    // w[e] @ x: the gather on the left, one column on the right; x @ w[e]:
    // one row on the left, the gather on the right.
    GatherOp g;
    Value x;
    bool transposed = false;
    if ((g = expertGather(mm.getLhs())) && rhs.getDimSize(2) == 1) {
      x = mm.getRhs();
    } else if ((g = expertGather(mm.getRhs())) && lhs.getDimSize(1) == 1) {
      x = mm.getLhs();
      transposed = true;
    } else {
      return failure();
    }
    auto xt = cast<RankedTensorType>(x.getType());
    int64_t s = out.getDimSize(0), k = transposed ? xt.getDimSize(2) : xt.getDimSize(1);
    int64_t o = transposed ? out.getDimSize(2) : out.getDimSize(1);
    if (xt.getDimSize(0) != s || cast<RankedTensorType>(g.getType()).getDimSize(0) != s)
      return failure(); // a broadcast batch: not one expert per row
    Type elem = out.getElementType();
    Location loc = mm.getLoc();
    Value rows = ReshapeOp::create(rewriter, loc, RankedTensorType::get({s, k}, elem), x);
    Value y = ExpertMatmulOp::create(rewriter, loc, RankedTensorType::get({s, o}, elem), rows,
                                     g.getData(), g.getIndices(), /*first=*/Value(),
                                     /*shadow=*/Value(), /*shadow_first=*/Value(), transposed, /*total_experts=*/IntegerAttr(),
                                     /*group_rows=*/IntegerAttr());
    rewriter.replaceOpWithNewOp<ReshapeOp>(mm, out, y);
    return success();
  }
};

struct MerakFuseExpertsPass : merak::impl::MerakFuseExpertsBase<MerakFuseExpertsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseExpertMatmul>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
