//===- ProgramData.cpp - manifest and initial data of a generated program -===//
#include "merak/Target/Program.h"

#include "ManifestJSON.h"
#include "merak/Target/PipelineProgram.h"

#include "merak/Conversion/MerakToEmitC.h"
#include "merak/Dialect/Merak/Analysis/OpCosts.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::merak;
namespace schema = ::merak::rt::schema;

LogicalResult target::writeElementData(Operation *owner, ElementsAttr attr, int64_t bytes,
                                      llvm::raw_ostream &os) {
  auto type = cast<RankedTensorType>(attr.getType());
  Type et = type.getElementType();
  int64_t n = type.getNumElements(), eb = storageElementBytes(et);
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    // Parameter blobs go straight from the resource to the file.
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob || (int64_t)blob->getData().size() != n * eb)
      return owner->emitError("the data of this tensor is missing or has the wrong size");
    os.write(blob->getData().data(), blob->getData().size());
    os.write_zeros(bytes - n * eb);
    return success();
  }
  std::string out;
  size_t start = 0;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    if (et.isInteger(1)) {
      for (bool v : dense.getValues<bool>())
        out.push_back(v ? 1 : 0);
    } else {
      ArrayRef<char> raw = dense.getRawData();
      if (dense.isSplat()) {
        for (int64_t i = 0; i < n; ++i)
          out.append(raw.data(), eb);
      } else {
        out.append(raw.data(), raw.size());
      }
    }
  } else {
    return owner->emitError("unsupported kind of elements attribute");
  }
  if ((int64_t)(out.size() - start) != n * eb)
    return owner->emitError("tensor data has ") << out.size() - start << " bytes, expected "
                                                 << n * eb;
  out.resize(start + bytes, '\0');
  os << out;
  return success();
}

FailureOr<schema::Tensor> target::manifestParam(ParamOp p, const llvm::StringSet<> &trained,
                                                int64_t initBytes, schema::Program &program) {
  auto type = p.getTensorType();
  int64_t off = p->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt();
  schema::Tensor entry = manifestTensor(p.getSymName().str(), type, off);
  entry.bytes = target::tensorBytes(type);
  if (auto k = p->getAttrOfType<StringAttr>(kKindAttr))
    entry.kind = k.str();
  else
    entry.kind = trained.contains(p.getSymName()) ? "trainable" : "frozen";
  if (entry.kind == "hparam") {
    StringRef key = p.getSymName();
    key.consume_front("optimizer.hparams.");
    program.hparams[key.str()] = p.getSymName().str();
    if (auto dense = dyn_cast<DenseElementsAttr>(p.getInitialValue()); dense && dense.isSplat())
      program.defaults.hparams[key.str()] = dense.getSplatValue<APFloat>().convertToDouble();
  }
  std::optional<ZeroLayout> zero = getZeroLayout(p.getOperation());
  if (std::optional<ShardLayout> shard = getShardLayout(p)) {
    if (off < initBytes)
      return p.emitError("a sharded parameter lies in the initialised storage");
    std::optional<std::vector<int64_t>> blockSizes;
    if (!shard->blockSizes.empty())
      blockSizes.emplace(shard->blockSizes.begin(), shard->blockSizes.end());
    entry.shard = schema::Shard{
        shard->axis,
        shard->parts,
        shard->blocks,
        std::move(blockSizes),
        shard->group,
        shard->placement >= 0 ? std::optional<int64_t>(shard->placement) : std::nullopt};
    entry.globalShape = manifestShape(globalShardType(
        zero ? RankedTensorType::get(zero->shape, type.getElementType()) : type, *shard));
  }
  if (zero) {
    // ZeRO-1 state: this dp rank's part of the flattened, padded tensor.
    // (Of a tensor-parallel shard: global_shape is the full tensor's.)
    entry.zero = schema::Zero{zero->parts};
    if (!entry.globalShape)
      entry.globalShape = std::vector<int64_t>(zero->shape.begin(), zero->shape.end());
  }
  return entry;
}

