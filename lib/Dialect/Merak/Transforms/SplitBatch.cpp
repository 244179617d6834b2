//===- SplitBatch.cpp - merak-split-batch ---------------------------------===//
//
// The per-part model of data parallelism and micro-batching, found by
// propagating the batch from the inputs (see Passes.td). In the spirit of
// GSPMD's sharding propagation, with the ops' factor rules
// (ShardingRuleOpInterface) as the only knowledge of ops:
//
//   %ids : [8, 16]                           %ids : [4, 16]      (parts = 2)
//   %x = gather %wte[%ids] -> [8, 16, 64]     %x -> [4, 16, 64]
//   %m = constant dense<..> : [8, 1, 16, 16]  %m' = constant <part 0> : [4, 1, 16, 16]
//   %h = reshape %x -> [8, 16, 4, 16]         %h -> [4, 16, 4, 16]
//   %s = reduce_mean %l axes = [0, 1]         (unchanged: each part's mean)
//
// Two phases. The analysis walks the function in program order and
// records, for every value that carries the batch, where it lies (a
// dimension viewed as [blocks, parts, n / (blocks * parts)]); operands that
// meet the batch without deriving from the inputs are recorded for a local
// copy, checked all the way down (constants equal in every part, ops with a
// parallel factor). An input that meets the batch joins the split inputs
// and the analysis starts again; nothing has been changed by then. Only a
// complete analysis is applied: local copies, local types, and the op
// attributes that spell sizes.
//
// Positions along the batch (an argsort of rows that carry it, and what is
// computed from them and constants alone) are each part's positions of its
// own rows: a gather or scatter at them (the rule's `addressedBy`) reads or
// writes the part's rows, as a dispatch that sorts the batch's rows by
// expert does on each DDP rank.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/Evaluator.h"
#include "merak/Evaluator/HostTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKSPLITBATCH
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

using namespace mlir;
using namespace mlir::merak;

SmallVector<BlockArgument> mlir::merak::batchInputs(func::FuncOp fn) {
  SmallVector<BlockArgument> all;
  for (BlockArgument arg : fn.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || t.getRank() == 0)
      return {};
    if (t.getRank() == 2 && t.getElementType().isInteger() && !t.getElementType().isInteger(1))
      return {arg}; // token ids
    if (!all.empty() && t.getDimSize(0) != cast<RankedTensorType>(all[0].getType()).getDimSize(0))
      return {};
    all.push_back(arg);
  }
  return all;
}

