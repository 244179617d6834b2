//===- SplitBackward.cpp - merak-split-backward ---------------------------===//
//
// Splits merak-pipeline's backward fragments into the parts a schedule runs
// at different times (see Passes.td and docs/parallelism.md, "Pipeline"):
//
//  * zero bubble: B (the input gradients) and W (the weight gradients and
//    their accumulation); B is the backward slice of the "cot:i" results,
//    W every other op;
//  * shifted critical path: R (the ops that depend on the stage inputs or
//    stashed activations but not on the incoming gradients: the recomputed
//    forward) and the rest; plus a forward that also returns R's values.
//
// Each part is built by one routine (`outline`) from a list of the
// original's ops: its arguments are the original's arguments it reads
// (same attributes) and the values of another part it reads (carried
// through a runtime buffer, named "<prefix>:i"); ops that depend on no
// argument are cloned into every part that reads them. The original is then
// erased. One walk per part over the block: linear in the fragment's size.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKSPLITBACKWARD
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-split-backward"

using namespace mlir;
using namespace mlir::merak;

namespace {

constexpr StringLiteral kName = "merak.name";

StringRef argName(func::FuncOp f, unsigned i) {
  auto n = f.getArgAttrOfType<StringAttr>(i, kName);
  return n ? n.getValue() : StringRef();
}

bool isCotangent(StringRef name) { return name.starts_with("cot:"); }

DictionaryAttr named(Builder &b, const Twine &name) {
  return b.getDictionaryAttr(b.getNamedAttr(kName, b.getStringAttr(name)));
}

/// The ops of `body` that depend on no block argument (constants, parameter
/// reads and what is computed from them only): cheap to clone, never
/// carried between parts.
llvm::DenseSet<Operation *> argumentFree(Block &body) {
  llvm::DenseSet<Operation *> dependent, free;
  for (Operation &op : body.without_terminator()) {
    bool dep = op.getNumResults() == 0 || llvm::any_of(op.getOperands(), [&](Value v) {
                 Operation *d = v.getDefiningOp();
                 return !d || dependent.contains(d);
               });
    (dep ? dependent : free).insert(&op);
  }
  return free;
}

/// Erases the ops of `body` whose results nothing reads (e.g. the
/// recomputed loss of the last stage), so no part computes or carries them.
void eraseDeadOps(Block &body) {
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

/// A part of a fragment being outlined into a function of its own.
struct PartSpec {
  std::string name, kind;
  /// The original's ops that move into the part (program order).
  SmallVector<Operation *> ops;
  /// Values of other parts the part reads: its trailing arguments.
  SmallVector<Value> carriedIn;
  std::string carriedInPrefix;
  /// What it returns, with their result attributes.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  /// Whether the part keeps every cotangent argument of the original, read
  /// or not (the backward: the gradient message's layout comes from it).
  bool keepCotangents = false;
};

/// Builds `spec` as a function after `fn` (see the file comment).
func::FuncOp outline(func::FuncOp fn, const PartSpec &spec,
                     const llvm::DenseSet<Operation *> &free, int64_t stage) {
  OpBuilder b(fn);
  b.setInsertionPointAfter(fn);
  Block &body = fn.getBody().front();

  // The arguments it reads, directly or through argument-free ops it clones
  // (those read none), in the original's order.
  llvm::SmallBitVector usedArg(fn.getNumArguments());
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (spec.keepCotangents && isCotangent(argName(fn, i)))
      usedArg.set(i);
  auto noteOperand = [&](Value v) {
    if (auto a = dyn_cast<BlockArgument>(v); a && a.getOwner() == &body)
      usedArg.set(a.getArgNumber());
  };
  for (Operation *op : spec.ops)
    for (Value v : op->getOperands())
      noteOperand(v);
  for (Value v : spec.results)
    noteOperand(v);

  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Value> argSources;
  for (unsigned i : usedArg.set_bits()) {
    argTypes.push_back(fn.getArgument(i).getType());
    argAttrs.push_back(fn.getArgAttrDict(i) ? fn.getArgAttrDict(i) : b.getDictionaryAttr({}));
    argSources.push_back(fn.getArgument(i));
  }
  for (auto [i, v] : llvm::enumerate(spec.carriedIn)) {
    argTypes.push_back(v.getType());
    argAttrs.push_back(named(b, spec.carriedInPrefix + ":" + Twine(i)));
    argSources.push_back(v);
  }
  SmallVector<Type> resultTypes;
  for (Value v : spec.results)
    resultTypes.push_back(v.getType());
  auto part = func::FuncOp::create(b, fn.getLoc(), spec.name,
                                   b.getFunctionType(argTypes, resultTypes));
  Block *entry = part.addEntryBlock();
  IRMapping map;
  for (auto [src, arg] : llvm::zip(argSources, entry->getArguments()))
    map.map(src, arg);

  OpBuilder pb = OpBuilder::atBlockEnd(entry);
  // Clones an argument-free op the part reads but does not own, with the
  // argument-free ops it reads (iteratively, operands first).
  auto materialize = [&](Value v) {
    SmallVector<Operation *> stack;
    if (Operation *d = v.getDefiningOp(); d && !map.contains(v) && free.contains(d))
      stack.push_back(d);
    while (!stack.empty()) {
      Operation *op = stack.back();
      bool ready = true;
      for (Value o : op->getOperands())
        if (!map.contains(o)) {
          ready = false;
          stack.push_back(o.getDefiningOp());
        }
      if (ready) {
        stack.pop_back();
        if (!map.contains(op->getResult(0)))
          pb.clone(*op, map);
      }
    }
  };
  for (Operation *op : spec.ops) {
    for (Value v : op->getOperands())
      if (!map.contains(v))
        materialize(v);
    pb.clone(*op, map);
  }
  SmallVector<Value> results;
  for (Value v : spec.results) {
    if (!map.contains(v))
      materialize(v);
    results.push_back(map.lookupOrDefault(v));
  }
  func::ReturnOp::create(pb, fn.getLoc(), results);
  part.setAllArgAttrs(argAttrs);
  part.setAllResultAttrs(spec.resultAttrs);
  part->setAttr(kFragmentAttr, b.getDictionaryAttr({
                                   b.getNamedAttr("stage", b.getI64IntegerAttr(stage)),
                                   b.getNamedAttr("kind", b.getStringAttr(spec.kind)),
                               }));
  return part;
}

SmallVector<DictionaryAttr> resultAttrsOf(func::FuncOp fn) {
  SmallVector<DictionaryAttr> out;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    out.push_back(fn.getResultAttrDict(i) ? fn.getResultAttrDict(i)
                                          : DictionaryAttr::get(fn.getContext(), {}));
  return out;
}

/// Zero bubble: @stage<s>_backward -> B (same name) + @stage<s>_backward_weight.
void splitWeight(func::FuncOp bwd, int64_t stage) {
  Block &body = bwd.getBody().front();
  eraseDeadOps(body);
  Operation *ret = body.getTerminator();
  llvm::DenseSet<Operation *> free = argumentFree(body);
  // B: the backward slice of the input gradients.
  llvm::DenseSet<Operation *> inB;
  SmallVector<Operation *> work;
  auto need = [&](Value v) {
    if (Operation *d = v.getDefiningOp(); d && inB.insert(d).second)
      work.push_back(d);
  };
  for (Value v : ret->getOperands())
    need(v);
  while (!work.empty())
    for (Value v : work.pop_back_val()->getOperands())
      need(v);

  PartSpec b, w;
  llvm::SetVector<Value> carried;
  for (Operation &op : body.without_terminator()) {
    if (inB.contains(&op)) {
      if (!free.contains(&op))
        b.ops.push_back(&op);
      continue;
    }
    if (free.contains(&op))
      continue; // cloned where read
    w.ops.push_back(&op);
    for (Value v : op.getOperands())
      if (Operation *d = v.getDefiningOp(); d && inB.contains(d) && !free.contains(d))
        carried.insert(v);
  }
  std::string base = bwd.getSymName().str();
  b.name = base;
  b.kind = "backward";
  b.keepCotangents = true;
  b.results.assign(ret->getOperands().begin(), ret->getOperands().end());
  b.resultAttrs = resultAttrsOf(bwd);
  OpBuilder builder(bwd);
  for (auto [i, v] : llvm::enumerate(carried)) {
    b.results.push_back(v);
    b.resultAttrs.push_back(named(builder, "wstash:" + Twine(i)));
  }
  w.name = base + "_weight";
  w.kind = "backward_weight";
  w.carriedIn.assign(carried.begin(), carried.end());
  w.carriedInPrefix = "wstash";
  bwd.setSymName(base + "_unsplit");
  outline(bwd, w, free, stage);
  outline(bwd, b, free, stage);
  bwd.erase();
}

/// Shifted critical path: @stage<s>_backward -> @stage<s>_recompute (R) +
/// the rest (same name), and @stage<s>_forward_keep.
LogicalResult splitRecompute(func::FuncOp fwd, func::FuncOp bwd, int64_t stage) {
  Block &body = bwd.getBody().front();
  eraseDeadOps(body);
  Operation *ret = body.getTerminator();
  llvm::DenseSet<Operation *> free = argumentFree(body);
  // Ops that must stay after the gradient arrives: those reading a
  // cotangent or a gradient accumulator (another micro-batch's backward may
  // still add to it), writes, and what depends on them.
  llvm::DenseSet<Operation *> late;
  llvm::DenseSet<Value> lateValues;
  for (unsigned i = 0; i < bwd.getNumArguments(); ++i)
    if (isCotangent(argName(bwd, i)))
      lateValues.insert(bwd.getArgument(i));
  PartSpec r, rest;
  for (Operation &op : body.without_terminator()) {
    bool isLate = isa<SetParamOp>(op) ||
                  llvm::any_of(op.getOperands(), [&](Value v) { return lateValues.contains(v); });
    if (auto get = dyn_cast<GetParamOp>(op))
      isLate |= get.getName().starts_with(kGradAccumulatorPrefix);
    if (isLate) {
      late.insert(&op);
      for (Value v : op.getResults())
        lateValues.insert(v);
    }
  }
  llvm::SetVector<Value> carried;
  for (Operation &op : body.without_terminator()) {
    if (free.contains(&op) && !late.contains(&op))
      continue; // cloned where read
    if (!late.contains(&op)) {
      r.ops.push_back(&op);
      continue;
    }
    rest.ops.push_back(&op);
    for (Value v : op.getOperands())
      if (Operation *d = v.getDefiningOp(); d && !late.contains(d) && !free.contains(d))
        carried.insert(v);
  }
  for (Value v : ret->getOperands())
    if (Operation *d = v.getDefiningOp(); d && !late.contains(d) && !free.contains(d))
      carried.insert(v);

  OpBuilder builder(bwd);
  std::string base = bwd.getSymName().str();
  std::string prefix = base.substr(0, base.size() - StringRef("backward").size());
  r.name = prefix + "recompute";
  r.kind = "recompute";
  for (auto [i, v] : llvm::enumerate(carried)) {
    r.results.push_back(v);
    r.resultAttrs.push_back(named(builder, "rstash:" + Twine(i)));
  }
  rest.name = base;
  rest.kind = "backward";
  rest.keepCotangents = true;
  rest.carriedIn.assign(carried.begin(), carried.end());
  rest.carriedInPrefix = "rstash";
  rest.results.assign(ret->getOperands().begin(), ret->getOperands().end());
  rest.resultAttrs = resultAttrsOf(bwd);
  bwd.setSymName(base + "_unsplit");
  func::FuncOp rfn = outline(bwd, r, free, stage);
  outline(bwd, rest, free, stage);
  bwd.erase();

  // The forward that keeps R's values: R's ops cloned after the forward's,
  // reading the forward's arguments and stashed results by name.
  func::FuncOp keep = fwd.clone();
  keep.setSymName(prefix + "forward_keep");
  OpBuilder kb(fwd);
  kb.setInsertionPointAfter(fwd);
  kb.insert(keep);
  keep->setAttr(kFragmentAttr, kb.getDictionaryAttr({
                                   kb.getNamedAttr("stage", kb.getI64IntegerAttr(stage)),
                                   kb.getNamedAttr("kind", kb.getStringAttr("forward_keep")),
                               }));
  llvm::StringMap<Value> byName;
  for (unsigned i = 0; i < keep.getNumArguments(); ++i)
    byName[argName(keep, i)] = keep.getArgument(i);
  Operation *kret = keep.getBody().front().getTerminator();
  // Arguments first: a middle stage's output is named like its input
  // ("act:0"), and R reads the input.
  for (unsigned i = 0; i < keep.getNumResults(); ++i)
    if (auto n = keep.getResultAttrOfType<StringAttr>(i, kName))
      byName.try_emplace(n.getValue(), kret->getOperand(i));
  IRMapping map;
  for (unsigned i = 0; i < rfn.getNumArguments(); ++i) {
    Value v = byName.lookup(argName(rfn, i));
    if (!v)
      return rfn.emitError("merak-split-backward: the forward has no value named '")
             << argName(rfn, i) << "' for argument " << i;
    map.map(rfn.getArgument(i), v);
  }
  OpBuilder ob(kret);
  for (Operation &op : rfn.getBody().front().without_terminator())
    ob.clone(op, map);
  SmallVector<Value> results(kret->getOperands());
  SmallVector<DictionaryAttr> attrs = resultAttrsOf(keep);
  for (auto [i, v] : llvm::enumerate(rfn.getBody().front().getTerminator()->getOperands())) {
    results.push_back(map.lookup(v));
    attrs.push_back(rfn.getResultAttrDict(i));
  }
  func::ReturnOp::create(ob, kret->getLoc(), results);
  kret->erase();
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  keep.setType(kb.getFunctionType(keep.getArgumentTypes(), types));
  keep.setAllResultAttrs(attrs);
  return success();
}

struct MerakSplitBackwardPass : merak::impl::MerakSplitBackwardBase<MerakSplitBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool weight = schedule == "zb-h1" || schedule == "zb-h2";
    bool recompute = schedule == "shifted-critical-path";
    if (!weight && !recompute)
      return;
    PipelinePlanAttr plan = getPipelinePlan(module);
    if (!plan) {
      module.emitError("merak-split-backward: not a pipeline module (run merak-pipeline)");
      return signalPassFailure();
    }
    int64_t stages = plan.getStages();
    for (int64_t s = 0; s < stages; ++s) {
      std::string prefix = ("stage" + Twine(s) + "_").str();
      auto fwd = module.lookupSymbol<func::FuncOp>(prefix + "forward");
      auto bwd = module.lookupSymbol<func::FuncOp>(prefix + "backward");
      if (!fwd || !bwd) {
        module.emitError("merak-split-backward: no @") << prefix << "forward/backward";
        return signalPassFailure();
      }
      if (weight)
        splitWeight(bwd, s);
      else if (s + 1 < stages && failed(splitRecompute(fwd, bwd, s)))
        return signalPassFailure(); // the last stage never recomputes early
    }
  }
};

} // namespace
