//===- OnnxOpsControl.cpp - control flow decided at compile time ----------===//
//
// merak's programs are static, so control flow imports only where it is
// decided at compile time:
//  - an If whose condition folds to a constant (the expansions of functions
//    such as AffineGrid branch on the input's rank or an attribute) is the
//    chosen branch, inlined: its nodes import into the enclosing function
//    (seeing every outer value) and its outputs are the If's;
//  - a Loop whose trip count and condition fold to constants, and a Scan
//    (whose trip count is its inputs' static length), unroll: the body
//    imports once per iteration, its inputs bound to that iteration's
//    values (the iteration number a constant, so a body that slices with
//    it folds):
//
//      Loop(M = 3, cond = true, v0) { i, c, v => c, f(v, i), g(v) }
//        => v1 = f(v0, 0); v2 = f(v1, 1); v3 = f(v2, 2)
//           outputs: v3, stack([g(v0), g(v1), g(v2)], 0)
//      Scan(s0, x [T, ..]) { s, xt => h(s, xt), o(s, xt) }
//        => x_0 .. x_T-1 = split(x, T) (one split: its gradient a concat)
//           s_t+1 = h(s_t, x_t); outputs: s_T, stack(o(s_t, x_t), axis)
//
//    their gradients are the body's ops' own.
// A condition or trip count computed at run time is an error naming it. Also
// the walks over subgraphs the importer's sort and checks use.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include "mlir/IR/Matchers.h"
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


int64_t countNodes(const onnx::GraphProto &g) {
  SmallVector<const onnx::NodeProto *> top, all;
  for (const auto &node : g.node())
    top.push_back(&node);
  withSubgraphs(top, all);
  return all.size();
}

/// An error when `trips` iterations of `body` would exceed kMaxUnrolledNodes.
LogicalResult checkUnrollSize(NodeContext &n, const onnx::GraphProto &body, int64_t trips) {
  int64_t nodes = std::max<int64_t>(countNodes(body), 1);
  if (trips > kMaxUnrolledNodes / nodes)
    return n.error("unrolls to " + Twine(trips) + " iterations of a body of " + Twine(nodes) +
                   " nodes, more than merak unrolls (" + Twine(kMaxUnrolledNodes) +
                   " nodes: loops unroll at compile time)");
  return success();
}

/// The body graph of a Loop or Scan.
const onnx::GraphProto *bodyOf(NodeContext &n) {
  const onnx::AttributeProto *body = n.attr("body");
  if (!body || !body->has_g()) {
    (void)n.error("has no body graph");
    return nullptr;
  }
  return &body->g();
}

/// The values stacked along `axis` (NodeContext::stack), in reverse order
/// for `reverse` (Scan's prepending outputs).
Value stackInOrder(NodeContext &n, ArrayRef<Value> values, int64_t axis, bool reverse) {
  SmallVector<Value> order(values);
  if (reverse)
    std::reverse(order.begin(), order.end());
  return n.stack(order, axis);
}

/// An integer attribute list of `count` entries (default zeros).
FailureOr<SmallVector<int64_t>> intsOf(NodeContext &n, StringRef name, int64_t count) {
  SmallVector<int64_t> v = n.getInts(name).value_or(SmallVector<int64_t>(count, 0));
  if ((int64_t)v.size() != count)
    return (void)n.error(Twine(name) + " has " + Twine(v.size()) + " entries, expected " +
                   Twine(count)),
           failure();
  return v;
}

