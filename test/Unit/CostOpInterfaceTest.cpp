//===- CostOpInterfaceTest.cpp - FLOPs and bytes of merak ops -------------===//
//
// CostOpInterface on a few ops, against numbers computed by hand.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::merak;

namespace {

constexpr const char *kModule = R"mlir(
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %img: tensor<1x3x8x8xf32>,
             %k: tensor<6x3x3x3xf32>, %s: tensor<2x4x16x16xf32>, %lab: tensor<6xi64>,
             %lg: tensor<6x10xf32>) {
  %0 = merak.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %1 = merak.conv2d %img, %k strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x3x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
  %2 = merak.add %0, %0 : tensor<2x3x5xf32>, tensor<2x3x5xf32>
  %3 = merak.softmax %s axis = 3 : tensor<2x4x16x16xf32>
  %4 = merak.reshape %0 : tensor<2x3x5xf32> to tensor<6x5xf32>
  %5 = merak.transpose %w perm = [1, 0] : tensor<4x5xf32> to tensor<5x4xf32>
  %6 = merak.cross_entropy %lg, %lab axis = 1 reduction = "mean" : tensor<6x10xf32>, tensor<6xi64> -> tensor<f32>
  %7 = merak.argsort %lg axis = 1 : tensor<6x10xf32> -> tensor<6x10xi64>
  return
}
)mlir";

struct Costs {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  SmallVector<Operation *> ops;
  Costs() {
    ctx.loadDialect<MerakDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kModule, &ctx);
    if (module)
      module->walk([&](Operation *op) {
        if (isa<CostOpInterface>(op))
          ops.push_back(op);
      });
  }
  int64_t flops(unsigned i) { return cast<CostOpInterface>(ops[i]).getFlops(); }
  int64_t bytes(unsigned i) { return cast<CostOpInterface>(ops[i]).getBytesAccessed(); }
};

TEST(CostOpInterface, HandComputed) {
  Costs c;
  ASSERT_TRUE(c.module);
  ASSERT_EQ(c.ops.size(), 8u);
  // matmul [2,3,4] x [4,5]: 2 * (2*3*5) * 4 = 240 FLOPs;
  // bytes 4 * (24 + 20 + 30) = 296.
  EXPECT_EQ(c.flops(0), 240);
  EXPECT_EQ(c.bytes(0), 296);
  // conv 3->6 channels, 3x3 kernel, 8x8 -> 6x6: 2 * (6*6*6) * (3*3*3) = 11664;
  // bytes 4 * (192 + 162 + 216) = 2280.
  EXPECT_EQ(c.flops(1), 11664);
  EXPECT_EQ(c.bytes(1), 2280);
  // add: one FLOP per element (30); reads 2 x 30, writes 30 floats.
  EXPECT_EQ(c.flops(2), 30);
  EXPECT_EQ(c.bytes(2), 360);
  // softmax: 5 per element of 2*4*16*16 = 2048.
  EXPECT_EQ(c.flops(3), 5 * 2048);
  EXPECT_EQ(c.bytes(3), 2 * 4 * 2048);
  // reshape: a view (no FLOPs, no traffic).
  EXPECT_EQ(c.flops(4), 0);
  EXPECT_EQ(c.bytes(4), 0);
  // transpose: the elementwise default (20 elements, read and written).
  EXPECT_EQ(c.flops(5), 20);
  EXPECT_EQ(c.bytes(5), 2 * 4 * 20);
  // cross-entropy over 6x10 logits: 5 per logit; bytes 240 + 48 + 4.
  EXPECT_EQ(c.flops(6), 300);
  EXPECT_EQ(c.bytes(6), 292);
  // argsort of 6 rows of 10: ceil(log2(10)) = 4 comparisons per element
  // (60); reads 240 bytes, writes 480.
  EXPECT_EQ(c.flops(7), 4 * 60);
  EXPECT_EQ(c.bytes(7), 720);
  // estimateOpFlops goes through the interface.
  EXPECT_EQ(estimateOpFlops(c.ops[0]), 240);
  EXPECT_EQ(estimateOpFlops(c.ops[4]), 0);
}

} // namespace
