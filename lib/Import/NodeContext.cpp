//===- NodeContext.cpp - the API ONNX op handlers build with --------------===//
#include "GraphImporter.h"

#include "merak/Evaluator/Evaluator.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

Value NodeContext::input(unsigned i) {
  if (!hasInput(i))
    return {};
  return graph.values.lookup(node.input(i));
}

FailureOr<HostTensor> NodeContext::constantInput(unsigned i, StringRef what) {
  ElementsAttr attr;
  Value v = input(i);
  if (!v || !matchPattern(v, m_Constant(&attr))) {
    (void)error(Twine(what) + " (input " + Twine(i) + ", '" +
                (hasInput(i) ? node.input(i) : std::string()) +
                "') must be a compile-time constant");
    return failure();
  }
  // A splat (ConstantOfShape's output) holds one value for any declared
  // size; reading it expands every element.
  if (attr.getNumElements() > kMaxMaterialisedElements) {
    (void)error(Twine(what) + " (input " + Twine(i) + ", '" + node.input(i) + "') has " +
                Twine(attr.getNumElements()) + " elements, too many to read at compile "
                "time (limit " + Twine(kMaxMaterialisedElements) + ")");
    return failure();
  }
  return HostTensor::fromAttr(attr);
}

FailureOr<double> NodeContext::constantScalar(unsigned i, StringRef what) {
  auto t = constantInput(i, what);
  if (failed(t))
    return failure();
  if (t->size() != 1) {
    (void)error(Twine(what) + " must be a scalar, got " + Twine(t->size()) +
                " elements");
    return failure();
  }
  return t->getAsDouble(0);
}

FailureOr<SmallVector<int64_t>> NodeContext::constantInts(unsigned i, StringRef what) {
  auto t = constantInput(i, what);
  if (failed(t))
    return failure();
  if (t->isFloat()) {
    (void)error(Twine(what) + " must be an integer tensor");
    return failure();
  }
  return SmallVector<int64_t>(t->i().begin(), t->i().end());
}

FailureOr<int64_t> NodeContext::constantInt(unsigned i, StringRef what) {
  auto v = constantInts(i, what);
  if (failed(v))
    return failure();
  if (v->size() != 1) {
    (void)error(Twine(what) + " must be a scalar, got " + Twine(v->size()) + " elements");
    return failure();
  }
  return (*v)[0];
}

LogicalResult NodeContext::requireInputs(unsigned count) {
  for (unsigned i = 0; i < std::max(count, numInputs()); ++i)
    if ((i < count && !hasInput(i)) || (hasInput(i) && !input(i)))
      return error("input " + Twine(i) + (i < count ? " is required" : " is given") +
                   " and must be a tensor");
  return success();
}

