//===- Optimizer.cpp - merak-optimizer ------------------------------------===//
//
// Builds @train_step from @loss_grad: gradient clipping and the
// learning-rate schedule as scalar merak ops, then one fused update op per
// parameter (merak.adamw_update / adan_update / sgd_update), with
// merak.set_param writing parameters and optimizer state (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include <cmath>
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKOPTIMIZER
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-optimizer"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// The group a ZeRO part is split over: "dp", or for an expert shard
/// (expert parallelism) the ranks holding the same experts, "edp".
StringRef zeroGroup(bool expert) { return expert ? "edp" : "dp"; }

/// Builds ops at one location; scalars are rank-0 tensors of `elem`.
struct Ops {
  OpBuilder &b;
  Location loc;
  Type elem;

  Value c(double v) {
    return ConstantOp::create(
        b, loc, SplatElementsAttr::get(RankedTensorType::get({}, elem), b.getFloatAttr(elem, v)));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
  Value where(Value c, Value x, Value y) { return WhereOp::create(b, loc, c, x, y); }
};

struct MerakOptimizerPass : merak::impl::MerakOptimizerBase<MerakOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    symbols.emplace(module);
    // @loss_grad -> @train_step, and every gradient function marked
    // merak.update (merak-pipeline's stages) -> the update it names.
    SmallVector<std::pair<func::FuncOp, std::string>> targets;
    if (auto grad = module.lookupSymbol<func::FuncOp>("loss_grad"))
      targets.push_back({grad, "train_step"});
    for (auto f : module.getOps<func::FuncOp>())
      if (auto update = f->getAttrOfType<StringAttr>("merak.update"))
        targets.push_back({f, update.str()});
    if (targets.empty()) {
      module.emitError("merak-optimizer: no @loss_grad (run merak-autodiff with entry=loss)");
      return signalPassFailure();
    }
    for (auto &target : targets)
      if (module.lookupSymbol(target.second)) {
        module.emitError("merak-optimizer: the module already has a @") << target.second;
        return signalPassFailure();
      }
    if (optimizer != "sgd" && optimizer != "adamw" && optimizer != "adan") {
      module.emitError("merak-optimizer: unknown optimizer '")
          << optimizer << "' (expected sgd, adamw or adan)";
      return signalPassFailure();
    }
    if (schedule != "constant" && schedule != "linear-warmup" && schedule != "cosine") {
      module.emitError("merak-optimizer: unknown schedule '")
          << schedule << "' (expected constant, linear-warmup or cosine)";
      return signalPassFailure();
    }
    if (schedule == "cosine" && totalSteps <= warmupSteps) {
      module.emitError("merak-optimizer: the cosine schedule needs total-steps > warmup-steps");
      return signalPassFailure();
    }
    if (failed(checkHyperparameters(module)))
      return signalPassFailure();
    bool adan = optimizer == "adan";
    b1 = beta1 >= 0 ? beta1 : (adan ? 0.02 : 0.9);
    b2 = beta2 >= 0 ? beta2 : (adan ? 0.08 : 0.999);
    wd = weightDecay >= 0 ? weightDecay : (optimizer == "adamw" ? 0.01 : 0.0);
    for (auto &[grad, name] : targets)
      if (failed(build(module, grad, name)))
        return signalPassFailure();
  }

  double b1 = 0, b2 = 0, wd = 0;

  /// Every hyper-parameter in its domain, so that a bad value is a compile
  /// error naming it rather than a NaN (or an internal error) at run time.
  /// -1 is the "the optimizer's default" of beta1, beta2 and weight-decay.
  LogicalResult checkHyperparameters(ModuleOp module) {
    auto bad = [&](StringRef name, double v, StringRef domain) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", v);
      module.emitError("merak-optimizer: ") << name << " = " << text << " is not " << domain;
      return failure();
    };
    auto finite = [](double v) { return std::isfinite(v); };
    if (!finite(lr) || lr < 0)
      return bad("lr", lr, "a finite number >= 0");
    if (!finite(minLr) || minLr < 0)
      return bad("min-lr", minLr, "a finite number >= 0");
    for (auto [name, v] : {std::pair<StringRef, double>("beta1", beta1), {"beta2", beta2}})
      if (v != -1 && !(v >= 0 && v < 1))
        return bad(name, v, "in [0, 1)");
    if (!(beta3 >= 0 && beta3 < 1))
      return bad("beta3", beta3, "in [0, 1)");
    if (!finite(eps) || eps <= 0)
      return bad("eps", eps, "a finite number > 0");
    if (weightDecay != -1 && (!finite(weightDecay) || weightDecay < 0))
      return bad("weight-decay", weightDecay, "a finite number >= 0");
    if (!finite(momentum) || momentum < 0)
      return bad("momentum", momentum, "a finite number >= 0");
    if (!finite(clipNorm) || clipNorm < 0)
      return bad("clip-norm", clipNorm, "a finite number >= 0 (0: off)");
    if (warmupSteps < 0 || totalSteps < 0) {
      module.emitError("merak-optimizer: warmup-steps and total-steps must be >= 0");
      return failure();
    }
    return success();
  }

  /// The ZeRO layout of the parameter being updated (its gradient is a
  /// part of the averaged gradient), if any.
  std::optional<ZeroLayout> zero;

  /// A zero-initialised state parameter next to `param` (with ZeRO, of the
  /// local part's type).
  Value state(ModuleOp module, OpBuilder &b, ParamOp param, StringRef slot) {
    std::string name = ("optimizer." + optimizer + "." + slot + "." + param.getSymName()).str();
    if (auto existing = symbols->lookup<ParamOp>(name)) { // held by several updates
      stateNames.push_back(name);
      return GetParamOp::create(b, param.getLoc(), existing.getTensorType(),
                                FlatSymbolRefAttr::get(b.getContext(), name));
    }
    OpBuilder pb(param);
    pb.setInsertionPointAfter(param);
    auto type = param.getTensorType();
    if (zero) {
      type = RankedTensorType::get({zero->partSize()}, type.getElementType());
      auto state = ParamOp::create(pb, param.getLoc(), pb.getStringAttr(name), TypeAttr::get(type),
                                   SplatElementsAttr::get(type, pb.getZeroAttr(type.getElementType())));
      state->setAttr(kKindAttr, pb.getStringAttr("state"));
      state->setAttr(kZeroAttr, zeroLayoutAttr(pb.getContext(), *zero));
      // A tensor-parallel shard's state: the parts split the local shard.
      if (std::optional<ShardLayout> shard = getShardLayout(param))
        setShardLayout(state, *shard);
      symbols->insert(state);
      stateNames.push_back(name);
      return GetParamOp::create(b, param.getLoc(), type, FlatSymbolRefAttr::get(b.getContext(), name));
    }
    // A tensor-parallel shard's state is sharded alike (its initial value,
    // like the parameter's, has the full shape).
    std::optional<ShardLayout> shard = getShardLayout(param);
    auto initType = shard ? globalShardType(type, *shard) : type;
    auto state = ParamOp::create(pb, param.getLoc(), pb.getStringAttr(name), TypeAttr::get(type),
                                 SplatElementsAttr::get(initType, pb.getZeroAttr(type.getElementType())));
    state->setAttr(kKindAttr, pb.getStringAttr("state"));
    if (shard)
      setShardLayout(state, *shard);
    symbols->insert(state);
    stateNames.push_back(name);
    return GetParamOp::create(b, param.getLoc(), type, FlatSymbolRefAttr::get(b.getContext(), name));
  }
  SmallVector<std::string> stateNames;
  /// The module's symbols, kept up to date with the state parameters and
  /// hyper-parameters the pass adds (a lookup per parameter would walk the
  /// whole module each time).
  std::optional<SymbolTable> symbols;

  void set(OpBuilder &b, Location loc, StringRef name, Value v) {
    SetParamOp::create(b, loc, FlatSymbolRefAttr::get(b.getContext(), name), v);
  }

  /// A run-time hyper-parameter: a scalar parameter of kind "hparam" named
  /// `optimizer.hparams.<key>` holding the compile-time value, so that the
  /// generated program can override it from its command line (--lr).
  Value hparam(ModuleOp module, Ops &o, StringRef key, double value) {
    std::string name = ("optimizer.hparams." + key).str();
    auto type = RankedTensorType::get({}, o.elem);
    if (!symbols->lookup(name)) {
      OpBuilder pb = OpBuilder::atBlockBegin(module.getBody());
      auto p = ParamOp::create(pb, module.getLoc(), pb.getStringAttr(name), TypeAttr::get(type),
                               SplatElementsAttr::get(type, pb.getFloatAttr(o.elem, value)));
      p->setAttr(kKindAttr, pb.getStringAttr("hparam"));
      symbols->insert(p);
    }
    return GetParamOp::create(o.b, o.loc, type, FlatSymbolRefAttr::get(o.b.getContext(), name));
  }

  /// The learning rate at `step` (rank-0, i64): the schedule, scaled from
  /// the run-time peak learning rate.
  Value learningRate(ModuleOp module, Ops &o, Value step) {
    Value peak = hparam(module, o, "lr", lr);
    if (schedule == "constant" || warmupSteps <= 0) {
      if (schedule != "cosine")
        return peak;
    }
    Value stepF = CastOp::create(o.b, o.loc, RankedTensorType::get({}, o.elem), step);
    Value t = o.add(stepF, o.c(1.0));
    Value warm = warmupSteps > 0 ? o.min(o.c(1.0), o.div(t, o.c((double)warmupSteps))) : o.c(1.0);
    Value warmLr = o.mul(peak, warm);
    if (schedule == "linear-warmup")
      return warmLr;
    // cosine: progress in [0, 1] after the warm-up.
    Value progress = o.div(o.sub(stepF, o.c((double)warmupSteps)),
                           o.c((double)(totalSteps - warmupSteps)));
    progress = ClampOp::create(o.b, o.loc, progress, o.b.getF64FloatAttr(0.0),
                               o.b.getF64FloatAttr(1.0));
    Value cosv = CosOp::create(o.b, o.loc, o.mul(o.c(M_PI), progress));
    Value halfRange = o.mul(o.c(0.5), o.sub(peak, o.c(minLr)));
    Value decayed = o.add(o.c(minLr), o.mul(halfRange, o.add(o.c(1.0), cosv)));
    if (warmupSteps <= 0)
      return decayed;
    Value inWarmup = LtOp::create(o.b, o.loc, stepF, o.c((double)warmupSteps));
    return o.where(inWarmup, warmLr, decayed);
  }

  LogicalResult build(ModuleOp module, func::FuncOp grad, StringRef name) {
    OpBuilder mb(grad);
    mb.setInsertionPointAfter(grad);
    auto fn = cast<func::FuncOp>(mb.clone(*grad));
    fn.setSymName(name);
    for (StringRef attr : {"merak.update", "merak.norm_group", "merak.norm_skip"})
      fn->removeAttr(attr);
    auto i64 = RankedTensorType::get({}, mb.getI64Type());
    if (failed(fn.insertArgument(fn.getNumArguments(), i64,
                                 mb.getDictionaryAttr(mb.getNamedAttr(
                                     "merak.name", mb.getStringAttr("step"))),
                                 fn.getLoc())))
      return failure();
    Value step = fn.getArguments().back();
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    Value loss = ret.getOperand(0);
    Type elem = cast<RankedTensorType>(loss.getType()).getElementType();
    OpBuilder b(ret);
    Ops o{b, fn.getLoc(), elem};

    // Gradients by parameter, from the result names "grad:<param>".
    SmallVector<std::pair<ParamOp, Value>> grads;
    SmallVector<std::optional<ZeroLayout>> zeros; // per gradient (merak-data-parallel zero=1)
    for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
      auto name = fn.getResultAttrOfType<StringAttr>(i, "merak.name");
      if (!name || !name.getValue().starts_with("grad:"))
        return fn.emitError("merak-optimizer: result ") << i << " of @loss_grad is not a gradient";
      auto param = symbols->lookup<ParamOp>(name.getValue().drop_front(5));
      if (!param)
        return fn.emitError("merak-optimizer: no parameter for ") << name;
      if (Type pe = cast<RankedTensorType>(param.getType()).getElementType(); pe != elem)
        return param.emitError("merak-optimizer: parameter '")
               << param.getSymName() << "' is " << pe << " but the loss is " << elem
               << ": merak trains parameters in the loss's type; export the model in float32 "
                  "(model.float()) and compile with --precision bf16 for bf16 compute over "
                  "float32 master weights";
      grads.push_back({param, ret.getOperand(i)});
      zeros.push_back(getZeroLayout(fn.getResultAttr(i, kZeroAttr)));
    }

    // Global gradient norm and clipping (torch.nn.utils.clip_grad_norm_).
    // Tensor-parallel shards hold parts of their gradients: their squares
    // are summed over "tp"; replicated gradients are counted once.
    // ZeRO parts (zero padded) are summed over "dp" (parts of a shard's
    // gradient: over "dp", then with the shards over "tp").
    // Expert-parallel shards (merak-expert-parallel) hold other experts on
    // every rank of "ep": their squares are summed over "ep".
    Value sumSq = o.c(0.0), shardSq, zeroSq, zeroShardSq, expertSq, zeroExpertSq;
    auto normSkip = grad->getAttrOfType<ArrayAttr>("merak.norm_skip");
    for (auto [index, pg] : llvm::enumerate(grads)) {
      auto &[param, g] = pg;
      if (normSkip && llvm::is_contained(normSkip.getValue(), param.getSymNameAttr()))
        continue; // a tied copy whose norm another stage counts
      auto gt = cast<RankedTensorType>(g.getType());
      Value part =
          SumSquaresOp::create(b, o.loc, RankedTensorType::get({}, gt.getElementType()), g);
      Value *into = &sumSq;
      if (isExpertShard(param))
        into = zeros[index] ? &zeroExpertSq : &expertSq;
      else if (param->hasAttr(kShardAttr))
        into = zeros[index] ? &zeroShardSq : &shardSq;
      else if (zeros[index])
        into = &zeroSq;
      *into = *into ? o.add(*into, part) : part;
    }
    // `partial` summed over `group`, added to `into` (or alone).
    auto addSummed = [&](Value into, Value partial, StringRef group) -> Value {
      Value sum =
          AllReduceOp::create(b, o.loc, ValueRange{partial}, group, "sum").getResult(0);
      return into ? o.add(into, sum) : sum;
    };
    if (zeroShardSq)
      shardSq = addSummed(shardSq, zeroShardSq, "dp");
    if (shardSq)
      sumSq = addSummed(sumSq, shardSq, "tp");
    if (zeroSq)
      sumSq = addSummed(sumSq, zeroSq, "dp");
    if (zeroExpertSq) // ZeRO parts of expert shards: over "edp", then "ep"
      expertSq = addSummed(expertSq, zeroExpertSq, "edp");
    if (expertSq)
      sumSq = addSummed(sumSq, expertSq, "ep");
    if (auto group = grad->getAttrOfType<StringAttr>("merak.norm_group"))
      sumSq = AllReduceOp::create(b, o.loc, ValueRange{sumSq}, group.getValue(), "sum")
                  .getResult(0);
    Value norm = o.sqrt(sumSq);
    Value coef;
    if (clipNorm > 0)
      coef = o.min(o.c(1.0), o.div(o.c(clipNorm), o.add(norm, o.c(1e-6))));
    Value lrT = learningRate(module, o, step);

    // ZeRO: updated parts waiting for their all-gather, gathered in buckets
    // of about bucket-bytes; an expert shard's parts over its "edp" group.
    SmallVector<std::tuple<ParamOp, Value, int64_t>> pendings[2]; // param, part, parts
    int64_t pendingBytes[2] = {0, 0};
    auto gather = [&](bool expert) {
      auto &pending = pendings[expert];
      if (pending.empty())
        return;
      SmallVector<Value> parts;
      SmallVector<Type> types;
      for (auto &[param, part, n] : pending) {
        auto t = cast<RankedTensorType>(part.getType());
        parts.push_back(part);
        types.push_back(RankedTensorType::get({t.getDimSize(0) * n}, t.getElementType()));
      }
      auto ag = AllGatherOp::create(b, o.loc, types, parts, zeroGroup(expert));
      for (auto [entry, full] : llvm::zip(pending, ag.getResults())) {
        ParamOp param = std::get<0>(entry);
        set(b, param.getLoc(), param.getSymName(),
            buildZeroUnflatten(b, param.getLoc(), full, param.getTensorType()));
      }
      pending.clear();
      pendingBytes[expert] = 0;
    };
    for (auto [index, pg] : llvm::enumerate(grads)) {
      auto &[param, gIn] = pg;
      zero = zeros[index];
      Location loc = param.getLoc();
      Value g = gIn;
      Value p = GetParamOp::create(b, loc, param.getTensorType(), FlatSymbolRefAttr::get(b.getContext(), param.getSymName()));
      const bool expert = isExpertShard(param);
      if (zero) // this rank's part of the (replicated) parameter
        p = LocalShardOp::create(b, loc, g.getType(),
                                 buildZeroFlatten(b, loc, p, zero->parts), zeroGroup(expert));
      // One fused update op per parameter; its results are written back
      // with set_param (state first, then the parameter, as before).
      auto f64 = [&](double v) { return b.getF64FloatAttr(v); };
      Value updated;
      if (optimizer == "sgd") {
        Value buf;
        std::string bufName;
        if (momentum != 0) {
          buf = state(module, b, param, "momentum_buffer");
          bufName = stateNames.back();
        }
        SmallVector<Type> types(buf ? 2 : 1, p.getType());
        auto op = SgdUpdateOp::create(b, loc, types, p, g, buf, lrT, coef, f64(momentum), f64(wd),
                                      momentum != 0 && nesterov ? b.getUnitAttr() : UnitAttr());
        if (buf)
          set(b, loc, bufName, op.getResult(1));
        updated = op.getResult(0);
      } else if (optimizer == "adamw") {
        Value m = state(module, b, param, "exp_avg");
        std::string mName = stateNames.back();
        Value v = state(module, b, param, "exp_avg_sq");
        std::string vName = stateNames.back();
        auto op = AdamWUpdateOp::create(b, loc, p.getType(), p.getType(), p.getType(), p, g, m, v,
                                        lrT, step, coef, f64(b1), f64(b2), f64(eps), f64(wd));
        set(b, loc, mName, op.getNewExpAvg());
        set(b, loc, vName, op.getNewExpAvgSq());
        updated = op.getNewParam();
      } else {
        // Adan, Algorithm 1 with m0 = g0, v0 = 0, n0 = g0^2.
        Value prev = state(module, b, param, "prev_grad");
        std::string prevName = stateNames.back();
        Value mOld = state(module, b, param, "exp_avg");
        std::string mName = stateNames.back();
        Value vOld = state(module, b, param, "exp_avg_diff");
        std::string vName = stateNames.back();
        Value nOld = state(module, b, param, "exp_avg_sq");
        std::string nName = stateNames.back();
        Type t = p.getType();
        auto op = AdanUpdateOp::create(b, loc, TypeRange{t, t, t, t, t}, p, g, mOld, vOld, nOld,
                                       prev, lrT, step, coef, f64(b1), f64(b2),
                                       f64(beta3.getValue()), f64(eps), f64(wd));
        set(b, loc, mName, op.getNewExpAvg());
        set(b, loc, vName, op.getNewExpAvgDiff());
        set(b, loc, nName, op.getNewExpAvgSq());
        set(b, loc, prevName, op.getNewPrevGrad());
        updated = op.getNewParam();
      }
      if (!zero) {
        set(b, loc, param.getSymName(), updated);
        continue;
      }
      pendings[expert].push_back({param, updated, zero->parts});
      auto full = param.getTensorType();
      pendingBytes[expert] += full.getNumElements() * storageElementBytes(full.getElementType());
      if (pendingBytes[expert] >= bucketBytes)
        gather(expert);
    }
    gather(false);
    gather(true);
    zero.reset();
    func::ReturnOp::create(b, ret.getLoc(), ValueRange{loss, norm, lrT});
    ret.erase();
    SmallVector<Type> types{loss.getType(), norm.getType(), lrT.getType()};
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
    SmallVector<DictionaryAttr> names;
    for (StringRef n : {"loss", "grad_norm", "lr"})
      names.push_back(b.getDictionaryAttr(b.getNamedAttr("merak.name", b.getStringAttr(n))));
    fn.setAllResultAttrs(ArrayRef<DictionaryAttr>(names));
    return success();
  }
};
} // namespace
