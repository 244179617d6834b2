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
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

static int64_t align64(int64_t n) {
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

static int64_t tensorBytes(Type t) {
  auto r = cast<RankedTensorType>(t);
  return r.getNumElements() * storageElementBytes(r.getElementType());
}

using target::slotBytes;

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
  json::Array params, accumulators;
  json::Object hparams, defaults;
  for (ParamOp p : module.getOps<ParamOp>()) {
    std::string kindName = target::manifestParamKind(p, trained, hparams, defaults);
    auto type = p.getTensorType();
    if (p.getSymName().starts_with(kGradAccumulatorPrefix))
      accumulators.push_back(p.getSymName().str());
    int64_t off = p->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt();
    json::Object entry{{"name", p.getSymName().str()},
                       {"dtype", target::manifestDType(type)},
                       {"shape", target::manifestShape(type)},
                       {"offset", off},
                       {"bytes", tensorBytes(type)},
                       {"kind", kindName}};
    // Tensor-parallel shards, as in a serial program's manifest: the full
    // initial tensor follows the constants and every rank copies its part.
    if (std::optional<ShardLayout> shard = getShardLayout(p)) {
      if (off < initBytes.getInt())
        return p.emitError("a sharded parameter lies in the initialised storage");
      entry["shard"] = json::Object{
          {"axis", shard->axis}, {"parts", shard->parts}, {"blocks", shard->blocks}};
      std::optional<ZeroLayout> zero = getZeroLayout(p.getOperation());
      entry["global_shape"] = target::manifestShape(globalShardType(
          zero ? RankedTensorType::get(zero->shape, type.getElementType()) : type, *shard));
      auto dense = dyn_cast<DenseElementsAttr>(p.getInitialValue());
      bool zeros = dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
                   dense.getSplatValue<APFloat>().isPosZero();
      if (!zeros) {
        auto full = cast<RankedTensorType>(p.getInitialValue().getType());
        entry["data_offset"] = written;
        entry["data_bytes"] = tensorBytes(full);
        if (failed(target::writeElementData(p, p.getInitialValue(), slotBytes(full), dataOs)))
          return failure();
        written += slotBytes(full);
      }
    }
    if (std::optional<ZeroLayout> zero = getZeroLayout(p.getOperation())) {
      // ZeRO-1 state: this dp rank's part, as in a serial program's manifest.
      entry["zero"] = json::Object{{"parts", zero->parts}};
      if (!entry.get("global_shape"))
        entry["global_shape"] = json::Array(zero->shape);
    }
    params.push_back(std::move(entry));
  }

  // The arena: fragments, then the step's inputs and outputs.
  int64_t fragArena = 0;
  for (func::FuncOp f : frags)
    fragArena = std::max(fragArena, f->getAttrOfType<IntegerAttr>(kArenaBytesAttr).getInt());
  int64_t top = align64(fragArena);
  auto place = [&](int64_t bytes) {
    int64_t off = top;
    top += std::max(align64(bytes), kBufferAlignment);
    return off;
  };
  json::Array inputs, outputs;
  llvm::StringMap<std::pair<int64_t, int64_t>> dataSlot; // name -> (offset, mb bytes)
  llvm::StringMap<std::string> dataRole;                // name -> role
  bool haveTokens = false;
  std::string otherInput;
  for (BlockArgument arg : lossFn.getArguments()) {
    auto name = lossFn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "merak.name");
    auto type = cast<RankedTensorType>(arg.getType());
    std::string n = name ? name.str() : "";
    std::string role;
    if (n == "labels")
      role = "labels";
    else if (!haveTokens && type.getRank() == 2 && type.getElementType().isInteger())
      role = "tokens", haveTokens = true;
    else // an array input of a model without token ids (features, images)
      role = "other", otherInput = n;
    if (haveTokens && !otherInput.empty())
      return lossFn.emitError("a pipeline program with token ids feeds only them and labels; "
                              "input '")
             << otherInput << "' is neither";
    dataRole[n] = role;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= m; // every micro-batch of the step
    auto full = RankedTensorType::get(shape, type.getElementType());
    int64_t off = place(tensorBytes(full));
    dataSlot[n] = {off, tensorBytes(type)};
    inputs.push_back(json::Object{{"name", n}, {"role", role}, {"dtype", target::manifestDType(type)},
                                  {"shape", target::manifestShape(full)}, {"offset", off}});
  }
  auto i64 = RankedTensorType::get({}, IntegerType::get(module.getContext(), 64));
  int64_t stepOff = place(8);
  inputs.push_back(json::Object{{"name", "step"}, {"role", "step"}, {"dtype", "I64"},
                                {"shape", json::Array{}}, {"offset", stepOff}});
  // Fragment (stage, kind) -> function.
  auto fragment = [&](int64_t s, StringRef kind) {
    return module.lookupSymbol<func::FuncOp>(("stage" + Twine(s) + "_" + kind).str());
  };
  func::FuncOp update0 = fragment(0, "update");
  llvm::StringMap<int64_t> outSlot;
  for (unsigned i = 0; i < update0.getNumResults(); ++i) {
    Type t = update0.getResultTypes()[i];
    std::string n = resultName(update0, i).str();
    outSlot[n] = place(tensorBytes(t));
    outputs.push_back(json::Object{{"name", n}, {"dtype", target::manifestDType(t)}, {"shape", target::manifestShape(t)},
                                   {"offset", outSlot[n]}});
  }
  (void)i64;

  // Messages of every cut c (between stage c and c + 1).
  SmallVector<Message> act(stages), cot(stages);
  for (int64_t c = 0; c + 1 < stages; ++c) {
    func::FuncOp fwd = fragment(c, "forward"), bwd = fragment(c, "backward");
    for (unsigned i = 0; i < fwd.getNumResults(); ++i)
      if (auto [k, idx] = splitName(resultName(fwd, i)); k == "act")
        act[c].add(idx, fwd.getResultTypes()[i]);
    for (unsigned i = 0; i < bwd.getNumArguments(); ++i)
      if (auto [k, idx] = splitName(argName(bwd, i)); k == "cot")
        cot[c].add(idx, bwd.getArgumentTypes()[i]);
  }

  // Values kept between two fragments of a stage, laid out like a message:
  // the forward's "stash:i" (merak-recompute: activations the backward
  // reads), the recomputation's "rstash:i" (merak-split-backward, shifted
  // critical path: what the rest of the backward reads; the forward_keep
  // returns the same) and the input-gradient backward's "wstash:i" (zero
  // bubble: what the weight-gradient backward reads).
  auto keptLayout = [&](StringRef producer, StringRef name) {
    SmallVector<Message> out(stages);
    for (int64_t s = 0; s < stages; ++s)
      if (func::FuncOp f = fragment(s, producer))
        for (unsigned i = 0; i < f.getNumResults(); ++i)
          if (auto [k, idx] = splitName(resultName(f, i)); k == name)
            out[s].add(idx, f.getResultTypes()[i]);
    return out;
  };
  llvm::StringMap<SmallVector<Message>> kept;
  kept["stash"] = keptLayout("forward", "stash");
  kept["rstash"] = keptLayout("recompute", "rstash");
  kept["wstash"] = keptLayout("backward", "wstash");
  SmallVector<Message> &stash = kept["stash"];

  json::Array fragments;
  for (auto indexed : llvm::enumerate(frags)) {
    func::FuncOp f = indexed.value();
    auto [s, fragKind] = pipelineFragmentStageKind(f);
    bool isForward = fragKind == "forward" || fragKind == "forward_keep";
    auto argOffsets = [&](unsigned i) {
      return f.getArgAttrOfType<IntegerAttr>(i, kOffsetAttr).getInt();
    };
    auto slots = f->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
    json::Array args, results;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      Type t = f.getArgumentTypes()[i];
      auto [kindName, idx] = splitName(argName(f, i));
      json::Object a{{"offset", argOffsets(i)}, {"bytes", tensorBytes(t)}};
      if (kindName == "act") {
        a["source"] = "act";
        a["msg_offset"] = act[s - 1].offset.lookup(idx);
      } else if (kindName == "cot") {
        a["source"] = "cot";
        a["msg_offset"] = cot[s].offset.lookup(idx);
      } else if (kept.count(kindName) && kept[kindName][s].offset.count(idx)) {
        a["source"] = kindName.str();
        a["msg_offset"] = kept[kindName][s].offset.lookup(idx);
      } else if (kindName == "step") {
        a["source"] = "step";
      } else if (dataSlot.count(kindName)) {
        std::string role = dataRole.lookup(kindName);
        a["source"] = role == "other" ? std::string("input") : role;
        if (role == "other")
          a["input_offset"] = dataSlot.lookup(kindName).first;
      } else {
        return f.emitError("fragment argument ") << i << " has no known source";
      }
      args.push_back(std::move(a));
    }
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      Type t = f.getResultTypes()[i];
      auto [kindName, idx] = splitName(resultName(f, i));
      json::Object r{{"offset", slots[i]}, {"bytes", tensorBytes(t)}, {"dtype", target::manifestDType(t)}};
      if (kindName == "act") {
        r["dest"] = "act";
        r["msg_offset"] = act[s].offset.lookup(idx);
      } else if (kindName == "cot") {
        r["dest"] = "cot";
        r["msg_offset"] = cot[s - 1].offset.lookup(idx);
      } else if (kindName != "act" && kept.count(kindName) &&
                 kept[kindName][s].offset.count(idx) && fragKind != "update") {
        r["dest"] = kindName.str();
        r["msg_offset"] = kept[kindName][s].offset.lookup(idx);
      } else if (isForward && kindName == "loss") {
        r["dest"] = "loss";
      } else if (fragKind == "update" && (kindName == "grad_norm" || kindName == "lr")) {
        r["dest"] = kindName.str();
        r["out_offset"] = outSlot.lookup(kindName);
      } else {
        r["dest"] = "none";
      }
      results.push_back(std::move(r));
    }
    fragments.push_back(json::Object{
        {"name", f.getSymName().str()},
        {"stage", s},
        {"kind", fragKind.str()},
        {"arena_bytes", f->getAttrOfType<IntegerAttr>(kArenaBytesAttr).getInt()},
        {"args", std::move(args)},
        {"results", std::move(results)}});
  }

  // Accumulators of parameters several stages hold, summed before updates.
  ArrayAttr owners = plan.getOwners();
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
  json::Array shared;
  for (const std::string &acc : order)
    if (holders[acc].size() > 1) {
      json::Array st;
      for (int64_t s : holders[acc])
        st.push_back(s);
      shared.push_back(json::Object{{"name", acc}, {"stages", std::move(st)}});
    }

  json::Array stageInfo, programs;
  auto program = buildPipelineSchedule(*kind, ranks, m, chunks, recordedKeptMicrobatches(module));
  for (int64_t s = 0; s < stages; ++s) {
    json::Array owned;
    for (Attribute n : cast<ArrayAttr>(owners[s]))
      owned.push_back(cast<StringAttr>(n).getValue().str());
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
    json::Array params;
    for (StringRef n : used)
      params.push_back(n.str());
    stageInfo.push_back(json::Object{{"act_in_bytes", s ? act[s - 1].bytes : 0},
                                     {"act_out_bytes", s + 1 < stages ? act[s].bytes : 0},
                                     {"cot_in_bytes", s + 1 < stages ? cot[s].bytes : 0},
                                     {"cot_out_bytes", s ? cot[s - 1].bytes : 0},
                                     {"stash_bytes", stash[s].bytes},
                                     {"rstash_bytes", kept["rstash"][s].bytes},
                                     {"wstash_bytes", kept["wstash"][s].bytes},
                                     {"owned", std::move(owned)},
                                     {"params", std::move(params)}});
  }
  for (int64_t r = 0; r < ranks; ++r) {
    json::Array instrs;
    for (const PipelineInstr &i : program[r])
      instrs.push_back(chunks > 1 ? json::Array{pipelineInstrName(i.kind).str(), i.mb, i.chunk}
                                  : json::Array{pipelineInstrName(i.kind).str(), i.mb});
    programs.push_back(std::move(instrs));
  }

  json::Array ops;
  for (func::FuncOp f : frags)
    for (std::string &n : kernelOpNames(f))
      ops.push_back(std::move(n));
  if (!info.optimizer.empty())
    defaults["optimizer"] = info.optimizer;
  json::Object pipeline{{"stages", stages},
                        {"virtual_stages", chunks},
                        {"microbatches", m},
                        {"schedule", pipelineScheduleName(*kind).str()},
                        {"fragments", std::move(fragments)},
                        {"stage_info", std::move(stageInfo)},
                        {"accumulators", std::move(accumulators)},
                        {"shared", std::move(shared)},
                        {"programs", std::move(programs)}};
  json::Object manifest{{"format", 1},
                        {"entry", "pipeline"},
                        {"model", info.model},
                        {"arena_bytes", top},
                        {"params_bytes", paramsBytes.getInt()},
                        {"params_init_bytes", initBytes.getInt()},
                        {"consts_offset", constsOffset},
                        {"consts_bytes", constsBytes.getInt()},
                        {"params", std::move(params)},
                        {"inputs", std::move(inputs)},
                        {"outputs", std::move(outputs)},
                        {"hparams", std::move(hparams)},
                        {"defaults", std::move(defaults)},
                        {"ops", std::move(ops)},
                        {"mesh", json::Object{{"pp", ranks}, {"dp", info.dp}, {"tp", info.tp}}},
                        {"pipeline", std::move(pipeline)}};
  manifestOs << json::Value(std::move(manifest));
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
  if (failed(lowerToEmitC(module, fns, info.target)))
    return failure();
  os << "// Generated by merak-compile from " << info.model << " — do not edit.\n";
  if (failed(emitc::translateToCpp(module, os)))
    return failure();
  os << "\n// The pipeline runtime calls fragments by index "
        "(runtime/include/merak_rt/pipeline.h).\n"
     << "extern \"C\" void merak_run_fragment(long long i, char *A, char *P, const char *C) {\n"
     << "  switch (i) {\n";
  for (int64_t k = 0; k < n; ++k)
    os << "  case " << k << ": merak_fragment_" << k << "(A, P, C); return;\n";
  os << "  }\n}\n"
     << "extern \"C\" void merak_train_step(char *, char *, const char *) {}\n";
  return success();
}