bool NodeContext::isOutputUsed(unsigned i) const {
  return (int)i < node.output_size() && !node.output(i).empty() &&
         graph.consumed.contains(node.output(i));
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}
int64_t NodeContext::getInt(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}
double NodeContext::getFloat(StringRef name, double dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}
std::string NodeContext::getString(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}
std::optional<SmallVector<int64_t>> NodeContext::getInts(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

FailureOr<std::pair<int64_t, int64_t>> NodeContext::flattenedAt(int64_t axis) {
  auto in = inputType(0);
  if (axis < 0)
    axis += in.getRank();
  if (axis < 0 || axis > in.getRank()) {
    (void)error("axis out of range");
    return failure();
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < in.getRank(); ++d)
    (d < axis ? outer : inner) *= in.getDimSize(d);
  return std::make_pair(outer, inner);
}

FailureOr<int64_t> NodeContext::axis(int64_t a, int64_t rank) {
  int64_t n = a < 0 ? a + rank : a;
  // A scalar has no axis: every caller indexes the shape with the result.
  if (n < 0 || n >= rank) {
    (void)error("axis " + Twine(a) + " is out of range for rank " + Twine(rank));
    return failure();
  }
  return n;
}

FailureOr<int64_t> NodeContext::constantAxis(unsigned i, int64_t rank) {
  auto a = constantInts(i, "axis");
  if (failed(a))
    return failure();
  if (a->size() != 1)
    return (void)error("axis must be a scalar"), failure();
  return axis((*a)[0], rank);
}

SmallVector<Value> NodeContext::finish(Operation *op) {
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(op->getContext(), loc, op->getOperands(),
                                      op->getRawDictionaryAttrs(),
                                      op->getPropertiesStorage(),
                                      op->getRegions(), types)) ||
        types.size() != op->getNumResults()) {
      (void)error("cannot build '" + op->getName().getStringRef() + "'");
      op->erase();
      failedNode = true;
      return {};
    }
    for (auto [res, t] : llvm::zip(op->getResults(), types))
      res.setType(t);
  }
  for (Type t : op->getResultTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    auto count = rt ? checkedNumElements(rt.getShape()) : FailureOr<int64_t>(0);
    if (failed(count) || *count > kMaxElements) {
      (void)error("result of '" + op->getName().getStringRef() +
                  "' has absurd dimensions (element count overflows)");
      op->erase();
      failedNode = true;
      return {};
    }
  }
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    (void)error("cannot build '" + op->getName().getStringRef() + "'");
    op->erase();
    failedNode = true;
    return {};
  }
  auto folded = foldWithEvaluator(op, graph.options.foldMaxElements);
  if (failed(folded))
    return SmallVector<Value>(op->getResults());
  SmallVector<Value> out;
  for (Attribute a : *folded)
    out.push_back(ConstantOp::create(b, loc, cast<ElementsAttr>(a)));
  op->erase();
  return out;
}

SmallVector<Value> NodeContext::createSplit(Value input, int64_t axis,
                                            ArrayRef<int64_t> sizes) {
  if (failedNode || !input) {
    failedNode = true;
    return {};
  }
  SmallVector<Type> placeholders(sizes.size(), b.getNoneType());
  auto op = SplitOp::create(b, loc, placeholders, input, axis, sizes);
  return finish(op);
}

Value NodeContext::constant(const HostTensor &t) {
  std::string hint = node.name().empty() && node.output_size() ? node.output(0)
                                                                : node.name();
  return ConstantOp::create(b, loc, graph.makeElements(t, hint));
}

std::string onnx_import::describeNode(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return "node '" + node.name() + "'";
  for (const auto &out : node.output())
    if (!out.empty())
      return "node <unnamed, output '" + out + "'>";
  return "unnamed node";
}

// The helpers below accept a null Value (from an earlier failed create)
// and then do nothing, like `create`: the node's first error is reported.

Value NodeContext::scalarLike(Value like, double v) {
  if (failedNode || !like)
    return {};
  auto et = cast<RankedTensorType>(like.getType()).getElementType();
  HostTensor t(RankedTensorType::get({}, et));
  t.setFromDouble(0, v);
  return constant(t);
}

Value NodeContext::broadcastTo(Value v, ArrayRef<int64_t> shape) {
  if (failedNode || !v)
    return {};
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  return create<BroadcastOp>(RankedTensorType::get(shape, t.getElementType()), v);
}

Value NodeContext::reshape(Value v, ArrayRef<int64_t> shape) {
  if (failedNode || !v)
    return {};
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  return create<ReshapeOp>(RankedTensorType::get(shape, t.getElementType()), v);
}

SmallVector<Value> NodeContext::unstack(Value v, int64_t dim) {
  if (failedNode || !v)
    return {};
  auto t = cast<RankedTensorType>(v.getType());
  int64_t len = t.getDimSize(dim);
  SmallVector<int64_t> shape(t.getShape());
  shape.erase(shape.begin() + dim);
  SmallVector<Value> out;
  for (Value p : createSplit(v, dim, SmallVector<int64_t>(len, 1)))
    out.push_back(reshape(p, shape));
  return out;
}

Value NodeContext::stack(ArrayRef<Value> values, int64_t axis) {
  if (values.empty() || failedNode)
    return {};
  auto t = cast<RankedTensorType>(values[0].getType());
  FailureOr<int64_t> a = this->axis(axis, t.getRank() + 1);
  if (failed(a))
    return {};
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.begin() + *a, 1);
  SmallVector<Value> parts;
  for (Value v : values) {
    if (cast<RankedTensorType>(v.getType()).getShape() != t.getShape()) {
      (void)error("the values to stack (a loop's outputs per iteration) differ in shape");
      return {};
    }
    parts.push_back(reshape(v, shape));
  }
  return parts.size() == 1 ? parts[0] : create<ConcatOp>(ValueRange(parts), *a);
}

