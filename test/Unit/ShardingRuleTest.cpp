//===- ShardingRuleTest.cpp - the factor rules of merak ops ---------------===//
//
// ShardingRuleOpInterface on the ops tensor parallelism (and later the batch
// and expert axes) walks through, against factorisations worked out by hand:
// where a split of an operand dimension lands, and where it goes.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Interfaces/ShardingModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::merak;

namespace {

constexpr const char *kModule = R"mlir(
func.func @f(%x: tensor<2x8x12xf32>, %w: tensor<12x6xf32>, %b: tensor<6xf32>,
             %q: tensor<2x4x8x3xf32>, %ids: tensor<2x8xi64>, %emb: tensor<10x12xf32>,
             %a: tensor<2x3xf32>, %img: tensor<2x8x1x5xf32>, %dw: tensor<8x1x1x2xf32>,
             %db: tensor<8xf32>, %gw: tensor<8x2x1x2xf32>) {
  %0 = merak.matmul %x, %w : tensor<2x8x12xf32>, tensor<12x6xf32> -> tensor<2x8x6xf32>
  %1 = merak.add %0, %b : tensor<2x8x6xf32>, tensor<6xf32>
  %2 = merak.reshape %x : tensor<2x8x12xf32> to tensor<2x8x4x3xf32>
  %3:3 = merak.split %x axis = 2 sizes = [4, 4, 4] : tensor<2x8x12xf32> -> tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
  %4 = merak.softmax %q axis = 3 : tensor<2x4x8x3xf32>
  %5 = merak.transpose %q perm = [0, 2, 1, 3] : tensor<2x4x8x3xf32> to tensor<2x8x4x3xf32>
  %6 = merak.reduce_sum %x axes = [2] : tensor<2x8x12xf32> -> tensor<2x8xf32>
  %7 = merak.gather %emb[%ids] axis = 0 : tensor<10x12xf32>, tensor<2x8xi64> -> tensor<2x8x12xf32>
  %8 = merak.reshape %a : tensor<2x3xf32> to tensor<3x2xf32>
  %9 = merak.layer_norm %x axis = 2 epsilon = 1.0e-05 : (tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %10 = merak.gather_grad %x[%ids] axis = 0 : tensor<2x8x12xf32>, tensor<2x8xi64> -> tensor<10x12xf32>
  %11 = merak.gather_grad %x[%ids] axis = 0 acc %emb : tensor<2x8x12xf32>, tensor<2x8xi64>, tensor<10x12xf32> -> tensor<10x12xf32>
  %12 = merak.conv2d %img, %dw bias %db strides = [1, 1] padding = [0, 1, 0, 0] dilations = [1, 1] groups = 8 : (tensor<2x8x1x5xf32>, tensor<8x1x1x2xf32>, tensor<8xf32>) -> tensor<2x8x1x5xf32>
  %13 = merak.conv2d %img, %gw strides = [1, 1] padding = [0, 1, 0, 0] dilations = [1, 1] groups = 4 : (tensor<2x8x1x5xf32>, tensor<8x2x1x2xf32>) -> tensor<2x8x1x5xf32>
  %14 = merak.conv2d_backward_data %img, %dw strides = [1, 1] padding = [0, 1, 0, 0] dilations = [1, 1] groups = 8 : (tensor<2x8x1x5xf32>, tensor<8x1x1x2xf32>) -> tensor<2x8x1x5xf32>
  %15 = merak.reshape %q : tensor<2x4x8x3xf32> to tensor<2x4x3x8xf32>
  return
}
)mlir";

struct Rules {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  SmallVector<Operation *> ops;
  Rules() {
    DialectRegistry registry;
    registry.insert<MerakDialect, func::FuncDialect>();
    registerShardingRuleExternalModels(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(kModule, &ctx);
    if (module)
      module->walk([&](Operation *op) {
        if (isa<MerakDialect>(op->getDialect()))
          ops.push_back(op);
      });
  }
  std::optional<ShardingRule> rule(unsigned i) {
    return cast<ShardingRuleOpInterface>(ops[i]).getShardingRule();
  }
};

using Where = std::optional<std::pair<int64_t, int64_t>>;
Where at(int64_t dim, int64_t blocks) { return std::pair<int64_t, int64_t>(dim, blocks); }

TEST(ShardingRule, MatmulContractionIsAReduction) {
  Rules r;
  ASSERT_TRUE(r.module);
  auto rule = r.rule(0);
  ASSERT_TRUE(rule);
  // A split of x's features (the contraction K) lands on the reduction
  // factor, which the weight holds on its dim 0 and the result does not.
  auto k = rule->locate(rule->operands[0], 2, 1);
  ASSERT_TRUE(k);
  EXPECT_EQ(rule->factors[k->factor].kind, FactorKind::Reduction);
  EXPECT_EQ(rule->find(rule->operands[1], *k), at(0, 1));
  EXPECT_EQ(rule->find(rule->results[0], *k), std::nullopt);
  // The output features N: parallel, the weight's dim 1, the result's dim 2.
  auto n = rule->locate(rule->operands[1], 1, 1);
  ASSERT_TRUE(n);
  EXPECT_EQ(rule->factors[n->factor].kind, FactorKind::Parallel);
  EXPECT_EQ(rule->find(rule->results[0], *n), at(2, 1));
  EXPECT_EQ(rule->find(rule->operands[0], *n), std::nullopt);
}

TEST(ShardingRule, ElementwiseBroadcasts) {
  Rules r;
  auto rule = r.rule(1);
  ASSERT_TRUE(rule);
  auto c = rule->locate(rule->operands[0], 2, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(rule->find(rule->operands[1], *c), at(0, 1)); // the bias [6]
  auto t = rule->locate(rule->operands[0], 1, 1);
  ASSERT_TRUE(t);
  EXPECT_EQ(rule->find(rule->operands[1], *t), std::nullopt); // broadcast
  EXPECT_EQ(rule->find(rule->results[0], *t), at(1, 1));
}

TEST(ShardingRule, ReshapeRefines) {
  Rules r;
  auto rule = r.rule(2);
  ASSERT_TRUE(rule);
  // [2, 8, 12] -> [2, 8, 4, 3]: dim 2 of the input is the factors (4, 3).
  ASSERT_EQ(rule->operands[0][2].size(), 2u);
  auto heads = rule->locate(rule->operands[0], 2, 1);
  ASSERT_TRUE(heads);
  EXPECT_EQ(rule->factors[heads->factor].size, 4);
  EXPECT_EQ(rule->find(rule->results[0], *heads), at(2, 1));
  // Blocks 2 of 12 fall inside the heads factor: the heads dim with blocks 2.
  auto half = rule->locate(rule->operands[0], 2, 2);
  ASSERT_TRUE(half);
  EXPECT_EQ(rule->find(rule->results[0], *half), at(2, 2));
  // Blocks 4 of 12 are the minor factor 3 (stride 3): dim 3.
  auto minor = rule->locate(rule->operands[0], 2, 4);
  ASSERT_TRUE(minor);
  EXPECT_EQ(rule->find(rule->results[0], *minor), at(3, 1));
}

TEST(ShardingRule, ReshapeWithoutRefinement) {
  Rules r;
  // Dimension `dim` of the operand is a replicated factor the result lacks.
  auto replicatedAlone = [](const ShardingRule &rule, int64_t dim) {
    auto f = rule.locate(rule.operands[0], dim, 1);
    return f && rule.factors[f->factor].kind == FactorKind::Replicated &&
           !rule.find(rule.results[0], *f);
  };
  // [2, 3] -> [3, 2] has no common refinement: each dimension is a
  // replicated factor of its own side.
  auto flat = r.rule(8);
  ASSERT_TRUE(flat);
  EXPECT_TRUE(replicatedAlone(*flat, 0));
  EXPECT_TRUE(replicatedAlone(*flat, 1));
  // [2, 4, 8, 3] -> [2, 4, 3, 8] (Funnel's relative shift): the batch and
  // the heads before the mixed dimensions stay shared parallel factors.
  auto shift = r.rule(15);
  ASSERT_TRUE(shift);
  for (int64_t dim : {0, 1}) {
    auto kept = shift->locate(shift->operands[0], dim, 1);
    ASSERT_TRUE(kept);
    EXPECT_EQ(shift->factors[kept->factor].kind, FactorKind::Parallel);
    EXPECT_EQ(shift->find(shift->results[0], *kept), at(dim, 1));
  }
  EXPECT_TRUE(replicatedAlone(*shift, 2));
  EXPECT_TRUE(replicatedAlone(*shift, 3));
}

TEST(ShardingRule, EqualSplitSelectsParts) {
  Rules r;
  auto rule = r.rule(3);
  ASSERT_TRUE(rule);
  // A split of the fused axis with blocks 1 lands on the part selector,
  // which cannot be split; blocks 3 would put it past the selector.
  auto sel = rule->locate(rule->operands[0], 2, 1);
  ASSERT_TRUE(sel);
  EXPECT_EQ(rule->factors[sel->factor].kind, FactorKind::Replicated);
  EXPECT_EQ(rule->blocksPastReplicated(rule->operands[0], 2, *sel), 3);
  auto part = rule->locate(rule->operands[0], 2, 3);
  ASSERT_TRUE(part);
  for (unsigned i = 0; i < 3; ++i)
    EXPECT_EQ(rule->find(rule->results[i], *part), at(2, 1));
}

TEST(ShardingRule, AxesThatCannotSplit) {
  Rules r;
  auto softmax = r.rule(4);
  ASSERT_TRUE(softmax);
  EXPECT_EQ(softmax->factors[softmax->locate(softmax->operands[0], 3, 1)->factor].kind,
            FactorKind::Replicated);
  EXPECT_EQ(softmax->factors[softmax->locate(softmax->operands[0], 1, 1)->factor].kind,
            FactorKind::Parallel);
  auto norm = r.rule(9);
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->factors[norm->locate(norm->operands[0], 2, 1)->factor].kind,
            FactorKind::Replicated);
  EXPECT_EQ(norm->find(norm->results[0], *norm->locate(norm->operands[0], 0, 1)), at(0, 1));
}

TEST(ShardingRule, TransposeReduceGather) {
  Rules r;
  auto t = r.rule(5);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->find(t->results[0], *t->locate(t->operands[0], 1, 1)), at(2, 1));
  auto sum = r.rule(6);
  ASSERT_TRUE(sum);
  auto c = sum->locate(sum->operands[0], 2, 1);
  EXPECT_EQ(sum->factors[c->factor].kind, FactorKind::Reduction);
  EXPECT_EQ(sum->find(sum->results[0], *sum->locate(sum->operands[0], 1, 1)), at(1, 1));
  auto g = r.rule(7);
  ASSERT_TRUE(g);
  // The table's rows are looked up (replicated), its columns and the
  // indices' dims go to the result.
  EXPECT_EQ(g->factors[g->locate(g->operands[0], 0, 1)->factor].kind, FactorKind::Replicated);
  EXPECT_EQ(g->find(g->results[0], *g->locate(g->operands[0], 1, 1)), at(2, 1));
  EXPECT_EQ(g->find(g->results[0], *g->locate(g->operands[1], 0, 1)), at(0, 1));
}

// The accumulating form (merak-fuse-grad-accumulation's, after sharding)
// has no rule: split on its summed rows, every part would add the
// accumulator once. The plain scatter-add's rows are a reduction.
TEST(ShardingRule, AccumulatingFormsHaveNone) {
  Rules r;
  ASSERT_TRUE(r.module);
  auto plain = r.rule(10);
  ASSERT_TRUE(plain);
  auto rows = plain->locate(plain->operands[0], 0, 1);
  ASSERT_TRUE(rows);
  EXPECT_EQ(plain->factors[rows->factor].kind, FactorKind::Reduction);
  EXPECT_FALSE(r.rule(11));
}

// A depthwise convolution (one channel per group) keeps its channels
// split: input dim 1, weight dim 0, bias and result dim 1 share a parallel
// factor (so does its input gradient); a convolution of larger groups
// mixes the channels of a group, which stay replicated.
TEST(ShardingRule, DepthwiseConvolutionKeepsChannels) {
  Rules r;
  auto dw = r.rule(12);
  ASSERT_TRUE(dw);
  auto c = dw->locate(dw->operands[0], 1, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(dw->factors[c->factor].kind, FactorKind::Parallel);
  EXPECT_EQ(dw->find(dw->operands[1], *c), at(0, 1));
  EXPECT_EQ(dw->find(dw->operands[2], *c), at(0, 1));
  EXPECT_EQ(dw->find(dw->results[0], *c), at(1, 1));
  auto grouped = r.rule(13);
  ASSERT_TRUE(grouped);
  EXPECT_EQ(grouped->factors[grouped->locate(grouped->operands[0], 1, 1)->factor].kind,
            FactorKind::Replicated);
  auto back = r.rule(14);
  ASSERT_TRUE(back);
  auto g = back->locate(back->operands[0], 1, 1);
  ASSERT_TRUE(g);
  EXPECT_EQ(back->factors[g->factor].kind, FactorKind::Parallel);
  EXPECT_EQ(back->find(back->operands[1], *g), at(0, 1));
  EXPECT_EQ(back->find(back->results[0], *g), at(1, 1));
}

} // namespace