namespace {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Where a value carries the batch: dimension `dim` viewed as [blocks,
/// parts, n / (blocks * parts)]; part r is part r of every block.
struct Where {
  int64_t dim = 0, blocks = 1;
  bool operator==(const Where &o) const { return dim == o.dim && blocks == o.blocks; }
};

using Key = std::tuple<Value, int64_t, int64_t>;
Key keyOf(Value v, Where w) { return {v, w.dim, w.blocks}; }

std::optional<ShardingRule> ruleOf(Operation *op) {
  auto iface = dyn_cast<ShardingRuleOpInterface>(op);
  return iface ? iface.getShardingRule() : std::nullopt;
}

std::string describe(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return "argument #" + std::to_string(arg.getArgNumber());
  return "'" + v.getDefiningOp()->getName().getStringRef().str() + "'";
}

class Splitter {
public:
  Splitter(func::FuncOp fn, int64_t parts) : fn(fn), parts(parts) {}

  /// Splits dimension 0 of `inputs` and follows the batch; inputs that meet
  /// it are added and the analysis repeats. Then applies it.
  LogicalResult run(SmallVector<BlockArgument> inputs) {
    while (true) {
      split.clear(), local.clear(), localConstants.clear(), pending.clear(), positions.clear();
      demanded = BlockArgument();
      for (BlockArgument arg : inputs)
        split[arg] = {0, 1};
      if (failed(analyse()))
        return failure();
      if (!demanded)
        break;
      inputs.push_back(demanded);
    }
    if (failed(checkSizes()))
      return failure();
    apply();
    return success();
  }

private:
  func::FuncOp fn;
  int64_t parts;
  /// Values that carry the batch (the inputs' descendants).
  llvm::MapVector<Value, Where> split;
  /// Values checked for a local copy, and whether they can have one.
  DenseMap<Key, bool> local;
  /// The local values of the constants among them (part 0), and of the
  /// values of constants only evaluated for want of a local computation.
  DenseMap<Key, Attribute> localConstants;
  /// Values of constants only, evaluated (null: not evaluable).
  DenseMap<Value, std::unique_ptr<HostTensor>> values;
  /// The largest value evaluated: per-row index arithmetic ([batch,
  /// sequence] and the like), not [batch, heads, T, T] masks.
  static constexpr int64_t kMaxEvaluated = int64_t(1) << 22;
  /// Values that carry the batch and hold positions along it (indices of
  /// the local rows).
  DenseSet<Value> positions;
  /// Operands to replace by their local copies.
  struct Pending {
    Operation *user;
    unsigned index;
    Where where;
  };
  SmallVector<Pending> pending;
  /// An input that met the batch (the analysis restarts with it split).
  BlockArgument demanded;

  /// An error at `op` naming it (imported ops carry the graph's location,
  /// not the node's), with a note naming the ONNX node and the op's types
  /// where the importer named it.
  InFlightDiagnostic error(Operation *op) {
    InFlightDiagnostic d = op->emitError("merak-split-batch: '") << op->getName() << "': ";
    if (auto name = dyn_cast<NameLoc>(op->getLoc())) {
      Diagnostic &note = d.attachNote() << "the ONNX node '" << name.getName().getValue() << "': ";
      llvm::interleaveComma(op->getOperandTypes(), note);
      note << " -> ";
      llvm::interleaveComma(op->getResultTypes(), note);
    }
    return d;
  }

  LogicalResult analyse() {
    for (Operation &op : fn.getBody().front()) {
      if (failed(visit(&op)))
        return failure();
      if (demanded)
        return success();
    }
    return success();
  }

  /// Follows the batch through `op` by its sharding rule.
  LogicalResult visit(Operation *op) {
    auto first = llvm::find_if(op->getOperands(), [&](Value v) { return split.count(v); });
    if (first == op->operand_end() || isa<func::ReturnOp>(op))
      return success();
    unsigned index = first - op->operand_begin();
    if (!isa<ShardingRuleOpInterface>(op))
      return error(op) << "operand #" << index
                       << " carries the batch, and this op has no sharding rule to follow it";
    std::optional<ShardingRule> rule = ruleOf(op);
    if (!rule)
      return error(op) << "operand #" << index
                       << " carries the batch, and this op has no sharding rule for these shapes "
                          "(a reshape that mixes the batch with other axes)";
    // The batch's factor, from the first operand that carries it other than
    // on an axis read at local positions (a gather's table).
    std::optional<ShardingRule::FactorSplit> fs;
    SmallVector<bool> onPositions(op->getNumOperands(), false);
    for (auto [j, v] : llvm::enumerate(op->getOperands())) {
      auto it = split.find(v);
      if (it == split.end())
        continue;
      std::optional<ShardingRule::FactorSplit> at =
          rule->locate(rule->operands[j], it->second.dim, it->second.blocks);
      if (!at)
        return error(op) << "operand #" << j << " carries the batch in dimension " << it->second.dim
                         << ", which this op does not keep as a whole factor (a reshape "
                            "that mixes the batch with another axis)";
      onPositions[j] = atLocalPositions(op, *rule, at->factor);
      if (!fs && !onPositions[j])
        fs = at, index = j;
    }
    if (!fs)
      return error(op) << "carries the batch only on axes read at positions along it";
    Where s = split.lookup(op->getOperand(index));
    for (auto [j, v, factors] : llvm::enumerate(op->getOperands(), rule->operands)) {
      std::optional<std::pair<int64_t, int64_t>> at = rule->find(factors, *fs);
      auto it = split.find(v);
      if (it != split.end()) {
        if (!(at && it->second == Where{at->first, at->second}) && !onPositions[j])
          return error(op) << "operands #" << index << " and #" << j
                           << " carry the batch in different dimensions";
        continue;
      }
      if (at && failed(needLocal(op, j, {at->first, at->second})))
        return failure();
      if (demanded)
        return success();
    }
    bool kept = false;
    for (auto [r, factors] : llvm::zip(op->getResults(), rule->results))
      if (std::optional<std::pair<int64_t, int64_t>> at = rule->find(factors, *fs)) {
        split[r] = {at->first, at->second};
        kept = true;
      }
    kept |= scatteredAtLocalPositions(op, *rule);
    FactorKind kind = rule->factors[fs->factor].kind;
    if (!kept && (kind == FactorKind::Parallel || kind == FactorKind::Replicated))
      return error(op) << "selects along the batch (dimension " << s.dim << " of operand #" << index
                       << ") or mixes it with other axes: a part of the batch would "
                       << "need the rows of others";
    recordPositions(op, *rule, fs->factor);
    return success();
  }

  /// Whether `factor` of `op` is read or written at the positions an
  /// operand holds that are positions along the batch: each part's are its
  /// own rows' (a sort of the local rows), so the axis is the local one.
  bool atLocalPositions(Operation *op, const ShardingRule &rule, unsigned factor) {
    return llvm::any_of(rule.addressedBy, [&](ShardingRule::Positions a) {
      return a.factor == factor && positions.contains(op->getOperand(a.value));
    });
  }

  /// A scatter at positions along the batch: its result's axis holds the
  /// local rows (batch-major).
  bool scatteredAtLocalPositions(Operation *op, const ShardingRule &rule) {
    bool any = false;
    for (ShardingRule::Positions a : rule.addressedBy) {
      if (!positions.contains(op->getOperand(a.value)))
        continue;
      for (auto [r, factors] : llvm::zip(op->getResults(), rule.results))
        if (auto at = rule.find(factors, {a.factor, 1}); at && !split.count(r)) {
          split[r] = {at->first, at->second};
          any = true;
        }
    }
    return any;
  }

  /// Results that hold positions along the batch: an argsort's along it,
  /// and what is computed from such positions and constants alone (P // k,
  /// the importer's checks of an index against the axis's size).
  void recordPositions(Operation *op, const ShardingRule &rule, unsigned factor) {
    for (ShardingRule::Positions p : rule.positionsIn)
      if (p.factor == factor)
        positions.insert(op->getResult(p.value));
    bool fromPositions = llvm::all_of(op->getOperands(), [&](Value v) {
      return split.count(v) ? positions.contains(v)
                            : isa_and_nonnull<ConstantOp>(v.getDefiningOp());
    });
    if (fromPositions && rule.addressedBy.empty())
      for (Value r : op->getResults())
        if (split.count(r))
          positions.insert(r);
  }

  /// Operand `index` of `user` meets the batch at `w` without carrying it.
  LogicalResult needLocal(Operation *user, unsigned index, Where w) {
    if (failed(checkLocal(user->getOperand(index), w, user)))
      return failure();
    if (!demanded)
      pending.push_back({user, index, w});
    return success();
  }

  /// Whether `v`, which does not derive from the inputs, can be computed at
  /// the local batch `w` (memoised); errors are reported at `user`.
  LogicalResult checkLocal(Value v, Where w, Operation *user) {
    if (auto it = local.find(keyOf(v, w)); it != local.end())
      return success(it->second);
    LogicalResult ok = checkLocalUncached(v, w, user);
    local[keyOf(v, w)] = succeeded(ok);
    return ok;
  }

  LogicalResult checkLocalUncached(Value v, Where w, Operation *user) {
    Operation *def = v.getDefiningOp();
    if (!def) {
      // Another input of the model (an attention mask): split it too.
      auto arg = cast<BlockArgument>(v);
      if (w.dim != 0 || w.blocks != 1)
        return error(user) << "input #" << arg.getArgNumber()
                           << " meets the batch in its dimension " << w.dim
                           << "; only an input's leading dimension can be split";
      demanded = arg;
      return success();
    }
    if (auto get = dyn_cast<GetParamOp>(def))
      return error(user) << "meets the batch with the parameter '" << get.getName() << "'";
    if (auto c = dyn_cast<ConstantOp>(def)) {
      FailureOr<Attribute> part = localConstant(c, w);
      if (failed(part))
        return error(user) << "meets the batch with a constant whose parts along dimension "
                           << w.dim << " differ (a part could not keep its own rows)";
      localConstants[keyOf(v, w)] = *part;
      return success();
    }
    // An op: computed at the local batch by its sharding rule; failing that,
    // a value of constants only (a mask indexed by batch position, built
    // from per-row constants) that is equal in every part is evaluated and
    // becomes a local constant. The first error stands if neither works.
    std::optional<std::pair<Location, std::string>> first;
    LogicalResult ok = failure();
    {
      ScopedDiagnosticHandler capture(def->getContext(), [&](Diagnostic &d) {
        if (!first)
          first.emplace(d.getLocation(), d.str());
        return success();
      });
      ok = checkComputedLocally(v, w, user);
    }
    if (succeeded(ok))
      return success();
    if (const HostTensor *t = evaluated(v))
      if (FailureOr<Attribute> part = localPart(*t, w); succeeded(part)) {
        localConstants[keyOf(v, w)] = *part;
        return success();
      }
    if (first)
      emitError(first->first) << first->second;
    return failure();
  }

  /// Whether op result `v` can be computed at the local batch `w` from local
  /// copies of its operands (its sharding rule's parallel factor).
  LogicalResult checkComputedLocally(Value v, Where w, Operation *user) {
    Operation *def = v.getDefiningOp();
    std::optional<ShardingRule> rule = ruleOf(def);
    unsigned k = cast<OpResult>(v).getResultNumber();
    std::optional<ShardingRule::FactorSplit> fs =
        rule ? rule->locate(rule->results[k], w.dim, w.blocks) : std::nullopt;
    if (!fs || rule->factors[fs->factor].kind != FactorKind::Parallel)
      return error(user) << "meets the batch with a value of " << describe(v)
                         << " that cannot be computed at the local batch";
    for (auto [operand, factors] : llvm::zip(def->getOperands(), rule->operands)) {
      if (split.count(operand))
        return error(user) << "meets the batch twice through " << describe(v);
      if (auto at = rule->find(factors, *fs))
        if (failed(checkLocal(operand, {at->first, at->second}, user)))
          return failure();
    }
    return success();
  }

  /// The part 0 of constant `c` along `w`, when every part equals it.
  FailureOr<Attribute> localConstant(ConstantOp c, Where w) {
    auto value = cast<ElementsAttr>(c.getValue());
    if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat())
      return Attribute(dense.resizeSplat(localOf(tensorOf(c.getResult()), w)));
    FailureOr<HostTensor> t = HostTensor::fromAttr(value);
    if (failed(t))
      return failure();
    return localPart(*t, w);
  }

  /// The value of `v` when it derives from constants only and every value
  /// on the way has at most kMaxEvaluated elements (memoised; null
  /// otherwise).
  const HostTensor *evaluated(Value v) {
    if (auto it = values.find(v); it != values.end())
      return it->second.get();
    std::unique_ptr<HostTensor> result;
    auto type = tensorOf(v);
    Operation *def = v.getDefiningOp();
    if (def && type.hasStaticShape() && type.getNumElements() <= kMaxEvaluated &&
        isMemoryEffectFree(def)) {
      if (auto c = dyn_cast<ConstantOp>(def)) {
        if (FailureOr<HostTensor> t = HostTensor::fromAttr(cast<ElementsAttr>(c.getValue()));
            succeeded(t))
          result = std::make_unique<HostTensor>(std::move(*t));
      } else if (!isa<GetParamOp>(def) && def->getNumRegions() == 0) {
        SmallVector<const HostTensor *> operands;
        for (Value x : def->getOperands())
          operands.push_back(isa<RankedTensorType>(x.getType()) ? evaluated(x) : nullptr);
        SmallVector<HostTensor> results;
        ScopedDiagnosticHandler quiet(def->getContext(), [](Diagnostic &) { return success(); });
        if (llvm::all_of(operands, [](const HostTensor *t) { return t != nullptr; }) &&
            succeeded(evaluateOp(def, operands, results)))
          result =
              std::make_unique<HostTensor>(std::move(results[cast<OpResult>(v).getResultNumber()]));
      }
    }
    return (values[v] = std::move(result)).get();
  }

  /// The part 0 of host tensor `t` along `w`, when every part equals it.
  FailureOr<Attribute> localPart(const HostTensor &t, Where w) {
    RankedTensorType type = t.getType(), localType = localOf(type, w);
    // [outer, blocks, parts, chunk, inner] over the flat elements.
    ArrayRef<int64_t> shape = type.getShape();
    if (shape[w.dim] % (w.blocks * parts))
      return failure(); // parts that are not whole rows
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < w.dim; ++d)
      outer *= shape[d];
    for (int64_t d = w.dim + 1; d < (int64_t)shape.size(); ++d)
      inner *= shape[d];
    int64_t chunk = shape[w.dim] / (w.blocks * parts) * inner;
    HostTensor part(localType);
    int64_t out = 0;
    for (int64_t o = 0; o < outer * w.blocks; ++o) {
      int64_t base = o * parts * chunk;
      for (int64_t e = 0; e < chunk; ++e, ++out) {
        double first = t.getAsDouble(base + e);
        for (int64_t p = 1; p < parts; ++p) {
          double other = t.getAsDouble(base + p * chunk + e);
          if (other != first && !(std::isnan(other) && std::isnan(first)))
            return failure();
        }
        if (t.isFloat())
          part.f()[out] = first;
        else
          part.i()[out] = t.i()[base + e];
      }
    }
    return Attribute(part.toAttr());
  }