Value NodeContext::sliceDim(Value v, int64_t dim, int64_t start, int64_t limit,
                           int64_t stride) {
  if (failedNode || !v)
    return {};
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> starts(t.getRank(), 0), limits(t.getShape()), strides(t.getRank(), 1);
  starts[dim] = start;
  limits[dim] = limit;
  strides[dim] = stride;
  return create<SliceOp>(v, starts, limits, strides);
}

/// How many times constant indices take each of `rows` rows in order
/// (0,..,0, 1,..,1, .., rows-1, r times each), or 0 (also for indices that
/// are not integers, which merak.gather's verifier then refuses).
static int64_t repeatsOfRows(const HostTensor &idx, int64_t rows) {
  int64_t total = idx.size();
  if (rows <= 0 || total == 0 || total % rows || idx.isFloat() ||
      idx.i().size() != size_t(total))
    return 0;
  int64_t r = total / rows;
  for (int64_t e = 0; e < total; ++e) {
    int64_t v = idx.i()[e];
    if ((v < 0 ? v + rows : v) != e / r)
      return 0;
  }
  return r;
}

Value NodeContext::gather(Value data, Value indices, int64_t axis) {
  if (failedNode || !data || !indices)
    return {};
  auto type = cast<RankedTensorType>(data.getType());
  auto idxType = cast<RankedTensorType>(indices.getType());
  ElementsAttr attr;
  if (matchPattern(indices, m_Constant(&attr)) && !matchPattern(data, m_Constant())) {
    FailureOr<HostTensor> idx = HostTensor::fromAttr(attr);
    if (int64_t r = succeeded(idx) ? repeatsOfRows(*idx, type.getDimSize(axis)) : 0) {
      SmallVector<int64_t> split(type.getShape()), out(type.getShape().take_front(axis));
      split.insert(split.begin() + axis + 1, 1);
      llvm::append_range(out, idxType.getShape());
      llvm::append_range(out, type.getShape().drop_front(axis + 1));
      Value v = reshape(data, split);
      split[axis + 1] = r;
      return reshape(broadcastTo(v, split), out);
    }
  }
  return create<GatherOp>(data, indices, axis);
}

void NodeContext::setOutputs(ArrayRef<Value> vals) {
  if (failedNode)
    return;
  for (auto [i, v] : llvm::enumerate(vals))
    if ((int)i < node.output_size() && !node.output(i).empty() && v)
      graph.values[node.output(i)] = v;
}

const SmallVector<Value> *NodeContext::inputSequence(unsigned i) {
  if (!hasInput(i))
    return nullptr;
  auto it = graph.sequences.find(node.input(i));
  return it == graph.sequences.end() ? nullptr : &it->second;
}

void NodeContext::setSequenceOutput(ArrayRef<Value> items) {
  if (failedNode || node.output_size() == 0 || node.output(0).empty())
    return;
  if (llvm::any_of(items, [](Value v) { return !v; }))
    return;
  graph.sequences[node.output(0)] = SmallVector<Value>(items);
}

// An error fails the node even when a helper that reported it returns a
// null Value and its handler carries on (importNodes checks hasFailed()).
LogicalResult NodeContext::error(const Twine &msg) {
  emitError(loc) << node.op_type() << " " << describeNode(node) << ": " << msg;
  failedNode = true;
  return failure();
}

DropoutLedger &NodeContext::dropouts() { return graph.dropouts; }

void NodeContext::readLeniently(StringRef what) {
  auto reason = llvm::find_if(graph.lenientReads, [&](auto &r) { return r.first == what; });
  if (reason == graph.lenientReads.end())
    reason = &graph.lenientReads.emplace_back(what.str(), SmallVector<std::string>());
  reason->second.push_back(node.name().empty() ? describeNode(node) : "'" + node.name() + "'");
}

