//===- MerakRun.cpp - the merak-run reference evaluator tool --------------===//
//
// merak-run MODEL [--input FILE]... [--expect FILE]... [--output-dir DIR]
//                 [--rtol R] [--atol A] [--input-shape NAME=DxD]...
// merak-run MODEL --test-data DIR
//
// Exit 0 when every output matches its expectation (or none were given),
// 1 on any error or mismatch.
//
//===----------------------------------------------------------------------===//
#include "merak/Evaluator/Evaluator.h"
#include "merak/Import/OnnxImporter.h"
#include "merak/Import/TensorProtoIO.h"
#include "merak/Tools/Drivers.h"
#include "merak/Pipelines/Registration.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mlir;
using namespace mlir::merak;
namespace cl = llvm::cl;

namespace {
struct RunOptions {
  cl::OptionCategory cat{"merak-run options"};
  cl::opt<std::string> model{cl::Positional, cl::desc("<model.onnx | model.onnxtxt | model.mlir>"),
                             cl::Required, cl::cat(cat)};
  cl::list<std::string> inputs{"input", cl::desc("Input tensor file (.pb or .npy), in the model's input order"),
                               cl::value_desc("file"), cl::cat(cat)};
  cl::list<std::string> expects{"expect", cl::desc("Expected output (.pb or .npy), in output order"),
                                cl::value_desc("file"), cl::cat(cat)};
  cl::opt<std::string> testData{"test-data", cl::desc("ONNX test case directory with test_data_set_*/input_N.pb, output_N.pb"),
                                cl::value_desc("dir"), cl::cat(cat)};
  cl::opt<std::string> outputDir{"output-dir", cl::desc("Write outputs here as output_N.pb (or .npy with --output-format=npy)"),
                                 cl::value_desc("dir"), cl::cat(cat)};
  cl::opt<std::string> entry{"entry", cl::desc("Function to evaluate (merak IR)"),
                             cl::init("forward"), cl::cat(cat)};
  cl::opt<unsigned> steps{"steps",
                          cl::desc("Run the entry this many times with the same inputs, "
                                   "keeping parameter updates (a training step); an "
                                   "argument named 'step' gets 0, 1, ...; scalar outputs "
                                   "of every run are printed as JSON lines"),
                          cl::init(1), cl::cat(cat)};
  cl::opt<std::string> outputFormat{"output-format", cl::desc("pb or npy"), cl::init("pb"), cl::cat(cat)};
  cl::opt<double> rtol{"rtol", cl::desc("Relative tolerance (|got-exp| <= atol + rtol*|exp|; bf16 and "
                                        "f16 results also within 2 ulps of exp)"),
                       cl::init(1e-3), cl::cat(cat)};
  cl::opt<double> atol{"atol", cl::desc("Absolute tolerance"), cl::init(1e-7), cl::cat(cat)};
  cl::list<std::string> bindConstants{
      "bind-constant",
      cl::desc("Make graph input NAME a compile-time constant with the value in "
               "FILE (for shapes/axes fed as inputs); it is then not passed as "
               "--input, and dropped from --test-data by its TensorProto name"),
      cl::value_desc("NAME=FILE"), cl::cat(cat)};
  cl::list<std::string> inputShapes{"input-shape", cl::desc("Bind a graph input's shape, NAME=8x128"),
                                    cl::value_desc("NAME=DIMS"), cl::cat(cat)};
};

struct Mismatch {
  int64_t count = 0, first = -1;
  double maxAbs = 0, maxRel = 0;
};

/// True when a test file of type `file` holds what the model has as
/// bfloat16 `want` in uint16: onnx before 1.13 wrote its bfloat16 test data
/// so (Debian's libonnx-testdata), as bit patterns of unstated rounding.
static bool storesBf16AsUint16(Type file, Type want) {
  auto f = dyn_cast<RankedTensorType>(file);
  auto w = dyn_cast<RankedTensorType>(want);
  return f && w && f.getElementType().isUnsignedInteger(16) && w.getElementType().isBF16();
}
static std::string legacyBf16(StringRef file) {
  return ("'" + file + "' holds bfloat16 data as uint16 (test data of onnx before 1.13): "
          "unsupported")
      .str();
}

/// One unit in the last place of `e` in a 16-bit float type (bf16: 8 bits
/// of precision, f16: 11); 0 for the wider ones.
double narrowUlp(Type t, double e) {
  int bits = t.isBF16() ? 8 : t.isF16() ? 11 : 0;
  if (!bits || e == 0 || !std::isfinite(e))
    return 0;
  return std::ldexp(1.0, std::ilogb(e) - (bits - 1));
}

/// Elementwise allclose (NaN equals NaN, infinities must match exactly). A
/// bf16 or f16 result also matches within 2 units in the last place of the
/// expected value: a chain of ops rounding to 8 (11) bits differs from the
/// reference by a few of them whatever the order of its sums.
Mismatch compare(const HostTensor &got, const HostTensor &exp, double rtol,
                 double atol) {
  Mismatch m;
  Type narrow = got.getElementType();
  for (int64_t k = 0; k < exp.size(); ++k) {
    double g = got.getAsDouble(k), e = exp.getAsDouble(k);
    bool ok;
    if (!got.isFloat() && !exp.isFloat()) {
      ok = got.i()[k] == exp.i()[k];
      // |difference| as a double is only used for reporting.
      m.maxAbs = std::max(m.maxAbs, std::fabs((double)got.i()[k] - (double)exp.i()[k]));
    }
    else if (std::isnan(e) || std::isnan(g))
      ok = std::isnan(e) && std::isnan(g);
    else if (std::isinf(e) || std::isinf(g))
      ok = g == e;
    else {
      double abs = std::fabs(g - e);
      m.maxAbs = std::max(m.maxAbs, abs);
      if (e != 0)
        m.maxRel = std::max(m.maxRel, abs / std::fabs(e));
      ok = abs <= atol + rtol * std::fabs(e) || abs <= 2 * narrowUlp(narrow, e);
    }
    if (!ok && m.count++ == 0)
      m.first = k;
  }
  return m;
}

std::string formatIndex(ArrayRef<int64_t> shape, int64_t lin) {
  SmallVector<int64_t> idx(shape.size());
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    idx[d] = shape[d] ? lin % shape[d] : 0;
    lin = shape[d] ? lin / shape[d] : 0;
  }
  std::string s = "[";
  for (auto [i, v] : llvm::enumerate(idx))
    s += (i ? "," : "") + std::to_string(v);
  return s + "]";
}