/// One run of a Scan body over the states `states` and the scan inputs
/// `inputs` (each [T, ..] along `inAxes`): the final states, then each
/// scan output stacked along `outAxes`.
FailureOr<SmallVector<Value>> runScan(NodeContext &n, const onnx::GraphProto &body,
                                      SmallVector<Value> states, ArrayRef<Value> inputs,
                                      ArrayRef<int64_t> inAxes, ArrayRef<int64_t> inDirs,
                                      ArrayRef<int64_t> outAxes, ArrayRef<int64_t> outDirs) {
  // The trip count (and its size check) before anything is cut.
  int64_t trips = -1;
  SmallVector<int64_t> axes;
  for (auto [j, x] : llvm::enumerate(inputs)) {
    auto t = cast<RankedTensorType>(x.getType());
    FailureOr<int64_t> axis = n.axis(inAxes[j], t.getRank());
    if (failed(axis))
      return failure();
    int64_t len = t.getDimSize(*axis);
    if (trips >= 0 && len != trips)
      return (void)n.error("its scan inputs have lengths " + Twine(trips) + " and " + Twine(len)),
             failure();
    trips = len;
    axes.push_back(*axis);
  }
  if (trips == 0)
    return (void)n.unsupported("a Scan over zero iterations"), failure();
  if (failed(checkUnrollSize(n, body, trips)))
    return failure();
  SmallVector<SmallVector<Value>> slices;
  for (auto [j, x] : llvm::enumerate(inputs)) {
    slices.push_back(n.unstack(x, axes[j]));
    if (inDirs[j])
      std::reverse(slices.back().begin(), slices.back().end());
  }
  if (n.hasFailed())
    return failure();
  size_t numStates = states.size();
  SmallVector<SmallVector<Value>> scans(outAxes.size());
  for (int64_t t = 0; t < trips; ++t) {
    SmallVector<Value> bound(states);
    for (auto &s : slices)
      bound.push_back(s[t]);
    FailureOr<SmallVector<Value>> outs = n.importSubgraph(body, bound);
    if (failed(outs))
      return failure();
    if (outs->size() != numStates + scans.size())
      return (void)n.error("its body has " + Twine(outs->size()) + " outputs, expected " +
                     Twine(numStates + scans.size())),
             failure();
    states.assign(outs->begin(), outs->begin() + numStates);
    for (auto [j, list] : llvm::enumerate(scans))
      list.push_back((*outs)[numStates + j]);
  }
  for (auto [j, list] : llvm::enumerate(scans))
    states.push_back(stackInOrder(n, list, outAxes[j], outDirs[j] != 0));
  if (n.hasFailed())
    return failure();
  return states;
}

/// Scan-9 and later: N states, then M scan inputs (num_scan_inputs), each
/// cut along its axis.
LogicalResult scanOp(NodeContext &n) {
  const onnx::GraphProto *body = bodyOf(n);
  if (!body)
    return failure();
  int64_t m = n.getInt("num_scan_inputs", 0);
  int64_t numIn = n.numInputs();
  if (m < 1 || m > numIn)
    return n.error("num_scan_inputs is " + Twine(m) + ", with " + Twine(numIn) + " inputs");
  int64_t states = numIn - m, k = (int64_t)n.numOutputs() - states;
  if (k < 0)
    return n.error("has " + Twine(n.numOutputs()) + " outputs, fewer than its " +
                   Twine(states) + " states");
  auto inAxes = intsOf(n, "scan_input_axes", m);
  auto inDirs = intsOf(n, "scan_input_directions", m);
  auto outAxes = intsOf(n, "scan_output_axes", k);
  auto outDirs = intsOf(n, "scan_output_directions", k);
  if (failed(inAxes) || failed(inDirs) || failed(outAxes) || failed(outDirs))
    return failure();
  SmallVector<Value> init, xs;
  for (int64_t i = 0; i < numIn; ++i) {
    if (!n.hasInput(i))
      return n.error("input " + Twine(i) + " is missing");
    if (!n.input(i))
      return n.unsupported("a sequence or optional as input " + Twine(i));
    (i < states ? init : xs).push_back(n.input(i));
  }
  FailureOr<SmallVector<Value>> outs =
      runScan(n, *body, init, xs, *inAxes, *inDirs, *outAxes, *outDirs);
  if (failed(outs))
    return failure();
  n.setOutputs(*outs);
  return success();
}