std::string onnx_import::listed(ArrayRef<std::string> items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < 3; ++i)
    out += (i ? ", " : "") + items[i];
  if (items.size() > 3)
    out += " and " + std::to_string(items.size() - 3) + " more";
  return out;
}

bool NodeContext::exportTrainsBatchNorm() {
  auto it = graph.exportNormModules.find(&node);
  if (it == graph.exportNormModules.end())
    return false;
  graph.exportTrainingNorms.push_back("'" + it->second + "'");
  return true;
}

LogicalResult NodeContext::unsupported(const Twine &what) {
  emitError(loc) << "unsupported " << what << " in ONNX op '" << node.op_type()
                 << "' (" << describeNode(node) << ", opset " << opset << ")";
  failedNode = true;
  return failure();
}

FailureOr<SmallVector<Value>> NodeContext::importSubgraph(const onnx::GraphProto &g,
                                                          ArrayRef<Value> inputs) {
  if (g.initializer_size() || g.sparse_initializer_size()) {
    (void)unsupported("initializers inside a subgraph");
    return failure();
  }
  if (g.input_size() != (int)inputs.size()) {
    (void)error("its subgraph '" + g.name() + "' declares " + Twine(g.input_size()) +
                " inputs, the node binds " + Twine(inputs.size()));
    return failure();
  }
  // Bind the inputs (a loop body's), remembering the outer values their
  // names hide.
  SmallVector<std::pair<std::string, Value>> hidden;
  for (auto [decl, v] : llvm::zip(g.input(), inputs)) {
    if (!v) {
      (void)unsupported("a sequence or optional bound to the subgraph input '" + decl.name() +
                        "'");
      return failure();
    }
    if (decl.type().has_tensor_type() && decl.type().tensor_type().elem_type() &&
        convertDataType(getContext(), decl.type().tensor_type().elem_type()) !=
            cast<RankedTensorType>(v.getType()).getElementType()) {
      (void)error("its subgraph's input '" + decl.name() + "' is declared " +
                  dataTypeName(decl.type().tensor_type().elem_type()) +
                  ", the node binds another element type");
      return failure();
    }
    hidden.emplace_back(decl.name(), graph.values.lookup(decl.name()));
    graph.values[decl.name()] = v;
  }
  SmallVector<const onnx::NodeProto *> nodes;
  for (const auto &sub : g.node())
    nodes.push_back(&sub);
  // A loop body's nodes count against the unroll budget (an empty body as
  // one, so that a loop that never stops still reaches it).
  if (!inputs.empty() &&
      (graph.unrolledNodes += std::max(g.node_size(), 1)) > kMaxUnrolledNodes) {
    (void)error("its loops unroll to more than " + Twine(kMaxUnrolledNodes) +
                " nodes (nested loops multiply): loops unroll at compile time");
    return failure();
  }
  // The subgraph's names are its own: once its outputs are read they leave
  // the scope, so that no later outer node (or iteration) sees them.
  auto forgetLocals = [&] {
    for (const auto &sub : g.node())
      for (const auto &o : sub.output()) {
        graph.values.erase(o);
        graph.sequences.erase(o);
      }
    // In reverse: an input name bound twice gets back its outermost value.
    for (auto &[name, outer] : llvm::reverse(hidden))
      if (outer)
        graph.values[name] = outer;
      else
        graph.values.erase(name);
  };
  // The subgraph's ops were checked with the graph's (checkSupported).
  if (failed(graph.importNodes(nodes))) {
    failedNode = true;
    return failure();
  }
  SmallVector<Value> outs;
  for (const auto &o : g.output()) {
    Value v = graph.values.lookup(o.name());
    if (!v && inputs.empty() && g.output_size() == 1 && graph.sequences.count(o.name())) {
      // A sequence (of static length) passes through as the node's.
      SmallVector<Value> items = graph.sequences[o.name()];
      forgetLocals();
      setSequenceOutput(items);
      return outs;
    }
    if (!v) {
      (void)error("subgraph output '" + o.name() + "' has no value");
      return failure();
    }
    outs.push_back(v);
  }
  forgetLocals();
  return outs;
}
