//===- PipelineProgram.cpp - manifest, data and C++ of pipeline programs --===//
//
// Layout of the arena A of a pipeline program: [0, F) is shared by the
// fragments (F = the largest fragment arena; a fragment's inputs and
// outputs are only valid around its call), followed by the step's inputs
// (the rank's whole batch of tokens and labels, all micro-batches, and the
// step) and outputs (loss, grad_norm, lr), which the runtime reads and
// writes as for a serial program. Activations and gradients that outlive a
// fragment call (stashed stage inputs, messages) live in runtime buffers
// per micro-batch, never in A.
//
//===----------------------------------------------------------------------===//
#include "merak/Target/PipelineProgram.h"

#include "ManifestJSON.h"

#include "merak/Conversion/MerakToEmitC.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::merak;
namespace schema = ::merak::rt::schema;

static int64_t align64(int64_t n) {
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

using target::slotBytes;
using target::tensorBytes;

void mlir::merak::reportPipelineMemoryPlan(ModuleOp module, llvm::raw_ostream &os) {
  FailureOr<SmallVector<func::FuncOp>> frags = pipelineFragments(module);
  if (failed(frags))
    return;
  os << "merak-compile: memory plan: fragment arenas";
  for (func::FuncOp f : *frags)
    os << " " << f.getSymName() << "="
       << f->getAttrOfType<IntegerAttr>(kArenaBytesAttr).getInt();
  os << " bytes; parameters and state "
     << module->getAttrOfType<IntegerAttr>(kParamsBytesAttr).getInt() << " bytes, constants "
     << module->getAttrOfType<IntegerAttr>(kConstsBytesAttr).getInt() << " bytes\n";
}

namespace {
/// Offsets of a cut's values inside its activation and gradient messages.
struct Message {
  llvm::DenseMap<int64_t, int64_t> offset; // value index -> byte offset
  int64_t bytes = 0;
  void add(int64_t index, Type t) {
    offset[index] = bytes;
    bytes += slotBytes(t);
  }
};

/// "act:3" -> ("act", 3); anything else -> (name, -1).
std::pair<StringRef, int64_t> splitName(StringRef name) {
  auto [kind, idx] = name.split(':');
  int64_t i = -1;
  if (idx.empty() || idx.getAsInteger(10, i))
    return {name, -1};
  return {kind, i};
}

StringRef argName(func::FuncOp f, unsigned i) {
  auto n = f.getArgAttrOfType<StringAttr>(i, "merak.name");
  return n ? n.getValue() : "";
}
StringRef resultName(func::FuncOp f, unsigned i) {
  auto n = f.getResultAttrOfType<StringAttr>(i, "merak.name");
  return n ? n.getValue() : "";
}

/// Fragment (stage, kind) -> function; null when there is none.
func::FuncOp fragmentOf(ModuleOp module, int64_t s, StringRef kind) {
  return module.lookupSymbol<func::FuncOp>(("stage" + Twine(s) + "_" + kind).str());
}

/// Where a pipeline program's values travel between fragments: the
/// messages of every cut, the values kept between a stage's fragments, and
/// the step's inputs and outputs in A.
struct Layout {
  SmallVector<Message> act, cot; ///< cut c: between stage c and c + 1
  llvm::StringMap<SmallVector<Message>> kept; ///< "stash", "rstash", "wstash": per stage
  llvm::StringMap<std::pair<int64_t, int64_t>> dataSlot; ///< input -> (offset, mb bytes)
  llvm::StringMap<std::string> dataRole;                 ///< input -> role
  llvm::StringMap<int64_t> outSlot;                      ///< output -> offset
  /// Where kept value `name`:`idx` of stage `s` lies in its buffer.
  std::optional<int64_t> keptOffset(StringRef name, int64_t s, int64_t idx) const {
    auto it = kept.find(name);
    if (it == kept.end() || !it->second[s].offset.count(idx))
      return std::nullopt;
    return it->second[s].offset.lookup(idx);
  }
};

/// The step's inputs (every micro-batch's tokens and labels, or arrays; the
/// label count; then the step) and outputs (the update's results), placed
/// in A from `top` (advanced past them); their slots go into `l`.
LogicalResult placeInputsOutputs(ModuleOp module, func::FuncOp lossFn, int64_t m, int64_t &top,
                                 Layout &l, schema::Program &manifest) {
  auto place = [&](int64_t bytes) {
    int64_t off = top;
    top += std::max(align64(bytes), kBufferAlignment);
    return off;
  };
  bool haveTokens = false;
  for (BlockArgument arg : lossFn.getArguments()) {
    auto name = lossFn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "merak.name");
    auto type = cast<RankedTensorType>(arg.getType());
    std::string n = name ? name.str() : "";
    if (n == kLabelCountInput && type.getRank() == 0) {
      // One value for the whole step, read by every micro-batch.
      l.dataRole[n] = n;
      l.dataSlot[n] = {place(tensorBytes(type)), tensorBytes(type)};
      manifest.inputs.push_back(target::manifestTensor(n, type, l.dataSlot[n].first));
      manifest.inputs.back().role = n;
      continue;
    }
    std::string role;
    if (n == "labels")
      role = "labels";
    else if (!haveTokens && target::isTokenInput(lossFn, arg.getArgNumber()))
      role = "tokens", haveTokens = true;
    else // an array input: features, images, a padded batch's attention mask
      role = "other";
    l.dataRole[n] = role;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= m; // every micro-batch of the step
    auto full = RankedTensorType::get(shape, type.getElementType());
    int64_t off = place(tensorBytes(full));
    l.dataSlot[n] = {off, tensorBytes(type)};
    manifest.inputs.push_back(target::manifestTensor(n, full, off));
    manifest.inputs.back().role = role;
    manifest.inputs.back().indexLimit = target::indexLimit(lossFn, arg.getArgNumber());
    if (std::optional<int64_t> ignored = target::ignoreIndex(lossFn, arg.getArgNumber()))
      manifest.inputs.back().ignoreIndex = schema::SignedInt{*ignored};
  }
  auto i64 = RankedTensorType::get({}, IntegerType::get(module.getContext(), 64));
  manifest.inputs.push_back(target::manifestTensor("step", i64, place(8)));
  manifest.inputs.back().role = "step";
  func::FuncOp update0 = fragmentOf(module, 0, "update");
  for (unsigned i = 0; i < update0.getNumResults(); ++i) {
    Type t = update0.getResultTypes()[i];
    std::string n = resultName(update0, i).str();
    l.outSlot[n] = place(tensorBytes(t));
    manifest.outputs.push_back(target::manifestTensor(n, t, l.outSlot[n]));
  }
  return success();
}

/// The messages of every cut and the kept values of every stage.
void layoutMessages(ModuleOp module, int64_t stages, Layout &l) {
  l.act.assign(stages, Message());
  l.cot.assign(stages, Message());
  for (int64_t c = 0; c + 1 < stages; ++c) {
    func::FuncOp fwd = fragmentOf(module, c, "forward"), bwd = fragmentOf(module, c, "backward");
    for (unsigned i = 0; i < fwd.getNumResults(); ++i)
      if (auto [k, idx] = splitName(resultName(fwd, i)); k == "act")
        l.act[c].add(idx, fwd.getResultTypes()[i]);
    for (unsigned i = 0; i < bwd.getNumArguments(); ++i)
      if (auto [k, idx] = splitName(argName(bwd, i)); k == "cot")
        l.cot[c].add(idx, bwd.getArgumentTypes()[i]);
  }
  // Values kept between two fragments of a stage, laid out like a message:
  // the forward's "stash:i" (merak-recompute: activations the backward
  // reads), the recomputation's "rstash:i" (merak-split-backward, shifted
  // critical path: what the rest of the backward reads; the forward_keep
  // returns the same) and the input-gradient backward's "wstash:i" (zero
  // bubble: what the weight-gradient backward reads).
  for (auto [producer, name] : {std::pair<StringRef, StringRef>{"forward", "stash"},
                                {"recompute", "rstash"},
                                {"backward", "wstash"}}) {
    SmallVector<Message> &out = l.kept[name];
    out.assign(stages, Message());
    for (int64_t s = 0; s < stages; ++s)
      if (func::FuncOp f = fragmentOf(module, s, producer))
        for (unsigned i = 0; i < f.getNumResults(); ++i)
          if (auto [k, idx] = splitName(resultName(f, i)); k == name)
            out[s].add(idx, f.getResultTypes()[i]);
  }
}

/// Fragment `f`'s entry: where each argument comes from and each result goes.
FailureOr<schema::Fragment> fragmentEntry(func::FuncOp f, const Layout &l) {
  auto [s, fragKind] = pipelineFragmentStageKind(f);
  bool isForward = fragKind == "forward" || fragKind == "forward_keep";
  auto slots = f->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
  schema::Fragment entry;
  entry.name = f.getSymName().str();
  entry.stage = s;
  entry.kind = fragKind.str();
  entry.arenaBytes = f->getAttrOfType<IntegerAttr>(kArenaBytesAttr).getInt();
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto [kindName, idx] = splitName(argName(f, i));
    schema::FragmentArg &a = entry.args.emplace_back();
    if (int64_t off = f.getArgAttrOfType<IntegerAttr>(i, kOffsetAttr).getInt(); off >= 0)
      a.offset = off; // else read in place (isInPlaceFragmentArg)
    a.bytes = tensorBytes(f.getArgumentTypes()[i]);
    if (kindName == "act") {
      a.source = "act";
      a.msgOffset = l.act[s - 1].offset.lookup(idx);
    } else if (kindName == "cot") {
      a.source = "cot";
      a.msgOffset = l.cot[s].offset.lookup(idx);
    } else if (std::optional<int64_t> kept = l.keptOffset(kindName, s, idx)) {
      a.source = kindName.str();
      a.msgOffset = kept;
    } else if (kindName == "step") {
      a.source = "step";
    } else if (l.dataSlot.count(kindName)) {
      std::string role = l.dataRole.lookup(kindName);
      a.source = role == "other" ? std::string("input") : role;
      if (role == "other" || role == kLabelCountInput)
        a.inputOffset = l.dataSlot.lookup(kindName).first;
    } else {
      return f.emitError("fragment argument ") << i << " has no known source";
    }
  }
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    Type t = f.getResultTypes()[i];
    auto [kindName, idx] = splitName(resultName(f, i));
    schema::FragmentResult &r = entry.results.emplace_back();
    if (slots[i] >= 0)
      r.offset = slots[i]; // else written in place (isInPlaceFragmentResult)
    r.bytes = tensorBytes(t);
    r.dtype = target::manifestDType(t);
    std::optional<int64_t> kept = l.keptOffset(kindName, s, idx);
    if (kindName == "act") {
      r.dest = "act";
      r.msgOffset = l.act[s].offset.lookup(idx);
    } else if (kindName == "cot") {
      r.dest = "cot";
      r.msgOffset = l.cot[s - 1].offset.lookup(idx);
    } else if (kept && fragKind != "update") {
      r.dest = kindName.str();
      r.msgOffset = kept;
    } else if (isForward && kindName == "loss") {
      r.dest = "loss";
    } else if (fragKind == "update" && (kindName == "grad_norm" || kindName == "lr")) {
      r.dest = kindName.str();
      r.outOffset = l.outSlot.lookup(kindName);
    } else {
      r.dest = "none";
    }
  }
  return entry;
}

