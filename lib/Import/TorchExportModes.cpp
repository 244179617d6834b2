//===- TorchExportModes.cpp - training ops in torch's dynamo exports ------===//
//
// torch's dynamo exporter (torch.onnx.export(..., dynamo=True)) records on
// every node the FX node it came from (metadata "pkg.torch.onnx.fx_node",
// e.g. `%bn : [...] = call_function[target=torch.ops.aten.
// _native_batch_norm_legit_functional.default](args = (%x, ..., True, 0.1,
// 1e-05), kwargs = {})`). Two of its rewrites change what training does:
//
//  - a training-mode batch norm (aten._native_batch_norm_legit_functional
//    and its siblings with `training` True) is written as a
//    BatchNormalization without training_mode, which ONNX reads as
//    inference: the module normalises each batch with its own statistics
//    and updates the running ones. The importer reads the FX node and
//    imports such a node as training (with a warning that counts them);
//  - its graph optimizer (optimize=True, the default) rewrites for
//    inference: it folds those batch norms into the Conv or Gemm before
//    them, with the running statistics, and removes the dropout of
//    scaled_dot_product_attention. Nothing in the file then trains as the
//    module does, so the import is refused, naming every folded norm and
//    removed dropout at once, and saying how to export.
//
// A node without the metadata (the TorchScript exporter, other tools) is
// read by ONNX's semantics alone.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cstdio>

#include <google/protobuf/unknown_field_set.h>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// NodeProto.metadata_props (field 9 since ONNX 1.16); Debian's onnx 1.12
/// schema keeps it among the unknown fields.
constexpr int kNodeMetadataField = 9;

/// The value of metadata entry `key` of `node`, or "".
std::string nodeMetadata(const onnx::NodeProto &node, StringRef key) {
  const auto *field = node.GetDescriptor()->FindFieldByName("metadata_props");
  if (field && field->is_repeated() &&
      field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
    const auto *refl = node.GetReflection();
    for (int i = 0, e = refl->FieldSize(node, field); i < e; ++i) {
      const auto &entry = refl->GetRepeatedMessage(node, field, i);
      const auto *d = entry.GetDescriptor();
      const auto *r = entry.GetReflection();
      if (r->GetString(entry, d->FindFieldByName("key")) == key)
        return r->GetString(entry, d->FindFieldByName("value"));
    }
    return "";
  }
  const auto &unknown = node.GetReflection()->GetUnknownFields(node);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto &f = unknown.field(i);
    if (f.number() != kNodeMetadataField ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()) && entry.key() == key)
      return entry.value();
  }
  return "";
}

/// The FX node a dynamo-exported node came from: its name, its target
/// (`aten.X.overload`) and its arguments as written.
struct FxNode {
  std::string name;
  std::string target;
  SmallVector<std::string> args;
  llvm::StringMap<std::string> kwargs;

  /// Positional argument `i` or keyword `key`, or "".
  StringRef arg(unsigned i, StringRef key) const {
    if (i < args.size())
      return args[i];
    auto it = kwargs.find(key);
    return it == kwargs.end() ? StringRef() : StringRef(it->second);
  }
};

/// `text` split at its top-level commas (outside brackets), trimmed.
SmallVector<std::string> splitTopLevel(StringRef text) {
  SmallVector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == ',' && depth == 0) {
      StringRef part = text.slice(start, i).trim();
      if (!part.empty())
        parts.push_back(part.str());
      start = i + 1;
    }
  }
  return parts;
}

