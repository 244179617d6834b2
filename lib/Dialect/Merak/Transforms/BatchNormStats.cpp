//===- BatchNormStats.cpp - merak-batch-norm-stats ------------------------===//
//
// The running statistics of batch normalisation, updated by training as
// PyTorch's nn.BatchNorm* updates its buffers. For every
//
//   %m = merak.get_param @bn.running_mean
//   %v = merak.get_param @bn.running_var
//   %y = merak.batch_norm %x, %s, %b, %m, %v {training, momentum = M}
//
// of @forward, right after the normalisation (n values per channel: the
// batch rows this part computes times the spatial size):
//
//   %mk   = merak.reduce_mean %x axes = [0, 2, ...] {keepdims}
//   %d    = merak.sub %x, %mk
//   %var  = merak.reduce_mean (%d * %d) axes = [0, 2, ...]      // [C]
//   %mean = merak.reshape %mk to [C]
//   merak.set_param @bn.running_mean, %m' * M + %mean * (1 - M)
//   merak.set_param @bn.running_var,  %v' * M + %var * (n / (n - 1)) * (1 - M)
//
// (%m', %v' read the parameters again, so two normalisations sharing
// statistics update them in turn). The parameters become buffers
// (`merak.kind = "buffer"`): never trained, saved in checkpoints, one value
// per rank. It runs after merak-split-batch, so n is what one part (a data
// parallel rank's micro-batch) normalises over, as PyTorch's DDP without
// SyncBatchNorm and gradient accumulation over micro-batches do; the
// pipeline partitioner keeps these writes in the forward fragments (not in
// the backward's recomputation), so they happen once per micro-batch, in
// order. The `momentum` attribute is consumed.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKBATCHNORMSTATS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
/// `value` with `type`'s shape and element type, every element `x`.
Value splat(OpBuilder &b, Location loc, RankedTensorType type, double x) {
  return ConstantOp::create(b, loc,
                            SplatElementsAttr::get(type, b.getFloatAttr(type.getElementType(), x)));
}

struct MerakBatchNormStatsPass : merak::impl::MerakBatchNormStatsBase<MerakBatchNormStatsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn) {
      module.emitError("merak-batch-norm-stats: no @") << entry;
      return signalPassFailure();
    }
    SmallVector<BatchNormOp> updated;
    fn.walk([&](BatchNormOp op) {
      if (op.getMomentumAttr())
        updated.push_back(op);
    });
    for (BatchNormOp op : updated)
      if (failed(update(module, op)))
        return signalPassFailure();
  }

  /// The update of one normalisation's statistics (none, with a warning,
  /// when they are not parameters).
  LogicalResult update(ModuleOp module, BatchNormOp op) {
    double momentum = op.getMomentumAttr().getValueAsDouble();
    op.removeMomentumAttr();
    auto mean = op.getMean().getDefiningOp<GetParamOp>();
    auto var = op.getVar().getDefiningOp<GetParamOp>();
    if (!mean || !var || mean.getName() == var.getName()) {
      op.emitWarning("merak-batch-norm-stats: the running statistics are not two parameters "
                     "(initializers), so training does not update them");
      return success();
    }
    auto x = cast<RankedTensorType>(op.getInput().getType());
    SmallVector<int64_t> axes{0};
    int64_t n = x.getDimSize(0);
    for (int64_t d = 2; d < x.getRank(); ++d) {
      axes.push_back(d);
      n *= x.getDimSize(d);
    }
    if (n < 2)
      return op.emitError("merak-batch-norm-stats: the batch normalisation of '")
             << mean.getName() << "' trains over " << n << " value per channel (this part's "
             << x.getDimSize(0)
             << " row(s) x the spatial size); the unbiased variance of its "
                "running statistics needs two or more (PyTorch refuses it too): use a larger "
                "batch per data-parallel rank and micro-batch";
    for (GetParamOp get : {mean, var})
      if (auto p = module.lookupSymbol<ParamOp>(get.getNameAttr()))
        p->setAttr(kKindAttr, StringAttr::get(module.getContext(), "buffer"));

    Location loc = op.getLoc();
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    auto channel = cast<RankedTensorType>(mean.getType());
    Value in = op.getInput();
    Value meanKept = ReduceMeanOp::create(b, loc, in, axes, true);
    Value centered = SubOp::create(b, loc, in, meanKept);
    Value batchVar =
        ReduceMeanOp::create(b, loc, MulOp::create(b, loc, centered, centered), axes, false);
    Value batchMean = ReshapeOp::create(b, loc, channel, meanKept);
    double unbiased = static_cast<double>(n) / static_cast<double>(n - 1);
    auto write = [&](GetParamOp param, Value batch, double scale) {
      Value old = GetParamOp::create(b, loc, channel, param.getNameAttr());
      Value next = AddOp::create(
          b, loc, MulOp::create(b, loc, old, splat(b, loc, channel, momentum)),
          MulOp::create(b, loc, batch, splat(b, loc, channel, scale * (1 - momentum))));
      SetParamOp::create(b, loc, param.getNameAttr(), next);
    };
    write(mean, batchMean, 1.0);
    write(var, batchVar, unbiased);
    return success();
  }
};
} // namespace
