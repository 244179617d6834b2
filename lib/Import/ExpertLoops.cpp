//===- ExpertLoops.cpp - transformers' eager expert loops, batched --------===//
//
// transformers' "eager" Mixture-of-Experts layers (Mixtral, Qwen-MoE, GPT-OSS)
// loop over the experts the batch hits. A trace unrolls that loop into one
// block per expert its example hit:
//
//   M = Transpose(OneHot(idx [T, K], D, [0, 1]), perm [2, 1, 0])   // [D, K, T]
//   per block, e = the block's expert:
//     pos, tok = NonZero(M[e])                     // the (k, t) routed to e
//     y = f(Gather(h, tok), Gather(W, e), .., w[tok, pos])
//     acc = acc + ScatterElements(zeros, tok, y)   // index_add_
//
// NonZero's shape depends on the data, and the number of blocks is the
// number of experts the export's example hit: no static program holds it
// (onnxruntime fails on an input that hits other experts). The first
// block's body, applied to every (t, k) pair with each pair's own expert,
// is the whole layer for any routing: the batched_mm form, whose expert
// GEMMs merak-fuse-experts groups. Before the import, the first block of
// each layer becomes that (pairs token-major, as batched_mm's rows):
//
//   NonZero(M[e])              -> Gather(NonZero(ConstantOfShape(Shape(idx))),
//                                        [1, 0])   // every (k, t): a constant
//   Gather(W, e)               -> Gather(W, ids)   ids = Reshape(idx, [-1])
//   MatMul(x, Transpose(W_e))  -> Squeeze(MatMul(W_ids, Unsqueeze(x, 2)), 2)
//   MatMul(x, W_e)             -> Squeeze(MatMul(Unsqueeze(x, 1), W_ids), 1)
//   Gemm(x, W_e, c)            -> either of the above, + c
//   ScatterElements(d, tok, y) -> d + ReduceSum(Reshape(y, [T, K, ..]), 1)
//
// and every other block's scatter becomes its data (its pairs are counted
// in the first); then the nodes nothing reads go. The block's gathers of
// its tokens and of their routing weights become a broadcast and a reshape
// at import (constant indices that repeat every row in order).
//
// The expert index may be read only by the mask and by gathers of stacked
// [E, ...] parameters, a gathered weight only by those products and by
// element-wise ops (a per-expert bias); the body may read no other
// parameter (it would be one expert's), and every block must gather the
// same weights. Anything else is an error naming the node. A model without
// such a loop is not touched.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

const onnx::AttributeProto *findAttr(const onnx::NodeProto &n, const char *name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t intAttr(const onnx::NodeProto &n, const char *name, int64_t dflt) {
  const onnx::AttributeProto *a = findAttr(n, name);
  return a ? a->i() : dflt;
}

std::vector<int64_t> intsAttr(const onnx::NodeProto &n, const char *name) {
  const onnx::AttributeProto *a = findAttr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

/// The values of a small int64/int32 tensor stored in the proto itself.
std::optional<std::vector<int64_t>> tensorInts(const onnx::TensorProto &t) {
  std::vector<int64_t> v;
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (t.int64_data_size())
      return std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
    v.resize(t.raw_data().size() / sizeof(int64_t));
    std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(int64_t));
    return v;
  }
  if (t.data_type() == onnx::TensorProto::INT32) {
    if (t.int32_data_size())
      return std::vector<int64_t>(t.int32_data().begin(), t.int32_data().end());
    std::vector<int32_t> w(t.raw_data().size() / sizeof(int32_t));
    std::memcpy(w.data(), t.raw_data().data(), w.size() * sizeof(int32_t));
    return std::vector<int64_t>(w.begin(), w.end());
  }
  return std::nullopt;
}

bool isFloat(int32_t type) {
  return type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE ||
         type == onnx::TensorProto::FLOAT16 || type == onnx::TensorProto::BFLOAT16;
}

onnx::TensorProto int64Tensor(const std::vector<int64_t> &values) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims((int64_t)values.size());
  for (int64_t v : values)
    t.add_int64_data(v);
  return t;
}

/// One unrolled iteration of an expert loop.
struct Block {
  int nonZero = -1;              // NonZero(M[e])
  std::string expert;            // e
  int scatter = -1;              // its index_add_ (ScatterElements)
  std::vector<int> gathers;      // Gather(W, e) nodes
  std::vector<std::string> weights; // their W, sorted
};

