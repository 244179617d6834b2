//===- MoeAuxLoss.cpp - merak-moe-aux-loss --------------------------------===//
//
// Adds the Switch Transformer load-balancing loss of the Mixture-of-Experts
// layers to @loss, as transformers computes it for Mixtral-style models
// (load_balancing_loss_func, over all L layers' N routed tokens together):
//
//   f[e] = (number of top-k choices of expert e, all layers) / (L N)
//   P[e] = (sum over the layers' tokens of softmax(router logits)[., e]) / (L N)
//   loss += coefficient * E * sum_e f[e] P[e]
//
// f is a count (no gradient); P carries the gradient into the routers.
//
// A layer is found from its expert GEMMs (merak.expert_matmul; the gate/up
// and down GEMMs of a layer share their `experts` operand): the router's
// choice is the top-k of a [N, E] score tensor, which the importer spells
// as a `merak.gather_elements` of the scores at the k indices; the expert
// indices derive from those indices. The scores are the router's softmax
// (Mixtral, Qwen2-MoE, OLMoE: top-k of the probabilities) or its logits
// (GPT-OSS: top-k first, softmax of the k values after), whose softmax P
// is then taken here.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKMOEAUXLOSS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

namespace {
RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// One MoE layer's routing: the top-k indices [N, k] and the scores [N, E]
/// they were chosen from.
struct Routing {
  GatherElementsOp topk;
  int64_t experts = 0;
};

/// The integer values `experts` derives from (through integer ops: the
/// reshape of the top-k indices, the wrap of negative ones), at most
/// `limit` of them.
llvm::SetVector<Value> integerAncestors(Value experts, size_t limit = 64) {
  llvm::SetVector<Value> seen;
  SmallVector<Value> work{experts};
  while (!work.empty() && seen.size() < limit) {
    Value v = work.pop_back_val();
    if (!seen.insert(v))
      continue;
    if (Operation *def = v.getDefiningOp())
      for (Value in : def->getOperands())
        if (isa<IntegerType>(tensorOf(in).getElementType()))
          work.push_back(in);
  }
  return seen;
}

/// The top-k of the layer whose expert GEMM reads `experts`, among the
/// function's [N, k] gathers of [N, E] scores (`topks`).
FailureOr<Routing> routingOf(ExpertMatmulOp mm, ArrayRef<GatherElementsOp> topks) {
  Value ids = mm.getExperts();
  int64_t e = tensorOf(mm.getWeight()).getDimSize(0);
  if (auto plan = ids.getDefiningOp<ExpertShadowPlanOp>()) // shadowing renames the ids
    ids = plan.getExperts();
  if (auto place = ids.getDefiningOp<ExpertPlaceOp>()) // dynamic placement maps them
    ids = place.getExperts();
  if (auto gathered = ids.getDefiningOp<AllGatherOp>()) {
    // Expert parallelism: the GEMM holds E / ep experts and reads the ep
    // group's ids; the layer's routing is this rank's.
    ids = gathered.getInputs()[0];
    e *= gathered.getParts();
  }
  int64_t rows = tensorOf(ids).getDimSize(0);
  llvm::SetVector<Value> ancestors = integerAncestors(ids);
  GatherElementsOp found;
  for (GatherElementsOp g : topks) {
    RankedTensorType scores = tensorOf(g.getData()), idx = tensorOf(g.getIndices());
    if (scores.getDimSize(1) == e && idx.getDimSize(0) * idx.getDimSize(1) == rows &&
        ancestors.contains(g.getIndices())) {
      found = g;
      break;
    }
  }
  if (!found)
    return mm.emitError("merak-moe-aux-loss: cannot find the router of this expert GEMM: "
                        "expected its expert indices to be the top-k of a [tokens, ")
           << e << "] score tensor";
  return Routing{found, e};
}

struct MerakMoeAuxLossPass : merak::impl::MerakMoeAuxLossBase<MerakMoeAuxLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>("loss");
    if (!fn) {
      module.emitError("merak-moe-aux-loss: no func.func @loss (run merak-attach-loss first)");
      return signalPassFailure();
    }
    if (!(coefficient >= 0) || !std::isfinite(coefficient)) {
      module.emitError("merak-moe-aux-loss: the coefficient must be >= 0, got ") << coefficient;
      return signalPassFailure();
    }
    // The candidate top-ks: a float [N, E] score tensor gathered at [N, k]
    // indices along the experts.
    SmallVector<GatherElementsOp> topks;
    fn.walk([&](GatherElementsOp g) {
      RankedTensorType scores = tensorOf(g.getData()), idx = tensorOf(g.getIndices());
      if (scores.getRank() == 2 && idx.getRank() == 2 &&
          scores.getDimSize(0) == idx.getDimSize(0) && isa<FloatType>(scores.getElementType()))
        topks.push_back(g);
    });
    // One routing per layer (its GEMMs share the top-k), in program order.
    SmallVector<Routing> layers;
    llvm::SmallPtrSet<Operation *, 8> seen;
    WalkResult walk = fn.walk([&](ExpertMatmulOp mm) {
      if (mm.getWeight().getDefiningOp<ExpertShadowOp>()) // shadow copies: see their layer's
        return WalkResult::advance();
      FailureOr<Routing> r = routingOf(mm, topks);
      if (failed(r))
        return WalkResult::interrupt();
      if (seen.insert(r->topk).second)
        layers.push_back(*r);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (layers.empty()) {
      fn.emitError("merak-moe-aux-loss: the model has no Mixture-of-Experts layer (no "
                   "merak.expert_matmul: see merak-fuse-experts)");
      return signalPassFailure();
    }
    int64_t e = layers.front().experts;
    if (llvm::any_of(layers, [&](const Routing &r) { return r.experts != e; })) {
      fn.emitError("merak-moe-aux-loss: the MoE layers have different numbers of experts");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    OpBuilder b(ret);
    Location loc = fn.getLoc();
    Value loss = ret.getOperand(0);
    Type f = tensorOf(loss).getElementType();
    Value counts, probs;
    int64_t total = 0;
    for (Routing r : layers) {
      Value scores = r.topk.getData(), idx = r.topk.getIndices();
      RankedTensorType it = tensorOf(idx);
      int64_t n = it.getDimSize(0), k = it.getDimSize(1);
      total += n;
      // P: the scores are probabilities when they come from a softmax over
      // the experts, logits otherwise.
      auto sm = scores.getDefiningOp<SoftmaxOp>();
      int64_t axis = sm ? static_cast<int64_t>(sm.getAxis()) : 0;
      bool overExperts = sm && (axis == 1 || axis == -1);
      Value p = overExperts ? scores : Value(SoftmaxOp::create(b, loc, scores, 1));
      if (tensorOf(p).getElementType() != f)
        p = CastOp::create(b, loc, RankedTensorType::get(tensorOf(p).getShape(), f), p);
      Value column = ReshapeOp::create(
          b, loc, RankedTensorType::get({n * k, 1}, it.getElementType()), idx);
      auto iotaType = RankedTensorType::get({1, e}, it.getElementType());
      SmallVector<APInt> iota;
      for (int64_t i = 0; i < e; ++i)
        iota.push_back(APInt(it.getElementTypeBitWidth(), i));
      Value ids = ConstantOp::create(
          b, loc, cast<ElementsAttr>(DenseElementsAttr::get(iotaType, iota)));
      Value hits = EqOp::create(b, loc, column, ids);
      Value ones = CastOp::create(b, loc, RankedTensorType::get({n * k, e}, f), hits);
      Value c = ReduceSumOp::create(b, loc, ones, ArrayRef<int64_t>{0}, false);
      Value ps = ReduceSumOp::create(b, loc, p, ArrayRef<int64_t>{0}, false);
      counts = counts ? Value(AddOp::create(b, loc, counts, c)) : c;
      probs = probs ? Value(AddOp::create(b, loc, probs, ps)) : ps;
    }
    // coefficient * E * sum_e (counts / total) (probs / total)
    Value dot = ReduceSumOp::create(b, loc, MulOp::create(b, loc, counts, probs),
                                    ArrayRef<int64_t>{0}, false);
    double scale = coefficient * (double)e / ((double)total * (double)total);
    auto scalar = RankedTensorType::get({}, f);
    Value s = ConstantOp::create(
        b, loc, cast<ElementsAttr>(DenseElementsAttr::get(
                    scalar, ArrayRef<Attribute>{b.getFloatAttr(f, scale)})));
    Value aux = MulOp::create(b, loc, dot, s);
    ret.setOperand(0, AddOp::create(b, loc, loss, aux));
  }
};
} // namespace