/// Per stage: message and kept-value sizes, the params it owns and uses;
/// the gradient accumulators several ranks hold; each rank's instructions.
void addStages(ModuleOp module, ArrayRef<func::FuncOp> frags, const Layout &l,
               PipelineScheduleKind kind, int64_t ranks, int64_t m, int64_t chunks,
               schema::Pipeline &pipeline) {
  // Accumulators of parameters several stages hold, summed before updates.
  int64_t stages = ranks * chunks;
  ArrayAttr owners = getPipelinePlan(module).getOwners();
  llvm::StringMap<SmallVector<int64_t>> holders;
  SmallVector<std::string> order;
  for (auto [s, names] : llvm::enumerate(owners))
    for (Attribute n : cast<ArrayAttr>(names)) {
      std::string acc = (kGradAccumulatorPrefix + cast<StringAttr>(n).getValue()).str();
      if (!module.lookupSymbol(acc))
        continue;
      auto &h = holders[acc];
      if (h.empty())
        order.push_back(acc);
      if (!llvm::is_contained(h, (int64_t)s % ranks)) // the holder ranks
        h.push_back(s % ranks);
    }
  for (const std::string &acc : order)
    if (holders[acc].size() > 1)
      pipeline.shared.push_back({acc, std::vector<int64_t>(holders[acc].begin(), holders[acc].end())});

  for (int64_t s = 0; s < stages; ++s) {
    schema::StageInfo &stage = pipeline.stageInfo.emplace_back();
    for (Attribute n : cast<ArrayAttr>(owners[s]))
      stage.owned.push_back(cast<StringAttr>(n).getValue().str());
    // Every param the stage's fragments read or write: the only part of P
    // its ranks touch (and initialise, restore and checkpoint).
    llvm::SetVector<StringRef> used;
    for (func::FuncOp f : frags)
      if (pipelineFragmentStageKind(f).first == s)
        f.walk([&](Operation *op) {
        if (auto get = dyn_cast<GetParamOp>(op))
          used.insert(get.getName());
        else if (auto set = dyn_cast<SetParamOp>(op))
          used.insert(set.getName());
      });
    for (StringRef n : used)
      stage.params.push_back(n.str());
    stage.actInBytes = s ? l.act[s - 1].bytes : 0;
    stage.actOutBytes = s + 1 < stages ? l.act[s].bytes : 0;
    stage.cotInBytes = s + 1 < stages ? l.cot[s].bytes : 0;
    stage.cotOutBytes = s ? l.cot[s - 1].bytes : 0;
    stage.stashBytes = l.kept.find("stash")->second[s].bytes;
    stage.rstashBytes = l.kept.find("rstash")->second[s].bytes;
    stage.wstashBytes = l.kept.find("wstash")->second[s].bytes;
  }
  auto program = buildPipelineSchedule(kind, ranks, m, chunks, recordedKeptMicrobatches(module));
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<schema::Instr> &instrs = pipeline.programs.emplace_back();
    for (const PipelineInstr &i : program[r])
      instrs.push_back({pipelineInstrName(i.kind).str(), i.mb,
                        chunks > 1 ? std::optional<int64_t>(i.chunk) : std::nullopt});
  }
}
} // namespace