/// An element as printed in reports: integers exactly, floats with %e.
std::string formatValue(const HostTensor &t, int64_t k) {
  if (!t.isFloat())
    return std::to_string(t.i()[k]);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t.f()[k];
  return os.str();
}

int fail(const Twine &msg) {
  llvm::errs() << "merak-run: error: " << msg << "\n";
  return 1;
}

/// fail(), for the helpers below that return a LogicalResult.
LogicalResult failWith(const Twine &msg) {
  fail(msg);
  return failure();
}

/// The model: an ONNX file imported with --input-shape/--bind-constant, or
/// merak IR. Null after an error (printed).
OwningOpRef<ModuleOp> loadModel(const RunOptions &opts, MLIRContext &ctx,
                                llvm::SourceMgr &sourceMgr) {
  StringRef path = opts.model;
  if (path.ends_with(".onnx") || path.ends_with(".onnxtxt") || path.ends_with(".onnxtext")) {
    ImportOptions importOpts;
    for (const std::string &spec : opts.inputShapes) {
      std::string err;
      if (failed(parseInputShape(spec, importOpts, err)))
        return fail(err), nullptr;
    }
    for (StringRef spec : opts.bindConstants) {
      auto [name, file] = spec.split('=');
      if (name.empty() || file.empty())
        return fail("--bind-constant expects NAME=FILE, got '" + spec + "'"), nullptr;
      std::string err;
      auto t = readTensorFile(&ctx, file, err);
      if (failed(t))
        return fail(err), nullptr;
      importOpts.constantInputs[name] = std::move(*t);
    }
    return importOnnxFile(path, &ctx, importOpts);
  }
  if (!opts.bindConstants.empty())
    return fail("--bind-constant applies to ONNX models only"), nullptr;
  if (!opts.inputShapes.empty())
    return fail("--input-shape applies to ONNX models only (merak IR has static shapes)"), nullptr;
  if (!llvm::sys::fs::exists(path))
    return fail("cannot open '" + path + "': no such file"), nullptr;
  return parseSourceFile<ModuleOp>(path, sourceMgr, ParserConfig(&ctx));
}

