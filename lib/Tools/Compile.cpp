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
#include "merak/Tools/ResolvedOptions.h"
#include "merak/Planner/Planner.h"
#include "merak/Pipelines/Pipelines.h"
#include "merak/Pipelines/Registration.h"
#include "merak/Planner/Report.h"
#include "merak/Planner/Simulate.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

#include <sys/resource.h>

using namespace mlir;
using namespace mlir::merak;

namespace {
int failWith(llvm::raw_ostream &log, const Twine &msg) {
  log << "merak-compile: error: " << msg << "\n";
  return 1;
}

/// The loss's element type where it is narrower than the runtime's float32
/// or float64 loss (a model exported in bf16 or float16 computes its loss
/// so, and trains its parameters in that type); null otherwise.
Type narrowLossType(ModuleOp module) {
  auto loss = module.lookupSymbol<func::FuncOp>("loss");
  if (!loss || loss.getNumResults() == 0)
    return {};
  auto t = dyn_cast<RankedTensorType>(loss.getResultTypes()[0]);
  return t && !t.getElementType().isF32() && !t.getElementType().isF64() ? t.getElementType()
                                                                         : Type();
}

/// Prints "N trainable parameters (M elements), K frozen" (and the buffers
/// among the K).
void reportTrainableParameters(ModuleOp module, llvm::raw_ostream &os) {
  // The gradient function's results name exactly the trainable parameters.
  int64_t trainable = 0, elements = 0, total = 0, buffers = 0;
  // Optimizer state (optimizer.<name>.<slot>.<param>) is not a parameter.
  for (ParamOp param : module.getOps<ParamOp>()) {
    if (!param.getSymName().starts_with("optimizer."))
      ++total;
    buffers += isBuffer(param);
  }
  // (With ZeRO the gradients are parts: count the parameters' elements.)
  if (auto grad = module.lookupSymbol<func::FuncOp>("loss_grad"))
    for (unsigned i = 1; i < grad.getNumResults(); ++i) {
      ++trainable;
      auto name = grad.getResultAttrOfType<StringAttr>(i, "merak.name");
      ParamOp param = name && name.getValue().starts_with("grad:")
                          ? module.lookupSymbol<ParamOp>(name.getValue().drop_front(5))
                          : ParamOp();
      elements += cast<RankedTensorType>(param ? param.getType() : grad.getResultTypes()[i])
                      .getNumElements();
    }
  os << "merak-compile: " << trainable << " trainable parameters (" << elements << " elements), "
     << total - trainable << " frozen";
  if (buffers)
    os << " (" << buffers
       << " of them buffers that training updates: BatchNorm running statistics and counts)";
  os << "\n";
}

/// Warns about each --frozen glob that names no parameter of the model (a
/// typo, or names from another export: dynamo prefixes a wrapper's
/// attribute, TorchScript names the module's): it freezes nothing.
void warnUnmatchedFrozen(ModuleOp module, ArrayRef<std::string> frozen, llvm::raw_ostream &os) {
  SmallVector<StringRef> names;
  for (ParamOp param : module.getOps<ParamOp>())
    names.push_back(param.getSymName());
  for (const std::string &pattern : frozen) {
    auto glob = llvm::GlobPattern::create(pattern);
    if (!glob) // a bad pattern is merak-autodiff's error
      continue;
    if (llvm::any_of(names, [&](StringRef n) { return glob->match(n); }))
      continue;
    os << "merak-compile: warning: --frozen '" << pattern
       << "' matches no parameter of the model, so it freezes nothing";
    if (!names.empty())
      os << " (its " << names.size() << " parameters are named like '" << names.front()
         << "'; merak-compile --compile-to=import lists them)";
    os << "\n";
  }
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

/// A new compilation's id (64 random bits and the time, in hex): the
/// executable and its weights file carry it, so that a stale weights file is
/// an error, not other weights.
std::string newProgramId() {
  uint64_t hi = llvm::sys::Process::GetRandomNumber(),
           lo = llvm::sys::Process::GetRandomNumber();
  uint64_t now = std::chrono::system_clock::now().time_since_epoch().count();
  return llvm::formatv("{0:x-8}{1:x-8}{2:x-16}", hi & 0xffffffff, lo & 0xffffffff, now).str();
}

/// Writes the program's source, manifest and data to a scratch directory and
/// builds the executable `out` and its weights file `out`.safetensors (the
/// initial data, read by the ranks at start-up); they replace what was
/// there only when everything succeeded.
int buildBinary(ModuleOp module, ProgramInfo program, StringRef out, bool verbose,
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
  std::string manifest = path("manifest.json"), data = path("data.bin"), cpp = path("step.cpp"),
              embedded = path("embedded.bin");
  program.weightsFile = (llvm::sys::path::filename(out) + ".safetensors").str();
  program.weightsId = newProgramId();
  {
    std::error_code ec1, ec2;
    llvm::raw_fd_ostream mos(manifest, ec1), dos(data, ec2);
    if (ec1 || ec2)
      return fail("cannot write to " + dir);
    if (failed(writeProgramData(module, program, mos, dos)))
      return 1;
  }
  {
    // The executable embeds no data: its weights file holds it.
    std::error_code ec;
    llvm::raw_fd_ostream eos(embedded, ec);
    if (ec)
      return fail("cannot write to " + dir);
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
  std::string pid = std::to_string(llvm::sys::Process::getProcessId());
  std::string tmp = (outAbs + ".tmp" + pid).str();
  std::string weights = (outAbs + ".safetensors").str(), weightsTmp = weights + ".tmp" + pid;
  auto removeTemporaries = [&] {
    llvm::sys::fs::remove(tmp);
    llvm::sys::fs::remove(weightsTmp);
  };
  if (std::string err = writeWeightsFile(manifest, data, weightsTmp, program.weightsId);
      !err.empty()) {
    removeTemporaries();
    return fail("writing the weights file " + weights + ": " + err);
  }
  if (std::string err = buildExecutable(dir, cpp, manifest, embedded, 0, tmp, verbose,
                                        runtimeDir, log, program.target);
      !err.empty()) {
    removeTemporaries();
    return fail("building the executable: " + err);
  }
  // The weights first: an executable never lands without its weights.
  for (auto [from, to] : {std::pair<std::string, std::string>{weightsTmp, weights},
                          {tmp, outAbs.str().str()}})
    if (std::error_code ec = llvm::sys::fs::rename(from, to)) {
      removeTemporaries();
      return fail("cannot write " + to + ": " + ec.message());
    }
  if (verbose)
    log << "merak-compile: build files kept in " << dir << "\n";
  log << "merak-compile: wrote " << out << " and " << out << ".safetensors\n";
  return 0;
}
} // namespace

namespace {
/// One compilation: the context, the module and the options, with each
/// step of runCompile a method.
class Compilation {
public:
  Compilation(const CompileOptions &opts, const ResolvedOptions &resolved,
              llvm::raw_ostream &log, std::string *reportOut)
      : opts(opts), r(resolved), log(log), reportOut(reportOut), ctx(registry()),
        diag(sourceMgr, &ctx, log) {
    // Errors name their cause and location; never dump whole modules at users.
    ctx.printOpOnDiagnostic(false);
  }

  int run();

private:
  static DialectRegistry registry() {
    DialectRegistry registry;
    registerMerakDialects(registry);
    return registry;
  }
  int fail(const Twine &msg) { return failWith(log, msg); }
  LogicalResult configure(PassManager &pm) {
    return opts.commandLinePassOptions ? applyPassManagerCLOptions(pm) : success();
  }
  OwningOpRef<ModuleOp> importAndClean(const ImportOptions &io);
  /// The module with the per-rank micro-batch (dp, micro-batches).
  std::optional<int> importModule();
  /// With -v: the seconds since the previous mark and the peak resident
  /// memory so far, after phase `name`.
  void markPhase(StringRef name);
  std::chrono::steady_clock::time_point lastMark = std::chrono::steady_clock::now();
  /// The passes from `from` to `to` (merak's pipeline builder).
  bool runPhases(CompilePhase from, CompilePhase to);
  std::optional<int> simulate();
  std::optional<int> printReport();
  int printPipelinePhase();
  int writeOutput();
  int keep(llvm::ToolOutputFile &out);

  const CompileOptions &opts;
  /// A copy: --moe-chunks auto is resolved on the imported model.
  ResolvedOptions r;
  llvm::raw_ostream &log;
  std::string *reportOut;
  MLIRContext ctx;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diag;
  OwningOpRef<ModuleOp> module;
  std::optional<SimulatedStep> simulated;
};

OwningOpRef<ModuleOp> Compilation::importAndClean(const ImportOptions &io) {
  // A model in merak IR (.mlir: what --compile-to=import prints, or
  // bench/paper/gpt_mlir.py's generated GPTs) is read as is.
  OwningOpRef<ModuleOp> m = r.mlirInput ? readMerakModule(opts.input, ctx, sourceMgr, log)
                                        : importOnnxFile(opts.input, &ctx, io);
  if (!m || opts.noCleanup)
    return m;
  PassManager pm(&ctx);
  if (failed(configure(pm)))
    return nullptr;
  buildImportCleanupPipeline(pm, opts.fusedExperts, opts.fusedScan);
  if (failed(pm.run(*m)))
    return nullptr;
  return m;
}

std::optional<int> Compilation::importModule() {
  module = importAndClean(r.import);
  if (!module)
    return 1;
  warnUnmatchedFrozen(*module, opts.frozen, log);
  // Rows of one micro-batch on one data-parallel rank: merak-split-batch
  // (the training phase's first pass) makes the model compute them. The
  // batch must divide; anything else it cannot split, it names.
  const int64_t split = opts.dp * opts.microbatches;
  auto fn = module->lookupSymbol<func::FuncOp>("forward");
  if (split <= 1 || !fn)
    return std::nullopt;
  SmallVector<BlockArgument> inputs = batchInputs(fn);
  if (inputs.empty())
    return fail("--dp/--microbatches need a [batch, sequence] integer input (token ids) or "
                "inputs sharing a leading batch dimension to split");
  int64_t batch = cast<RankedTensorType>(inputs.front().getType()).getDimSize(0);
  auto name = fn.getArgAttrOfType<StringAttr>(inputs.front().getArgNumber(), "merak.name");
  if (batch % split != 0)
    return fail("the batch of input '" + (name ? name.getValue() : StringRef("?")) + "' (" +
                Twine(batch) + ") does not divide by --dp " + Twine(opts.dp) +
                (opts.microbatches > 1 ? " x --microbatches " + Twine(opts.microbatches) : ""));
  return std::nullopt;
}

bool Compilation::runPhases(CompilePhase from, CompilePhase to) {
  PassManager pm(&ctx);
  if (failed(configure(pm)))
    return false;
  if (failed(buildMerakPipeline(pm, from, to, r.pipeline, log))) {
    fail("bad optimizer options '" + r.pipeline.optimizer + "'");
    return false;
  }
  return succeeded(pm.run(*module));
}

std::optional<int> Compilation::simulate() {
  if (!opts.simulate)
    return std::nullopt;
  std::string err;
  std::unique_ptr<llvm::ToolOutputFile> trace;
  if (!opts.simulateTrace.empty() && !(trace = openOutputFile(opts.simulateTrace, &err)))
    return fail(err);
  FailureOr<SimulatedStep> step =
      simulatePipelineOf(*module, r.simulation, err, trace ? &trace->os() : nullptr);
  if (failed(step))
    return fail("--simulate: " + err);
  if (trace)
    trace->keep();
  printSimulatedStep(*step, log, "merak-compile: ");
  simulated = *step;
  return std::nullopt;
}

/// The report, after the last phase that changes the program; on stdout it
/// replaces the IR.
std::optional<int> Compilation::printReport() {
  if (!r.report)
    return std::nullopt;
  ReportOptions ro{llvm::sys::path::filename(opts.input).str(),
                   opts.dp,
                   opts.tp,
                   opts.pp,
                   opts.microbatches,
                   r.pipeline.pipelined() ? opts.schedule : "",
                   opts.optimizer,
                   opts.report == "json",
                   simulated,
                   opts.plannerJson};
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(printCompileReport(*module, ro, os)))
    return 1;
  std::string err;
  if (failed(deliverReport(text, opts.reportFile, reportOut, err)))
    return fail(err);
  if (opts.reportFile == "-" && opts.output == "-" && r.compileTo != CompilePhase::Binary)
    return 0;
  return std::nullopt;
}

/// --compile-to=pipeline, recompute, schedule: the plan and the IR, or the
/// instruction lists.
int Compilation::printPipelinePhase() {
  if (std::optional<int> rc = printReport())
    return *rc;
  std::string err;
  auto out = openOutputFile(opts.output, &err);
  if (!out)
    return fail(err);
  if (r.compileTo == CompilePhase::Schedule) {
    printPipelineScheduleOf(*module, out->os());
  } else {
    printPipelinePlan(*module, out->os());
    module->print(out->os());
  }
  return keep(*out);
}

int Compilation::writeOutput() {
  if (std::optional<int> rc = printReport())
    return *rc;
  ProgramInfo program;
  program.model = llvm::sys::path::filename(opts.input).str();
  program.optimizer = opts.optimizer;
  program.target = opts.target;
  if (r.compileTo == CompilePhase::Binary)
    return buildBinary(*module, program, opts.output == "-" ? "train" : opts.output,
                       opts.verbose, opts.runtimeDir, log);
  // Open the output only now, so a failed compile never clobbers it.
  std::string err;
  auto out = openOutputFile(opts.output, &err);
  if (!out)
    return fail(err);
  if (r.compileTo == CompilePhase::Emit) {
    if (failed(emitProgramSource(*module, program, out->os())))
      return 1;
  } else if (opts.emitBytecode) {
    if (failed(writeBytecodeToFile(*module, out->os())))
      return fail("cannot write bytecode");
  } else {
    module->print(out->os());
  }
  return keep(*out);
}

/// Keeps a written output, or says why it could not be written (a full
/// disk, /dev/full) instead of letting the stream abort the process.
int Compilation::keep(llvm::ToolOutputFile &out) {
  out.os().flush();
  if (std::error_code ec = out.os().error()) {
    out.os().clear_error();
    return fail("cannot write " + opts.output + ": " + ec.message());
  }
  out.keep();
  return 0;
}

void Compilation::markPhase(StringRef name) {
  if (!opts.verbose)
    return;
  auto now = std::chrono::steady_clock::now();
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  log << llvm::formatv("merak-compile: phase {0}: {1:f1} s, peak RSS {2} MB\n", name,
                       std::chrono::duration<double>(now - lastMark).count(),
                       usage.ru_maxrss / 1024);
  lastMark = now;
}

int Compilation::run() {
  if (std::optional<int> rc = importModule())
    return *rc;
  markPhase("import");
  if (r.pipeline.moeChunks == 0) { // --moe-chunks auto
    std::string why;
    r.pipeline.moeChunks = chooseExpertChunks(*module, r.simulation, why);
    log << "merak-compile: --moe-chunks auto: " << r.pipeline.moeChunks << " (profile '"
        << r.simulation.profile.name << "': " << why << ")\n";
  }
  const CompilePhase to = r.compileTo;
  const bool pipelined = r.pipeline.pipelined();
  // The training step (with its stages and schedule), then the simulator
  // on it, then overlap and the memory plan.
  if (to >= CompilePhase::Training) {
    if (!runPhases(CompilePhase::Import, std::min(to, CompilePhase::Schedule)))
      return 1;
    markPhase("training");
    if (Type narrow = narrowLossType(*module); narrow && to >= CompilePhase::Lower) {
      std::string type;
      llvm::raw_string_ostream(type) << narrow;
      return fail("the model computes its loss and trains its parameters in " + type +
                  " (it was exported in that type), and the runtime trains programs with "
                  "float32 parameters and loss; export the model in float32 (model.float()) "
                  "and compile with --precision bf16 for bf16 compute over float32 master "
                  "weights");
    }
    if (!pipelined)
      reportTrainableParameters(*module, log);
  }
  if (std::optional<int> rc = simulate())
    return *rc;
  if (to == CompilePhase::Pipeline || to == CompilePhase::Recompute ||
      to == CompilePhase::Schedule)
    return printPipelinePhase();
  if (to >= CompilePhase::Lower && !pipelined && !module->lookupSymbol("train_step"))
    return fail("no @train_step to lower");
  if (to >= CompilePhase::Overlap && !runPhases(CompilePhase::Schedule, to))
    return 1;
  if (to >= CompilePhase::Overlap)
    markPhase("overlap and lower");
  if (to >= CompilePhase::Lower && pipelined)
    reportPipelineMemoryPlan(*module, log);
  else if (to >= CompilePhase::Lower)
    reportMemoryPlan(*module, log);
  int rc = writeOutput();
  markPhase(to >= CompilePhase::Emit ? "emit and binary" : "output");
  return rc;
}
} // namespace

int mlir::merak::runCompile(const CompileOptions &given, llvm::raw_ostream &log,
                            std::string *reportOut) {
  // --devices: the planner chooses the mesh, then that plan is compiled.
  CompileOptions planned;
  if (given.devices != 0) {
    if (std::optional<int> rc = planCompile(given, log, reportOut, planned))
      return *rc;
  }
  const CompileOptions &opts = given.devices != 0 ? planned : given;
  std::string error;
  FailureOr<ResolvedOptions> resolved = resolveCompileOptions(opts, error);
  if (failed(resolved))
    return failWith(log, error);
  return Compilation(opts, *resolved, log, reportOut).run();
}

CompileResult mlir::merak::compileModel(const CompileOptions &options) {
  CompileResult result;
  llvm::raw_string_ostream log(result.diagnostics);
  result.ok = runCompile(options, log, &result.report) == 0;
  return result;
}