/// The text between the bracket at `open` and its match, or "".
StringRef bracketed(StringRef text, size_t open) {
  if (open >= text.size())
    return "";
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(' || text[i] == '[' || text[i] == '{')
      ++depth;
    else if ((text[i] == ')' || text[i] == ']' || text[i] == '}') && --depth == 0)
      return text.slice(open + 1, i);
  }
  return "";
}

std::optional<FxNode> fxNodeOf(const onnx::NodeProto &node) {
  std::string text = nodeMetadata(node, "pkg.torch.onnx.fx_node");
  StringRef t(text);
  if (!t.consume_front("%"))
    return std::nullopt;
  FxNode fx;
  fx.name = t.take_until([](char c) { return c == ' '; }).str();
  size_t target = t.find("target=");
  if (target == StringRef::npos)
    return std::nullopt;
  StringRef name = t.substr(target + 7).take_until([](char c) { return c == ']'; });
  name.consume_front("torch.ops.");
  fx.target = name.str();
  size_t args = t.find("args = (");
  if (args != StringRef::npos)
    fx.args = splitTopLevel(bracketed(t, args + 7));
  size_t kwargs = t.find("kwargs = {");
  if (kwargs != StringRef::npos)
    for (const std::string &kv : splitTopLevel(bracketed(t, kwargs + 9))) {
      auto [key, value] = StringRef(kv).split(':');
      fx.kwargs[key.trim().trim('\'')] = value.trim().str();
    }
  return fx;
}

/// Whether `fx` is a batch norm with running statistics in training mode.
bool isTrainingBatchNorm(const FxNode &fx) {
  StringRef target = fx.target;
  if (target.starts_with("aten._batch_norm_with_update"))
    return true;
  // (input, weight, bias, running_mean, running_var, training, ...)
  if (target.starts_with("aten._native_batch_norm_legit_functional") ||
      target == "aten._native_batch_norm_legit.default" ||
      target.starts_with("aten.native_batch_norm.") || target.starts_with("aten.batch_norm."))
    return fx.arg(5, "training") == "True";
  return false;
}

/// The dropout probability `fx` applies in training (0: none).
double trainingDropout(const FxNode &fx) {
  StringRef target = fx.target;
  StringRef p, train = "True";
  if (target.starts_with("aten.scaled_dot_product_attention.")) {
    p = fx.arg(4, "dropout_p"); // applied whatever the module's mode
  } else if (target.starts_with("aten.native_dropout.") || target.starts_with("aten.dropout.")) {
    p = fx.arg(1, "p");
    train = fx.arg(2, "train");
  }
  double value = 0;
  if (p.empty() || train != "True" || p.getAsDouble(value))
    return 0;
  return value;
}

/// The module a node belongs to ("layer1.0.bn1"), from the exporter's name
/// scopes (`['', 'layer1', '0', 'bn1', '<op>']`), or the FX node's name.
std::string moduleOf(const onnx::NodeProto &node, const FxNode &fx) {
  std::string scopes = nodeMetadata(node, "pkg.torch.onnx.name_scopes");
  SmallVector<std::string> parts = splitTopLevel(StringRef(scopes).trim("[]"));
  SmallVector<StringRef> path;
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (StringRef s = StringRef(parts[i]).trim("'\""); !s.empty())
      path.push_back(s);
  return path.empty() ? fx.name : llvm::join(path, ".");
}

} // namespace

bool onnx_import::fromTorchExport(const onnx::NodeProto &node) {
  return !nodeMetadata(node, "pkg.torch.onnx.fx_node").empty();
}

bool GraphImporter::isExportParameter(StringRef initializer) const {
  std::string mangled = initializer.str();
  for (char &c : mangled)
    if (!llvm::isAlnum(c))
      c = '_';
  return exportParameters.contains(mangled);
}

LogicalResult GraphImporter::readTorchExportModes(ArrayRef<const onnx::NodeProto *> nodes) {
  // The ONNX nodes made from each FX node, in graph order.
  struct Group {
    std::optional<FxNode> fx;
    std::string module;
    bool norm = false, dropout = false;
  };
  llvm::StringMap<unsigned> index; // FX node name -> its group
  std::vector<Group> groups;
  for (const onnx::NodeProto *node : nodes) {
    std::optional<FxNode> fx = fxNodeOf(*node);
    if (!fx)
      continue;
    // torch.export names the graph's inputs for the module's state by kind:
    // `%p_<path>` a parameter, `%b_<path>` a buffer, `%c_<name>` a constant,
    // the path's dots as underscores.
    fromDynamo = true;
    auto noteParameters = [&](StringRef arg) {
      for (size_t at = arg.find("%p_"); at != StringRef::npos; at = arg.find("%p_", at + 1))
        exportParameters.insert(
            arg.substr(at + 3).take_while([](char c) { return llvm::isAlnum(c) || c == '_'; }));
    };
    for (StringRef arg : fx->args)
      noteParameters(arg);
    for (const auto &kwarg : fx->kwargs)
      noteParameters(kwarg.getValue());
    auto [it, added] = index.try_emplace(fx->name, groups.size());
    if (added)
      groups.push_back({fx, moduleOf(*node, *fx)});
    Group &g = groups[it->second];
    if (node->op_type() == "BatchNormalization" && isTrainingBatchNorm(*g.fx))
      exportNormModules[node] = g.module;
    g.norm |= node->op_type() == "BatchNormalization";
    g.dropout |= node->op_type() == "Dropout";
  }
  SmallVector<std::string> folded, removed;
  for (const Group &g : groups) {
    if (isTrainingBatchNorm(*g.fx) && !g.norm)
      folded.push_back("'" + g.module + "'");
    if (double p = trainingDropout(*g.fx); p > 0 && !g.dropout) {
      char prob[32];
      std::snprintf(prob, sizeof prob, "%g", p);
      removed.push_back("'" + g.module + "' (p = " + prob + ")");
    }
  }
  if (folded.empty() && removed.empty())
    return success();
  std::string what;
  if (!folded.empty())
    what = "the training-mode batch norm" + std::string(folded.size() > 1 ? "s " : " ") +
           listed(folded) + " folded into the Conv or Gemm before " +
           (folded.size() > 1 ? "each" : "it") +
           ", normalising with the running statistics (the module normalises each batch with "
           "its own)";
  if (!removed.empty())
    what +=
        (what.empty() ? "" : "; ") + std::string("the dropout of ") + listed(removed) + " removed";
  return fail(fileLoc, "this export lost training operations of the module to the exporter's "
                       "graph optimizer (torch.onnx.export's optimize=True, the default, "
                       "rewrites for inference): " +
                           what +
                           ". Training the file would silently differ from training the "
                           "module. Export with torch.onnx.export(..., dynamo=True, "
                           "optimize=False) (or dynamo=False)");
}

void GraphImporter::resolveTrainingModes() {
  resolveUntaggedDropouts(dropouts, values);
  for (auto &[what, nodes] : lenientReads)
    emitWarning(fileLoc) << nodes.size() << " node(s) (" << listed(nodes) << "): " << what;
  if (exportTrainingNorms.empty())
    return;
  emitWarning(fileLoc) << exportTrainingNorms.size()
                       << " BatchNormalization node(s) without training_mode (ONNX's "
                          "inference) came from training-mode batch norms ("
                       << listed(exportTrainingNorms)
                       << "; torch's dynamo exporter records them in the nodes' metadata): "
                          "imported as training, normalising each batch with its own "
                          "statistics and updating the running ones, as the module trains";
}