/// One data set: the input files in argument order and the expected
/// outputs in result order.
struct Case {
  std::string name;
  SmallVector<std::string> inputs, expects;
};

/// The numbered files `<dir>/<prefix>N.pb` from N = 0 on.
SmallVector<std::string> numberedFiles(StringRef dir, StringRef prefix) {
  SmallVector<std::string> files;
  for (unsigned i = 0;; ++i) {
    SmallString<256> p(dir);
    llvm::sys::path::append(p, prefix + std::to_string(i) + ".pb");
    if (!llvm::sys::fs::exists(p))
      return files;
    files.push_back(p.str().str());
  }
}

/// The data sets: --test-data's test_data_set_* directories (inputs bound
/// by --bind-constant left out), or the command line's --input/--expect.
FailureOr<SmallVector<Case>> gatherCases(const RunOptions &opts, MLIRContext &ctx) {
  if (opts.testData.empty())
    return SmallVector<Case>{{"command line",
                              SmallVector<std::string>(opts.inputs.begin(), opts.inputs.end()),
                              SmallVector<std::string>(opts.expects.begin(), opts.expects.end())}};
  if (!opts.inputs.empty() || !opts.expects.empty())
    return failWith("--test-data cannot be combined with --input/--expect");
  std::error_code ec;
  SmallVector<std::string> dirs;
  for (llvm::sys::fs::directory_iterator it(opts.testData, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::path::filename(it->path()).starts_with("test_data_set_"))
      dirs.push_back(it->path());
  if (ec)
    return failWith("cannot read test data directory '" + opts.testData + "': " + ec.message());
  if (dirs.empty())
    return failWith("'" + opts.testData + "' has no test_data_set_* directories");
  llvm::sort(dirs);
  SmallVector<Case> cases;
  for (const std::string &dir : dirs) {
    Case c{dir, {}, numberedFiles(dir, "output_")};
    for (const std::string &p : numberedFiles(dir, "input_")) {
      std::string err, name;
      if (!opts.bindConstants.empty() && succeeded(readTensorFile(&ctx, p, err, &name)) &&
          llvm::any_of(opts.bindConstants,
                       [&](StringRef spec) { return spec.split('=').first == name; }))
        continue; // bound as a compile-time constant
      c.inputs.push_back(p);
    }
    // A data set without expected outputs would compare nothing and pass.
    if (c.expects.empty())
      return failWith("'" + dir + "' has no output_0.pb: --test-data has nothing to compare");
    cases.push_back(std::move(c));
  }
  return cases;
}

/// The entry function's interface: names of arguments and results, and
/// the argument named "step" that merak-run feeds (0, 1, ...), if any.
struct Entry {
  mutable func::FuncOp func; // a handle: its accessors are not const
  int stepArg = -1;
  explicit Entry(func::FuncOp func) : func(func) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (argName(i) == "step")
        stepArg = i;
  }
  std::string argName(unsigned i) const {
    auto a = func.getArgAttrOfType<StringAttr>(i, "merak.name");
    return a ? a.getValue().str() : "#" + std::to_string(i);
  }
  std::string resultName(unsigned i) const {
    auto a = func.getResultAttrOfType<StringAttr>(i, "merak.name");
    return a ? a.getValue().str() : "#" + std::to_string(i);
  }
  unsigned fileArgs() const { return func.getNumArguments() - (stepArg >= 0); }
};

