//===- OnnxOpsControl.cpp - If with a compile-time condition --------------===//
//
// merak's programs are static, so control flow imports only where it is
// decided at compile time: an If whose condition folds to a constant (the
// expansions of functions such as AffineGrid branch on the input's rank or
// an attribute) is the chosen branch, inlined: its nodes import into the
// enclosing function (seeing every outer value) and its outputs are the
// If's. A condition computed at run time is an error naming it; Loop and
// Scan stay unsupported.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

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