LogicalResult target::writeShardData(ParamOp p, schema::Tensor &entry, int64_t &written,
                                     llvm::raw_ostream &os) {
  auto dense = dyn_cast<DenseElementsAttr>(p.getInitialValue());
  if (dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
      dense.getSplatValue<APFloat>().isPosZero())
    return success(); // zero-initialised (optimizer state): nothing to copy
  auto full = cast<RankedTensorType>(p.getInitialValue().getType());
  entry.dataOffset = written;
  entry.dataBytes = tensorBytes(full);
  if (failed(writeElementData(p, p.getInitialValue(), slotBytes(full), os)))
    return failure();
  written += slotBytes(full);
  return success();
}

int64_t target::slotBytes(Type t) {
  auto r = cast<RankedTensorType>(t);
  int64_t b = r.getNumElements() * storageElementBytes(r.getElementType());
  return std::max((b + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment,
                  kBufferAlignment);
}

void target::addKernelOps(func::FuncOp fn, schema::Program &manifest) {
  for (Operation *op : kernelOps(fn)) {
    manifest.ops.push_back(op->getName().stripDialect().str());
    manifest.opKeys.push_back(opCostKey(op));
  }
}

void target::addExpertTables(func::FuncOp fn, schema::Program &manifest) {
  fn.walk([&](ExpertPlaceOp op) {
    if (!manifest.moe)
      manifest.moe.emplace();
    schema::Moe &moe = *manifest.moe;
    moe.rebalanceEvery = op.getRebalanceEvery();
    const int64_t n = op.getTable();
    if (llvm::any_of(moe.tables, [&](const schema::MoeTable &t) { return t.table == n; }))
      return;
    moe.tables.push_back({n, placementParamName(n), (int64_t)op.getWeightRows()});
  });
}

LogicalResult target::writeInitialParams(ModuleOp module, int64_t initBytes,
                                         llvm::raw_ostream &os) {
  auto offsetOf = [](ParamOp p) { return p->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt(); };
  SmallVector<ParamOp> withData;
  for (ParamOp p : module.getOps<ParamOp>())
    if (offsetOf(p) < initBytes)
      withData.push_back(p);
  llvm::sort(withData, [&](ParamOp a, ParamOp b) { return offsetOf(a) < offsetOf(b); });
  int64_t written = 0;
  for (ParamOp p : withData) {
    if (written != offsetOf(p))
      return p.emitError("parameter storage offsets are not contiguous");
    if (failed(writeElementData(p, p.getInitialValue(), slotBytes(p.getType()), os)))
      return failure();
    written += slotBytes(p.getType());
  }
  if (written != initBytes)
    return module.emitError("initialised parameter storage size differs from the plan");
  return success();
}

LogicalResult mlir::merak::writeProgramData(ModuleOp module, const ProgramInfo &info,
                                            llvm::raw_ostream &manifestOs,
                                            llvm::raw_ostream &dataOs) {
  if (isPipelineModule(module))
    return writePipelineProgramData(module, info, manifestOs, dataOs);
  auto fn = module.lookupSymbol<func::FuncOp>(info.entry);
  auto arena = fn ? fn->getAttrOfType<IntegerAttr>(kArenaBytesAttr) : IntegerAttr();
  auto paramsBytes = module->getAttrOfType<IntegerAttr>(kParamsBytesAttr);
  auto constsBytes = module->getAttrOfType<IntegerAttr>(kConstsBytesAttr);
  if (!arena || !paramsBytes || !constsBytes)
    return module.emitError("no memory plan for @") << info.entry << " (run merak-plan-memory)";

  // Parameters written by the step train; the others are frozen buffers.
  llvm::StringSet<> trained;
  fn.walk([&](SetParamOp s) { trained.insert(s.getName()); });

  auto initBytes = module->getAttrOfType<IntegerAttr>(kParamsInitBytesAttr);
  if (!initBytes)
    return module.emitError("no memory plan for the parameters (run merak-plan-memory)");
  // Initial data: parameters below params_init_bytes, in offset order.
  if (failed(target::writeInitialParams(module, initBytes.getInt(), dataOs)))
    return failure();
  int64_t written = initBytes.getInt();

  schema::Program manifest;
  manifest.entry = info.entry;
  manifest.model = info.model;
  manifest.arenaBytes = arena.getInt();
  manifest.paramsBytes = paramsBytes.getInt();
  manifest.paramsInitBytes = initBytes.getInt();
  manifest.constsBytes = constsBytes.getInt();
  DeviceMesh mesh = getMesh(module);
  manifest.mesh = {mesh.pp, mesh.dp, mesh.tp, mesh.ep};
  for (ParamOp p : module.getOps<ParamOp>()) {
    FailureOr<schema::Tensor> entry =
        target::manifestParam(p, trained, initBytes.getInt(), manifest);
    if (failed(entry))
      return failure();
    manifest.params.push_back(std::move(*entry));
  }
  manifest.constsOffset = written;
  WalkResult walk = fn.walk([&](ConstantOp c) {
    int64_t off = c->getAttrOfType<IntegerAttr>(kOffsetAttr).getInt();
    if (written != manifest.constsOffset + off ||
        failed(target::writeElementData(c, c.getValue(), target::slotBytes(c.getType()), dataOs)))
      return WalkResult::interrupt();
    written += target::slotBytes(c.getType());
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return fn.emitError("cannot lay out the constants");
  if (written != manifest.constsOffset + constsBytes.getInt())
    return fn.emitError("constant storage size differs from the plan");
  // Tensor-parallel shards: the full initial tensors follow the constants;
  // every rank copies its shard out of them.
  int64_t index = 0;
  for (ParamOp p : module.getOps<ParamOp>()) {
    schema::Tensor &entry = manifest.params[index++];
    if (entry.shard && failed(target::writeShardData(p, entry, written, dataOs)))
      return failure();
  }

  bool haveTokens = false;
  for (BlockArgument arg : fn.getArguments()) {
    auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "merak.name");
    std::string n = name ? name.str() : ("arg" + std::to_string(arg.getArgNumber()));
    auto type = cast<RankedTensorType>(arg.getType());
    std::string role = "other";
    if (n == "labels")
      role = "labels";
    else if (n == "step" && type.getRank() == 0)
      role = "step";
    else if (n == kLabelCountInput && type.getRank() == 0)
      role = kLabelCountInput.str();
    else if (!haveTokens && target::isTokenInput(fn, arg.getArgNumber()))
      role = "tokens", haveTokens = true;
    manifest.inputs.push_back(target::manifestTensor(
        n, type, fn.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kOffsetAttr).getInt()));
    manifest.inputs.back().role = role;
    manifest.inputs.back().indexLimit = target::indexLimit(fn, arg.getArgNumber());
    if (std::optional<int64_t> ignored = target::ignoreIndex(fn, arg.getArgNumber()))
      manifest.inputs.back().ignoreIndex = schema::SignedInt{*ignored};
  }
  auto slots = fn->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, "merak.name");
    manifest.outputs.push_back(target::manifestTensor(
        name ? name.str() : "result" + std::to_string(i), fn.getResultTypes()[i], slots[i]));
  }
  target::addKernelOps(fn, manifest);
  target::addExpertTables(fn, manifest);
  if (!info.optimizer.empty())
    manifest.defaults.optimizer = info.optimizer;
  if (!info.weightsFile.empty())
    manifest.weights = schema::Weights{info.weightsFile, info.weightsId};
  manifestOs << schema::dump(manifest);
  return success();
}

LogicalResult mlir::merak::emitProgramSource(ModuleOp module, const ProgramInfo &info,
                                             llvm::raw_ostream &os) {
  if (isPipelineModule(module))
    return emitPipelineProgramSource(module, info, os);
  PassManager pm(module.getContext());
  MerakToEmitCOptions opts;
  opts.entry = info.entry;
  opts.target = info.target;
  pm.addPass(createMerakToEmitC(opts));
  pm.addPass(createMerakSplitEmitCFunctions());
  if (failed(pm.run(module)))
    return failure();
  os << "// Generated by merak-compile from " << info.model << " — do not edit.\n";
  return emitc::translateToCpp(module, os);
}