/// Scan-8: an optional sequence_lens, then N states and M scan inputs, all
/// with a batch axis 0 the body does not see (the scan axis is 1): one run
/// per batch row, stacked back.
LogicalResult scan8Op(NodeContext &n) {
  const onnx::GraphProto *body = bodyOf(n);
  if (!body)
    return failure();
  int64_t m = n.getInt("num_scan_inputs", 0);
  int64_t numIn = (int64_t)n.numInputs() - 1;
  if (m < 1 || m > numIn)
    return n.error("num_scan_inputs is " + Twine(m) + ", with " + Twine(numIn) +
                   " inputs after sequence_lens");
  int64_t states = numIn - m, k = (int64_t)n.numOutputs() - states;
  if (k < 0)
    return n.error("has " + Twine(n.numOutputs()) + " outputs, fewer than its " +
                   Twine(states) + " states");
  auto dirs = intsOf(n, "directions", m);
  if (failed(dirs))
    return failure();
  SmallVector<Value> all;
  for (int64_t i = 1; i <= numIn; ++i) {
    if (!n.hasInput(i))
      return n.error("input " + Twine(i) + " is missing");
    if (!n.input(i))
      return n.unsupported("a sequence or optional as input " + Twine(i));
    auto t = n.inputType(i);
    if (t.getRank() < (i <= states ? 1 : 2))
      return n.error("input " + Twine(i) + " has no batch axis");
    all.push_back(n.input(i));
  }
  int64_t batch = n.inputType(1).getDimSize(0);
  if (llvm::any_of(all, [&](Value v) {
        return cast<RankedTensorType>(v.getType()).getDimSize(0) != batch;
      }))
    return n.error("its inputs' batch axes differ");
  int64_t seq = n.inputType(states + 1).getDimSize(1);
  // Every row unrolls the body over the sequence.
  if (seq == 0)
    return n.unsupported("a Scan over zero iterations");
  if (batch > kMaxUnrolledNodes / seq || failed(checkUnrollSize(n, *body, batch * seq)))
    return batch > kMaxUnrolledNodes / seq
               ? n.error("unrolls " + Twine(batch) + " rows of " + Twine(seq) +
                         " iterations, more than merak unrolls")
               : failure();
  if (n.hasInput(0)) {
    FailureOr<SmallVector<int64_t>> lens = n.constantInts(0, "sequence_lens of Scan");
    if (failed(lens))
      return failure();
    if (llvm::any_of(*lens, [&](int64_t l) { return l != seq; }))
      return n.unsupported("sequence_lens shorter than the sequence (" + Twine(seq) + ")");
  }
  SmallVector<SmallVector<Value>> rows;
  for (Value v : all)
    rows.push_back(n.unstack(v, 0));
  if (n.hasFailed())
    return failure();
  SmallVector<int64_t> zeros(m, 0), outZeros(k, 0);
  SmallVector<SmallVector<Value>> perOutput(states + k);
  for (int64_t b = 0; b < batch; ++b) {
    SmallVector<Value> init, xs;
    for (int64_t i = 0; i < numIn; ++i)
      (i < states ? init : xs).push_back(rows[i][b]);
    FailureOr<SmallVector<Value>> outs =
        runScan(n, *body, init, xs, zeros, *dirs, outZeros, outZeros);
    if (failed(outs))
      return failure();
    for (auto [j, v] : llvm::enumerate(*outs))
      perOutput[j].push_back(v);
  }
  SmallVector<Value> results;
  for (auto &list : perOutput)
    results.push_back(n.stack(list, 0));
  if (n.hasFailed())
    return failure();
  n.setOutputs(results);
  return success();
}

