//===- PlannerProbe.cpp - the planner's cost tables -----------------------===//
//
// Per tensor-parallel degree the model is compiled once into the finest
// pipeline (one stage per candidate cut, one micro-batch = the whole
// batch); every op of each fine stage's forward and backward fragment is
// read with its FLOPs and bytes (CostOpInterface), parameter operands'
// bytes apart. See docs/parallelism.md, "Planner".
//
//===----------------------------------------------------------------------===//
#include "PlannerProbe.h"
#include "merak/Planner/Planner.h"

#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"
#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"
#include "merak/Dialect/Merak/Analysis/PipelineSimulator.h"
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Import/OnnxImporter.h"
#include "merak/Pipelines/Pipelines.h"
#include "merak/Pipelines/Registration.h"
#include "merak/Planner/Report.h"
#include "merak/Planner/Simulate.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::merak;

OwningOpRef<ModuleOp> mlir::merak::readMerakModule(StringRef path, MLIRContext &ctx,
                                                   llvm::SourceMgr &sm, llvm::raw_ostream &log) {
  std::string err;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &err);
  if (!file) {
    log << "merak-compile: error: " << err << "\n";
    return nullptr;
  }
  sm.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> m = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!m) {
    log << "merak-compile: error: cannot read " << path << " as merak IR (see the errors above)\n";
    return nullptr;
  }
  if (!m->lookupSymbol<func::FuncOp>("forward")) {
    log << "merak-compile: error: " << path
        << " has no func.func @forward (the model's forward function)\n";
    return nullptr;
  }
  return m;
}

namespace mlir::merak::planner {
int64_t tensorBytes(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape())
    return 0;
  return r.getNumElements() * std::max<int64_t>(1, storageElementBytes(r.getElementType()));
}

bool isParamRead(Value v) {
  Operation *d = v.getDefiningOp();
  while (d && isa<LocalShardOp, ReshapeOp, TransposeOp, CastOp>(d))
    d = d->getOperand(0).getDefiningOp();
  return d && isa<GetParamOp>(d);
}

/// The attention core: ops producing or reading a [..., S, S] score tensor
/// (rank >= 3, two equal trailing dimensions > 1): QK^T, mask, softmax,
/// dropout, probabilities x V. Selective recomputation (Korthikanti et al.
/// 2022) recomputes exactly these.
bool isScoreType(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getRank() >= 3 && r.getDimSize(r.getRank() - 1) > 1 &&
         r.getDimSize(r.getRank() - 1) == r.getDimSize(r.getRank() - 2);
}
bool isAttentionCore(Operation *op) {
  return llvm::any_of(op->getResultTypes(), isScoreType) ||
         (isa<MatmulOp, MatmulTOp>(op) && isScoreType(op->getOperand(0).getType()));
}

OpCost opCost(Operation *op) {
  OpCost c;
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost || isa<func::ReturnOp>(op))
    return c;
  c.flops = cost.getFlops();
  int64_t total = cost.getBytesAccessed();
  if (total == 0)
    return c;
  for (Value v : op->getOperands())
    if (isParamRead(v))
      c.paramBytes += tensorBytes(v.getType());
  c.actBytes = std::max<int64_t>(0, total - c.paramBytes);
  return c;
}

int64_t modelBatch(ModuleOp module) {
  auto fn = module.lookupSymbol<func::FuncOp>("forward");
  SmallVector<BlockArgument> inputs = fn ? batchInputs(fn) : SmallVector<BlockArgument>();
  return inputs.empty() ? 1 : cast<RankedTensorType>(inputs.front().getType()).getDimSize(0);
}

/// Whether merak-split-batch splits the cleaned-up model's batch (into its
/// smallest divisor above 1); where it does not, dp and the micro-batches
/// stay 1.
bool batchSplits(ModuleOp cleaned) {
  int64_t batch = modelBatch(cleaned), part = 2;
  while (part <= batch && batch % part)
    ++part;
  if (part > batch)
    return false;
  OwningOpRef<ModuleOp> copy = cleaned.clone();
  ScopedDiagnosticHandler quiet(cleaned.getContext(), [](Diagnostic &) { return success(); });
  PassManager pm(cleaned.getContext());
  MerakSplitBatchOptions split;
  split.parts = part;
  pm.addPass(createMerakSplitBatch(split));
  return succeeded(pm.run(*copy));
}

