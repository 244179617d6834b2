//===- OnnxImporter.cpp - ONNX graph to merak IR --------------------------===//
//
// Loads the model (binary or text), validates the graph (names, topology,
// dtypes, shapes), turns initializers into merak.param / merak.constant
// (Initializers.cpp), and imports nodes in topological order through the per-op table. Every value
// has a static type; ops whose operands are constants are folded as they
// are created, which is how shape arithmetic disappears.
//
//===----------------------------------------------------------------------===//
#include "merak/Import/OnnxImporter.h"
#include "GraphImporter.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/Evaluator.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/defs/parser.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <onnx/defs/schema.h>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

static constexpr int64_t kMaxOpset = 28;
static constexpr int64_t kProtobufLimit = int64_t(2) << 30;

LogicalResult mlir::merak::parseInputShape(StringRef spec, ImportOptions &options,
                                           std::string &error) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || !spec.contains('=')) {
    error = "--input-shape expects NAME=D0xD1x..., got '" + spec.str() + "'";
    return failure();
  }
  SmallVector<int64_t> shape;
  if (!dims.empty()) {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 0) {
        error = "--input-shape " + spec.str() + ": '" + p.str() +
                "' is not a non-negative dimension";
        return failure();
      }
      shape.push_back(d);
    }
  }
  if (!options.inputShapes.try_emplace(name, shape).second) {
    error = "--input-shape given twice for '" + name.str() + "'";
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GraphImporter (initializers: Initializers.cpp)
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<const onnx::NodeProto *>> GraphImporter::sortNodes() {
  // Producers of each name; duplicates are an error.
  llvm::StringMap<int> producer;
  llvm::StringSet<> defined;
  for (const auto &in : graph.input())
    defined.insert(in.name());
  for (const auto &kv : initializers)
    defined.insert(kv.getKey());
  int n = graph.node_size();
  for (int i = 0; i < n; ++i) {
    const auto &node = graph.node(i);
    for (const auto &out : node.output()) {
      if (out.empty())
        continue;
      if (producer.count(out) || defined.contains(out))
        return fail(nodeLoc(node), "value name '" + out +
                                       "' is defined more than once");
      producer[out] = i;
    }
  }
  // Kahn's algorithm; inputs that nothing defines are dangling.
  std::vector<int> pending(n, 0);
  std::vector<SmallVector<int, 2>> users(n);
  for (int i = 0; i < n; ++i) {
    const auto &node = graph.node(i);
    for (const auto &in : node.input()) {
      if (in.empty() || defined.contains(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return fail(nodeLoc(node), "input '" + in + "' of node '" + node.name() +
                                       "' (" + node.op_type() +
                                       ") is not produced by any node, graph "
                                       "input or initializer (dangling edge)");
      ++pending[i];
      users[it->second].push_back(i);
    }
    // A branch's reads of outer values order the node after their
    // producers too (an unknown name is reported when the branch imports).
    SmallVector<std::string> implicit;
    outerReads(node, implicit);
    for (const std::string &in : implicit)
      if (auto it = producer.find(in); it != producer.end() && it->second != i) {
        ++pending[i];
        users[it->second].push_back(i);
      }
  }
  SmallVector<const onnx::NodeProto *> order;
  SmallVector<int> ready;
  for (int i = n - 1; i >= 0; --i)
    if (!pending[i])
      ready.push_back(i);
  while (!ready.empty()) {
    int i = ready.pop_back_val();
    order.push_back(&graph.node(i));
    for (int u : users[i])
      if (--pending[u] == 0)
        ready.push_back(u);
  }
  if ((int)order.size() != n) {
    for (int i = 0; i < n; ++i)
      if (pending[i])
        return fail(nodeLoc(graph.node(i)),
                    "the graph has a cycle through node '" + graph.node(i).name() +
                        "' (" + graph.node(i).op_type() + ")");
  }
  for (const auto &out : graph.output())
    if (!defined.contains(out.name()) && !producer.count(out.name()))
      return fail(fileLoc, "graph output '" + out.name() +
                               "' is not produced by any node");
  return order;
}

LogicalResult GraphImporter::checkSupported(ArrayRef<const onnx::NodeProto *> nodes) {
  const OpRegistry &reg = OpRegistry::get();
  llvm::StringSet<> reported;
  bool ok = true;
  for (const onnx::NodeProto *node : nodes) {
    bool standard = node->domain().empty() || node->domain() == "ai.onnx";
    std::string key = node->domain() + "::" + node->op_type();
    OpRegistry::Resolution res;
    if (standard) {
      res = reg.lookup(node->op_type(), opset);
      if (res.fn)
        continue;
    }
    ok = false;
    if (!reported.insert(key).second)
      continue;
    InFlightDiagnostic diag = emitError(nodeLoc(*node));
    if (!standard) {
      diag << "unsupported ONNX op '" << node->op_type() << "' of domain '"
           << node->domain() << "' (" << describeNode(*node) << ")";
    } else if (res.version && reg.imports(node->op_type())) {
      // merak imports the op, but not the semantics it has at this opset.
      diag << "unsupported ONNX op " << node->op_type() << "-" << res.version
           << ": merak does not import that version (" << describeNode(*node)
           << ", opset " << opset << ")";
    } else {
      diag << "unsupported ONNX op '" << node->op_type() << "' ("
           << describeNode(*node) << ", opset " << opset << ")";
    }
  }
  return success(ok);
}

/// The model's ai.onnx opset (ops are versioned individually, see
/// OpRegistry: an op whose semantics at this opset have no handler is
/// reported as unsupported).
LogicalResult GraphImporter::readOpset() {
  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
  if (opset == 0) {
    std::string domains;
    for (const auto &imp : model.opset_import())
      domains += (domains.empty() ? "" : ", ") + imp.domain();
    return fail(fileLoc, "unsupported model: it imports no ai.onnx opset (only " +
                             domains + ")");
  }
  if (opset > kMaxOpset)
    return fail(fileLoc, "unsupported opset " + Twine(opset) +
                             " (merak imports ai.onnx opsets up to " +
                             Twine(kMaxOpset) + ")");

  return success();
}

/// A graph input bound to a constant (--bind-constant): its value must fit
/// the input's declared element type and static dimensions.
LogicalResult GraphImporter::checkBoundInput(const onnx::ValueInfoProto &in, Location loc,
                                             const HostTensor &value) {
  Type declared = in.type().has_tensor_type()
                      ? convertDataType(ctx, in.type().tensor_type().elem_type())
                      : Type();
  std::string got, want;
  llvm::raw_string_ostream gs(got), ws(want);
  gs << value.getType();
  if (declared)
    ws << declared;
  else
    ws << "a non-tensor";
  if (declared != value.getElementType())
    return fail(loc, "the value bound to graph input '" + in.name() + "' is " +
                         got + ", but the input's element type is " + want);
  // Static dimensions the model declares must match the bound value.
  const auto &tt = in.type().tensor_type();
  ArrayRef<int64_t> vs = value.getShape();
  bool mismatch = tt.has_shape() && tt.shape().dim_size() != (int)vs.size();
  for (int d = 0; !mismatch && tt.has_shape() && d < tt.shape().dim_size(); ++d)
    mismatch = tt.shape().dim(d).has_dim_value() &&
               tt.shape().dim(d).dim_value() != vs[d];
  if (mismatch)
    return fail(loc, "the value bound to graph input '" + in.name() + "' is " +
                         got + ", which does not fit the input's declared shape");
  return success();
}

/// The type of a graph input from its declaration and --input-shape.
FailureOr<RankedTensorType> GraphImporter::inputType(const onnx::ValueInfoProto &in,
                                                     Location loc) {
  if (!in.type().has_tensor_type())
    return fail(loc, "graph input '" + in.name() +
                         "' is not a tensor (unsupported input kind)");
  const auto &tt = in.type().tensor_type();
  Type et = convertDataType(ctx, tt.elem_type());
  if (!et)
    return fail(loc, "graph input '" + in.name() + "' has unsupported dtype " +
                         dataTypeName(tt.elem_type()));
  SmallVector<int64_t> shape;
  auto bound = options.inputShapes.find(in.name());
  if (!tt.has_shape() && bound == options.inputShapes.end())
    return fail(loc, "graph input '" + in.name() +
                         "' has no shape; bind it with --input-shape " +
                         in.name() + "=D0xD1x...");
  if (tt.has_shape()) {
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto &dim = tt.shape().dim(d);
      if (dim.has_dim_value()) {
        shape.push_back(dim.dim_value());
        continue;
      }
      if (bound == options.inputShapes.end() && d == 0 && options.batchSize > 0) {
        shape.push_back(options.batchSize);
        batchBound = true;
        continue;
      }
      if (bound == options.inputShapes.end())
        return fail(loc, "graph input '" + in.name() + "' has dynamic dimension " +
                             Twine(d) +
                             (dim.has_dim_param() ? " ('" + dim.dim_param() + "')"
                                                  : std::string()) +
                             "; bind it with --input-shape " + in.name() + "=D0xD1x..." +
                             (d == 0 ? " or --batch-size N" : ""));
      shape.push_back(ShapedType::kDynamic);
    }
  }
  if (bound != options.inputShapes.end()) {
    ArrayRef<int64_t> given = bound->second;
    if (tt.has_shape() && given.size() != shape.size())
      return fail(loc, "--input-shape for '" + in.name() + "' has rank " +
                           Twine(given.size()) + " but the input has rank " +
                           Twine(shape.size()));
    for (size_t d = 0; tt.has_shape() && d < shape.size(); ++d)
      if (shape[d] != ShapedType::kDynamic && shape[d] != given[d])
        return fail(loc, "--input-shape for '" + in.name() + "' gives dimension " +
                             Twine(d) + " = " + Twine(given[d]) +
                             " but the model fixes it to " + Twine(shape[d]));
    shape.assign(given.begin(), given.end());
  }
  auto n = checkedNumElements(shape);
  if (failed(n) || *n > kMaxElements)
    return fail(loc, "graph input '" + in.name() +
                         "' has absurd dimensions (element count overflows)");
  return RankedTensorType::get(shape, et);
}

/// Every node, in topological order, through its op's import rule.
LogicalResult GraphImporter::importNodes(ArrayRef<const onnx::NodeProto *> order) {
  const OpRegistry &reg = OpRegistry::get();
  for (const onnx::NodeProto *node : order) {
    Location loc = nodeLoc(*node);
    for (const auto &in : node->input())
      if (!in.empty() && !values.count(in) && !sequences.count(in))
        return fail(loc, "input '" + in + "' of " + describeNode(*node) +
                             " has no value");
    if (failed(verifyNodeSchema(*node, loc)))
      return failure();
    // An Identity of a parameter that something else reads too is
    // TorchScript's de-duplication of equal values in an inference export
    // (a parameter of its own). The sole reader of it is an alias, and so
    // is any Identity the dynamo exporter wrote (aten.alias of a lifted
    // buffer, read once per use: MiniMax's decay buffers): it reads the
    // same tensor, which a --frozen buffer's copy would otherwise train.
    if (node->op_type() == "Identity" && initializers.count(node->input(0)) &&
        values[node->input(0)].getDefiningOp<GetParamOp>() && readers.lookup(node->input(0)) > 1 &&
        !fromTorchExport(*node)) {
      if (failed(importIdentityParam(*node)))
        return failure();
      continue;
    }
    NodeContext nc(*this, *node, opset, builder, loc);
    if (failed(reg.lookup(node->op_type(), opset).fn(nc)) || nc.hasFailed())
      return failure();
    for (const auto &out : node->output())
      if (!out.empty() && !values.count(out) && !sequences.count(out) &&
          consumed.contains(out))
        return fail(loc, "internal: node did not define output '" + out + "'");
  }

  return success();
}

/// The function's results: every graph output, checked against its
/// declared type; the function type and result names.
LogicalResult GraphImporter::importOutputs(func::FuncOp func, ArrayRef<Type> argTypes) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    Value v = values.lookup(out.name());
    if (!v && sequences.count(out.name()))
      return fail(fileLoc, "unsupported: graph output '" + out.name() +
                               "' is a sequence (merak's functions return tensors)");
    if (!v)
      return fail(fileLoc, "graph output '" + out.name() + "' has no value");
    // A declared static output type that disagrees with what the graph
    // computes means a malformed model (or an importer bug): say so.
    if (out.type().has_tensor_type()) {
      const auto &tt = out.type().tensor_type();
      auto vt = cast<RankedTensorType>(v.getType());
      Type et = convertDataType(ctx, tt.elem_type());
      bool bad = tt.elem_type() != 0 && et != vt.getElementType();
      if (tt.has_shape()) {
        bad |= tt.shape().dim_size() != vt.getRank();
        for (int d = 0; !bad && d < tt.shape().dim_size(); ++d)
          bad = tt.shape().dim(d).has_dim_value() &&
                tt.shape().dim(d).dim_value() != vt.getDimSize(d);
      }
      if (bad) {
        std::string got;
        llvm::raw_string_ostream os(got);
        os << vt;
        return fail(fileLoc, "graph output '" + out.name() +
                                 "' is declared with another type or shape than "
                                 "the graph computes (" + got + ")");
      }
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "merak.name", builder.getStringAttr(out.name()));
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  fileLoc = FileLineColLoc::get(ctx, graph.name().empty() ? "model" : graph.name(), 0, 0);
  if (failed(readOpset()))
    return nullptr;
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc);
  module = *owned;
  if (failed(indexInitializers()))
    return nullptr;
  auto order = sortNodes();
  if (failed(order))
    return nullptr;
  // The nodes of If branches are checked and read like the graph's: their
  // inputs (outer values among them) and the branches' outputs are uses.
  SmallVector<const onnx::NodeProto *> all;
  withSubgraphs(*order, all);
  if (failed(checkSupported(all)) || failed(readTorchExportModes(all)))
    return nullptr;
  for (const auto *node : all) {
    for (const auto &in : node->input()) {
      consumed.insert(in);
      ++readers[in];
    }
    for (const auto &attr : node->attribute())
      if (attr.has_g())
        for (const auto &o : attr.g().output())
          consumed.insert(o.name());
  }
  for (const auto &out : graph.output())
    consumed.insert(out.name());

  // Graph inputs (those that are not initializers) become arguments.
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  llvm::StringSet<> seenInputs;
  SmallVector<std::pair<std::string, RankedTensorType>> boundInputs;
  for (const auto &in : graph.input()) {
    if (initializers.count(in.name()))
      continue;
    Location loc = NameLoc::get(StringAttr::get(ctx, in.name()), fileLoc);
    if (!seenInputs.insert(in.name()).second)
      return (void)fail(loc, "duplicate graph input '" + in.name() + "'"), nullptr;
    if (auto c = options.constantInputs.find(in.name());
        c != options.constantInputs.end()) {
      if (failed(checkBoundInput(in, loc, c->second)))
        return nullptr;
      boundInputs.push_back({in.name(), c->second.getType()});
      continue;
    }
    FailureOr<RankedTensorType> type = inputType(in, loc);
    if (failed(type))
      return nullptr;
    argTypes.push_back(*type);
    argNames.push_back(in.name());
  }
  for (const auto &kv : options.constantInputs)
    if (!seenInputs.contains(kv.getKey()))
      return (void)fail(fileLoc, "--bind-constant names '" + kv.getKey() +
                               "', which is not a graph input"),
             nullptr;
  if (options.batchSize > 0 && !batchBound)
    return (void)fail(fileLoc, "--batch-size " + Twine(options.batchSize) +
                                   ": no graph input has a dynamic leading (batch) "
                                   "dimension left to bind (the model was exported with a "
                                   "fixed batch, or --input-shape binds every input)"),
           nullptr;
  for (const auto &kv : options.inputShapes)
    if (!seenInputs.contains(kv.getKey()))
      return (void)fail(fileLoc, "--input-shape names '" + kv.getKey() +
                               "', which is not a graph input"),
             nullptr;

  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, fileLoc, kEntryName,
                                   builder.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values[name] = body->getArgument(i);
    func.setArgAttr(i, "merak.name", builder.getStringAttr(name));
  }

  for (auto &[name, type] : boundInputs)
    values[name] = ConstantOp::create(
        builder, NameLoc::get(StringAttr::get(ctx, name), fileLoc),
        makeElements(options.constantInputs.lookup(name), name));

  if (failed(importInitializers(func)) || failed(checkFoldedCopies()))
    return nullptr;

  if (failed(importNodes(*order)))
    return nullptr;
  resolveTrainingModes();
  if (failed(resolveRandomDraws(dropouts, values, graph)))
    return nullptr;

  if (failed(importOutputs(func, argTypes)))
    return nullptr;
  // Every op was verified as it was created (NodeContext::create), so a
  // module that fails here is an importer bug, not a bad model.
  if (failed(verify(module)))
    return (void)fail(fileLoc, "internal: the imported module does not verify "
                               "(an importer bug; the error above names the op)"),
           nullptr;
  return owned;
}

