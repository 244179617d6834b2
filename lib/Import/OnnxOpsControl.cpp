//===- OnnxOpsControl.cpp - If with a compile-time condition --------------===//
//
// merak's programs are static, so control flow imports only where it is
// decided at compile time: an If whose condition folds to a constant (the
// expansions of functions such as AffineGrid branch on the input's rank or
// an attribute) is the chosen branch, inlined: its nodes import into the
// enclosing function (seeing every outer value) and its outputs are the
// If's. A condition computed at run time is an error naming it; Loop and
// Scan stay unsupported. Also the walks over subgraphs the importer's
// sort and checks use.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

/// The names a node's subgraphs (If's branches) read from the enclosing
/// scopes: every input of their nodes that the subgraph does not define
/// itself, recursively.
void onnx_import::outerReads(const onnx::NodeProto &node, SmallVectorImpl<std::string> &out) {
  for (const auto &attr : node.attribute()) {
    if (!attr.has_g())
      continue;
    const onnx::GraphProto &g = attr.g();
    llvm::StringSet<> local;
    for (const auto &in : g.input())
      local.insert(in.name());
    for (const auto &init : g.initializer())
      local.insert(init.name());
    for (const auto &sub : g.node())
      for (const auto &o : sub.output())
        local.insert(o);
    SmallVector<std::string> reads;
    for (const auto &sub : g.node()) {
      for (const auto &in : sub.input())
        reads.push_back(in);
      outerReads(sub, reads);
    }
    for (const auto &o : g.output())
      reads.push_back(o.name());
    for (std::string &r : reads)
      if (!r.empty() && !local.contains(r))
        out.push_back(std::move(r));
  }
}

/// `nodes` and, after each, the nodes of its subgraphs (If's branches),
/// recursively.
void onnx_import::withSubgraphs(ArrayRef<const onnx::NodeProto *> nodes,
                                SmallVectorImpl<const onnx::NodeProto *> &all) {
  for (const onnx::NodeProto *node : nodes) {
    all.push_back(node);
    for (const auto &attr : node->attribute())
      if (attr.has_g()) {
        SmallVector<const onnx::NodeProto *> sub;
        for (const auto &n : attr.g().node())
          sub.push_back(&n);
        withSubgraphs(sub, all);
      }
  }
}

namespace {

LogicalResult ifOp(NodeContext &n) {
  FailureOr<HostTensor> cond = n.constantInput(0, "the condition of If");
  if (failed(cond))
    return failure();
  if (cond->size() != 1)
    return n.error("the condition has " + Twine(cond->size()) + " elements, not one");
  const char *name = cond->getAsDouble(0) != 0 ? "then_branch" : "else_branch";
  const onnx::AttributeProto *branch = n.attr(name);
  if (!branch || !branch->has_g())
    return n.error(Twine("has no ") + name + " graph");
  FailureOr<SmallVector<Value>> outs = n.importSubgraph(branch->g());
  if (failed(outs))
    return failure();
  if (outs->empty() && branch->g().output_size() == 1)
    return success(); // a sequence, set as the node's output
  if (outs->size() != n.numOutputs())
    return n.error(Twine("the ") + name + " has " + Twine(outs->size()) +
                   " outputs, the node " + Twine(n.numOutputs()));
  n.setOutputs(*outs);
  return success();
}

} // namespace

void onnx_import::registerControlOps(OpRegistry &r) {
  r.add("If", 1, ifOp);
  r.sameAs("If", 11, 1); // the branches' output shapes may differ
  r.sameAs("If", 13, 1); // sequences as outputs
  r.sameAs("If", 16, 1); // optionals
  r.sameAs("If", 19, 1); // types added
  r.sameAs("If", 21, 1);
  r.sameAs("If", 23, 1);
  r.sameAs("If", 24, 1);
  r.sameAs("If", 25, 1);
}
