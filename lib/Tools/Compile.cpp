//===- Compile.cpp - the merak-compile driver as a library call -----------===//
//
// Phases run in order up to CompileOptions::compileTo: import, training
// (loss, autodiff, optimizer; sharding and pipelining with dp/tp/pp), lower
// (memory plan), emit (C++), binary (the executable). merak-compile
// (MerakCompile.cpp) and the Python module call runCompile/compileModel.
//
//===----------------------------------------------------------------------===//
#include "merak/Tools/Compile.h"

#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Import/OnnxImporter.h"
#include "merak/Target/PipelineProgram.h"
#include "merak/Target/Program.h"
#include "merak/Tools/PipelineCompile.h"
#include "merak/Tools/Planner.h"
#include "merak/Tools/Registration.h"
#include "merak/Tools/Report.h"
#include "merak/Tools/Simulate.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
using Phase = CompilePhase;

int failWith(llvm::raw_ostream &log, const Twine &msg) {
  log << "merak-compile: error: " << msg << "\n";
  return 1;
}

/// The first [batch, sequence] integer argument of @forward: the token ids
/// data parallelism splits.
FailureOr<std::pair<std::string, SmallVector<int64_t>>> tokenInput(ModuleOp module) {
  auto fn = module.lookupSymbol<func::FuncOp>("forward");
  if (!fn)
    return failure();
  for (BlockArgument arg : fn.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "merak.name");
    if (t && name && t.getRank() == 2 && t.getElementType().isInteger() &&
        !t.getElementType().isInteger(1))
      return std::make_pair(name.str(), SmallVector<int64_t>(t.getShape()));
  }
  return failure();
}

/// Without token ids (an MLP on features, a CNN on images): every input of
/// @forward, which must share a leading (batch) dimension. Empty when an
/// input has no leading dimension or they differ.
SmallVector<std::pair<std::string, SmallVector<int64_t>>> batchInputs(ModuleOp module) {
  SmallVector<std::pair<std::string, SmallVector<int64_t>>> inputs;
  auto fn = module.lookupSymbol<func::FuncOp>("forward");
  if (!fn)
    return {};
  for (BlockArgument arg : fn.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "merak.name");
    if (!t || !name || t.getRank() == 0 ||
        (!inputs.empty() && t.getDimSize(0) != inputs.front().second[0]))
      return {};
    inputs.emplace_back(name.str(), SmallVector<int64_t>(t.getShape()));
  }
  return inputs;
}

/// Prints the memory plan's totals: the peak arena against what every
/// temporary would take without reuse.
void reportMemoryPlan(ModuleOp module, llvm::raw_ostream &os) {
  auto fn = module.lookupSymbol<func::FuncOp>("train_step");
  int64_t unplanned = 0;
  fn.walk([&](Operation *op) {
    if (op->hasAttr(kOffsetsAttr))
      for (Value r : op->getResults())
        unplanned += cast<RankedTensorType>(r.getType()).getNumElements() *
                     storageElementBytes(cast<RankedTensorType>(r.getType()).getElementType());
  });
  auto bytes = [&](StringRef name, Operation *on) {
    return on->getAttrOfType<IntegerAttr>(name).getInt();
  };
  os << "merak-compile: memory plan: arena peak " << bytes(kArenaBytesAttr, fn) << " bytes ("
     << unplanned << " bytes of temporaries without reuse), parameters and state "
     << bytes(kParamsBytesAttr, module) << " bytes, constants " << bytes(kConstsBytesAttr, module)
     << " bytes\n";
}

