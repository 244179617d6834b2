//===- SyncBatchNorm.cpp - merak-sync-batch-norm --------------------------===//
//
// Batch normalisation with statistics over the whole data-parallel batch
// (PyTorch's nn.SyncBatchNorm), for meshes with dp > 1. After
// merak-split-batch each rank's program holds its own rows; every
// training-mode
//
//   %y = merak.batch_norm %x, %w, %b, %m, %v {training[, momentum = M]}
//
// of @forward (x [N, C, ...], n local values per channel) becomes, with
// sums kept as [1, C, 1, ...]:
//
//   %mean = merak.all_reduce (reduce_sum %x) group = "dp" / (n dp)
//   %xc   = %x - %mean
//   %var  = merak.all_reduce (reduce_sum %xc * %xc) group = "dp" / (n dp)
//   %y    = %xc * rsqrt(%var + eps) * %w + %b
//
// (two passes, so the variance keeps its precision as the kernel's does),
// and with `momentum` the running statistics take the global batch's:
// M * old + (1 - M) * mean, and the variance unbiased by n dp / (n dp - 1);
// the batch counter counts too. The all-reduces' derivative is the
// all-reduce of the gradients (VJPCollectives.cpp), which gives every rank
// the global sums PyTorch's backward all-reduces. Micro-batches stay
// separate (one all-reduce per micro-batch, as SyncBatchNorm under
// gradient accumulation).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "BatchNormUtil.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKSYNCBATCHNORM
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakSyncBatchNormPass : merak::impl::MerakSyncBatchNormBase<MerakSyncBatchNormPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn) {
      module.emitError("merak-sync-batch-norm: no @") << entry;
      return signalPassFailure();
    }
    const int64_t dp = getMesh(module).dp;
    if (dp == 1)
      return;
    SmallVector<BatchNormOp> ops;
    fn.walk([&](BatchNormOp op) {
      if (op.getTraining())
        ops.push_back(op);
    });
    for (BatchNormOp op : ops)
      if (failed(rewrite(module, op, dp)))
        return signalPassFailure();
  }

  /// A splat constant of type `t`.
  static Value splat(OpBuilder &b, Location loc, RankedTensorType t, double v) {
    return ConstantOp::create(b, loc,
                              SplatElementsAttr::get(t, b.getFloatAttr(t.getElementType(), v)));
  }

  LogicalResult rewrite(ModuleOp module, BatchNormOp op, int64_t dp) {
    auto x = cast<RankedTensorType>(op.getInput().getType());
    if (x.getRank() < 2)
      return op.emitError("merak-sync-batch-norm: the input needs a channel dimension");
    SmallVector<int64_t> axes{0}, keep(x.getRank(), 1);
    int64_t n = x.getDimSize(0);
    for (int64_t d = 2; d < x.getRank(); ++d) {
      axes.push_back(d);
      n *= x.getDimSize(d);
    }
    keep[1] = x.getDimSize(1);
    const double total = static_cast<double>(n) * static_cast<double>(dp);
    auto keepType = RankedTensorType::get(keep, x.getElementType());
    Location loc = op.getLoc();
    OpBuilder b(op);
    auto globalMean = [&](Value v) {
      Value local = ReduceSumOp::create(b, loc, v, axes, true);
      Value sum = AllReduceOp::create(b, loc, ValueRange{local}, "dp", "sum").getResult(0);
      return MulOp::create(b, loc, sum, splat(b, loc, keepType, 1.0 / total)).getResult();
    };
    auto channels = [&](Value v) { return ReshapeOp::create(b, loc, keepType, v).getResult(); };
    Value mean = globalMean(op.getInput());
    Value xc = SubOp::create(b, loc, op.getInput(), mean);
    Value var = globalMean(MulOp::create(b, loc, xc, xc));
    const double eps = op.getEpsilon().convertToDouble();
    Value rstd = RsqrtOp::create(b, loc, AddOp::create(b, loc, var, splat(b, loc, keepType, eps)));
    Value y = MulOp::create(b, loc, xc, rstd);
    y = MulOp::create(b, loc, y, channels(op.getScale()));
    y = AddOp::create(b, loc, y, channels(op.getBias()));
    op.getResult().replaceAllUsesWith(y);
    if (auto m = op.getMomentumAttr())
      if (failed(updateRunning(module, op, b, mean, var, m.getValueAsDouble(), total)))
        return failure();
    op.erase();
    return success();
  }

  /// The running statistics from the global batch's mean and variance
  /// (unbiased), as merak-batch-norm-stats writes them from a part's.
  LogicalResult updateRunning(ModuleOp module, BatchNormOp op, OpBuilder &b, Value mean, Value var,
                              double momentum, double total) {
    auto stats = runningStatistics(module, op, "merak-sync-batch-norm");
    if (!stats)
      return success();
    auto [rm, rv] = *stats;
    if (total < 2)
      return op.emitError("merak-sync-batch-norm: the batch normalisation of '")
             << rm.getName() << "' trains over " << total
             << " value per channel; the unbiased variance needs two or more";
    Location loc = op.getLoc();
    auto channel = cast<RankedTensorType>(rm.getType());
    auto blend = [&](GetParamOp param, Value batch, double factor) {
      Value old = GetParamOp::create(b, loc, channel, param.getNameAttr());
      Value flat = ReshapeOp::create(b, loc, channel, batch);
      Value kept = MulOp::create(b, loc, old, splat(b, loc, channel, momentum));
      Value fresh = MulOp::create(b, loc, flat, splat(b, loc, channel, (1 - momentum) * factor));
      SetParamOp::create(b, loc, param.getNameAttr(), AddOp::create(b, loc, kept, fresh));
    };
    blend(rm, mean, 1.0);
    blend(rv, var, total / (total - 1));
    countBatchNormForward(module, b, loc, rm.getName());
    return success();
  }
};
} // namespace
