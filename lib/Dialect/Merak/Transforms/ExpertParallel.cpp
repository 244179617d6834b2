//===- ExpertParallel.cpp - merak-expert-parallel -------------------------===//
//
// Expert parallelism with Megatron-LM's all-gather dispatcher (see
// ShardingPasses.td). Per expert GEMM, with W a parameter [E, ...] read only
// by expert GEMMs:
//
//   expert_matmul(x [S, K], W [E, O, K][e [S]])                  -> [S, O]
//     => reduce_scatter_ep(expert_matmul(all_gather_ep(x) [ep S, K],
//            W [E/ep, O, K][all_gather_ep(e) first group_rank_ep * E/ep]))
//
// W becomes this rank's E/ep experts (merak.shard axis 0, group "ep"). A
// row of another rank's expert is a zero row here, so the sum of the
// reduce-scatter is exact. With the all-to-all dispatcher (the default)
// the all-gather of x and the reduce-scatter become merak.all_to_all's
// dispatch and combine, which move only the rows each rank's experts need
// and give the same values; the ids are all-gathered either way. The
// all-gathers and dispatches of one value and the `first` of one E/ep are
// built once, before the first GEMM that reads them.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKEXPERTPARALLEL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// `t` with its leading dimension multiplied by `factor`.
RankedTensorType scaleLeading(RankedTensorType t, int64_t num, int64_t den) {
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = shape[0] * num / den;
  return RankedTensorType::get(shape, t.getElementType());
}

