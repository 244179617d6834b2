//===- CacheParamCasts.cpp - merak-cache-param-casts ----------------------===//
//
// With --precision bf16 every fragment of every micro-batch converts the
// float32 weights it multiplies by (merak-mixed-precision's casts). Megatron
// keeps a bf16 copy of the weights next to its float32 master copy; so does
// this pass, per stage:
//
//   merak.param @w : tensor<KxNxf32>                 merak.param @w ...
//                                                     merak.param @"pipeline.cast.bf16.w"
//   func @stage0_forward(...)                           : tensor<KxNxbf16> {merak.kind = "scratch"}
//     %w = merak.get_param @w                  ==>   func @stage0_prepare()   // once a step
//     %c = merak.cast %w : f32 to bf16                 %w = merak.get_param @w
//     ... %c ...                                       %c = merak.cast %w
//   (the same in the backward and the other           merak.set_param @"pipeline.cast.bf16.w", %c
//    parts of every micro-batch)                     func @stage0_forward(...)
//                                                      %c = merak.get_param @"pipeline.cast.bf16.w"
//
// The runner calls each stage's `prepare` fragment at the start of every
// step, after the previous update wrote the float32 weights (and after a
// restore or an expert move), so the copy is never stale and never saved:
// its kind is "scratch". The values are bitwise those of the casts it
// replaces. Update fragments keep their own casts, and so do reads of a
// parameter that a micro-batch fragment writes (BatchNorm's running
// statistics change within a step).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKCACHEPARAMCASTS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-cache-param-casts"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// A parameter cast to a narrower float type, read through the cache.
struct Cached {
  StringRef param;
  RankedTensorType type; ///< the cast's result
};

struct MerakCacheParamCastsPass : merak::impl::MerakCacheParamCastsBase<MerakCacheParamCastsPass> {
  using Base::Base;

  /// The cast of a parameter's storage worth caching: float to a float of
  /// fewer bits, straight from merak.get_param.
  static GetParamOp castParam(CastOp cast) {
    auto get = cast.getInput().getDefiningOp<GetParamOp>();
    auto from = cast.getInput().getType(), to = cast.getResult().getType();
    auto fromT = dyn_cast<RankedTensorType>(from), toT = dyn_cast<RankedTensorType>(to);
    if (!get || !fromT || !toT)
      return nullptr;
    auto fromE = dyn_cast<FloatType>(fromT.getElementType());
    auto toE = dyn_cast<FloatType>(toT.getElementType());
    return fromE && toE && toE.getWidth() < fromE.getWidth() ? get : nullptr;
  }

  /// The cache parameter of `c`, declared after the parameter (once).
  ParamOp cacheParam(SymbolTable &symbols, const Cached &c) {
    std::string elt;
    llvm::raw_string_ostream os(elt);
    os << c.type.getElementType();
    std::string name = ("pipeline.cast." + elt + "." + c.param).str();
    if (auto existing = symbols.lookup<ParamOp>(name))
      return existing;
    auto param = symbols.lookup<ParamOp>(c.param);
    OpBuilder b(param);
    b.setInsertionPointAfter(param);
    auto cache =
        ParamOp::create(b, param.getLoc(), b.getStringAttr(name), TypeAttr::get(c.type),
                        SplatElementsAttr::get(c.type, b.getZeroAttr(c.type.getElementType())));
    cache->setAttr(kKindAttr, b.getStringAttr("scratch"));
    symbols.insert(cache);
    return cache;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!getPipelinePlan(module))
      return;
    // Parameters a micro-batch fragment writes (BatchNorm's running
    // statistics): they change within a step, so a copy made at its start
    // would be stale.
    llvm::StringSet<> writtenWithinStep;
    auto microbatchFragment = [](func::FuncOp fn) {
      auto [stage, kind] = pipelineFragmentStageKind(fn);
      return stage >= 0 && kind != "update" && kind != "prepare";
    };
    for (auto fn : module.getOps<func::FuncOp>())
      if (microbatchFragment(fn))
        fn.walk([&](SetParamOp set) { writtenWithinStep.insert(set.getName()); });
    // Per stage, the casts of its micro-batch fragments, by parameter.
    std::map<int64_t, llvm::MapVector<std::pair<StringRef, Type>, SmallVector<CastOp>>> casts;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!microbatchFragment(fn))
        continue;
      int64_t stage = pipelineFragmentStageKind(fn).first;
      fn.walk([&](CastOp cast) {
        if (GetParamOp get = castParam(cast); get && !writtenWithinStep.contains(get.getName()))
          casts[stage][{get.getName(), cast.getResult().getType()}].push_back(cast);
      });
    }
    SymbolTable symbols(module);
    for (auto &[stage, byParam] : casts) {
      std::string name = ("stage" + Twine(stage) + "_prepare").str();
      if (symbols.lookup(name)) {
        module.emitError("merak-cache-param-casts: @") << name << " exists already";
        return signalPassFailure();
      }
      OpBuilder mb(module.getBodyRegion());
      mb.setInsertionPointToEnd(module.getBody());
      Location loc = module.getLoc();
      auto prepare = func::FuncOp::create(mb, loc, name, mb.getFunctionType({}, {}));
      prepare->setAttr(kFragmentAttr, mb.getDictionaryAttr(
                                          {mb.getNamedAttr("stage", mb.getI64IntegerAttr(stage)),
                                           mb.getNamedAttr("kind", mb.getStringAttr("prepare"))}));
      symbols.insert(prepare);
      OpBuilder pb = OpBuilder::atBlockEnd(prepare.addEntryBlock());
      for (auto &[key, uses] : byParam) {
        Cached c{key.first, cast<RankedTensorType>(key.second)};
        ParamOp cache = cacheParam(symbols, c);
        GetParamOp source = castParam(uses.front());
        Value w = GetParamOp::create(pb, loc, source.getType(), source.getNameAttr());
        Value narrow = CastOp::create(pb, loc, c.type, w);
        SetParamOp::create(pb, loc, FlatSymbolRefAttr::get(cache.getSymNameAttr()), narrow);
        for (CastOp use : uses) {
          GetParamOp get = castParam(use);
          OpBuilder ub(use);
          Value read = GetParamOp::create(ub, use.getLoc(), c.type,
                                          FlatSymbolRefAttr::get(cache.getSymNameAttr()));
          use.getResult().replaceAllUsesWith(read);
          use.erase();
          if (get->use_empty())
            get.erase();
        }
      }
      func::ReturnOp::create(pb, loc);
      LLVM_DEBUG(llvm::dbgs() << "@" << name << ": " << byParam.size() << " cached casts\n");
    }
  }
};
} // namespace
