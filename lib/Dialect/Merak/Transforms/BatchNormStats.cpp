//===- BatchNormStats.cpp - merak-batch-norm-stats ------------------------===//
//
// The running statistics of batch normalisation, updated by training as
// PyTorch's nn.BatchNorm* updates its buffers. For every
//
//   %m = merak.get_param @bn.running_mean
//   %v = merak.get_param @bn.running_var
//   %y = merak.batch_norm %x, %s, %b, %m, %v {training, momentum = M}
//
// of @forward, right after the normalisation:
//
//   %m', %v' = merak.get_param @bn.running_mean, @bn.running_var
//   %nm, %nv = merak.batch_norm_stats %x, %m', %v' momentum = M
//   merak.set_param @bn.running_mean, %nm
//   merak.set_param @bn.running_var, %nv
//
// (batch_norm_stats: M * old + (1 - M) * the batch mean and the unbiased
// batch variance, n / (n - 1) times the population one, n the values per
// channel: the rows this part computes times the spatial size; one pass
// pair over x per channel, no temporaries.)
// %m', %v' read the parameters again, so two normalisations sharing
// statistics update them in turn. The parameters become buffers
// (`merak.kind = "buffer"`): never trained, saved in checkpoints, one value
// per rank. It runs after merak-split-batch, so n is what one part (a data
// parallel rank's micro-batch) normalises over, as PyTorch's DDP without
// SyncBatchNorm and gradient accumulation over micro-batches do; the
// pipeline partitioner keeps these writes in the forward fragments (not in
// the backward's recomputation), so they happen once per micro-batch, in
// order. The `momentum` attribute is consumed.
//
// nn.BatchNorm* also counts its training forwards in the int64 buffer
// `<prefix>.num_batches_tracked`, which torch's exporter drops. Next to a
// running mean named `<prefix>.running_mean`, the pass declares that
// buffer (0 at the start, unless the file has it) and adds 1 per forward:
//
//   %c = merak.get_param @bn.num_batches_tracked
//   merak.set_param @bn.num_batches_tracked, (merak.add %c, 1)
//
// so the checkpoint holds every key of the module's state_dict.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "BatchNormUtil.h"

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
    warnMomentumZero(updated);
    for (BatchNormOp op : updated)
      if (failed(update(module, op)))
        return signalPassFailure();
  }

  /// One warning for the normalisations whose momentum is 0 (the running
  /// statistics replaced by each batch's): torch's exporter writes both
  /// nn.BatchNorm*(momentum=1.0) and momentum=None (a cumulative average)
  /// that way, and the file cannot tell which it was.
  static void warnMomentumZero(MutableArrayRef<BatchNormOp> ops) {
    auto zero = [](BatchNormOp op) { return op.getMomentumAttr().getValueAsDouble() == 0.0; };
    auto first = llvm::find_if(ops, zero);
    if (first == ops.end())
      return;
    InFlightDiagnostic d = first->emitWarning("merak-batch-norm-stats: ");
    d << llvm::count_if(ops, zero) << " batch normalisation(s) ";
    if (auto mean = first->getMean().getDefiningOp<GetParamOp>())
      d << "(the first: '" << mean.getName() << "') ";
    d << "have momentum 0 in the file, so each training batch replaces their running statistics "
         "(nn.BatchNorm*(momentum=1.0)); torch's exporter writes momentum=None (a cumulative "
         "average of the batches) the same way, which merak cannot recover: export with an "
         "explicit momentum if that was meant";
  }

  /// The update of one normalisation's statistics (none, with a warning,
  /// when they are not parameters).
  LogicalResult update(ModuleOp module, BatchNormOp op) {
    double momentum = op.getMomentumAttr().getValueAsDouble();
    op.removeMomentumAttr();
    auto stats = runningStatistics(module, op, "merak-batch-norm-stats");
    if (!stats)
      return success();
    auto [mean, var] = *stats;
    auto x = cast<RankedTensorType>(op.getInput().getType());
    int64_t n = x.getDimSize(0);
    for (int64_t d = 2; d < x.getRank(); ++d)
      n *= x.getDimSize(d);
    if (n < 2)
      return op.emitError("merak-batch-norm-stats: the batch normalisation of '")
             << mean.getName() << "' trains over " << n << " value per channel (this part's "
             << x.getDimSize(0)
             << " row(s) x the spatial size); the unbiased variance of its "
                "running statistics needs two or more (PyTorch refuses it too): use a larger "
                "batch per data-parallel rank and micro-batch";
    Location loc = op.getLoc();
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    auto channel = cast<RankedTensorType>(mean.getType());
    Value oldMean = GetParamOp::create(b, loc, channel, mean.getNameAttr());
    Value oldVar = GetParamOp::create(b, loc, channel, var.getNameAttr());
    auto update = BatchNormStatsOp::create(b, loc, channel, channel, op.getInput(), oldMean, oldVar,
                                           b.getF64FloatAttr(momentum));
    SetParamOp::create(b, loc, mean.getNameAttr(), update.getNewMean());
    SetParamOp::create(b, loc, var.getNameAttr(), update.getNewVar());
    countBatchNormForward(module, b, loc, mean.getName());
    return success();
  }
};
} // namespace

std::optional<std::pair<GetParamOp, GetParamOp>>
mlir::merak::runningStatistics(ModuleOp module, BatchNormOp op, StringRef pass) {
  auto mean = op.getMean().getDefiningOp<GetParamOp>();
  auto var = op.getVar().getDefiningOp<GetParamOp>();
  if (!mean || !var || mean.getName() == var.getName()) {
    op.emitWarning(pass) << ": the running statistics are not two parameters (initializers), "
                            "so training does not update them";
    return std::nullopt;
  }
  for (GetParamOp get : {mean, var})
    if (auto p = module.lookupSymbol<ParamOp>(get.getNameAttr()))
      p->setAttr(kKindAttr, StringAttr::get(module.getContext(), kBufferKind));
  return std::make_pair(mean, var);
}

void mlir::merak::countBatchNormForward(ModuleOp module, OpBuilder &b, Location loc,
                                        StringRef meanName) {
  if (!meanName.ends_with("running_mean"))
    return;
  std::string name =
      (meanName.drop_back(StringRef("running_mean").size()) + "num_batches_tracked").str();
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  auto counter = module.lookupSymbol<ParamOp>(name);
  if (!counter) {
    if (module.lookupSymbol(name))
      return;
    auto mean = module.lookupSymbol<ParamOp>(meanName);
    OpBuilder pb(mean);
    pb.setInsertionPointAfter(mean);
    counter = ParamOp::create(pb, loc, pb.getStringAttr(name), TypeAttr::get(i64),
                              DenseElementsAttr::get(i64, pb.getI64IntegerAttr(0)));
  } else if (counter.getTensorType() != i64) {
    return;
  }
  counter->setAttr(kKindAttr, StringAttr::get(module.getContext(), kBufferKind));
  auto ref = FlatSymbolRefAttr::get(b.getContext(), name);
  Value count = GetParamOp::create(b, loc, i64, ref);
  Value one = ConstantOp::create(b, loc, DenseElementsAttr::get(i64, b.getI64IntegerAttr(1)));
  SetParamOp::create(b, loc, ref, AddOp::create(b, loc, count, one));
}