/// Writes the program's source, manifest and data to a scratch directory and
/// builds the executable; `out` is replaced only when everything succeeded.
int buildBinary(ModuleOp module, const ProgramInfo &program, StringRef out, bool verbose,
                StringRef runtimeDir, llvm::raw_ostream &log) {
  auto fail = [&](const Twine &msg) { return failWith(log, msg); };
  if (program.target == "cuda" && !cudaRuntimeAvailable())
    return fail("--target cuda needs a merak built with CUDA (nvcc not found at configure time)");
  SmallString<128> outDir(out);
  llvm::sys::path::remove_filename(outDir);
  if (outDir.empty())
    outDir = ".";
  if (!llvm::sys::fs::is_directory(outDir))
    return fail("cannot write " + out + ": no directory '" + outDir + "'");
  if (llvm::sys::fs::is_directory(out))
    return fail("cannot write " + out + ": it is a directory");
  SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("merak-build", dir))
    return fail("cannot create a build directory: " + ec.message());
  llvm::scope_exit cleanup([&] {
    if (!verbose)
      llvm::sys::fs::remove_directories(dir);
  });
  auto path = [&](StringRef name) {
    SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  };
  std::string manifest = path("manifest.json"), data = path("data.bin"), cpp = path("step.cpp");
  uint64_t dataBytes = 0;
  {
    std::error_code ec1, ec2;
    llvm::raw_fd_ostream mos(manifest, ec1), dos(data, ec2);
    if (ec1 || ec2)
      return fail("cannot write to " + dir);
    if (failed(writeProgramData(module, program, mos, dos)))
      return 1;
    dataBytes = dos.tell();
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream cos(cpp, ec);
    if (ec)
      return fail("cannot write " + cpp);
    if (failed(emitProgramSource(module, program, cos)))
      return 1;
  }
  SmallString<128> outAbs(out);
  llvm::sys::fs::make_absolute(outAbs);
  std::string tmp = (outAbs + ".tmp" + Twine(llvm::sys::Process::getProcessId())).str();
  if (std::string err =
          buildExecutable(dir, cpp, manifest, data, dataBytes, tmp, verbose, runtimeDir, log,
                          program.target);
      !err.empty()) {
    llvm::sys::fs::remove(tmp);
    return fail("building the executable: " + err);
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, outAbs)) {
    llvm::sys::fs::remove(tmp);
    return fail("cannot write " + out + ": " + ec.message());
  }
  if (verbose)
    log << "merak-compile: build files kept in " << dir << "\n";
  log << "merak-compile: wrote " << out << "\n";
  return 0;
}
} // namespace