/// Compiles the model with tensor parallelism `tp` into `pp` pipeline
/// stages of one micro-batch. Diagnostics go to `diag`.
OwningOpRef<ModuleOp> compileProbe(const CompileOptions &o, int64_t tp, int64_t pp,
                                   MLIRContext &ctx, llvm::raw_ostream &diag, int64_t *batch,
                                   std::string *dtype, bool *splits,
                                   bool *imported) {
  llvm::SourceMgr sm;
  SourceMgrDiagnosticHandler handler(sm, &ctx, diag);
  OwningOpRef<ModuleOp> m;
  if (StringRef(o.input).ends_with(".mlir")) {
    m = readMerakModule(o.input, ctx, sm, diag);
  } else {
    ImportOptions io;
    for (const std::string &spec : o.inputShapes) {
      std::string err;
      if (failed(parseInputShape(spec, io, err))) {
        diag << err << "\n";
        return nullptr;
      }
    }
    io.batchSize = o.batchSize; // --batch-size binds the batch as for compiling
    m = importOnnxFile(o.input, &ctx, io);
  }
  if (!m)
    return nullptr;
  if (batch)
    *batch = modelBatch(*m);
  if (imported)
    *imported = true;
  PassManager cleanup(&ctx);
  buildImportCleanupPipeline(cleanup, o.fusedExperts, o.fusedScan);
  if (failed(cleanup.run(*m)))
    return nullptr;
  if (splits)
    *splits = batchSplits(*m);
  PassManager pm(&ctx);
  PipelineOptions training;
  training.loss = o.loss;
  training.logits = o.logits;
  training.labels = o.labels;
  training.frozen.assign(o.frozen.begin(), o.frozen.end());
  training.fusedAttention = o.fusedAttention;
  training.weightCastCache = o.weightCastCache;
  training.moeAuxLoss = o.moeAuxLoss;
  training.moeCapacityFactor = o.moeCapacityFactor;
  training.moeDropPolicy = o.moeDropPolicy;
  training.precision = o.precision;
  training.tp = tp;
  training.vocabParallel = tp > 1 && (o.vocabParallel >= 0 ? o.vocabParallel == 1
                                                           : o.loss == "cross-entropy");
  training.vocabParallelFallback = o.vocabParallel < 0;
  training.sequenceParallel = tp > 1 && o.sequenceParallel == 1;
  training.optimizer = "optimizer=" + o.optimizer;
  for (const std::string &kv : o.optimizerOptions)
    training.optimizer += " " + kv;
  training.pp = pp;
  training.microbatches = 1;
  // The stages as merak-pipeline cuts them, one stage included, before
  // recomputation.
  training.alwaysPipelined = true;
  if (failed(buildMerakPipeline(pm, CompilePhase::Import, CompilePhase::Pipeline, training,
                                diag)) ||
      failed(pm.run(*m)))
    return nullptr;
  // After merak-mixed-precision: --precision bf16 makes the GEMMs bf16.
  if (dtype)
    *dtype = computeDtype(*m).str();
  return m;
}

FailureOr<Probe> readProbe(ModuleOp module, int64_t tp, int64_t pp, bool gradAccumulationFusion) {
  // Costed as the program is emitted (as --simulate costs it): the GEMMs
  // read transposed operands in place and, with the fusion, add the weight
  // gradients into their accumulators.
  PassManager pm(module.getContext());
  addEmittedGemmPasses(pm, gradAccumulationFusion);
  if (failed(pm.run(module)))
    return failure();
  ReportOptions ro;
  ro.tp = tp;
  ro.pp = pp;
  ro.microbatches = 1;
  ro.schedule = "1f1b";
  FailureOr<std::vector<StageCosts>> costs = collectStageCosts(module, ro);
  if (failed(costs) || (int64_t)costs->size() != pp)
    return failure();
  Probe probe;
  probe.tp = tp;
  PipelinePlanAttr plan = getPipelinePlan(module);
  if (!plan || (int64_t)plan.getCuts().size() != pp - 1)
    return failure();
  probe.cuts.assign(plan.getCuts().begin(), plan.getCuts().end());
  SymbolTable symbols(module);
  for (int64_t s = 0; s < pp; ++s) {
    FineStage st;
    st.costs = (*costs)[s];
    st.stashInputs = st.costs.stashBytes;
    auto f = symbols.lookup<func::FuncOp>(("stage" + Twine(s) + "_forward").str());
    auto b = symbols.lookup<func::FuncOp>(("stage" + Twine(s) + "_backward").str());
    if (!f || !b)
      return failure();
    f.walk([&](Operation *op) {
      if (isa<func::FuncOp>(op))
        return;
      if (auto mm = dyn_cast<ExpertMatmulOp>(op))
        probe.experts = std::max(
            probe.experts, cast<RankedTensorType>(mm.getWeight().getType()).getDimSize(0));
      OpCost c = opCost(op);
      st.forward.push_back(c);
      bool stashed = !isViewOp(op) && !isa<ConstantOp, GetParamOp, func::ReturnOp>(op);
      int64_t out = 0;
      if (stashed)
        for (Value r : op->getResults())
          if (isa<FloatType>(getElementTypeOrSelf(r.getType())))
            out += tensorBytes(r.getType());
      st.stashAll += out;
      if (isAttentionCore(op)) {
        st.attention.push_back(c);
        st.stashAttention += out;
      }
    });
    st.stashAll += st.stashInputs;
    b.walk([&](Operation *op) {
      if (!isa<func::FuncOp>(op))
        st.backward.push_back(opCost(op));
    });
    for (Operation *op : recomputedOps(b, f))
      st.recompute.push_back(opCost(op));
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<StringAttr>(i, "merak.name");
          n && n.getValue().starts_with("act:"))
        st.actOut += tensorBytes(f.getResultTypes()[i]);
    probe.stages.push_back(std::move(st));
  }
  return probe;
}

} // namespace mlir::merak::planner