  RankedTensorType localOf(RankedTensorType t, Where w) const {
    SmallVector<int64_t> shape(t.getShape());
    shape[w.dim] /= parts;
    return RankedTensorType::get(shape, t.getElementType());
  }

  LogicalResult checkSizes() {
    for (auto &[v, w] : split) {
      int64_t n = tensorOf(v).getDimSize(w.dim);
      if (n % (w.blocks * parts) == 0)
        continue;
      InFlightDiagnostic d =
          isa<BlockArgument>(v)
              ? fn.emitError("merak-split-batch: the batch of input #")
                    << cast<BlockArgument>(v).getArgNumber() << " (" << n << ")"
              : error(v.getDefiningOp()) << "dimension " << w.dim << " of this result (size "
                                         << n << (w.blocks > 1 ? ", in " : "")
                                         << (w.blocks > 1 ? std::to_string(w.blocks) : "")
                                         << (w.blocks > 1 ? " blocks" : "") << ")";
      d << " does not divide into " << parts
        << " parts (data-parallel ranks x micro-batches)";
      return failure();
    }
    return success();
  }

  /// The local copy of `v` at `w` (checked by checkLocal), made once.
  Value localValue(Value v, Where w, DenseMap<Key, Value> &made) {
    if (Value m = made.lookup(keyOf(v, w)))
      return m;
    Operation *def = v.getDefiningOp();
    OpBuilder b(def->getContext());
    b.setInsertionPointAfter(def);
    Value result;
    if (Attribute part = localConstants.lookup(keyOf(v, w))) {
      // A constant's part, or a value of constants evaluated (checkLocal).
      auto value = cast<ElementsAttr>(part);
      result = ConstantOp::create(b, def->getLoc(), value.getType(), value);
    } else {
      std::optional<ShardingRule> rule = ruleOf(def);
      unsigned k = cast<OpResult>(v).getResultNumber();
      ShardingRule::FactorSplit fs = *rule->locate(rule->results[k], w.dim, w.blocks);
      SmallVector<Value> operands;
      for (auto [operand, factors] : llvm::zip(def->getOperands(), rule->operands)) {
        auto at = rule->find(factors, fs);
        operands.push_back(at ? localValue(operand, {at->first, at->second}, made) : operand);
      }
      Operation *copy = b.clone(*def);
      copy->setOperands(operands);
      for (auto [r, factors] : llvm::zip(copy->getResults(), rule->results))
        if (auto at = rule->find(factors, fs))
          r.setType(localOf(tensorOf(r), {at->first, at->second}));
      if (auto iface = dyn_cast<ShardingRuleOpInterface>(copy)) {
        iface.adaptToLocalTypes();
        iface.recordSplit("batch", w.dim, w.blocks, parts);
      }
      result = copy->getResult(k);
    }
    made[keyOf(v, w)] = result;
    return result;
  }