/// The case's input tensors in argument order (an empty slot for the step).
FailureOr<SmallVector<HostTensor>> readInputs(const Entry &entry, const Case &c, MLIRContext &ctx) {
  SmallVector<HostTensor> inputs;
  for (const std::string &file : c.inputs) {
    if ((int)inputs.size() == entry.stepArg)
      inputs.push_back(HostTensor());
    unsigned i = inputs.size();
    std::string err;
    auto t = readTensorFile(&ctx, file, err);
    if (failed(t))
      return failWith(err);
    Type want = entry.func.getArgumentTypes()[i];
    if (storesBf16AsUint16(t->getType(), want))
      return failWith(legacyBf16(file));
    if (t->getType() != want) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << "input " << i << " '" << entry.argName(i) << "' from '" << file << "' has type "
         << t->getType() << ", the model expects " << want;
      return failWith(os.str());
    }
    inputs.push_back(std::move(*t));
  }
  if (entry.stepArg >= 0 && (int)inputs.size() == entry.stepArg)
    inputs.push_back(HostTensor());
  return inputs;
}

/// Runs the entry --steps times on `inputs` (parameter updates kept),
/// printing each run's scalar outputs as a JSON line when it is a training
/// step; the last run's outputs.
FailureOr<SmallVector<HostTensor>> runSteps(const RunOptions &opts, const Entry &entry,
                                            SmallVector<HostTensor> inputs) {
  ParamStore store;
  FailureOr<SmallVector<HostTensor>> outputs;
  for (unsigned s = 0; s < opts.steps; ++s) {
    if (entry.stepArg >= 0) {
      HostTensor stepValue(cast<RankedTensorType>(entry.func.getArgumentTypes()[entry.stepArg]));
      if (stepValue.size() != 1 || stepValue.isFloat())
        return failWith("argument 'step' must be an integer scalar");
      stepValue.setFromInt(0, s);
      inputs[entry.stepArg] = std::move(stepValue);
    }
    ScopedEvaluationStep position(s); // merak.dropout's masks of step s
    outputs = evaluateFunction(entry.func, inputs, &store);
    if (failed(outputs))
      return failure();
    if (opts.steps > 1 || entry.stepArg >= 0) {
      llvm::outs() << "{\"step\": " << s;
      for (auto [i, t] : llvm::enumerate(*outputs))
        if (t.size() == 1)
          llvm::outs() << ", \"" << entry.resultName(i)
                       << "\": " << llvm::format("%.9g", t.getAsDouble(0));
      llvm::outs() << "}\n";
    }
  }
  return outputs;
}

/// --output-dir: the outputs as files (one directory per data set when
/// there are several).
LogicalResult writeOutputs(const RunOptions &opts, const Entry &entry, const Case &c,
                           bool severalCases, ArrayRef<HostTensor> outputs) {
  SmallString<256> dir(opts.outputDir);
  if (severalCases)
    llvm::sys::path::append(dir, llvm::sys::path::filename(c.name));
  llvm::sys::fs::create_directories(dir);
  for (auto [i, t] : llvm::enumerate(outputs)) {
    SmallString<256> p(dir);
    llvm::sys::path::append(p, "output_" + std::to_string(i) + "." + opts.outputFormat);
    std::string err;
    if (failed(writeTensorFile(t, p, entry.resultName(i), err)))
      return failWith(err);
  }
  return success();
}

