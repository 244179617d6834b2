//===- MerakCompile.cpp - the merak-compile driver ------------------------===//
//
// merak-compile MODEL.onnx [--compile-to=PHASE] [-o FILE] [--input-shape ...]
//
// Phases run in order up to --compile-to. This driver has the
// first phase, `import`; later phases (training, shard, pipeline, ...) are
// added to the Phase enum as they land.
//
//===----------------------------------------------------------------------===//
#include "merak/Import/OnnxImporter.h"
#include "merak/Tools/Drivers.h"
#include "merak/Tools/Registration.h"
#include "merak/Tools/PipelineCompile.h"
#include "merak/Tools/Report.h"
#include "merak/Dialect/Merak/Transforms/Pipeline.h"
#include "merak/Target/PipelineProgram.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "merak/Target/Program.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;
namespace cl = llvm::cl;

namespace {
enum class Phase { Import, Training, Shard, Pipeline, Schedule, Lower, Emit, Binary };

struct CompileOptions {
  cl::OptionCategory cat{"merak-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.onnx | model.onnxtxt>"),
                             cl::Required, cl::cat(cat)};
  cl::opt<std::string> output{"o", cl::desc("Output file ('-' for stdout)"),
                              cl::value_desc("file"), cl::init("-"), cl::cat(cat)};
  cl::opt<Phase> compileTo{
      "compile-to", cl::desc("Stop after this phase and print its IR"),
      cl::values(clEnumValN(Phase::Import, "import",
                            "ONNX -> merak dialect, shapes static, shape "
                            "arithmetic folded, parameters as merak.param"),
                 clEnumValN(Phase::Training, "training",
                            "adds @loss (the training loss), @loss_grad (loss "
                            "and the gradient of every trainable parameter) and "
                            "@train_step (gradients, clipping, LR schedule and "
                            "the optimizer update)"),
                 clEnumValN(Phase::Shard, "shard",
                            "with --tp/--dp/--zero: the training IR after sharding "
                            "(merak-tensor-parallel runs on @forward before the loss is "
                            "attached, merak-data-parallel after autodiff), with "
                            "merak.shard attributes and the inserted collectives"),
                 clEnumValN(Phase::Pipeline, "pipeline",
                            "with --pp/--microbatches: the stage assignment "
                            "(comment lines) and the IR of every stage's fragments"),
                 clEnumValN(Phase::Schedule, "schedule",
                            "with --pp/--microbatches: every stage's instruction list"),
                 clEnumValN(Phase::Lower, "lower",
                            "plans the memory of @train_step: arena offsets by "
                            "liveness, parameter and constant storage (prints the "
                            "planned merak IR and the peak arena bytes)"),
                 clEnumValN(Phase::Emit, "emit",
                            "the C++ host code of the step (EmitC), calling the "
                            "runtime's kernels"),
                 clEnumValN(Phase::Binary, "binary",
                            "the training executable (-o, default ./train): the "
                            "step compiled by the host C++ compiler, linked with the "
                            "CPU runtime, parameters embedded")),
      cl::init(Phase::Import), cl::cat(cat)};
  cl::list<std::string> inputShapes{
      "input-shape", cl::desc("Bind a graph input's shape (dynamic dims), e.g. input_ids=8x128"),
      cl::value_desc("NAME=DIMS"), cl::cat(cat)};
  cl::opt<std::string> loss{"loss",
                            cl::desc("Training loss: cross-entropy (of the logits output) "
                                     "or model-output (the model returns its loss)"),
                            cl::init("cross-entropy"), cl::cat(cat)};
  cl::opt<std::string> logits{"logits",
                              cl::desc("Output holding the logits (or the loss); default: the first"),
                              cl::init(""), cl::cat(cat)};
  cl::opt<std::string> labels{"labels",
                              cl::desc("next-token (labels are an extra input shaped like the "
                                       "logits without the class axis, supplied by the data "
                                       "loader) or the name of a graph input"),
                              cl::init("next-token"), cl::cat(cat)};
  cl::list<std::string> frozen{"frozen",
                               cl::desc("Glob of parameters that do not train (buffers such as "
                                        "causal masks); repeatable"),
                               cl::value_desc("GLOB"), cl::cat(cat)};
  cl::opt<std::string> optimizer{"optimizer", cl::desc("sgd, adamw (default) or adan"),
                                 cl::init("adamw"), cl::cat(cat)};
  cl::list<std::string> optimizerOptions{
      "opt", cl::desc("Optimizer/schedule option KEY=VALUE (repeatable): lr, beta1, beta2, "
                      "beta3, eps, weight-decay, momentum, nesterov, clip-norm, schedule "
                      "(constant|linear-warmup|cosine), warmup-steps, total-steps, min-lr; "
                      "see merak-opt --help for --merak-optimizer"),
      cl::value_desc("KEY=VALUE"), cl::cat(cat)};
  cl::opt<int64_t> dp{"dp", cl::desc("Data-parallel ranks: the batch is split over them and "
                                      "gradients are averaged (run with mpirun -np dp*tp*pp)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<int64_t> tp{"tp", cl::desc("Tensor-parallel ranks: Megatron-style column/row-parallel MLPs "
                                      "and head-split attention (run with mpirun -np dp*tp*pp)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<bool> vocabParallel{
      "vocab-parallel",
      cl::desc("With --tp: also split the vocabulary (tied embedding / LM head and the "
               "cross-entropy; Megatron-LM). The default when the vocabulary divides by tp "
               "(otherwise replicated, with a note); --vocab-parallel=false keeps it "
               "replicated, an explicit --vocab-parallel makes a vocabulary that cannot be "
               "split an error"),
      cl::init(true), cl::cat(cat)};
  cl::opt<int64_t> pp{"pp", cl::desc("Pipeline stages: the model is cut into pp stages of "
                                      "balanced cost (run with mpirun -np dp*tp*pp)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<int64_t> microbatches{
      "microbatches", cl::desc("Micro-batches per step (pipelining; with --pp 1, gradient "
                               "accumulation); the batch must divide by dp * microbatches"),
      cl::init(1), cl::cat(cat)};
  cl::opt<std::string> schedule{"schedule", cl::desc("Pipeline schedule: gpipe or 1f1b (default)"),
                                cl::init("1f1b"), cl::cat(cat)};
  cl::list<int64_t> stageBoundaries{
      "stage-boundaries",
      cl::desc("Override the partitioner: pp-1 increasing cut-point indices (as numbered by "
               "--compile-to=pipeline), stage s ending at cut point s"),
      cl::CommaSeparated, cl::value_desc("I,J,..."), cl::cat(cat)};
  cl::opt<int64_t> zero{"zero",
                        cl::desc("ZeRO stage with --dp: 0 (default) or 1 (gradients reduce-scattered, "
                                 "optimizer state sharded over dp, updated parameters all-gathered)"),
                        cl::value_desc("0|1"), cl::init(0), cl::cat(cat)};
  cl::opt<double> bucketMb{"bucket-mb",
                           cl::desc("Gradient all-reduce bucket size in MB (default 25)"),
                           cl::init(25.0), cl::cat(cat)};
  cl::opt<bool> verbose{"v", cl::desc("Print the host compiler and linker commands"),
                        cl::init(false), cl::cat(cat)};
  cl::opt<bool> emitBytecode{"emit-bytecode", cl::desc("Write MLIR bytecode instead of text"),
                             cl::init(false), cl::cat(cat)};
  cl::opt<bool> noCleanup{"no-cleanup",
                          cl::desc("Print the importer's raw output (skip folding/canonicalisation)"),
                          cl::init(false), cl::cat(cat)};
  cl::opt<std::string> report{
      "report", cl::ValueOptional, cl::value_desc("text|json"),
      cl::desc("Print the parallel plan (mesh, per stage: ONNX nodes, parameters, memory, "
               "FLOPs, collectives; tensor-parallel splits, data-parallel buckets); alone, "
               "implies --compile-to=training; replaces the IR on stdout"),
      cl::cat(cat)};
  cl::opt<std::string> reportFile{"report-file", cl::desc("Write --report here (default stdout)"),
                                  cl::value_desc("file"), cl::init("-"), cl::cat(cat)};
};

int fail(const Twine &msg) {
  llvm::errs() << "merak-compile: error: " << msg << "\n";
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
int buildBinary(ModuleOp module, const ProgramInfo &program, StringRef out, bool verbose) {
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
  auto cleanup = llvm::make_scope_exit([&] {
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
  if (std::string err = buildExecutable(dir, cpp, manifest, data, dataBytes, tmp, verbose);
      !err.empty()) {
    llvm::sys::fs::remove(tmp);
    return fail("building the executable: " + err);
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, outAbs)) {
    llvm::sys::fs::remove(tmp);
    return fail("cannot write " + out + ": " + ec.message());
  }
  if (verbose)
    llvm::errs() << "merak-compile: build files kept in " << dir << "\n";
  llvm::errs() << "merak-compile: wrote " << out << "\n";
  return 0;
}
} // namespace

int mlir::merak::merakCompileMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  CompileOptions opts;
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::HideUnrelatedOptions(opts.cat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "merak-compile: compiles an ONNX model (exported from PyTorch) into a "
      "parallel training program.\n\n"
      "  merak-compile model.onnx --compile-to=import -o model.mlir\n"
      "      imports the model into the merak dialect and prints the IR;\n"
      "      inspect or transform it further with merak-opt, evaluate it with merak-run.\n"
      "  merak-compile model.onnx --input-shape input_ids=8x128 --compile-to=import\n"
      "      binds a dynamic input dimension (every dynamic one must be bound).\n"
      "  merak-compile model.onnx --compile-to=training --frozen '*.attn.bias' \\\n"
      "      --optimizer adamw --opt lr=3e-4 --opt clip-norm=1.0 -o train.mlir\n"
      "      builds the training step; run it with\n"
      "      merak-run train.mlir --entry train_step --input ids.npy --input labels.npy --steps 10\n");

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
  SourceMgrDiagnosticHandler diag(sourceMgr, &ctx);

  if (opts.dp < 1 || opts.tp < 1 || opts.pp < 1)
    return fail("--dp, --tp and --pp must be at least 1");
  const bool pipelined = opts.pp > 1 || opts.microbatches > 1;
  const bool report = opts.report.getNumOccurrences() || opts.reportFile.getNumOccurrences();
  if (report && !opts.compileTo.getNumOccurrences())
    opts.compileTo = Phase::Training;
  if (report && opts.compileTo < Phase::Training)
    return fail("--report needs --compile-to=training or a later phase");
  if (opts.report != "" && opts.report != "text" && opts.report != "json")
    return fail("--report=" + opts.report + ": expected text or json");
  if (opts.microbatches < 1)
    return fail("--microbatches must be at least 1");
  if (pipelined && opts.compileTo < Phase::Training)
    return fail("--pp and --microbatches need --compile-to=training or a later phase");
  if (!pipelined && (opts.compileTo == Phase::Pipeline || opts.compileTo == Phase::Schedule))
    return fail("--compile-to=pipeline and schedule need --pp or --microbatches");
  if (failed(parsePipelineSchedule(opts.schedule)))
    return fail("unknown --schedule '" + opts.schedule + "' (expected gpipe or 1f1b)");
  if (!opts.stageBoundaries.empty() && (int64_t)opts.stageBoundaries.size() != opts.pp - 1)
    return fail("--stage-boundaries needs pp-1 = " + Twine(opts.pp - 1) + " cut points, got " +
                Twine(opts.stageBoundaries.size()));
  if (opts.dp > 1 && opts.compileTo < Phase::Training)
    return fail("--dp needs --compile-to=training or a later phase");
  if (opts.tp > 1 && opts.compileTo < Phase::Training)
    return fail("--tp needs --compile-to=training or a later phase");
  if (!(opts.bucketMb > 0))
    return fail("--bucket-mb must be positive");
  if (opts.zero != 0 && opts.zero != 1)
    return fail("--zero " + Twine(opts.zero) + ": only stages 0 and 1 exist");
  if (opts.zero && opts.compileTo < Phase::Training)
    return fail("--zero needs --compile-to=training or a later phase");

  auto importAndClean = [&](const ImportOptions &io) -> OwningOpRef<ModuleOp> {
    OwningOpRef<ModuleOp> m = importOnnxFile(opts.input, &ctx, io);
    if (!m || opts.noCleanup)
      return m;
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
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
  if (opts.compileTo >= Phase::Training) {
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    TrainingOptions training;
    training.loss = opts.loss;
    training.logits = opts.logits;
    training.labels = opts.labels;
    training.frozen.assign(opts.frozen.begin(), opts.frozen.end());
    training.dp = opts.dp;
    training.tp = opts.tp;
    // Vocabulary parallelism: by default whenever the model qualifies (a
    // remark says why not otherwise); asked for explicitly, it must apply.
    const bool vocabExplicit = opts.vocabParallel.getNumOccurrences() > 0;
    training.vocabParallel =
        opts.tp > 1 && (vocabExplicit ? opts.vocabParallel : opts.loss == "cross-entropy");
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
    pipeline.microbatches = opts.microbatches;
    pipeline.boundaries.assign(opts.stageBoundaries.begin(), opts.stageBoundaries.end());
    pipeline.schedule = opts.schedule;
    if (failed(pipelined ? buildPipelineTrainingPipeline(pm, training, pipeline)
                         : buildTrainingPipeline(pm, training)))
      return fail("bad optimizer options '" + training.optimizer + "'");
    if (failed(pm.run(*module)))
      return 1;
    if (pipelined)
      setPipelineSchedule(*module, opts.schedule);
    else
      reportTrainableParameters(*module, training, llvm::errs());
  }
  // --report, after the last phase that changes the program; on stdout it
  // replaces the IR.
  auto printReport = [&]() -> std::optional<int> {
    if (!report)
      return std::nullopt;
    ReportOptions ro{llvm::sys::path::filename(opts.input).str(), opts.dp, opts.tp, opts.pp,
                     opts.microbatches, pipelined ? opts.schedule.getValue() : "",
                     opts.optimizer, opts.report == "json"};
    if (failed(writeCompileReport(*module, ro, opts.reportFile)))
      return 1;
    if (opts.reportFile == "-" && opts.output == "-" && opts.compileTo != Phase::Binary)
      return 0;
    return std::nullopt;
  };
  if (opts.compileTo == Phase::Pipeline || opts.compileTo == Phase::Schedule) {
    if (std::optional<int> rc = printReport())
      return *rc;
    std::string err;
    auto out = openOutputFile(opts.output, &err);
    if (!out)
      return fail(err);
    if (opts.compileTo == Phase::Schedule) {
      printPipelineScheduleOf(*module, out->os());
    } else {
      printPipelinePlan(*module, out->os());
      module->print(out->os());
    }
    out->keep();
    return 0;
  }
  ProgramInfo program;
  program.model = llvm::sys::path::filename(opts.input).str();
  program.optimizer = opts.optimizer;
  program.dp = opts.dp;
  program.pp = opts.pp;
  program.tp = opts.tp;
  if (opts.compileTo >= Phase::Lower && pipelined) {
    if (failed(planPipelineMemory(*module, llvm::errs())))
      return 1;
  } else if (opts.compileTo >= Phase::Lower) {
    if (!module->lookupSymbol("train_step"))
      return fail("no @train_step to lower");
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    pm.addPass(createMerakPlanMemory());
    if (failed(pm.run(*module)))
      return 1;
    reportMemoryPlan(*module, llvm::errs());
  }
  if (std::optional<int> rc = printReport())
    return *rc;
  if (opts.compileTo == Phase::Binary)
    return buildBinary(*module, program, opts.output == "-" ? "train" : opts.output.getValue(),
                       opts.verbose);
  // Open the output only now, so a failed compile never clobbers it.
  std::string err;
  auto out = openOutputFile(opts.output, &err);
  if (!out)
    return fail(err);
  if (opts.compileTo == Phase::Emit) {
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