  void apply() {
    DenseMap<Key, Value> made;
    SmallVector<Operation *> replaced;
    for (Pending &p : pending) {
      Value full = p.user->getOperand(p.index);
      p.user->setOperand(p.index, localValue(full, p.where, made));
      replaced.push_back(full.getDefiningOp());
    }
    // The whole-batch versions nothing reads any more (an op may be listed
    // more than once: through several operands or users).
    llvm::SmallPtrSet<Operation *, 16> erased;
    while (!replaced.empty()) {
      Operation *op = replaced.pop_back_val();
      if (!op || erased.contains(op) || !isOpTriviallyDead(op))
        continue;
      erased.insert(op);
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          replaced.push_back(def);
      op->erase();
    }
    SetVector<Operation *> touched;
    for (auto &[v, w] : split) {
      v.setType(localOf(tensorOf(v), w));
      for (Operation *user : v.getUsers())
        touched.insert(user);
      if (Operation *def = v.getDefiningOp())
        touched.insert(def);
    }
    for (Operation *op : touched)
      if (auto iface = dyn_cast<ShardingRuleOpInterface>(op))
        iface.adaptToLocalTypes();
    for (auto &[v, w] : split)
      if (auto iface = v.getDefiningOp<ShardingRuleOpInterface>())
        iface.recordSplit("batch", w.dim, w.blocks, parts);
    Block &body = fn.getBody().front();
    fn.setType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                                 body.getTerminator()->getOperandTypes()));
  }
};

struct MerakSplitBatchPass : merak::impl::MerakSplitBatchBase<MerakSplitBatchPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerEvaluatorExternalModels(registry); // values of constants (checkLocal)
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (parts < 1) {
      module.emitError("merak-split-batch: parts must be positive");
      return signalPassFailure();
    }
    if (parts == 1)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-split-batch: no single-block function @") << entry;
      return signalPassFailure();
    }
    SmallVector<BlockArgument> inputs = batchInputs(fn);
    if (inputs.empty()) {
      fn.emitError("merak-split-batch: found no batch to split: it needs a [batch, sequence] "
                   "integer input (token ids) or inputs sharing a leading batch dimension");
      return signalPassFailure();
    }
    if (failed(Splitter(fn, parts).run(inputs)))
      return signalPassFailure();
  }
};
} // namespace