int mlir::merak::runCompile(const CompileOptions &opts, llvm::raw_ostream &log,
                            std::string *reportOut) {
  auto fail = [&](const Twine &msg) { return failWith(log, msg); };
  if (opts.devices != 0)
    return runPlannedCompile(opts, log, reportOut);
  if (opts.plannerSpace != "auto")
    return fail("--planner-space needs --devices (it restricts the planner's search)");
  ImportOptions importOpts;
  for (const std::string &spec : opts.inputShapes) {
    std::string err;
    if (failed(parseInputShape(spec, importOpts, err)))
      return fail(err);
  }
  DialectRegistry registry;
  registerMerakDialects(registry);
  MLIRContext ctx(registry);
  // Errors name their cause and location; never dump whole modules at users.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diag(sourceMgr, &ctx, log);
  auto configure = [&](PassManager &pm) {
    return opts.commandLinePassOptions ? applyPassManagerCLOptions(pm) : success();
  };

  Phase compileTo = opts.compileTo;
  if (opts.dp < 1 || opts.tp < 1 || opts.pp < 1)
    return fail("--dp, --tp and --pp must be at least 1");
  // Recomputation: stage-aware with a memory budget, none without; any
  // mode but none takes the pipelined path (one stage for a serial program).
  std::optional<int64_t> memoryBudget = parseByteSize(opts.memoryPerDevice);
  if (!memoryBudget || (!opts.memoryPerDevice.empty() && *memoryBudget <= 0))
    return fail("--memory-per-device '" + opts.memoryPerDevice +
                "': expected a positive byte count, optionally with a suffix KB, MB, GB, KiB, "
                "MiB or GiB");
  // The shifted critical path moves recomputation off the critical path:
  // without --recompute it recomputes fully, as in the Merak paper.
  bool scpDefault = opts.schedule == "shifted-critical-path" && (opts.pp > 1 || opts.microbatches > 1);
  std::string recompute = !opts.recompute.empty() ? opts.recompute
                          : *memoryBudget         ? "stage-aware"
                          : scpDefault            ? "full"
                                                  : "none";
  FailureOr<RecomputeMode> recomputeMode = parseRecomputeMode(recompute);
  if (failed(recomputeMode))
    return fail("unknown --recompute '" + recompute +
                "' (expected none, full, selective or stage-aware)");
  if (*recomputeMode == RecomputeMode::StageAware && !*memoryBudget)
    return fail("--recompute stage-aware needs --memory-per-device");
  const bool pipelined =
      opts.pp > 1 || opts.microbatches > 1 || *recomputeMode != RecomputeMode::None;
  if (opts.target != "cpu" && opts.target != "cuda")
    return fail("unknown --target '" + opts.target + "' (expected cpu or cuda)");
  const bool report = !opts.report.empty();
  // --report alone describes the training step; with --grad-reduce bf16 the
  // overlap phase, after which the dp buckets are bf16.
  if (report && !opts.compileToGiven)
    compileTo = opts.gradReduce == "bf16" ? Phase::Overlap : Phase::Training;
  if (report && compileTo < Phase::Training)
    return fail("--report needs --compile-to=training or a later phase");
  if (report && opts.report != "text" && opts.report != "json")
    return fail("--report=" + opts.report + ": expected text or json");
  if (opts.microbatches < 1)
    return fail("--microbatches must be at least 1");
  if (pipelined && compileTo < Phase::Training)
    return fail("--pp and --microbatches need --compile-to=training or a later phase");
  if (!pipelined && (compileTo == Phase::Pipeline || compileTo == Phase::Recompute ||
                     compileTo == Phase::Schedule))
    return fail("--compile-to=pipeline, recompute and schedule need --pp, --microbatches or "
                "--recompute");
  FailureOr<PipelineScheduleKind> scheduleKind = parsePipelineSchedule(opts.schedule);
  if (failed(scheduleKind))
    return fail("unknown --schedule '" + opts.schedule +
                "' (expected gpipe, 1f1b, interleaved, zb-h1, zb-h2 or "
                "shifted-critical-path)");
  if (opts.virtualStages < 1)
    return fail("--virtual-stages must be at least 1");
  if (opts.virtualStages > 1 && *scheduleKind != PipelineScheduleKind::Interleaved)
    return fail("--virtual-stages needs --schedule interleaved");
  if (*scheduleKind == PipelineScheduleKind::Interleaved && opts.virtualStages > 1 &&
      opts.pp < 2)
    return fail("--schedule interleaved with --virtual-stages needs --pp of at least 2");
  if (*scheduleKind == PipelineScheduleKind::Interleaved && opts.microbatches % opts.pp != 0)
    return fail("--schedule interleaved needs --microbatches (" + Twine(opts.microbatches) +
                ") to be a multiple of --pp (" + Twine(opts.pp) + ")");
  if (opts.simulate && !pipelined)
    return fail("--simulate needs --pp or --microbatches");
  if (!opts.simulateTrace.empty() && !opts.simulate)
    return fail("--simulate-trace needs --simulate");
  if (!opts.deviceProfile.empty() && !opts.simulate)
    return fail("--device-profile needs --simulate");
  if (opts.gradReduce != "fp32" && opts.gradReduce != "bf16")
    return fail("--grad-reduce must be fp32 or bf16, got '" + opts.gradReduce + "'");
  SimulateOptions simulation;
  simulation.dp = opts.dp;
  simulation.tp = opts.tp;
  simulation.pp = opts.pp;
  simulation.microbatches = opts.microbatches;
  simulation.gradReduceBf16 = opts.gradReduce == "bf16";
  if (!opts.deviceProfile.empty()) {
    llvm::Expected<DeviceProfile> profile = readDeviceProfile(opts.deviceProfile);
    if (!profile)
      return fail("--device-profile: " + llvm::toString(profile.takeError()));
    simulation.profile = std::move(*profile);
  }
  if (!opts.stageBoundaries.empty() && (int64_t)opts.stageBoundaries.size() != opts.pp - 1)
    return fail("--stage-boundaries needs pp-1 = " + Twine(opts.pp - 1) + " cut points, got " +
                Twine(opts.stageBoundaries.size()));
  if (opts.dp > 1 && compileTo < Phase::Training)
    return fail("--dp needs --compile-to=training or a later phase");
  if (opts.tp > 1 && compileTo < Phase::Training)
    return fail("--tp needs --compile-to=training or a later phase");
  if (!(opts.bucketMb > 0))
    return fail("--bucket-mb must be positive");
  if (opts.zero != 0 && opts.zero != 1)
    return fail("--zero " + Twine(opts.zero) + ": only stages 0 and 1 exist");
  if (opts.zero && compileTo < Phase::Training)
    return fail("--zero needs --compile-to=training or a later phase");
  if (opts.tpOverlap != "none" && opts.tpOverlap != "sub-pipeline")
    return fail("--tp-overlap must be none or sub-pipeline, got '" + opts.tpOverlap + "'");

  // A model in merak IR (.mlir: what --compile-to=import prints, or
  // bench/paper/gpt_mlir.py's generated GPTs) is read as is: its shapes are
  // fixed, so it cannot be re-imported with a per-rank batch.
  const bool mlirInput = StringRef(opts.input).ends_with(".mlir");
  if (mlirInput && !opts.inputShapes.empty())
    return fail("--input-shape needs an ONNX input; " + opts.input + " has fixed shapes");
  auto importAndClean = [&](const ImportOptions &io) -> OwningOpRef<ModuleOp> {
    OwningOpRef<ModuleOp> m = mlirInput ? readMerakModule(opts.input, ctx, sourceMgr, log)
                                        : importOnnxFile(opts.input, &ctx, io);
    if (!m || opts.noCleanup)
      return m;
    PassManager pm(&ctx);
    if (failed(configure(pm)))
      return nullptr;
    buildImportCleanupPipeline(pm);
    if (failed(pm.run(*m)))
      return nullptr;
    return m;
  };
  OwningOpRef<ModuleOp> module = importAndClean(importOpts);
  if (!module)
    return 1;
  // Rows of one micro-batch on one data-parallel rank.
  const int64_t split = opts.dp * opts.microbatches;
  if (split > 1) {
    // Data parallelism / micro-batches: import again with the per-rank
    // micro-batch, so every shape (including those PyTorch computes from
    // the input's) is local.
    // Token ids split along their batch; without them (an MLP, a CNN)
    // every input splits along its leading dimension.
    SmallVector<std::pair<std::string, SmallVector<int64_t>>> splitInputs;
    if (FailureOr<std::pair<std::string, SmallVector<int64_t>>> tokens = tokenInput(*module);
        succeeded(tokens))
      splitInputs.push_back(*tokens);
    else
      splitInputs = batchInputs(*module);
    if (splitInputs.empty())
      return fail("--dp/--microbatches need a [batch, sequence] integer input (token ids) or "
                  "inputs sharing a leading batch dimension to split");
    int64_t batch = splitInputs.front().second[0];
    if (batch % split != 0)
      return fail("the batch of input '" + splitInputs.front().first + "' (" + Twine(batch) +
                  ") does not divide by --dp " + Twine(opts.dp) +
                  (opts.microbatches > 1 ? " x --microbatches " + Twine(opts.microbatches) : ""));
    if (mlirInput)
      return fail("--dp/--microbatches split the batch, which needs an ONNX input: " +
                  opts.input + " is merak IR with fixed shapes (plan it with --devices, or "
                  "compile it with --pp only)");
    ImportOptions local = importOpts;
    local.overrideStaticDims = true;
    for (auto &[name, shape] : splitInputs) {
      SmallVector<int64_t> localShape = shape;
      localShape[0] = batch / split;
      local.inputShapes[name] = localShape;
    }
    module = importAndClean(local);
    if (!module)
      return fail("importing with the per-rank batch " + Twine(batch / split) +
                  " failed: the model may hard-code its batch size (export it "
                  "computing shapes from the input)");
  }
  if (compileTo >= Phase::Training) {
    PassManager pm(&ctx);
    if (failed(configure(pm)))
      return 1;
    TrainingOptions training;
    training.loss = opts.loss;
    training.logits = opts.logits;
    training.labels = opts.labels;
    training.frozen.assign(opts.frozen.begin(), opts.frozen.end());
    training.fuseAttention = opts.fusedAttention;
    training.precision = opts.precision;
    training.dp = opts.dp;
    training.tp = opts.tp;
    // Vocabulary parallelism: by default whenever the model qualifies (a
    // remark says why not otherwise); asked for explicitly, it must apply.
    const bool vocabExplicit = opts.vocabParallel >= 0;
    training.vocabParallel =
        opts.tp > 1 && (vocabExplicit ? opts.vocabParallel == 1 : opts.loss == "cross-entropy");
    training.vocabParallelFallback = !vocabExplicit;
    training.zero = opts.zero;
    training.bucketBytes = std::max<int64_t>(1, (int64_t)(opts.bucketMb * 1024 * 1024));
    training.optimizer = "optimizer=" + opts.optimizer;
    for (const std::string &kv : opts.optimizerOptions) {
      if (kv.find('=') == std::string::npos || kv.find_first_of(" {}") != std::string::npos)
        return fail("--opt expects KEY=VALUE, got '" + kv + "'");
      training.optimizer += " " + kv;
    }
    PipelineCompileOptions pipeline;
    pipeline.pp = opts.pp;
    pipeline.virtualStages =
        *scheduleKind == PipelineScheduleKind::Interleaved ? opts.virtualStages : 1;
    pipeline.microbatches = opts.microbatches;
    pipeline.boundaries.assign(opts.stageBoundaries.begin(), opts.stageBoundaries.end());
    pipeline.schedule = opts.schedule;
    // --compile-to=pipeline shows merak-pipeline's program (full recomputation).
    pipeline.recompute = compileTo == Phase::Pipeline ? "" : recompute;
    pipeline.memoryPerDevice = *memoryBudget;
    if (failed(pipelined ? buildPipelineTrainingPipeline(pm, training, pipeline, log)
                         : buildTrainingPipeline(pm, training, log)))
      return fail("bad optimizer options '" + training.optimizer + "'");
    if (failed(pm.run(*module)))
      return 1;
    if (pipelined)
      setPipelineSchedule(*module, opts.schedule, opts.virtualStages);
    else
      reportTrainableParameters(*module, training, log);
  }
  std::optional<SimulatedStep> simulated;
  if (opts.simulate) {
    std::string err;
    std::unique_ptr<llvm::ToolOutputFile> trace;
    if (!opts.simulateTrace.empty() && !(trace = openOutputFile(opts.simulateTrace, &err)))
      return fail(err);
    FailureOr<SimulatedStep> step = simulatePipelineOf(*module, simulation, err,
                                                       trace ? &trace->os() : nullptr);
    if (failed(step))
      return fail("--simulate: " + err);
    if (trace)
      trace->keep();
    printSimulatedStep(*step, log, "merak-compile: ");
    simulated = *step;
  }
  // The report, after the last phase that changes the program; on stdout it
  // replaces the IR.
  auto printReport = [&]() -> std::optional<int> {
    if (!report)
      return std::nullopt;
    ReportOptions ro{llvm::sys::path::filename(opts.input).str(), opts.dp, opts.tp, opts.pp,
                     opts.microbatches, pipelined ? opts.schedule : "",
                     opts.optimizer, opts.report == "json", simulated, opts.plannerJson};
    std::string text;
    llvm::raw_string_ostream os(text);
    if (failed(printCompileReport(*module, ro, os)))
      return 1;
    if (opts.reportFile.empty()) {
      if (reportOut)
        *reportOut = text;
      return std::nullopt;
    }
    std::string err;
    auto out = openOutputFile(opts.reportFile, &err);
    if (!out)
      return fail(err);
    out->os() << text;
    out->keep();
    if (opts.reportFile == "-" && opts.output == "-" && compileTo != Phase::Binary)
      return 0;
    return std::nullopt;
  };
  if (compileTo == Phase::Pipeline || compileTo == Phase::Recompute ||
      compileTo == Phase::Schedule) {
    if (std::optional<int> rc = printReport())
      return *rc;
    std::string err;
    auto out = openOutputFile(opts.output, &err);
    if (!out)
      return fail(err);
    if (compileTo == Phase::Schedule) {
      printPipelineScheduleOf(*module, out->os());
    } else {
      printPipelinePlan(*module, out->os());
      module->print(out->os());
    }
    out->keep();
    return 0;
  }
  // One module pass, with the command line's pass-manager options.
  auto runPass = [&](std::unique_ptr<Pass> pass) {
    PassManager pm(&ctx);
    if (failed(configure(pm)))
      return false;
    pm.addPass(std::move(pass));
    return succeeded(pm.run(*module));
  };
  if (compileTo >= Phase::Overlap) {
    MerakOverlapOptions overlap;
    overlap.tpOverlap = opts.tpOverlap;
    overlap.dpOverlap = opts.dpOverlap;
    overlap.bucketBytes = std::max<int64_t>(1, (int64_t)(opts.bucketMb * 1024 * 1024));
    if (!runPass(createMerakOverlap(overlap)))
      return 1;
    MerakGradReducePrecisionOptions gradReduce;
    gradReduce.precision = opts.gradReduce;
    if (opts.gradReduce != "fp32" && !runPass(createMerakGradReducePrecision(gradReduce)))
      return 1;
  }
  ProgramInfo program;
  program.model = llvm::sys::path::filename(opts.input).str();
  program.optimizer = opts.optimizer;
  program.dp = opts.dp;
  program.pp = opts.pp;
  program.tp = opts.tp;
  program.target = opts.target;
  // GEMMs read transposed operands in place (BLAS / cuBLASLt trans flags).
  if (compileTo >= Phase::Lower && !runPass(createMerakFoldTransposes()))
    return 1;
  if (compileTo >= Phase::Lower && pipelined) {
    if (failed(planPipelineMemory(*module, log)))
      return 1;
  } else if (compileTo >= Phase::Lower) {
    if (!module->lookupSymbol("train_step"))
      return fail("no @train_step to lower");
    if (!runPass(createMerakPlanMemory()))
      return 1;
    reportMemoryPlan(*module, log);
  }
  if (std::optional<int> rc = printReport())
    return *rc;
  if (compileTo == Phase::Binary)
    return buildBinary(*module, program, opts.output == "-" ? "train" : opts.output, opts.verbose,
                       opts.runtimeDir, log);
  // Open the output only now, so a failed compile never clobbers it.
  std::string err;
  auto out = openOutputFile(opts.output, &err);
  if (!out)
    return fail(err);
  if (compileTo == Phase::Emit) {
    if (failed(emitProgramSource(*module, program, out->os())))
      return 1;
  } else if (opts.emitBytecode) {
    if (failed(writeBytecodeToFile(*module, out->os())))
      return fail("cannot write bytecode");
  } else {
    module->print(out->os());
  }
  out->keep();
  return 0;
}

CompileResult mlir::merak::compileModel(const CompileOptions &options) {
  CompileResult result;
  llvm::raw_string_ostream log(result.diagnostics);
  result.ok = runCompile(options, log, &result.report) == 0;
  return result;
}