LogicalResult mlir::merak::writePipelineProgramData(ModuleOp module, const ProgramInfo &info,
                                                    llvm::raw_ostream &manifestOs,
                                                    llvm::raw_ostream &dataOs) {
  PipelinePlanAttr plan = getPipelinePlan(module);
  FailureOr<SmallVector<func::FuncOp>> fragsOr = pipelineFragments(module);
  auto lossFn = module.lookupSymbol<func::FuncOp>("loss");
  auto paramsBytes = module->getAttrOfType<IntegerAttr>(kParamsBytesAttr);
  auto constsBytes = module->getAttrOfType<IntegerAttr>(kConstsBytesAttr);
  auto initBytes = module->getAttrOfType<IntegerAttr>(kParamsInitBytesAttr);
  if (failed(fragsOr) || !lossFn || !paramsBytes || !constsBytes || !initBytes)
    return module.emitError("no planned pipeline program (run merak-plan-memory)");
  SmallVector<func::FuncOp> frags = *fragsOr;
  // Model stages; interleaved: `chunks` of them per rank (model stage k on
  // rank k mod ranks).
  int64_t stages = plan.getStages(), chunks = plan.getVirtualStages(), ranks = plan.getRanks();
  int64_t m = plan.getMicrobatches();
  StringAttr scheduleName = plan.getSchedule();
  FailureOr<PipelineScheduleKind> kind =
      parsePipelineSchedule(scheduleName ? scheduleName.getValue() : "1f1b");
  if (failed(kind))
    return module.emitError("unknown pipeline schedule");

  // Parameter data, then the constants of every fragment (plan order).
  if (failed(target::writeInitialParams(module, initBytes.getInt(), dataOs)))
    return failure();
  int64_t written = initBytes.getInt();
  int64_t constsOffset = written;
  for (func::FuncOp f : frags) {
    WalkResult r = f.walk([&](ConstantOp c) {
      if (written != constsOffset + c->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt() ||
          failed(target::writeElementData(c, c.getValue(), slotBytes(c.getType()), dataOs)))
        return WalkResult::interrupt();
      written += slotBytes(c.getType());
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return f.emitError("cannot lay out the constants");
  }
  if (written != constsOffset + constsBytes.getInt())
    return module.emitError("constant storage size differs from the plan");

  // Parameters: trainable when an update writes them.
  llvm::StringSet<> trained;
  for (func::FuncOp f : frags)
    f.walk([&](SetParamOp s) { trained.insert(s.getName()); });
  schema::Program manifest;
  manifest.constsOffset = constsOffset;
  schema::Pipeline &pipeline = manifest.pipeline.emplace();
  for (ParamOp p : module.getOps<ParamOp>()) {
    if (p.getSymName().starts_with(kGradAccumulatorPrefix))
      pipeline.accumulators.push_back(p.getSymName().str());
    // Tensor-parallel shards, as in a serial program's manifest: the full
    // initial tensor follows the constants and every rank copies its part.
    FailureOr<schema::Tensor> entry =
        target::manifestParam(p, trained, initBytes.getInt(), manifest);
    if (failed(entry) ||
        (entry->shard && failed(target::writeShardData(p, *entry, written, dataOs))))
      return failure();
    manifest.params.push_back(std::move(*entry));
  }

  // The arena: fragments, then the step's inputs and outputs.
  int64_t fragArena = 0;
  for (func::FuncOp f : frags)
    fragArena = std::max(fragArena, f->getAttrOfType<IntegerAttr>(kArenaBytesAttr).getInt());
  int64_t top = align64(fragArena);
  Layout layout;
  if (failed(placeInputsOutputs(module, lossFn, m, top, layout, manifest)))
    return failure();
  layoutMessages(module, stages, layout);
  for (func::FuncOp f : frags) {
    FailureOr<schema::Fragment> entry = fragmentEntry(f, layout);
    if (failed(entry))
      return failure();
    pipeline.fragments.push_back(std::move(*entry));
  }
  addStages(module, frags, layout, *kind, ranks, m, chunks, pipeline);

  for (func::FuncOp f : frags) {
    target::addKernelOps(f, manifest);
    target::addExpertTables(f, manifest);
  }
  if (!info.optimizer.empty())
    manifest.defaults.optimizer = info.optimizer;
  pipeline.stages = stages;
  pipeline.virtualStages = chunks;
  pipeline.microbatches = m;
  pipeline.schedule = pipelineScheduleName(*kind).str();
  manifest.entry = "pipeline";
  manifest.model = info.model;
  manifest.arenaBytes = top;
  manifest.paramsBytes = paramsBytes.getInt();
  manifest.paramsInitBytes = initBytes.getInt();
  manifest.constsBytes = constsBytes.getInt();
  DeviceMesh mesh = getMesh(module);
  manifest.mesh = {ranks, mesh.dp, mesh.tp, mesh.ep};
  if (!info.weightsFile.empty())
    manifest.weights = schema::Weights{info.weightsFile, info.weightsId};
  manifestOs << schema::dump(manifest);
  return success();
}

LogicalResult mlir::merak::emitPipelineProgramSource(ModuleOp module, const ProgramInfo &info,
                                                     llvm::raw_ostream &os) {
  FailureOr<SmallVector<func::FuncOp>> frags = pipelineFragments(module);
  if (failed(frags))
    return failure();
  SmallVector<std::pair<func::FuncOp, std::string>> fns;
  for (auto [k, f] : llvm::enumerate(*frags))
    fns.push_back({f, "merak_fragment_" + std::to_string(k)});
  int64_t n = fns.size();
  if (failed(lowerToEmitC(module, fns, info.target, /*fragmentIo=*/true)))
    return failure();
  PassManager pm(module.getContext());
  pm.addPass(createMerakSplitEmitCFunctions());
  if (failed(pm.run(module)))
    return failure();
  os << "// Generated by merak-compile from " << info.model << " — do not edit.\n";
  if (failed(emitc::translateToCpp(module, os)))
    return failure();
  os << "\n// The pipeline runtime calls fragments by index "
        "(runtime/include/merak_rt/pipeline.h).\n"
     << "extern \"C\" void merak_run_fragment(long long i, char *A, char *P, const char *C,\n"
     << "                                   char **IO) {\n"
     << "  switch (i) {\n";
  for (int64_t k = 0; k < n; ++k)
    os << "  case " << k << ": merak_fragment_" << k << "(A, P, C, IO); return;\n";
  os << "  }\n}\n"
     << "extern \"C\" void merak_train_step(char *, char *, const char *) {}\n";
  return success();
}
