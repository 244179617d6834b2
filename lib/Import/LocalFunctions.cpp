//===- LocalFunctions.cpp - inline an ONNX model's local functions --------===//
//
// A model may define functions (ModelProto.functions: torch's
// export_modules_as_functions, onnxscript's exports) that its nodes call by
// (domain, name). Before the import proper, every call is replaced by the
// function's body:
//   - a formal input is the call's actual input (absent: the empty name),
//     a formal output the call's output;
//   - every other value gets a name unique to the call site;
//   - an attribute that refers to the function's (ref_attr_name) takes the
//     call's value, under the body node's own name;
//   - calls inside bodies are expanded too (a recursion is an error).
// A function must import the model's ai.onnx opset: its body is imported
// at that opset.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "llvm/ADT/StringMap.h"

#include <map>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

struct Inliner {
  static constexpr size_t kMaxNodes = 1 << 22;
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto *> functions;
  int64_t modelOpset = 0;
  int64_t calls = 0;
  std::string error;
  std::vector<const onnx::FunctionProto *> active; // the calls being expanded
  std::string root;                                // the graph node expanded

  const onnx::FunctionProto *calleeOf(const onnx::NodeProto &n) const {
    auto it = functions.find({n.domain(), n.op_type()});
    return it == functions.end() ? nullptr : it->second;
  }

  /// Appends `call`'s expansion (or the node itself) to `out`.
  bool expand(const onnx::NodeProto &call, std::vector<onnx::NodeProto> &out, int depth) {
    const onnx::FunctionProto *f = calleeOf(call);
    if (!f) {
      // Calls nested in calls multiply: bound what a model may expand to.
      if (out.size() >= kMaxNodes)
        return fail("inlining the local functions (at " + root + ") makes more than " +
                    std::to_string(kMaxNodes) + " nodes");
      out.push_back(call);
      return true;
    }
    if (depth == 0)
      root = describeNode(call);
    auto where = "local function '" + f->domain() + "." + f->name() + "' (expanding " + root +
                 ")";
    if (llvm::is_contained(active, f))
      return fail(where + " calls itself, directly or not");
    for (const auto &imp : f->opset_import())
      if ((imp.domain().empty() || imp.domain() == "ai.onnx") && imp.version() != modelOpset)
        return fail(where + " imports ai.onnx opset " + std::to_string(imp.version()) +
                    ", the model " + std::to_string(modelOpset));
    if (call.input_size() > f->input_size() || call.output_size() > f->output_size())
      return fail(where + " has " + std::to_string(f->input_size()) + " inputs and " +
                  std::to_string(f->output_size()) + " outputs, the call more");
    std::map<std::string, std::string> rename;
    for (int i = 0; i < f->input_size(); ++i)
      rename[f->input(i)] = i < call.input_size() ? call.input(i) : "";
    for (int i = 0; i < f->output_size(); ++i)
      rename[f->output(i)] = i < call.output_size() ? call.output(i) : "";
    std::string prefix = call.name().empty() ? f->name() : call.name();
    prefix += "/" + std::to_string(calls++) + "/";
    auto mapped = [&](const std::string &name) {
      if (name.empty())
        return name;
      auto it = rename.find(name);
      return it != rename.end() ? it->second : prefix + name;
    };
    std::map<std::string, const onnx::AttributeProto *> given;
    for (const auto &a : call.attribute())
      given[a.name()] = &a;
    for (const onnx::NodeProto &body : f->node()) {
      onnx::NodeProto n = body;
      n.set_name(prefix + body.name());
      for (auto &in : *n.mutable_input())
        in = mapped(in);
      for (auto &o : *n.mutable_output())
        o = o.empty() ? o : mapped(o);
      // Formal outputs the call does not take: still unique names.
      for (int i = 0; i < n.output_size(); ++i)
        if (n.output(i).empty() && !body.output(i).empty())
          n.set_output(i, prefix + body.output(i));
      google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
      for (const auto &a : body.attribute()) {
        if (a.ref_attr_name().empty()) {
          *attrs.Add() = a;
          continue;
        }
        auto it = given.find(a.ref_attr_name());
        if (it == given.end())
          return fail(where + ": attribute '" + a.name() + "' of " + describeNode(body) +
                      " refers to the function's '" + a.ref_attr_name() +
                      "', which the call does not set (default values of function "
                      "attributes are not read)");
        onnx::AttributeProto value = *it->second;
        value.set_name(a.name());
        *attrs.Add() = value;
      }
      *n.mutable_attribute() = attrs;
      active.push_back(f);
      bool ok = expand(n, out, depth + 1);
      active.pop_back();
      if (!ok)
        return false;
    }
    return true;
  }

  bool fail(const std::string &msg) {
    if (error.empty())
      error = msg;
    return false;
  }
};

} // namespace

LogicalResult onnx_import::inlineLocalFunctions(onnx::ModelProto &model, std::string &error) {
  if (model.functions_size() == 0)
    return success();
  Inliner in;
  for (const auto &f : model.functions())
    in.functions[{f.domain(), f.name()}] = &f;
  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      in.modelOpset = imp.version();
  std::vector<onnx::NodeProto> nodes;
  for (const auto &n : model.graph().node())
    if (!in.expand(n, nodes, 0)) {
      error = in.error;
      return failure();
    }
  auto *graphNodes = model.mutable_graph()->mutable_node();
  graphNodes->Clear();
  for (auto &n : nodes)
    *graphNodes->Add() = std::move(n);
  return success();
}