/// Compares the outputs with the case's expectations, printing a line per
/// output; false when one differs.
FailureOr<bool> checkOutputs(const RunOptions &opts, const Entry &entry, const Case &c,
                             bool severalCases, ArrayRef<HostTensor> outputs, MLIRContext &ctx) {
  bool allMatch = true;
  // With several data sets each line says which one it is about.
  std::string where = severalCases ? llvm::sys::path::filename(c.name).str() + ": " : std::string();
  for (auto [i, file] : llvm::enumerate(c.expects)) {
    std::string err;
    auto exp = readTensorFile(&ctx, file, err);
    if (failed(exp))
      return failWith(err);
    const HostTensor &got = outputs[i];
    if (storesBf16AsUint16(exp->getType(), got.getType()))
      return failWith(legacyBf16(file));
    std::string label = "output " + std::to_string(i) + " '" + entry.resultName(i) + "'";
    if (exp->getShape() != got.getShape() || exp->getElementType() != got.getElementType()) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << label << ": got " << got.getType() << ", expected " << exp->getType();
      llvm::errs() << "merak-run: " << where << "MISMATCH " << os.str() << "\n";
      allMatch = false;
      continue;
    }
    Mismatch m = compare(got, *exp, opts.rtol, opts.atol);
    if (m.count) {
      llvm::errs() << "merak-run: " << where << "MISMATCH " << label << ": " << m.count << " of "
                   << exp->size() << " elements differ (rtol " << opts.rtol << ", atol "
                   << opts.atol << "); first at " << formatIndex(exp->getShape(), m.first)
                   << ": got " << formatValue(got, m.first) << ", expected "
                   << formatValue(*exp, m.first) << "; max abs err " << m.maxAbs << ", max rel err "
                   << m.maxRel << "\n";
      allMatch = false;
    } else {
      llvm::outs() << "merak-run: " << where << label << " matches (" << exp->size()
                   << " elements, max abs err " << m.maxAbs << ", max rel err " << m.maxRel
                   << ")\n";
    }
  }
  return allMatch;
}
} // namespace

int mlir::merak::merakRunMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  RunOptions opts;
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(opts.cat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "merak-run: reference evaluator. Runs a model on input tensors and "
      "compares its outputs with expected ones.\n\n"
      "  merak-run model.onnx --input x.pb --expect y.pb\n"
      "  merak-run model.onnx --test-data onnx/test/case_dir\n"
      "  merak-run model.mlir --input x.npy --output-dir out/\n");

  DialectRegistry registry;
  registerMerakDialects(registry);
  MLIRContext ctx(registry);
  // Errors name their cause and location; never dump whole modules at users.
  ctx.printOpOnDiagnostic(false);
  ctx.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diag(sourceMgr, &ctx);

  OwningOpRef<ModuleOp> module = loadModel(opts, ctx, sourceMgr);
  if (!module)
    return 1;
  if (opts.outputFormat != "pb" && opts.outputFormat != "npy")
    return fail("--output-format must be pb or npy, got '" + opts.outputFormat + "'");
  auto func = module->lookupSymbol<func::FuncOp>(opts.entry);
  if (!func)
    return fail("the module has no func.func @" + opts.entry);
  FailureOr<SmallVector<Case>> cases = gatherCases(opts, ctx);
  if (failed(cases))
    return 1;

  Entry entry(func);
  bool several = cases->size() > 1, allMatch = true;
  for (const Case &c : *cases) {
    if (c.inputs.size() != entry.fileArgs())
      return fail("model takes " + Twine(entry.fileArgs()) + " inputs but " +
                  Twine(c.inputs.size()) + " were given (" + c.name + ")");
    if (c.expects.size() > func.getNumResults())
      return fail("model has " + Twine(func.getNumResults()) + " outputs but " +
                  Twine(c.expects.size()) + " expectations were given");
    FailureOr<SmallVector<HostTensor>> inputs = readInputs(entry, c, ctx);
    if (failed(inputs))
      return 1;
    FailureOr<SmallVector<HostTensor>> outputs = runSteps(opts, entry, std::move(*inputs));
    if (failed(outputs))
      return 1;
    if (!opts.outputDir.empty() && failed(writeOutputs(opts, entry, c, several, *outputs)))
      return 1;
    FailureOr<bool> matched = checkOutputs(opts, entry, c, several, *outputs, ctx);
    if (failed(matched))
      return 1;
    allMatch &= *matched;
  }
  return allMatch ? 0 : 1;
}