/// Checks a node against ONNX's own schema (arity, attribute names/types,
/// required attributes), and that no required or variadic input is the
/// empty name, so that handlers can rely on their inputs.
/// Why `node` lacks a required input of `schema` (an empty name), or "".
/// Inputs beyond its formals are checked by the last formal (variadic) when
/// `checkAll`, else left to the handler.
static std::string missingInput(const onnx::NodeProto &node, const onnx::OpSchema &schema,
                                bool checkAll) {
  const auto &formals = schema.inputs();
  for (int i = 0; i < node.input_size(); ++i) {
    if (!node.input(i).empty() || formals.empty() || (!checkAll && i >= (int)formals.size()))
      continue;
    const auto &formal = formals[std::min<size_t>(i, formals.size() - 1)];
    if (formal.GetOption() != onnx::OpSchema::Optional)
      return "malformed " + node.op_type() + " " + describeNode(node) + ": input " +
             std::to_string(i) + " ('" + formal.GetName() + "') is required but empty";
  }
  return "";
}

LogicalResult GraphImporter::verifyNodeSchema(const onnx::NodeProto &node,
                                              Location loc) {
  // Debian's onnx library knows the op versions up to opset 17: a newer
  // version is checked by its handler, by the number and presence of the
  // inputs Debian's newest version needs, and when it is declared the same
  // as one Debian knows (Cos-22 as Cos-7), by that version's inputs (its
  // attributes may differ).
  auto resolved = OpRegistry::get().lookup(node.op_type(), opset);
  const auto *schema = onnx::OpSchemaRegistry::Schema(node.op_type(), (int)opset, "");
  // A version Debian's onnx lacks first meets the onnx wheel's count of its
  // inputs and which of them are required (OnnxOpArity.inc).
  std::optional<OpRegistry::Arity> arity;
  if (!schema || schema->SinceVersion() != resolved.version)
    arity = OpRegistry::onnxArity(node.op_type(), resolved.version);
  if (arity) {
    if (node.input_size() < arity->minInputs)
      return fail(loc, "malformed " + node.op_type() + " " + describeNode(node) + ": " +
                           Twine(node.input_size()) + " inputs, it needs at least " +
                           Twine(arity->minInputs));
    for (int i = 0; i < node.input_size() && arity->formals > 0; ++i) {
      int64_t formal = std::min<int64_t>(i, arity->formals - 1);
      if (node.input(i).empty() && ((arity->required >> formal) & 1))
        return fail(loc, "malformed " + node.op_type() + " " + describeNode(node) +
                             ": input " + Twine(i) + " is required but empty");
    }
  }
  if (!schema)
    return success();
  bool inputsOnly = schema->SinceVersion() != resolved.version;
  // A newer version than Debian's, not declared the same: Debian's newest
  // schema of the op still says how many inputs it needs and which are
  // required (a handler must not meet an absent one); extra inputs are the
  // handler's.
  bool proxy = inputsOnly && schema->SinceVersion() != resolved.sameAs;
  if (inputsOnly && node.input_size() < schema->min_input())
    return fail(loc, "malformed " + node.op_type() + " " + describeNode(node) + ": " +
                         Twine(node.input_size()) + " inputs, it needs at least " +
                         Twine(schema->min_input()));
  if (proxy) {
    std::string missing = missingInput(node, *schema, /*checkAll=*/false);
    return missing.empty() ? success() : fail(loc, missing);
  }
  // onnx 1.12 rejects an empty list attribute (INTS without ints: torch's
  // dynamo exporter writes `value_ints = []`) as a missing field, which
  // newer ONNX allows; such a node skips onnx's attribute check (its
  // handler checks what it reads), not the input checks below.
  bool emptyList = llvm::any_of(node.attribute(), [](const onnx::AttributeProto &a) {
    return (a.type() == onnx::AttributeProto::INTS && a.ints_size() == 0) ||
           (a.type() == onnx::AttributeProto::FLOATS && a.floats_size() == 0) ||
           (a.type() == onnx::AttributeProto::STRINGS && a.strings_size() == 0);
  });
  try {
    if (!inputsOnly && !emptyList)
      schema->Verify(node);
  } catch (const std::exception &e) {
    std::string what = e.what();
    // Drop onnx's "==> Context: ..." suffix; the location names the node.
    if (size_t ctxPos = what.find("\n\n==> Context"); ctxPos != std::string::npos)
      what.resize(ctxPos);
    return fail(loc, "malformed " + node.op_type() + " " + describeNode(node) +
                         ": " + what);
  }
  if (std::string missing = missingInput(node, *schema, !inputsOnly); !missing.empty())
    return fail(loc, missing);
  for (const auto &out : node.output())
    if (out == kEntryName)
      return fail(loc, "value name '" + out + "' collides with merak's entry "
                       "function @" + kEntryName);
  return success();
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

/// Loads what an import needs into `ctx`: the dialects it creates and the
/// evaluator's models (constant subgraphs fold through foldWithEvaluator).
static void prepareContext(MLIRContext *ctx) {
  DialectRegistry evaluator;
  registerEvaluatorExternalModels(evaluator);
  ctx->appendDialectRegistry(evaluator);
  ctx->loadDialect<MerakDialect, func::FuncDialect>();
}

/// Parses ONNX text (the onnx library's syntax) into `model`.
static LogicalResult parseOnnxText(StringRef text, StringRef name, Location loc,
                                   onnx::ModelProto &model) {
  // The onnx parser reads a NUL-terminated string; an embedded NUL would end
  // the text early without an error, so refuse it.
  if (text.contains('\0')) {
    emitError(loc) << "'" << name << "' is not valid ONNX text: it contains a NUL byte";
    return failure();
  }
  std::string buffer = text.str();
  try {
    auto status = onnx::OnnxParser::Parse(model, buffer.c_str());
    if (!status.IsOK()) {
      emitError(loc) << "'" << name << "' is not valid ONNX text: " << status.ErrorMessage();
      return failure();
    }
  } catch (const std::exception &e) {
    emitError(loc) << "'" << name << "' is not valid ONNX text: " << e.what();
    return failure();
  }
  return success();
}

/// The graph import proper, shared by the file and the buffer entry points.
static OwningOpRef<ModuleOp> importModel(onnx::ModelProto &model, StringRef name,
                                         StringRef baseDir, Location loc,
                                         MLIRContext *ctx, const ImportOptions &options) {
  if (!model.has_graph() || model.opset_import_size() == 0) {
    emitError(loc) << "'" << name << "' is not an ONNX model (no graph or no opset import)";
    return nullptr;
  }
  if (std::string error; failed(onnx_import::inlineLocalFunctions(model, error)) ||
                         failed(onnx_import::batchExpertLoops(model, error))) {
    emitError(loc) << "'" << name << "': " << error;
    return nullptr;
  }
  onnx_import::batchExpertSegments(model);
  try {
    GraphImporter importer(ctx, model, baseDir, options);
    return importer.run();
  } catch (const std::exception &e) {
    emitError(loc) << "internal error while importing '" << name << "': " << e.what();
    return nullptr;
  }
}

OwningOpRef<ModuleOp> mlir::merak::importOnnxBuffer(StringRef bytes, bool isText,
                                                    StringRef name, StringRef baseDir,
                                                    MLIRContext *ctx,
                                                    const ImportOptions &options) {
  prepareContext(ctx);
  Location loc = FileLineColLoc::get(ctx, name, 0, 0);
  if ((int64_t)bytes.size() >= kProtobufLimit) {
    emitError(loc) << "'" << name << "' is " << bytes.size()
                   << " bytes, over protobuf's 2 GiB limit; store large "
                      "tensors as ONNX external data";
    return nullptr;
  }
  onnx::ModelProto model;
  if (isText) {
    if (failed(parseOnnxText(bytes, name, loc, model)))
      return nullptr;
  } else if (!model.ParseFromArray(bytes.data(), (int)bytes.size())) {
    emitError(loc) << "'" << name
                   << "' is not a valid ONNX model (protobuf parsing failed: "
                      "truncated or not an ONNX file)";
    return nullptr;
  }
  return importModel(model, name, baseDir, loc, ctx, options);
}

OwningOpRef<ModuleOp> mlir::merak::importOnnxFile(StringRef path, MLIRContext *ctx,
                                                  const ImportOptions &options) {
  prepareContext(ctx);
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size)) {
    emitError(loc) << "cannot open '" << path << "': " << ec.message();
    return nullptr;
  }
  if ((int64_t)size >= kProtobufLimit) {
    emitError(loc) << "'" << path << "' is " << size
                   << " bytes, over protobuf's 2 GiB limit; store large "
                      "tensors as ONNX external data";
    return nullptr;
  }
  SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  onnx::ModelProto model;
  bool text = path.ends_with(".onnxtxt") || path.ends_with(".onnxtext");
  if (text) {
    auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf) {
      emitError(loc) << "cannot read '" << path << "': " << buf.getError().message();
      return nullptr;
    }
    if (failed(parseOnnxText((*buf)->getBuffer(), path, loc, model)))
      return nullptr;
  } else {
    // Stream the protobuf from the file instead of holding the whole file
    // next to the parsed message: peak memory is one copy of the model.
    int fd = ::open(path.str().c_str(), O_RDONLY);
    if (fd < 0) {
      emitError(loc) << "cannot read '" << path << "': " << std::strerror(errno);
      return nullptr;
    }
    google::protobuf::io::FileInputStream file(fd);
    file.SetCloseOnDelete(true);
    google::protobuf::io::CodedInputStream coded(&file);
    coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
    if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      emitError(loc) << "'" << path
                     << "' is not a valid ONNX model (protobuf parsing failed: "
                        "truncated or not an ONNX file)";
      return nullptr;
    }
  }
  return importModel(model, path, dir, loc, ctx, options);
}