/// Loop: M (optional), cond (optional), then the loop-carried values; the
/// body maps (iteration, cond, carried) to (cond, carried, scan outputs).
LogicalResult loopOp(NodeContext &n) {
  const onnx::GraphProto *body = bodyOf(n);
  if (!body)
    return failure();
  std::optional<int64_t> maxTrips;
  if (n.hasInput(0)) {
    // An integer: torch exports a while loop with M = INT64_MAX.
    FailureOr<int64_t> m = n.constantInt(0, "the trip count of Loop");
    if (failed(m))
      return failure();
    maxTrips = *m;
  }
  bool cond = true;
  if (n.hasInput(1)) {
    FailureOr<double> c = n.constantScalar(1, "the condition of Loop");
    if (failed(c))
      return failure();
    cond = *c != 0;
  }
  int64_t numCarried = std::max<int64_t>((int64_t)n.numInputs() - 2, 0);
  int64_t k = (int64_t)n.numOutputs() - numCarried;
  if (k < 0)
    return n.error("has " + Twine(n.numOutputs()) + " outputs, fewer than its " +
                   Twine(numCarried) + " loop-carried values");
  SmallVector<Value> carried;
  for (int64_t i = 0; i < numCarried; ++i) {
    if (!n.hasInput(2 + i))
      return n.error("loop-carried input " + Twine(2 + i) + " is missing");
    if (!n.input(2 + i))
      return n.unsupported("a sequence or optional as a loop-carried value");
    carried.push_back(n.input(2 + i));
  }
  // A loop whose condition never turns false stops at the unroll budget
  // (NodeContext::importSubgraph charges every iteration).
  MLIRContext *ctx = n.getContext();
  HostTensor cv(RankedTensorType::get({}, IntegerType::get(ctx, 1)));
  cv.setFromInt(0, 1);
  Value condIn = n.constant(cv);
  SmallVector<SmallVector<Value>> scans(k);
  int64_t iter = 0;
  for (; cond && (!maxTrips || iter < *maxTrips); ++iter) {
    HostTensor iv(RankedTensorType::get({}, IntegerType::get(ctx, 64)));
    iv.setFromInt(0, iter);
    SmallVector<Value> bound{n.constant(iv), condIn};
    bound.append(carried);
    FailureOr<SmallVector<Value>> outs = n.importSubgraph(*body, bound);
    if (failed(outs))
      return failure();
    if ((int64_t)outs->size() != 1 + numCarried + k)
      return n.error("its body has " + Twine(outs->size()) + " outputs, expected " +
                     Twine(1 + numCarried + k));
    // A body that passes its condition through runs all M iterations: a
    // loop too long to unroll is refused now, not after importing its limit.
    if (iter == 0 && (*outs)[0] == bound[1] && maxTrips &&
        failed(checkUnrollSize(n, *body, *maxTrips)))
      return failure();
    ElementsAttr c;
    if (!matchPattern((*outs)[0], m_Constant(&c)) || c.getNumElements() != 1)
      return n.error("the condition its body computes ('" + body->output(0).name() +
                     "', iteration " + Twine(iter) +
                     ") must be a compile-time constant: loops unroll at compile time");
    FailureOr<HostTensor> ct = HostTensor::fromAttr(c);
    if (failed(ct))
      return n.error("cannot read the condition its body computes");
    cond = ct->getAsDouble(0) != 0;
    carried.assign(outs->begin() + 1, outs->begin() + 1 + numCarried);
    for (auto [j, list] : llvm::enumerate(scans))
      list.push_back((*outs)[1 + numCarried + j]);
  }
  if (iter == 0 && k > 0)
    return n.unsupported("a Loop with scan outputs that runs no iteration");
  for (auto &list : scans)
    carried.push_back(n.stack(list, 0));
  if (n.hasFailed())
    return failure();
  n.setOutputs(carried);
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
  r.add("Loop", 1, loopOp);
  // 11: the carried values' shapes may change between iterations (each
  // unrolled iteration has its own); 13: sequences (refused by name as
  // the body's outputs); 16: optionals; later: types added.
  for (int64_t v : {11, 13, 16, 19, 21, 23, 24, 25})
    r.sameAs("Loop", v, 1);
  r.add("Scan", 8, scan8Op);
  r.add("Scan", 9, scanOp);
  // 11: negative axes (scanOp normalises them); later: types added.
  for (int64_t v : {11, 16, 19, 21, 23, 24, 25})
    r.sameAs("Scan", v, 9);
}