/// The blocks that read one expert mask M.
struct Layer {
  std::string mask, idx;
  std::vector<Block> blocks;
};

class ExpertLoops {
public:
  ExpertLoops(onnx::ModelProto &m, std::string &error) : g(*m.mutable_graph()), error(error) {
    for (const auto &imp : m.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx")
        opset = imp.version();
  }

  LogicalResult run() {
    if (opset < 13) // the rewrite writes axes as inputs
      return success();
    index();
    std::vector<Layer> layers = findLayers();
    if (layers.empty())
      return success();
    for (Layer &l : layers)
      for (Block &b : l.blocks)
        if (failed(analyse(l, b)))
          return failure();
    for (Layer &l : layers)
      if (failed(rewrite(l)))
        return failure();
    removeDeadNodes();
    return success();
  }

private:
  onnx::GraphProto &g;
  std::string &error;
  int64_t opset = 0;
  int fresh = 0;
  std::unordered_map<std::string, int> producer;
  std::unordered_map<std::string, std::vector<int>> users;
  std::unordered_map<std::string, const onnx::TensorProto *> inits;

  void index() {
    producer.clear();
    users.clear();
    for (const auto &t : g.initializer())
      inits[t.name()] = &t;
    for (int i = 0; i < g.node_size(); ++i) {
      for (const auto &o : g.node(i).output())
        if (!o.empty())
          producer[o] = i;
      for (const auto &in : g.node(i).input())
        if (!in.empty())
          users[in].push_back(i);
    }
  }

  const onnx::NodeProto *def(const std::string &name, const char *op) const {
    auto it = producer.find(name);
    if (it == producer.end() || g.node(it->second).op_type() != op)
      return nullptr;
    return &g.node(it->second);
  }
  const std::vector<int> &usersOf(const std::string &name) const {
    static const std::vector<int> none;
    auto it = users.find(name);
    return it == users.end() ? none : it->second;
  }
  /// A constant input's integers (a Constant node or an initializer).
  std::optional<std::vector<int64_t>> constInts(const std::string &name) const {
    if (auto it = inits.find(name); it != inits.end())
      return tensorInts(*it->second);
    if (const onnx::NodeProto *c = def(name, "Constant"))
      if (const onnx::AttributeProto *v = findAttr(*c, "value"))
        return tensorInts(v->t());
    return std::nullopt;
  }

  LogicalResult fail(const onnx::NodeProto &n, const std::string &why) {
    error = "the eager Mixture-of-Experts loop (transformers' per-expert loop) at " +
            describeNode(n) + ": " + why;
    return failure();
  }

  /// The layers: NonZero(Cast*(Gather(Transpose(OneHot(idx), [2, 1, 0]), e))).
  std::vector<Layer> findLayers() {
    std::vector<Layer> layers;
    std::unordered_map<std::string, size_t> byMask;
    for (int i = 0; i < g.node_size(); ++i) {
      if (g.node(i).op_type() != "NonZero")
        continue;
      std::string src = g.node(i).input(0);
      while (const onnx::NodeProto *c = def(src, "Cast"))
        src = c->input(0);
      const onnx::NodeProto *sel = def(src, "Gather");
      if (!sel || intAttr(*sel, "axis", 0) != 0)
        continue;
      const onnx::NodeProto *tr = def(sel->input(0), "Transpose");
      if (!tr || intsAttr(*tr, "perm") != std::vector<int64_t>{2, 1, 0})
        continue;
      const onnx::NodeProto *oh = def(tr->input(0), "OneHot");
      if (!oh || (intAttr(*oh, "axis", -1) != -1 && intAttr(*oh, "axis", -1) != 2) ||
          constInts(oh->input(2)) != std::vector<int64_t>{0, 1})
        continue;
      auto [it, added] = byMask.try_emplace(sel->input(0), layers.size());
      if (added)
        layers.push_back({sel->input(0), oh->input(0), {}});
      Block b;
      b.nonZero = i;
      b.expert = sel->input(1);
      layers[it->second].blocks.push_back(std::move(b));
    }
    return layers;
  }

  /// The token coordinate of NonZero's result: Transpose([1, 0]) then Split
  /// on axis 1 and Squeeze, or Gather(.., 1) on axis 0.
  std::vector<std::string> tokenCoordinates(const onnx::NodeProto &nz) const {
    std::vector<std::string> toks;
    for (int u : usersOf(nz.output(0))) {
      const onnx::NodeProto &n = g.node(u);
      if (n.op_type() == "Gather" && intAttr(n, "axis", 0) == 0 &&
          constInts(n.input(1)) == std::vector<int64_t>{1})
        toks.push_back(n.output(0));
      if (n.op_type() != "Transpose" || intsAttr(n, "perm") != std::vector<int64_t>{1, 0})
        continue;
      for (int s : usersOf(n.output(0))) {
        const onnx::NodeProto &split = g.node(s);
        if (split.op_type() != "Split" || intAttr(split, "axis", 0) != 1 ||
            split.output_size() != 2)
          continue;
        for (int q : usersOf(split.output(1)))
          if (g.node(q).op_type() == "Squeeze")
            toks.push_back(g.node(q).output(0));
      }
    }
    return toks;
  }

  /// The block's index_add_: a ScatterElements on axis 0 whose indices are
  /// the token coordinate broadcast over the columns.
  int findScatter(const Block &b) const {
    int found = -1;
    std::vector<std::string> work = tokenCoordinates(g.node(b.nonZero));
    std::unordered_set<std::string> seen;
    while (!work.empty()) {
      std::string v = work.back();
      work.pop_back();
      if (!seen.insert(v).second)
        continue;
      for (int u : usersOf(v)) {
        const onnx::NodeProto &n = g.node(u);
        if ((n.op_type() == "Unsqueeze" && constInts(n.input(1)) == std::vector<int64_t>{1}) ||
            (n.op_type() == "Expand" && n.input(0) == v))
          work.push_back(n.output(0));
        else if (n.op_type() == "ScatterElements" && n.input(1) == v &&
                 intAttr(n, "axis", 0) == 0)
          found = found == -1 || found == u ? u : -2;
      }
    }
    return found;
  }

  LogicalResult analyse(const Layer &l, Block &b) {
    const onnx::NodeProto &nz = g.node(b.nonZero);
    b.scatter = findScatter(b);
    if (b.scatter < 0)
      return fail(nz, b.scatter == -1
                          ? "no index_add_ (ScatterElements on axis 0 by the token "
                            "coordinate) takes its tokens"
                          : "more than one scatter takes its tokens");
    const onnx::NodeProto &sc = g.node(b.scatter);
    if (const onnx::AttributeProto *r = findAttr(sc, "reduction");
        r && r->s() != "none" && r->s() != "add")
      return fail(sc, "a scatter with reduction '" + r->s() + "' is not an index_add_");
    for (int u : usersOf(b.expert)) {
      const onnx::NodeProto &n = g.node(u);
      if (n.op_type() != "Gather" || n.input_size() < 2 || n.input(1) != b.expert ||
          intAttr(n, "axis", 0) != 0)
        return fail(n, "it reads the expert index, which only the mask and weight "
                       "gathers may");
      if (n.input(0) == l.mask)
        continue;
      if (!inits.count(n.input(0)))
        return fail(n, "the expert weights '" + n.input(0) +
                           "' are not a parameter (an initializer)");
      b.gathers.push_back(u);
      b.weights.push_back(n.input(0));
    }
    std::sort(b.weights.begin(), b.weights.end());
    if (b.weights.empty())
      return fail(nz, "no expert weights are gathered by the expert index (per-expert "
                      "modules rather than stacked [E, ...] parameters)");
    return checkSharedReads(b);
  }

  /// The block's body (what its pairs and its expert index reach, up to its
  /// scatter) may read a parameter only through the expert index: one read
  /// directly would be that expert's alone, not every pair's.
  LogicalResult checkSharedReads(const Block &b) {
    std::vector<std::string> work = {g.node(b.nonZero).output(0), b.expert};
    std::unordered_set<int> seen;
    while (!work.empty()) {
      std::string v = work.back();
      work.pop_back();
      for (int u : usersOf(v)) {
        if (!seen.insert(u).second)
          continue;
        const onnx::NodeProto &n = g.node(u);
        bool weightGather = std::find(b.gathers.begin(), b.gathers.end(), u) != b.gathers.end();
        for (int i = weightGather ? 1 : 0; i < n.input_size(); ++i) {
          auto it = inits.find(n.input(i));
          if (it == inits.end() || !isFloat(it->second->data_type()))
            continue;
          int64_t elements = 1;
          for (int64_t d : it->second->dims())
            elements *= d;
          if (elements > 1)
            return fail(n, "it reads the parameter '" + n.input(i) +
                               "' directly, not through the expert index (a per-expert "
                               "module?)");
        }
        if (u != b.scatter)
          for (const auto &o : n.output())
            work.push_back(o);
      }
    }
    return success();
  }

  // Node building.
  std::string name(const std::string &hint) {
    return "merak.experts/" + hint + "_" + std::to_string(fresh++);
  }
  onnx::NodeProto &node(const char *op, std::vector<std::string> inputs, std::string out) {
    onnx::NodeProto &n = *g.add_node();
    n.set_op_type(op);
    n.set_name(out);
    for (auto &in : inputs)
      n.add_input(in);
    n.add_output(out);
    return n;
  }
  std::string constant(const std::vector<int64_t> &values) {
    std::string out = name("const");
    onnx::AttributeProto *a = node("Constant", {}, out).add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = int64Tensor(values);
    return out;
  }
  std::string op(const char *type, std::vector<std::string> inputs) {
    std::string out = name(type);
    node(type, std::move(inputs), out);
    return out;
  }

  /// Rewrites product `n` (reading the gathered weights `w` [S, a, b] as
  /// its second input) into the batched form: transposed means x @ W_e^T.
  void batchProduct(onnx::NodeProto &n, const std::string &w, bool transposed,
                    const std::string &bias) {
    std::string x = n.input(0);
    int64_t axis = transposed ? 2 : 1;
    std::string xs = op("Unsqueeze", {x, constant({axis})});
    std::string y = transposed ? op("MatMul", {w, xs}) : op("MatMul", {xs, w});
    std::string axes = constant({axis});
    n.clear_input();
    n.clear_attribute();
    if (bias.empty()) {
      n.set_op_type("Squeeze");
      n.add_input(y);
      n.add_input(axes);
      return;
    }
    n.set_op_type("Add");
    n.add_input(op("Squeeze", {y, axes}));
    n.add_input(bias);
  }

  /// The consumers of one gathered weight `wg` in the template block.
  LogicalResult batchConsumers(const onnx::NodeProto &wg, int64_t weightRank) {
    std::string w = wg.output(0);
    for (int u : std::vector<int>(usersOf(w))) {
      onnx::NodeProto &n = *g.mutable_node(u);
      const std::string &t = n.op_type();
      if (t == "Transpose" && weightRank == 3 &&
          intsAttr(n, "perm") == std::vector<int64_t>{1, 0}) {
        for (int m : std::vector<int>(usersOf(n.output(0)))) {
          onnx::NodeProto &mm = *g.mutable_node(m);
          if (mm.op_type() != "MatMul" || mm.input(1) != n.output(0) || mm.input(0) == w)
            return fail(mm, "it reads a transposed expert weight; only x @ W^T batches");
          batchProduct(mm, w, /*transposed=*/true, "");
        }
      } else if (t == "MatMul" && weightRank == 3 && n.input(1) == w && n.input(0) != w) {
        batchProduct(n, w, /*transposed=*/false, "");
      } else if (t == "Gemm" && weightRank == 3 && n.input(1) == w && n.input(0) != w &&
                 intAttr(n, "transA", 0) == 0 && !findAttr(n, "alpha") &&
                 !findAttr(n, "beta")) {
        batchProduct(n, w, intAttr(n, "transB", 0) != 0, n.input_size() > 2 ? n.input(2) : "");
      } else if ((t == "Add" || t == "Sub" || t == "Mul" || t == "Div") && weightRank == 2) {
        continue; // a per-expert vector: per row once gathered by ids
      } else if (!(t == "Gemm" && weightRank == 2 && n.input_size() > 2 && n.input(2) == w)) {
        return fail(n, "it reads the expert weights gathered by " + describeNode(wg) +
                           " in a way that does not batch over tokens");
      }
    }
    return success();
  }

  LogicalResult rewrite(Layer &l) {
    Block &first = l.blocks.front();
    for (Block &b : l.blocks)
      if (b.weights != first.weights)
        return fail(g.node(b.nonZero), "its block gathers other expert weights than the first");
    // Every (t, k) pair, t-major (NonZero gives the (k, t) coordinates).
    std::string shapeTK = op("Shape", {l.idx});
    std::string pairs = op("ConstantOfShape", {shapeTK});
    onnx::AttributeProto *one = g.mutable_node(g.node_size() - 1)->add_attribute();
    one->set_name("value");
    one->set_type(onnx::AttributeProto::TENSOR);
    *one->mutable_t() = int64Tensor({1});
    onnx::NodeProto &nz = *g.mutable_node(first.nonZero);
    std::string coords = nz.output(0);
    nz.set_input(0, pairs);
    nz.set_output(0, name("pairs"));
    node("Gather", {nz.output(0), constant({1, 0})}, coords);
    std::string ids = op("Reshape", {l.idx, constant({-1})});
    for (int gi : first.gathers) {
      g.mutable_node(gi)->set_input(1, ids);
      int64_t rank = inits.at(g.node(gi).input(0))->dims_size();
      if (failed(batchConsumers(g.node(gi), rank)))
        return failure();
    }
    // The first scatter sums every pair of a token; the others are in it.
    onnx::NodeProto &sc = *g.mutable_node(first.scatter);
    std::string rowShape = op("Slice", {op("Shape", {sc.input(2)}), constant({1}),
                                        constant({INT64_MAX})});
    std::string tk = op("Concat", {shapeTK, rowShape});
    onnx::AttributeProto *axis = g.mutable_node(g.node_size() - 1)->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(0);
    std::string perPair = op("Reshape", {sc.input(2), tk});
    std::string sum = op("ReduceSum", {perPair, constant({1})});
    onnx::AttributeProto *keep = g.mutable_node(g.node_size() - 1)->add_attribute();
    keep->set_name("keepdims");
    keep->set_type(onnx::AttributeProto::INT);
    keep->set_i(0);
    std::string data = sc.input(0);
    sc.set_op_type("Add");
    sc.clear_attribute();
    sc.clear_input();
    sc.add_input(data);
    sc.add_input(sum);
    for (size_t i = 1; i < l.blocks.size(); ++i) {
      onnx::NodeProto &other = *g.mutable_node(l.blocks[i].scatter);
      std::string d = other.input(0);
      other.set_op_type("Identity");
      other.clear_attribute();
      other.clear_input();
      other.add_input(d);
    }
    return success();
  }

  /// Drops the nodes no graph output reads (the other blocks, the hit
  /// experts' NonZero). Names a subgraph reads count as read.
  void removeDeadNodes() {
    index();
    std::vector<char> live(g.node_size(), 0);
    std::vector<std::string> work;
    for (const auto &o : g.output())
      work.push_back(o.name());
    auto subgraphReads = [&](const onnx::GraphProto &sub, auto &self) -> void {
      for (const auto &n : sub.node()) {
        for (const auto &in : n.input())
          work.push_back(in);
        for (const auto &a : n.attribute()) {
          if (a.has_g())
            self(a.g(), self);
          for (const auto &sg : a.graphs())
            self(sg, self);
        }
      }
      for (const auto &o : sub.output())
        work.push_back(o.name());
    };
    while (!work.empty()) {
      std::string v = work.back();
      work.pop_back();
      auto it = producer.find(v);
      if (it == producer.end() || live[it->second])
        continue;
      live[it->second] = 1;
      const onnx::NodeProto &n = g.node(it->second);
      for (const auto &in : n.input())
        work.push_back(in);
      for (const auto &a : n.attribute()) {
        if (a.has_g())
          subgraphReads(a.g(), subgraphReads);
        for (const auto &sg : a.graphs())
          subgraphReads(sg, subgraphReads);
      }
    }
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < g.node_size(); ++i)
      if (live[i])
        *kept.Add() = std::move(*g.mutable_node(i));
    g.mutable_node()->Swap(&kept);
  }
};

} // namespace

LogicalResult onnx_import::batchExpertLoops(onnx::ModelProto &model, std::string &error) {
  return ExpertLoops(model, error).run();
}