struct MerakExpertParallelPass : merak::impl::MerakExpertParallelBase<MerakExpertParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ep < 1) {
      module.emitError("merak-expert-parallel: ep must be at least 1, got ") << (int64_t)ep;
      return signalPassFailure();
    }
    if (dispatcher != "alltoall" && dispatcher != "allgather") {
      module.emitError("merak-expert-parallel: dispatcher must be alltoall or allgather, got '")
          << dispatcher << "'";
      return signalPassFailure();
    }
    if (ep == 1)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-expert-parallel: no single-block func.func @") << entry;
      return signalPassFailure();
    }
    SmallVector<ExpertMatmulOp> gemms;
    fn.walk([&](ExpertMatmulOp op) {
      if (!op.getFirst())
        gemms.push_back(op);
    });
    if (gemms.empty()) {
      fn.emitError("merak-expert-parallel: --ep ")
          << (int64_t)ep
          << " needs a Mixture-of-Experts model, but @" << entry
          << " has no expert GEMM (merak.expert_matmul, formed by merak-fuse-experts from "
             "transformers' batched_mm experts)";
      return signalPassFailure();
    }
    FailureOr<SmallVector<ParamOp>> params = checkWeights(module, fn, gemms);
    if (failed(params))
      return signalPassFailure();
    for (ParamOp p : *params)
      shardParam(module, fn, p);
    for (ExpertMatmulOp op : gemms)
      rewrite(op);
  }

  /// The weights' parameters, after checking every one (before any change).
  FailureOr<SmallVector<ParamOp>> checkWeights(ModuleOp module, func::FuncOp fn,
                                               ArrayRef<ExpertMatmulOp> gemms) {
    llvm::SetVector<Operation *> params;
    for (ExpertMatmulOp op : gemms) {
      auto get = op.getWeight().getDefiningOp<GetParamOp>();
      if (!get)
        return op.emitError("merak-expert-parallel: the expert weight is not a parameter "
                            "(merak.get_param), so it cannot be split over the ep ranks"),
               failure();
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
      int64_t experts = tensorOf(op.getWeight()).getDimSize(0);
      if (experts % ep != 0)
        return op.emitError("merak-expert-parallel: ")
                   << experts << " experts do not divide by --ep " << (int64_t)ep,
               failure();
      params.insert(param);
    }
    for (Operation *p : params) {
      auto param = cast<ParamOp>(p);
      if (param->hasAttr(kShardAttr))
        return param.emitError("merak-expert-parallel: the expert weight @")
                   << param.getSymName() << " is already sharded",
               failure();
      std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(param, module);
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto get = dyn_cast<GetParamOp>(use.getUser());
        bool ok = get && get->getParentOfType<func::FuncOp>() == fn &&
                  llvm::all_of(get->getUses(), [](OpOperand &u) {
                    auto mm = dyn_cast<ExpertMatmulOp>(u.getOwner());
                    return mm && u.getOperandNumber() == 1;
                  });
        if (!ok)
          return use.getUser()->emitError("merak-expert-parallel: the expert weight @")
                     << param.getSymName()
                     << " is read here other than as an expert GEMM's weight, so it cannot "
                        "be split over the ep ranks",
                 failure();
      }
    }
    return llvm::map_to_vector(params, [](Operation *p) { return cast<ParamOp>(p); });
  }

  /// The param holds this rank's E / ep experts; its reads are retyped.
  void shardParam(ModuleOp module, func::FuncOp fn, ParamOp param) {
    RankedTensorType local = scaleLeading(param.getTensorType(), 1, ep);
    param.setTypeAttr(TypeAttr::get(local));
    ShardLayout layout;
    layout.axis = 0;
    layout.parts = ep;
    layout.group = "ep";
    setShardLayout(param, layout);
    fn.walk([&](GetParamOp get) {
      if (get.getName() == param.getSymName())
        get.getResult().setType(local);
    });
  }

  /// `v` gathered over the ep group, built once right after `v` is defined
  /// (or at the function's start for an argument).
  Value gathered(Value v) {
    if (Value done = gathers.lookup(v))
      return done;
    OpBuilder b(v.getContext());
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    Value g = AllGatherOp::create(b, v.getLoc(), TypeRange{scaleLeading(tensorOf(v), ep, 1)},
                                  ValueRange{v}, "ep")
                  .getResult(0);
    gathers[v] = g;
    return g;
  }

  /// `group_rank("ep") * local`: the first expert this rank holds, built
  /// once per `local` at the function's start.
  Value firstExpert(func::FuncOp fn, Location loc, int64_t local) {
    if (Value done = firsts.lookup(local))
      return done;
    OpBuilder b = OpBuilder::atBlockBegin(&fn.getBody().front());
    auto i64 = RankedTensorType::get({}, b.getI64Type());
    Value rank = GroupRankOp::create(b, loc, i64, "ep");
    Value n = ConstantOp::create(b, loc, DenseElementsAttr::get(i64, b.getI64IntegerAttr(local)));
    Value first = MulOp::create(b, loc, rank, n);
    firsts[local] = first;
    return first;
  }

  /// `op`'s input dispatched to the experts' ranks by the gathered ids `e`,
  /// built once per (input, ids) before the first GEMM reading it.
  Value dispatched(ExpertMatmulOp op, Value e, int64_t perRank) {
    Value x = op.getInput();
    auto key = std::make_pair(x, e);
    if (Value done = dispatches.lookup(key))
      return done;
    OpBuilder b(op);
    Value d = AllToAllOp::create(b, op.getLoc(), scaleLeading(tensorOf(x), ep, 1), x, e,
                                 b.getStringAttr("ep"), UnitAttr(),
                                 b.getI64IntegerAttr(perRank))
                  .getResult();
    dispatches[key] = d;
    return d;
  }

  void rewrite(ExpertMatmulOp op) {
    auto fn = op->getParentOfType<func::FuncOp>();
    Location loc = op.getLoc();
    Value ids = op.getExperts();
    if (tensorOf(ids).getElementType().isInteger(32)) { // the gather concatenates i64
      OpBuilder b(op);
      ids = CastOp::create(b, loc, RankedTensorType::get(tensorOf(ids).getShape(),
                                                         b.getI64Type()),
                           ids);
    }
    const int64_t perRank = tensorOf(op.getWeight()).getDimSize(0);
    Value e = gathered(ids);
    Value first = firstExpert(fn, loc, perRank);
    const bool allToAll = dispatcher == "alltoall";
    Value x = allToAll ? dispatched(op, e, perRank) : gathered(op.getInput());
    OpBuilder b(op);
    RankedTensorType rows = tensorOf(op.getResult());
    Value local = ExpertMatmulOp::create(b, loc, scaleLeading(rows, ep, 1), x, op.getWeight(), e,
                                         first, op.getTransposeWeight(),
                                         b.getI64IntegerAttr(perRank * ep));
    Value mine =
        allToAll
            ? AllToAllOp::create(b, loc, rows, local, e, b.getStringAttr("ep"), b.getUnitAttr(),
                                 b.getI64IntegerAttr(perRank))
                  .getResult()
            : ReduceScatterOp::create(b, loc, TypeRange{rows}, ValueRange{local}, "ep", "sum")
                  .getResult(0);
    op.getResult().replaceAllUsesWith(mine);
    op.erase();
  }

  DenseMap<Value, Value> gathers;
  DenseMap<std::pair<Value, Value>, Value> dispatches;
  DenseMap<int64_t, Value> firsts;
};
} // namespace
