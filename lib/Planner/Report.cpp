//===- Report.cpp - merak-compile --report --------------------------------===//
//
// Reads a compiled training program back into a per-stage summary: ONNX
// nodes (from op locations), parameters and optimizer state, memory (the
// arena plan, stashes), FLOPs (merak-pipeline's estimateOpFlops over the ops
// each rank runs per step), collectives and point-to-point traffic. Every
// number is per rank and per optimizer step. A serial or data/tensor-parallel
// program is one stage (@train_step); a pipelined one has merak.pipeline and
// the stage<s>_{forward,backward,update} fragments.
//
//===----------------------------------------------------------------------===//
#include "ReportModel.h"
#include "merak/Dialect/Merak/Analysis/OpCosts.h"
#include "merak/Planner/Simulate.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Target/PipelineProgram.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include <map>

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

namespace mlir::merak::report {

int64_t tensorBytes(Type t) {
  auto r = cast<RankedTensorType>(t);
  return r.getNumElements() * std::max<int64_t>(1, storageElementBytes(r.getElementType()));
}

/// A value's slot in a pipeline message (64-byte aligned, as
/// lib/Target/PipelineProgram.cpp packs them).
int64_t messageSlotBytes(Type t) {
  int64_t b = tensorBytes(t);
  return std::max((b + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment,
                  kBufferAlignment);
}

/// The partitioner's cost of one op; views and collectives do no arithmetic.
int64_t opFlops(Operation *op) {
  if (isViewOp(op) || collectiveKind(op) || isa<func::FuncOp, func::ReturnOp>(op))
    return 0;
  return estimateOpFlops(op);
}

int64_t fnFlops(func::FuncOp fn) {
  int64_t n = 0;
  if (fn)
    fn.walk([&](Operation *op) { n += opFlops(op); });
  return n;
}

/// The model's parameters and buffers (not optimizer state, accumulators,
/// hyper-parameters or a pass's tables).
bool isModelParam(ParamOp p) {
  StringRef n = p.getSymName();
  return (!p->hasAttr(kKindAttr) || isBuffer(p)) && !n.starts_with("optimizer.") &&
         !n.starts_with(kGradAccumulatorPrefix);
}

/// `v` (through a bias add) is the logits of a vocabulary-parallel
/// cross-entropy (`group` set).
bool feedsVocabLoss(Value v) {
  for (Operation *user : v.getUsers()) {
    if (auto ce = dyn_cast<CrossEntropyOp>(user); ce && ce.getLogits() == v && ce.getGroup())
      return true;
    if (isa<AddOp>(user) && feedsVocabLoss(user->getResult(0)))
      return true;
  }
  return false;
}

/// How a sharded parameter's split axis is used: "vocab" (the rows of an
/// embedding table or of an LM head whose logits stay split,
/// merak-tensor-parallel's vocabulary parallelism),
/// "column" (output features of a matmul, or a bias added there), "row"
/// (the contracted dimension) or "" when no such use is found.
std::string splitKind(Value v, int64_t d) {
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  for (Operation *user : v.getUsers())
    if (auto g = dyn_cast<GatherOp>(user); g && g.getData() == v && static_cast<int64_t>(g.getAxis()) == d)
      return "vocab";
  for (Operation *user : v.getUsers()) {
    if (auto t = dyn_cast<TransposeOp>(user)) {
      for (auto [i, p] : llvm::enumerate(t.getPerm()))
        if (p == d)
          if (std::string k = splitKind(t.getResult(), i); !k.empty())
            return k;
    } else if (auto m = dyn_cast<MatmulOp>(user)) {
      if (m.getRhs() == v && d == rank - 1 && feedsVocabLoss(m.getResult()))
        return "vocab";
      if (m.getRhs() == v)
        return d == rank - 1 ? "column" : d == rank - 2 ? "row" : "";
      return d == rank - 1 ? "row" : "column";
    } else if (rank == 1 && isa<AddOp>(user)) {
      return feedsVocabLoss(user->getResult(0)) ? "vocab" : "column";
    }
  }
  return "";
}

void Report::collectParams() {
  for (ParamOp p : module.getOps<ParamOp>()) {
    if (!isModelParam(p))
      continue;
    ParamInfo info;
    info.name = p.getSymName().str();
    auto t = p.getTensorType();
    info.shape.assign(t.getShape().begin(), t.getShape().end());
    info.elements = t.getNumElements();
    info.bytes = tensorBytes(t);
    info.buffer = isBuffer(p);
    info.shard = getShardLayout(p);
    auto g = info.shard ? globalShardType(t, *info.shard) : t;
    info.globalShape.assign(g.getShape().begin(), g.getShape().end());
    paramIndex[info.name] = params.size();
    params.push_back(std::move(info));
  }
  // Optimizer state is named optimizer.<optimizer>.<slot>.<param>.
  for (ParamOp p : module.getOps<ParamOp>()) {
    StringRef n = p.getSymName();
    auto kind = p->getAttrOfType<StringAttr>(kKindAttr);
    if (!kind || kind.getValue() != "state" || !n.consume_front("optimizer."))
      continue;
    StringRef rest = n.split('.').second.split('.').second;
    if (paramIndex.count(rest))
      param(rest).stateBytes += tensorBytes(p.getTensorType());
  }
}

/// Collectives by op name, so that every kind (all_reduce, and the
/// reduce_scatter / all_gather of ZeRO) is counted the same way: `bytes`
/// is the full tensors' size (the larger of operands and results); an
/// all_to_all (expert parallelism) counts this rank's rows, what it sends
/// in all (each row to one rank); a two-level one is its own kind
/// (kHierarchicalAllToAll), costed so.
std::optional<StringRef> collectiveKind(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (!name.consume_front("merak.") || !op->getAttrOfType<StringAttr>("group"))
    return std::nullopt;
  if (auto a2a = dyn_cast<AllToAllOp>(op); a2a && a2a.getHierarchical())
    return kHierarchicalAllToAll;
  if (isa<AllToAllStartOp>(op))
    return kOverlappedAllToAll;
  name.consume_back("_start"); // merak-overlap's started form: the same traffic
  if (name == "all_reduce" || name == "reduce_scatter" || name == "all_gather" ||
      name == "all_to_all" || name == "expert_shadow")
    return name;
  return std::nullopt;
}

void Report::countCollectives(func::FuncOp f, int64_t times, int64_t s, int fragment) {
  if (!f)
    return;
  auto add = [&](const std::string &key, int64_t count, int64_t bytes) {
    for (Traffic *t : {&stages[s].collectives[key], &stages[s].byFragment[fragment][key]})
      *t = {t->count + count, t->bytes + bytes};
  };
  f.walk([&](Operation *op) {
    // The vocab-parallel cross-entropy and its gradient all-reduce, per
    // row, the max (one double) and the sum of exponentials with the
    // label's logit (two) over their group.
    if (isa<CrossEntropyOp, CrossEntropyGradOp>(op))
      if (auto group = op->getAttrOfType<StringAttr>("group")) {
        auto logits = cast<RankedTensorType>(op->getOperand(0).getType());
        int64_t rows = logits.getNumElements() / std::max<int64_t>(1, logits.getShape().back());
        add(("all_reduce " + group.getValue()).str(), 2 * times, times * 3 * 8 * rows);
        return;
      }
    std::optional<StringRef> kind = collectiveKind(op);
    if (!kind)
      return;
    StringRef group = op->getAttrOfType<StringAttr>("group").getValue();
    int64_t in = 0, out = 0;
    bool scalars = true;
    for (Value v : op->getOperands()) {
      in += tensorBytes(v.getType());
      scalars &= cast<RankedTensorType>(v.getType()).getRank() == 0;
    }
    // A started collective's results are those of its merak.wait.
    Operation *results = op;
    if (op->getNumResults() == 1 && isa<RequestType>(op->getResult(0).getType()))
      results = *op->getResult(0).user_begin();
    for (Value v : results->getResults())
      out += tensorBytes(v.getType());
    int64_t bytes = std::max(in, out);
    if (auto a2a = dyn_cast<AllToAllOp>(op))
      bytes = tensorBytes((a2a.getCombine() ? a2a.getResult() : a2a.getInput()).getType());
    if (auto a2a = dyn_cast<AllToAllStartOp>(op))
      bytes = tensorBytes(a2a.getCombine() ? a2a.getCompletedTypes().front()
                                           : a2a.getInput().getType());
    if (auto shadow = dyn_cast<ExpertShadowOp>(op)) // every slot used
      bytes = tensorBytes((shadow.getReduce() ? shadow.getInput() : shadow.getResult()).getType());
    add((*kind + " " + group).str(), times, times * bytes);
    if (group != "dp" || *kind == "all_gather")
      return;
    if (scalars)
      dpScalarBytes += times * bytes;
    else {
      std::string dtype;
      llvm::raw_string_ostream ds(dtype);
      ds << cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
      for (int64_t i = 0; i < times; ++i)
        dpBuckets.push_back({s, kind->str(), (int64_t)op->getNumOperands(), bytes, dtype});
    }
  });
}

/// The ONNX node names on the ops of `f` (the importer's NameLocs), in
/// program order; parameter reads and folded constants are not nodes.
SmallVector<std::string> nodeNames(func::FuncOp f) {
  llvm::SetVector<StringRef> names;
  if (f)
    f.walk([&](Operation *op) {
      if (isa<GetParamOp, SetParamOp, ConstantOp, func::FuncOp>(op))
        return;
      op->getLoc()->walk([&](Location l) {
        if (auto n = dyn_cast<NameLoc>(l))
          names.insert(n.getName().getValue());
        return WalkResult::advance();
      });
    });
  return SmallVector<std::string>(llvm::map_range(names, [](StringRef s) { return s.str(); }));
}

void Report::collectStage(int64_t s, ModuleOp planned) {
  StageInfo &st = stages[s];
  int64_t m = opts.microbatches;
  llvm::SetVector<StringRef> held;
  func::FuncOp nodesFn;
  if (!pipelined) {
    nodesFn = fn(module, "loss");
    func::FuncOp step = fn(module, "train_step");
    llvm::StringSet<> written;
    step.walk([&](SetParamOp set) { written.insert(set.getName()); });
    for (ParamInfo &p : params) {
      held.insert(p.name);
      p.trainable = written.contains(p.name) && !p.buffer; // a buffer's write is the forward's
    }
    int64_t fwd = fnFlops(nodesFn), fb = fnFlops(fn(module, "loss_grad"));
    st.forwardFlops = fwd;
    st.backwardFlops = std::max<int64_t>(0, fb - fwd);
    st.updateFlops = std::max<int64_t>(0, fnFlops(step) - fb);
    countCollectives(step, 1, s);
    if (auto a = fn(planned, "train_step")->getAttrOfType<IntegerAttr>(kArenaBytesAttr))
      st.arenas.push_back({"train_step", a.getInt()});
  } else {
    PipelinePlanAttr plan = getPipelinePlan(module);
    // The backward's parts (merak-split-backward: recomputation, input and
    // weight gradients) count as the backward; interleaved model stages
    // beyond the first chunk have no update (their rank's is on stage r).
    func::FuncOp f = fn(module, fragment(s, "forward")), b = fn(module, fragment(s, "backward")),
                 u = fn(module, fragment(s, "update"));
    SmallVector<func::FuncOp> bParts{b};
    for (StringRef kind : {"recompute", "backward_weight"})
      if (func::FuncOp part = fn(module, fragment(s, kind)))
        bParts.push_back(part);
    nodesFn = f;
    for (StringRef name : plan.getOwnersOf(s)) {
      if (paramIndex.count(name)) {
        held.insert(name);
        param(name).trainable = true;
      }
    }
    SmallVector<func::FuncOp> fwdAndBwd{f};
    fwdAndBwd.append(bParts.begin(), bParts.end());
    for (func::FuncOp frag : fwdAndBwd)
      frag.walk([&](GetParamOp get) {
        if (paramIndex.count(get.getName()))
          held.insert(get.getName());
      });
    st.forwardFlops = m * fnFlops(f);
    for (func::FuncOp part : bParts)
      st.backwardFlops += m * fnFlops(part);
    st.updateFlops = u ? fnFlops(u) : 0;
    // The step's bf16 weights (merak-cache-param-casts) count with the update.
    if (func::FuncOp prep = fn(module, fragment(s, "prepare")))
      st.updateFlops += fnFlops(prep);
    st.partitionCost = plan.getCosts()[s];
    countCollectives(f, m, s, 0);
    for (func::FuncOp part : bParts)
      countCollectives(part, m, s, 1);
    if (u)
      countCollectives(u, 1, s, 2);
    for (StringRef kind : {"forward", "backward", "update", "forward_keep", "recompute",
                           "backward_weight", "prepare"})
      if (func::FuncOp g = fn(planned, fragment(s, kind))) {
        if (auto a = g->getAttrOfType<IntegerAttr>(kArenaBytesAttr))
          st.arenas.push_back({fragment(s, kind), a.getInt()});
        st.copies.push_back({fragment(s, kind), fragmentCopyBytes(g)});
      }
    auto named = [](func::FuncOp g, unsigned i, bool result) {
      auto n = result ? g.getResultAttrOfType<StringAttr>(i, "merak.name")
                      : g.getArgAttrOfType<StringAttr>(i, "merak.name");
      return n ? n.getValue() : StringRef();
    };
    int64_t actIn = 0, actOut = 0, cotIn = 0, cotOut = 0;
    for (auto [i, t] : llvm::enumerate(f.getArgumentTypes()))
      if (named(f, i, false).starts_with("act:"))
        actIn += messageSlotBytes(t);
    for (auto [i, t] : llvm::enumerate(f.getResultTypes()))
      if (named(f, i, true).starts_with("act:"))
        actOut += messageSlotBytes(t);
    for (auto [i, t] : llvm::enumerate(b.getArgumentTypes()))
      if (named(b, i, false).starts_with("cot:"))
        cotIn += messageSlotBytes(t);
    for (auto [i, t] : llvm::enumerate(b.getResultTypes()))
      if (named(b, i, true).starts_with("cot:"))
        cotOut += messageSlotBytes(t);
    st.recvPrev = m * actIn;
    st.sendNext = m * actOut;
    st.recvNext = m * cotIn;
    st.sendPrev = m * cotOut;
    // Held per micro-batch until its backward: the stage inputs and what
    // merak-recompute made the forward stash.
    int64_t stashed = 0;
    for (auto [i, t] : llvm::enumerate(f.getResultTypes()))
      if (named(f, i, true).starts_with("stash:"))
        stashed += messageSlotBytes(t);
    st.stashPerMicrobatch = actIn + stashed;
    st.stashBytes = m * st.stashPerMicrobatch;
    ArrayAttr rc = plan.getRecompute();
    if (rc && s < (int64_t)rc.size())
      st.recompute = cast<StringAttr>(rc[s]).str();
    else
      st.recompute = "full";
  }
  st.nodes = nodeNames(nodesFn);
  for (StringRef name : held) {
    ParamInfo &p = param(name);
    p.holders.push_back(s);
    st.params.push_back(p.name);
    st.paramElements += p.elements;
    st.paramBytes += p.bytes;
    st.stateBytes += p.stateBytes;
    if (auto acc =
            symbols.getSymbolTable(module).lookup<ParamOp>((kGradAccumulatorPrefix + name).str()))
      st.accumulatorBytes += tensorBytes(acc.getTensorType());
    if (p.shard && p.shard->group == "ep")
      p.split = "expert"; // E / ep experts of every expert GEMM's weight
    if (p.shard && p.split.empty() && nodesFn) {
      nodesFn.walk([&](GetParamOp get) {
        if (p.split.empty() && get.getName() == name)
          p.split = splitKind(get.getResult(), p.shard->axis);
      });
      if (p.split.empty())
        p.split = "split";
    }
  }
}

LogicalResult Report::collect() {
  PipelinePlanAttr plan = getPipelinePlan(module);
  pipelined = (bool)plan;
  int64_t nStages = 1;
  SmallVector<func::FuncOp> toPlan;
  if (pipelined) {
    nStages = plan.getStages();
    cutPoints = plan.getCutPoints();
    llvm::append_range(cuts, plan.getCuts());
    // Every fragment the program runs (its parts and per-rank updates).
    FailureOr<SmallVector<func::FuncOp>> frags = pipelineFragments(module);
    if (failed(frags))
      return failure();
    toPlan = std::move(*frags);
  } else {
    func::FuncOp step = fn(module, "train_step");
    if (!step)
      return module.emitError("--report: no @train_step (compile to the training phase or later)");
    toPlan.push_back(step);
  }
  plannedByCompile = llvm::all_of(toPlan, [](func::FuncOp f) { return f->hasAttr(kArenaBytesAttr); });
  // Arena sizes come from the memory plan; plan a copy when the compile
  // stopped before it.
  OwningOpRef<ModuleOp> copy;
  ModuleOp planned = module;
  if (!plannedByCompile) {
    copy = module.clone();
    planned = *copy;
    SmallVector<func::FuncOp> fns;
    for (func::FuncOp f : toPlan)
      fns.push_back(fn(planned, f.getSymName()));
    if (failed(planMemory(planned, fns)))
      return failure();
  }
  if (auto a = planned->getAttrOfType<IntegerAttr>(kParamsBytesAttr))
    paramStorageBytes = a.getInt();
  if (auto a = planned->getAttrOfType<IntegerAttr>(kConstsBytesAttr))
    constantBytes = a.getInt();

  if (func::FuncOp f = fn(module, "forward"))
    for (BlockArgument arg : f.getArguments()) {
      auto t = dyn_cast<RankedTensorType>(arg.getType());
      if (t && t.getRank() == 2 && t.getElementType().isInteger() &&
          !t.getElementType().isInteger(1)) {
        microbatchRows = t.getDimSize(0);
        sequence = t.getDimSize(1);
        break;
      }
    }

  collectParams();
  stages.resize(nStages);
  for (int64_t s = 0; s < nStages; ++s)
    collectStage(s, planned);
  if (copy)
    symbols.invalidateSymbolTable(*copy);
  for (const ParamInfo &p : params)
    if (p.shard && p.split == "vocab" && !vocab)
      vocab = &p;
  module.walk([&](CrossEntropyOp ce) { vocabLoss |= (bool)ce.getGroup(); });
  // Tied parameters: each holder sends its accumulator to every other.
  for (const ParamInfo &p : params)
    if (p.holders.size() > 1)
      for (int64_t s : p.holders)
        stages[s].tiedBytes += (p.holders.size() - 1) * p.bytes;
  return success();
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

/// "64, 32, 32".
std::string lengths(ArrayRef<int64_t> values) {
  return llvm::join(llvm::map_range(values, [](int64_t n) { return std::to_string(n); }), ", ");
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

/// "1234 bytes", with a binary-prefixed size from 1 MiB up.
std::string bytesStr(int64_t b) {
  std::string s = std::to_string(b) + " bytes";
  if (b >= (1 << 20))
    s += b >= (int64_t(1) << 30) ? llvm::formatv(" ({0:F2} GiB)", b / double(1 << 30)).str()
                                 : llvm::formatv(" ({0:F1} MiB)", b / double(1 << 20)).str();
  return s;
}

std::string flopsStr(int64_t f) {
  std::string s = std::to_string(f);
  if (f >= 1000000000000)
    s += llvm::formatv(" ({0:F2} TFLOP)", f / 1e12).str();
  else if (f >= 1000000000)
    s += llvm::formatv(" ({0:F2} GFLOP)", f / 1e9).str();
  else if (f >= 1000000)
    s += llvm::formatv(" ({0:F2} MFLOP)", f / 1e6).str();
  return s;
}

std::string rangeStr(int64_t first, int64_t last) {
  return first == last ? std::to_string(first)
                       : std::to_string(first) + "-" + std::to_string(last);
}

/// The vocabulary split of --tp: one entry per vocabulary length ("3 of 5
/// entries per rank (a, b, padded to 6)"), and whether the logits stay split.
void Report::printVocabulary(llvm::raw_ostream &os) const {
  if (!vocab) {
    os << "  vocabulary: replicated (embedding, LM head and loss on every tp rank)\n";
    return;
  }
  int64_t tp = opts.tp;
  os << "  vocabulary: split, ";
  llvm::MapVector<std::pair<int64_t, int64_t>, SmallVector<StringRef>> byLength;
  for (const ParamInfo &p : params)
    if (p.shard && p.split == "vocab")
      byLength[{p.shape[p.shard->axis], p.globalShape[p.shard->axis]}].push_back(p.name);
  bool first = true;
  for (const auto &[length, names] : byLength) {
    auto [local, global] = length;
    os << (first ? "" : ", ") << local << " of " << global
       << (first ? " entries per rank (" : " (");
    llvm::interleaveComma(names, os);
    if (local * tp != global)
      os << ", padded to " << local * tp;
    os << ")";
    first = false;
  }
  os << (vocabLoss ? "; logits stay split, vocab-parallel cross-entropy\n"
                   : "; token embeddings only: the LM head and loss on every tp rank\n");
}

void Report::printText(llvm::raw_ostream &os) const {
  int64_t dp = opts.dp, tp = opts.tp, m = opts.microbatches;
  int64_t world = dp * tp * (int64_t)stages.size();
  os << "merak-compile report: " << opts.model << "\n";
  os << "mesh: dp " << dp << " x tp " << tp << " x pp " << stages.size() << " = " << world
     << (world == 1 ? " rank" : " ranks") << " (rank = (stage * dp + dp_rank) * tp + tp_rank)\n";
  if (int64_t ep = getMesh(module).ep; ep > 1)
    os << "experts: ep " << ep << " (" << dp / ep << (dp / ep == 1 ? " group" : " groups")
       << " of " << ep << " consecutive dp ranks): each rank holds 1/" << ep
       << " of the experts, each expert is held by " << dp / ep
       << (dp / ep == 1 ? " rank" : " ranks (its edp group)") << "\n";
  os << "micro-batches: " << m << ", schedule "
     << (opts.schedule.empty() ? "none (one step, no pipeline)" : opts.schedule) << "\n";
  if (microbatchRows)
    os << "batch: " << microbatchRows * m * dp << " rows per step, " << microbatchRows * m
       << " per dp rank, " << microbatchRows << " per micro-batch; sequence " << sequence << "\n";
  os << "optimizer: " << opts.optimizer << "\n";
  os << "memory per rank: parameter storage " << bytesStr(paramStorageBytes)
     << " (every parameter and its state, on every rank), constants " << bytesStr(constantBytes)
     << (plannedByCompile ? "" : "; arenas planned for this report") << "\n";
  for (auto [s, st] : llvm::enumerate(stages)) {
    int64_t s64 = s;
    os << "stage " << s << " (ranks " << rangeStr(s64 * dp * tp, (s64 + 1) * dp * tp - 1)
       << "): " << st.nodes.size() << (st.nodes.size() == 1 ? " ONNX node" : " ONNX nodes");
    size_t n = st.nodes.size();
    for (size_t i = 0; i < n; ++i) {
      if (n > 8 && i == 3) {
        os << ", ...";
        i = n - 4;
        continue;
      }
      os << (i ? ", " : ": ") << st.nodes[i];
    }
    os << "\n";
    os << "  parameters: " << st.params.size() << " (" << st.paramElements << " elements, "
       << bytesStr(st.paramBytes) << "); optimizer state " << bytesStr(st.stateBytes);
    if (pipelined)
      os << "; gradient accumulators " << bytesStr(st.accumulatorBytes);
    os << "\n";
    for (const std::string &name : st.params) {
      const ParamInfo &p = param(name);
      os << "    " << p.name << " " << shapeStr(p.shape) << ", " << p.elements << " elements, "
         << bytesStr(p.bytes);
      if (p.shard)
        os << ", " << p.split << "-parallel shard of " << shapeStr(p.globalShape);
      if (p.buffer)
        os << ", buffer (updated by training)";
      else if (!p.trainable)
        os << ", frozen";
      if (p.holders.size() > 1) {
        os << ", tied (stages";
        for (int64_t h : p.holders)
          os << " " << h;
        os << ")";
      }
      os << "\n";
    }
    os << "  activations: arena peak " << bytesStr(st.arenaPeak());
    if (st.arenas.size() > 1) {
      os << " (";
      llvm::interleaveComma(st.arenas, os,
                            [&](auto &a) { os << a.first << " " << a.second; });
      os << ")";
    }
    if (pipelined)
      os << "; stash " << bytesStr(st.stashBytes) << " (" << m << " micro-batches of "
         << st.stashPerMicrobatch << " bytes; recompute " << st.recompute << ")";
    os << "\n";
    os << "  FLOPs per step: " << flopsStr(st.flops()) << " (forward " << st.forwardFlops
       << ", backward " << st.backwardFlops
       << (pipelined && st.recompute != "none" ? " with recomputation" : "")
       << ", update " << st.updateFlops << ")";
    if (st.partitionCost)
      os << "; partitioner cost " << *st.partitionCost << " per micro-batch";
    os << "\n";
    os << "  communication per step:";
    bool any = false;
    for (auto &[g, t] : st.collectives) {
      os << (any ? ", " : " ") << g << " " << t.count << " x (" << t.bytes << " bytes)";
      any = true;
    }
    if (pipelined && s > 0) {
      os << (any ? ", " : " ") << "recv " << st.recvPrev << " / send " << st.sendPrev
         << " bytes from / to stage " << s - 1;
      any = true;
    }
    if (pipelined && s + 1 < stages.size()) {
      os << (any ? ", " : " ") << "send " << st.sendNext << " / recv " << st.recvNext
         << " bytes to / from stage " << s + 1;
      any = true;
    }
    if (st.tiedBytes) {
      os << (any ? ", " : " ") << "tied gradients " << st.tiedBytes << " bytes each way";
      any = true;
    }
    os << (any ? "" : " none") << "\n";
  }

  os << "tensor parallel:";
  if (tp == 1) {
    os << " none\n";
  } else {
    int64_t sharded = llvm::count_if(params, [](const ParamInfo &p) { return (bool)p.shard; });
    Traffic sums = total("all_reduce tp"), scatters = total("reduce_scatter tp"),
            gathers = total("all_gather tp");
    os << " tp " << tp << ", " << sharded << " sharded parameters; all_reduce tp per step "
       << sums.count << " x (" << sums.bytes << " bytes)";
    // merak-sequence-parallel: the blocks' ends and starts.
    if (scatters.count)
      os << "; sequence parallel: reduce_scatter tp " << scatters.count << " x (" << scatters.bytes
         << " bytes), all_gather tp " << gathers.count << " x (" << gathers.bytes << " bytes)";
    os << "\n";
    for (const ParamInfo &p : params)
      if (p.shard)
        os << "  " << p.name << ": " << p.split << "-parallel, axis " << p.shard->axis << ", "
           << p.shard->parts << " parts" << (p.shard->blocks > 1 ? ", " : "")
           << (p.shard->blocks > 1 ? std::to_string(p.shard->blocks) + " blocks" : "")
           << (p.shard->blockSizes.empty() ? "" : " of lengths " + lengths(p.shard->blockSizes))
           << ", " << shapeStr(p.globalShape) << " -> " << shapeStr(p.shape) << "\n";
    printVocabulary(os);
  }
  os << "data parallel:";
  if (dp == 1) {
    os << " none\n";
  } else {
    int64_t bytes = 0;
    for (const Bucket &b : dpBuckets)
      bytes += b.bytes;
    os << " dp " << dp << ", " << dpBuckets.size() << " gradient bucket"
       << (dpBuckets.size() == 1 ? "" : "s") << " per step (" << bytesStr(bytes) << ")";
    if (dpScalarBytes)
      os << ", scalars (loss, norms) " << dpScalarBytes << " bytes";
    os << "\n";
    for (const Bucket &b : dpBuckets)
      os << "  stage " << b.stage << ": " << b.kind << " of " << b.tensors << " " << b.dtype
         << " tensors, " << bytesStr(b.bytes) << "\n";
  }
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

} // namespace mlir::merak::report

using namespace mlir::merak::report;

LogicalResult mlir::merak::printCompileReport(ModuleOp module, const ReportOptions &options,
                                              llvm::raw_ostream &os) {
  Report report(options, module);
  if (failed(report.collect()))
    return failure();
  if (options.json)
    os << llvm::formatv("{0:2}", report.toJson()) << "\n";
  else
    report.printText(os);
  return success();
}

LogicalResult mlir::merak::deliverReport(StringRef text, StringRef file, std::string *inMemory,
                                         std::string &error) {
  if (file.empty()) {
    if (inMemory)
      *inMemory = text.str();
    return success();
  }
  auto out = openOutputFile(file, &error);
  if (!out)
    return failure();
  out->os() << text;
  out->keep();
  return success();
}
