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
enum class Phase { Import, Training };

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
                            "the optimizer update)")),
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
  cl::opt<bool> emitBytecode{"emit-bytecode", cl::desc("Write MLIR bytecode instead of text"),
                             cl::init(false), cl::cat(cat)};
  cl::opt<bool> noCleanup{"no-cleanup",
                          cl::desc("Print the importer's raw output (skip folding/canonicalisation)"),
                          cl::init(false), cl::cat(cat)};
};

int fail(const Twine &msg) {
  llvm::errs() << "merak-compile: error: " << msg << "\n";
  return 1;
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

  OwningOpRef<ModuleOp> module = importOnnxFile(opts.input, &ctx, importOpts);
  if (!module)
    return 1;
  if (!opts.noCleanup) {
    PassManager pm(&ctx);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    buildImportCleanupPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
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
    training.optimizer = "optimizer=" + opts.optimizer;
    for (const std::string &kv : opts.optimizerOptions) {
      if (kv.find('=') == std::string::npos || kv.find_first_of(" {}") != std::string::npos)
        return fail("--opt expects KEY=VALUE, got '" + kv + "'");
      training.optimizer += " " + kv;
    }
    if (failed(buildTrainingPipeline(pm, training)))
      return fail("bad optimizer options '" + training.optimizer + "'");
    if (failed(pm.run(*module)))
      return 1;
    reportTrainableParameters(*module, training, llvm::errs());
  }
  // Open the output only now, so a failed compile never clobbers it.
  std::string err;
  auto out = openOutputFile(opts.output, &err);
  if (!out)
    return fail(err);
  if (opts.emitBytecode) {
    if (failed(writeBytecodeToFile(*module, out->os())))
      return fail("cannot write bytecode");
  } else {
    module->print(out->os());
  }
  out->keep();
  return 0;
}
