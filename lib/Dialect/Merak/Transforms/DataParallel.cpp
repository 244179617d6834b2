//===- DataParallel.cpp - merak-data-parallel -----------------------------===//
//
// Averages @loss_grad's loss and gradients over the data-parallel group in
// buckets (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKDATAPARALLEL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-data-parallel"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakDataParallelPass : merak::impl::MerakDataParallelBase<MerakDataParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp < 1 || bucketBytes < 1) {
      module.emitError("merak-data-parallel: dp and bucket-bytes must be positive");
      return signalPassFailure();
    }
    if (zero != 0 && zero != 1) {
      module.emitError("merak-data-parallel: zero must be 0 or 1, got ") << (int64_t)zero;
      return signalPassFailure();
    }
    if (dp == 1)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>("loss_grad");
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-data-parallel: no @loss_grad (run merak-autodiff with entry=loss)");
      return signalPassFailure();
    }
    Block &block = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    DenseMap<Operation *, int64_t> position;
    int64_t n = 0;
    for (Operation &op : block)
      position[&op] = n++;
    auto defPos = [&](Value v) -> int64_t {
      Operation *def = v.getDefiningOp();
      return def ? position[def] : -1;
    };

    // Gradients (results 1..), the last computed first.
    SmallVector<unsigned> order;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i)
      order.push_back(i);
    llvm::stable_sort(order, [&](unsigned a, unsigned b) {
      return defPos(ret.getOperand(a)) > defPos(ret.getOperand(b));
    });

    // Expert parallelism: an expert shard's gradient is averaged over the
    // ranks holding the same experts ("edp"), in buckets of its own.
    // One symbol table, looked up once per result.
    const int64_t ep = getMesh(module).ep;
    SymbolTable symbols(module);
    SmallVector<bool> expertGrad(ret.getNumOperands(), false);
    for (unsigned i = 1; i < ret.getNumOperands(); ++i)
      if (auto name = fn.getResultAttrOfType<StringAttr>(i, "merak.name");
          name && name.getValue().starts_with("grad:"))
        if (Operation *param = symbols.lookup(name.getValue().drop_front(5)))
          expertGrad[i] = isExpertShard(param);
    // ZeRO splits an expert shard's gradient over its "edp" group (none
    // when that is one rank: dp == ep).
    auto zeroParts = [&](bool expert) -> int64_t { return !zero ? 1 : expert ? dp / ep : dp; };

    DenseMap<Value, Value> averaged;
    SmallVector<Value> buckets[2]; // [expert shards?]
    int64_t filled[2] = {0, 0}; // bytes in each bucket
    auto flush = [&](bool expert) {
      SmallVector<Value> &bucket = buckets[expert];
      if (bucket.empty())
        return;
      // Right after the bucket's last-computed member (the terminator's
      // position stands for block arguments and values defined before).
      Value last = *llvm::max_element(bucket, [&](Value a, Value b) {
        return defPos(a) < defPos(b);
      });
      OpBuilder b(fn.getContext());
      if (Operation *def = last.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&block);
      if (int64_t n = zeroParts(expert); n > 1) {
        // ZeRO-1: this rank keeps its part of every averaged gradient.
        SmallVector<Value> mean = buildZeroGradientMean(b, fn.getLoc(), bucket, expert, n, ep);
        for (auto [from, to] : llvm::zip(bucket, mean))
          averaged[from] = to;
      } else {
        SmallVector<Value> mean = buildGradientMean(b, fn.getLoc(), bucket, expert, dp, ep);
        for (auto [from, to] : llvm::zip(bucket, mean))
          averaged[from] = to;
      }
      bucket.clear();
      filled[expert] = 0;
    };
    for (unsigned i : order) {
      Value g = ret.getOperand(i);
      bool expert = expertGrad[i];
      if (averaged.count(g) || llvm::is_contained(buckets[expert], g))
        continue;
      auto t = cast<RankedTensorType>(g.getType());
      buckets[expert].push_back(g);
      filled[expert] +=
          t.getNumElements() * std::max<int64_t>(1, storageElementBytes(t.getElementType()));
      if (filled[expert] >= bucketBytes)
        flush(expert);
    }
    flush(false);
    flush(true);

    // The loss, for reporting: the mean over the global batch.
    OpBuilder b(ret);
    Value loss = ret.getOperand(0);
    averaged[loss] = AllReduceOp::create(b, fn.getLoc(), ValueRange{loss}, "dp", "mean")
                         .getResult(0);
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (int64_t n = i > 0 ? zeroParts(expertGrad[i]) : 1; n > 1) {
        auto full = cast<RankedTensorType>(ret.getOperand(i).getType());
        ZeroLayout layout{n, SmallVector<int64_t>(full.getShape())};
        fn.setResultAttr(i, kZeroAttr, zeroLayoutAttr(fn.getContext(), layout));
      }
      ret.setOperand(i, averaged.lookup(ret.getOperand(i)));
    }
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                                 ret.getOperandTypes()));
  }
};
} // namespace
