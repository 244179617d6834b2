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
// transformers 4.x's blocks hold a module per expert and loop over
// range(E): every expert has a block, whose body reads its own parameters.
// The j-th parameter of every block is stacked, in expert order, into
// Concat(Unsqueeze(P_e, 0)) [E, ...], which the first block gathers by ids
// as above. dynamo writes the one-hot as Equal(Unsqueeze(idx, -1),
// Range(0, D, 1)), the coordinates with Slice, and index_put_ as a
// ScatterND by the token coordinate [n, 1]: the same rewrite.
//
// Every block must be the first's code, node for node (alignBlocks): the
// same ops and attributes, and from outside the body the same or equally
// computed values, except the expert index, the mask, the running sum and
// (per-expert modules) each block's own parameters. The expert index may
// be read only by the mask and by gathers of stacked [E, ...] parameters;
// a gathered weight only by those products and by element-wise ops (a
// per-expert bias); stacked weights and parameters read directly do not
// mix. Anything else is an error naming the node. A model without such a
// loop is not touched.
//
//===----------------------------------------------------------------------===//
#include "ProtoGraph.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// One unrolled iteration of an expert loop.
struct Block {
  int nonZero = -1;                 // NonZero(M[e])
  std::string expert;               // e
  int scatter = -1;                 // its index_add_ (ScatterElements)
  std::vector<int> gathers;         // Gather(W, e) nodes
  std::vector<std::string> weights; // their W, sorted
  /// Its body in node order: what its pairs and its expert index reach, up
  /// to its scatter, and the nodes that only prepare a parameter for them.
  std::vector<int> body;
  /// The per-expert parameters it reads directly, (node, input), in body
  /// order. Only per-expert modules (no gathers) may.
  std::vector<std::pair<int, int>> direct;
};

/// The blocks that read one expert mask M.
struct Layer {
  std::string mask, idx, depth;
  std::vector<Block> blocks;
};

class ExpertLoops : ProtoGraph {
public:
  ExpertLoops(onnx::ModelProto &m, std::string &error)
      : ProtoGraph(*m.mutable_graph(), "merak.experts/"), error(error) {
    for (const auto &imp : m.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx")
        opset = imp.version();
  }

  LogicalResult run() {
    if (opset < 13) // the rewrite writes axes as inputs
      return success();
    index();
    // A node without outputs is malformed (every ONNX op has one): the
    // importer's schema check names it; nothing here may index its outputs.
    for (const onnx::NodeProto &n : g.node())
      if (n.output_size() == 0)
        return success();
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
  std::string &error;
  int64_t opset = 0;

  LogicalResult fail(const onnx::NodeProto &n, const std::string &why) {
    error = "the eager Mixture-of-Experts loop (transformers' per-expert loop) "
            "at " +
            describeNode(n) + ": " + why;
    return failure();
  }

  /// The layers: NonZero(Cast*(Gather(Transpose(OneHot(idx), [2, 1, 0]), e))).
  std::vector<Layer> findLayers() {
    std::vector<Layer> layers;
    std::unordered_map<std::string, size_t> byMask;
    for (int i = 0; i < g.node_size(); ++i) {
      if (g.node(i).op_type() != "NonZero" || g.node(i).input_size() < 1)
        continue;
      std::string src = g.node(i).input(0);
      while (const onnx::NodeProto *c = def(src, "Cast"))
        src = c->input(0);
      const onnx::NodeProto *sel = def(src, "Gather");
      if (!sel || sel->input_size() < 2 || intAttr(*sel, "axis", 0) != 0)
        continue;
      const onnx::NodeProto *tr = def(sel->input(0), "Transpose");
      if (!tr || tr->input_size() < 1 || intsAttr(*tr, "perm") != std::vector<int64_t>{2, 1, 0})
        continue;
      std::optional<std::pair<std::string, std::string>> oneHot = oneHotOf(tr->input(0));
      if (!oneHot)
        continue;
      auto [it, added] = byMask.try_emplace(sel->input(0), layers.size());
      if (added)
        layers.push_back({sel->input(0), oneHot->first, oneHot->second, {}});
      Block b;
      b.nonZero = i;
      b.expert = sel->input(1);
      layers[it->second].blocks.push_back(std::move(b));
    }
    return layers;
  }

  /// (indices, depth) of a one-hot [T, K, D] of top-k indices: OneHot(idx,
  /// D, [0, 1]) (TorchScript) or Equal(Unsqueeze(idx, -1), Range(0, D, 1))
  /// (dynamo), either through casts.
  std::optional<std::pair<std::string, std::string>> oneHotOf(const std::string &v) const {
    std::string x = skipCasts(v);
    if (const onnx::NodeProto *oh = def(x, "OneHot")) {
      if (oh->input_size() < 3)
        return std::nullopt;
      int64_t axis = intAttr(*oh, "axis", -1);
      if ((axis == -1 || axis == 2) && constInts(oh->input(2)) == std::vector<int64_t>{0, 1})
        return std::make_pair(oh->input(0), oh->input(1));
      return std::nullopt;
    }
    const onnx::NodeProto *eq = def(x, "Equal");
    if (!eq || eq->input_size() < 2)
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const onnx::NodeProto *un = def(eq->input(side), "Unsqueeze");
      const onnx::NodeProto *range = def(eq->input(1 - side), "Range");
      if (!un || !range || un->input_size() < 2 || range->input_size() < 3 ||
          (constInts(un->input(1)) != std::vector<int64_t>{-1} &&
           constInts(un->input(1)) != std::vector<int64_t>{2}) ||
          constInts(skipCasts(range->input(0))) != std::vector<int64_t>{0} ||
          constInts(skipCasts(range->input(2))) != std::vector<int64_t>{1})
        continue;
      return std::make_pair(un->input(0), skipCasts(range->input(1)));
    }
    return std::nullopt;
  }

  /// The token coordinate of NonZero's result: Transpose([1, 0]) then Split
  /// on axis 1 (or Slice [1:2] on axis 1) and Squeeze, or Gather(.., 1) on
  /// axis 0.
  std::vector<std::string> tokenCoordinates(const onnx::NodeProto &nz) const {
    std::vector<std::string> toks;
    for (int u : usersOf(nz.output(0))) {
      const onnx::NodeProto &n = g.node(u);
      if (n.op_type() == "Gather" && n.input_size() > 1 && intAttr(n, "axis", 0) == 0 &&
          constInts(n.input(1)) == std::vector<int64_t>{1})
        toks.push_back(n.output(0));
      if (n.op_type() != "Transpose" || intsAttr(n, "perm") != std::vector<int64_t>{1, 0})
        continue;
      for (int s : usersOf(n.output(0))) {
        const onnx::NodeProto &part = g.node(s);
        std::string column;
        if (part.op_type() == "Split" && intAttr(part, "axis", 0) == 1 && part.output_size() == 2)
          column = part.output(1);
        else if (part.op_type() == "Slice" && part.input_size() >= 4 &&
                 constInts(part.input(1)) == std::vector<int64_t>{1} &&
                 constInts(part.input(2)) == std::vector<int64_t>{2} &&
                 constInts(part.input(3)) == std::vector<int64_t>{1} &&
                 (part.input_size() < 5 || constInts(part.input(4)) == std::vector<int64_t>{1}))
          column = part.output(0);
        for (int q : column.empty() ? std::vector<int>{} : usersOf(column))
          if (g.node(q).op_type() == "Squeeze")
            toks.push_back(g.node(q).output(0));
      }
    }
    return toks;
  }

  /// The block's index_add_: a ScatterElements on axis 0 whose indices are
  /// the token coordinate broadcast over the columns (TorchScript), or a
  /// ScatterND by the token coordinate as [n, 1] (dynamo's index_put_).
  int findScatter(const Block &b) const {
    int found = -1;
    std::vector<std::pair<std::string, bool>> work; // (value, expanded)
    for (const std::string &t : tokenCoordinates(g.node(b.nonZero)))
      work.push_back({t, false});
    std::set<std::pair<std::string, bool>> seen;
    while (!work.empty()) {
      auto [v, expanded] = work.back();
      work.pop_back();
      if (!seen.insert({v, expanded}).second)
        continue;
      for (int u : usersOf(v)) {
        const onnx::NodeProto &n = g.node(u);
        const std::string &t = n.op_type();
        std::optional<std::vector<int64_t>> axes =
            t == "Unsqueeze" && n.input_size() > 1 ? constInts(n.input(1)) : std::nullopt;
        if (axes && (*axes == std::vector<int64_t>{1} || *axes == std::vector<int64_t>{-1}))
          work.push_back({n.output(0), expanded});
        else if ((t == "Expand" && n.input(0) == v) || (t == "Concat" && n.input_size() == 1))
          work.push_back({n.output(0), expanded || t == "Expand"});
        else if (n.input_size() != 3)
          continue;
        else if ((t == "ScatterElements" && n.input(1) == v && intAttr(n, "axis", 0) == 0) ||
                 (t == "ScatterND" && n.input(1) == v && !expanded))
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
                          ? "no index_add_ (ScatterElements on axis 0 or ScatterND by the "
                            "token coordinate) takes its tokens"
                          : "more than one scatter takes its tokens");
    const onnx::NodeProto &sc = g.node(b.scatter);
    if (const onnx::AttributeProto *r = findAttr(sc, "reduction");
        r && r->s() != "none" && r->s() != "add")
      return fail(sc, "a scatter with reduction '" + r->s() + "' is not an index_add_");
    // A constant index (a loop over range(E), per-expert modules) is a
    // shared Constant that other nodes read too: its weights are the body's.
    for (int u : isConstant(b.expert) ? std::vector<int>{} : usersOf(b.expert)) {
      const onnx::NodeProto &n = g.node(u);
      if (n.op_type() != "Gather" || n.input_size() < 2 || n.input(1) != b.expert ||
          intAttr(n, "axis", 0) != 0)
        return fail(n, "it reads the expert index, which only the mask and weight "
                       "gathers may");
      if (n.input(0) == l.mask)
        continue;
      if (!inits.count(n.input(0)))
        return fail(n,
                    "the expert weights '" + n.input(0) + "' are not a parameter (an initializer)");
      b.gathers.push_back(u);
      b.weights.push_back(n.input(0));
    }
    std::sort(b.weights.begin(), b.weights.end());
    b.body = bodyOf(b);
    return success();
  }

  std::vector<int> bodyOf(const Block &b) const {
    std::set<int> nodes = {b.nonZero};
    std::vector<std::string> work = {g.node(b.nonZero).output(0)};
    if (!isConstant(b.expert))
      work.push_back(b.expert);
    while (!work.empty()) {
      std::string v = work.back();
      work.pop_back();
      for (int u : usersOf(v))
        if (nodes.insert(u).second && u != b.scatter)
          for (const auto &o : g.node(u).output())
            work.push_back(o);
    }
    // What prepares a parameter or a constant for the body (Transpose(W),
    // Cast(W)): nodes that read only initializers, constants and other
    // such nodes.
    std::vector<int> pending(nodes.begin(), nodes.end());
    while (!pending.empty()) {
      int u = pending.back();
      pending.pop_back();
      for (const auto &in : g.node(u).input()) {
        auto it = producer.find(in);
        if (it == producer.end() || nodes.count(it->second) ||
            g.node(it->second).op_type() == "Constant")
          continue;
        const onnx::NodeProto &p = g.node(it->second);
        bool prep = p.input_size() > 0;
        for (const auto &x : p.input())
          prep = prep && (isConstant(x) || (producer.count(x) && nodes.count(producer.at(x))));
        if (prep && nodes.insert(it->second).second)
          pending.push_back(it->second);
      }
    }
    return std::vector<int>(nodes.begin(), nodes.end());
  }

  /// Every block is the first's code (one traced loop body): node by node
  /// the same ops and attributes, the same inputs inside the body, and
  /// outside it the same values, equal constants, shapes (of the sum so
  /// far: every block's is the same), its own expert index, mask and sum, or
  /// each its own parameter at the same place (per-expert modules:
  /// `direct`). A lone block's parameters read outside the expert gathers
  /// are `direct` too.
  LogicalResult alignBlocks(Layer &l) {
    equivalents.clear(); // an earlier layer's rewrite renamed values
    Block &first = l.blocks.front();
    if (l.blocks.size() == 1)
      for (int u : first.body)
        for (int i = 0; i < g.node(u).input_size(); ++i)
          if (isParam(g.node(u).input(i)) && !(i == 0 && isGather(first, u)))
            first.direct.push_back({u, i});
    for (size_t bi = 1; bi < l.blocks.size(); ++bi) {
      Block &b = l.blocks[bi];
      if (b.body.size() != first.body.size())
        return fail(g.node(b.nonZero), "its block has " + std::to_string(b.body.size()) +
                                           " nodes, the first " +
                                           std::to_string(first.body.size()));
      std::unordered_map<int, int64_t> posB, posF;
      for (size_t k = 0; k < b.body.size(); ++k)
        posB[b.body[k]] = k, posF[first.body[k]] = k;
      std::vector<std::pair<int, int>> direct;
      for (size_t k = 0; k < b.body.size(); ++k) {
        const onnx::NodeProto &x = g.node(b.body[k]), &y = g.node(first.body[k]);
        bool same =
            x.op_type() == y.op_type() && x.input_size() == y.input_size() && sameAttributes(x, y);
        for (int i = 0; same && i < x.input_size(); ++i) {
          const std::string &xi = x.input(i), &yi = y.input(i);
          int64_t px = position(xi, posB), py = position(yi, posF);
          if (px != py)
            same = false;
          else if (px < 0 && xi != yi && !(xi == b.expert && yi == first.expert) &&
                   !(i == 0 && (b.body[k] == b.scatter || b.body[k] == b.nonZero)) &&
                   !(fromShapes(xi) && fromShapes(yi))) {
            if (isParam(xi) && isParam(yi))
              direct.push_back({(int)k, i});
            else if (!equivalent(xi, yi))
              return fail(x, "its block reads '" + xi + "' where the first reads '" + yi + "'");
          }
        }
        if (!same)
          return fail(x, "its block's code differs from the first's at " + describeNode(y));
      }
      if (bi > 1 && direct.size() != first.direct.size())
        return fail(g.node(b.nonZero), "its block reads other parameters than the second");
      first.direct.clear();
      for (auto [k, i] : direct) {
        b.direct.push_back({b.body[k], i});
        first.direct.push_back({first.body[k], i});
      }
    }
    if (!first.weights.empty() && !first.direct.empty()) {
      const onnx::NodeProto &n = g.node(first.direct.front().first);
      return fail(n, "it reads the parameter '" + n.input(first.direct.front().second) +
                         "' directly, not through the expert index");
    }
    if (first.weights.empty() && first.direct.empty())
      return fail(g.node(first.nonZero), "its body reads no expert weights");
    return success();
  }

  bool isGather(const Block &b, int u) const {
    return std::find(b.gathers.begin(), b.gathers.end(), u) != b.gathers.end();
  }
  /// The position in the body of `v`'s producer, or -1 outside it.
  int64_t position(const std::string &v, const std::unordered_map<int, int64_t> &pos) const {
    auto it = producer.find(v);
    if (it == producer.end())
      return -1;
    auto at = pos.find(it->second);
    return at == pos.end() ? -1 : at->second;
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

  /// Node `n` of the first block reads the pairs' weights `w` (rank
  /// `weightRank`: [S, ...]) where it read one expert's: products become
  /// batched, element-wise ops (a bias) stay.
  LogicalResult batchUse(onnx::NodeProto &n, const std::string &w, int64_t weightRank,
                         const std::string &origin) {
    const std::string &t = n.op_type();
    if (t == "Transpose" && weightRank == 3 && intsAttr(n, "perm") == std::vector<int64_t>{1, 0}) {
      for (int m : std::vector<int>(usersOf(n.output(0)))) {
        onnx::NodeProto &mm = *g.mutable_node(m);
        if (mm.op_type() != "MatMul" || mm.input(1) != n.output(0) || mm.input(0) == w)
          return fail(mm, "it reads a transposed expert weight; only x @ W^T batches");
        batchProduct(mm, w, /*transposed=*/true, "");
      }
    } else if (t == "MatMul" && weightRank == 3 && n.input(1) == w && n.input(0) != w) {
      batchProduct(n, w, /*transposed=*/false, "");
    } else if (t == "Gemm" && weightRank == 3 && n.input(1) == w && n.input(0) != w &&
               intAttr(n, "transA", 0) == 0 && floatAttr(n, "alpha", 1) == 1 &&
               floatAttr(n, "beta", 1) == 1) {
      batchProduct(n, w, intAttr(n, "transB", 0) != 0, n.input_size() > 2 ? n.input(2) : "");
    } else if (!((t == "Add" || t == "Sub" || t == "Mul" || t == "Div") && weightRank == 2) &&
               !(t == "Gemm" && weightRank == 2 && n.input_size() > 2 && n.input(2) == w)) {
      return fail(n, "it reads the expert weights " + origin +
                         " in a way that does not batch over tokens");
    }
    return success();
  }

  /// Per-expert modules: the j-th parameter every block reads directly,
  /// stacked in expert order, Concat(Unsqueeze(P_e, 0) for each expert e).
  /// Every expert must have its block (a loop over range(E)).
  FailureOr<std::vector<std::string>> stackModules(const Layer &l) {
    const Block &first = l.blocks.front();
    std::vector<std::string> stacked;
    if (first.direct.empty())
      return stacked;
    std::optional<std::vector<int64_t>> depth = constInts(l.depth);
    if (!depth || depth->size() != 1 || (*depth)[0] != (int64_t)l.blocks.size())
      return fail(g.node(first.nonZero),
                  "per-expert modules need a block for every expert: " +
                      std::to_string(l.blocks.size()) + " blocks for a one-hot of depth " +
                      (depth && depth->size() == 1 ? std::to_string((*depth)[0]) : "?"));
    std::vector<const Block *> byExpert(l.blocks.size(), nullptr);
    for (const Block &b : l.blocks) {
      std::optional<std::vector<int64_t>> e = constInts(b.expert);
      if (!e || e->size() != 1 || (*e)[0] < 0 || (*e)[0] >= (int64_t)byExpert.size() ||
          byExpert[(*e)[0]])
        return fail(g.node(b.nonZero), "the expert index of a per-expert module's block must "
                                       "be a constant, one block per expert");
      byExpert[(*e)[0]] = &b;
      bool same = b.direct.size() == first.direct.size();
      for (size_t j = 0; same && j < first.direct.size(); ++j) {
        const onnx::NodeProto &x = g.node(b.direct[j].first), &y = g.node(first.direct[j].first);
        same = x.op_type() == y.op_type() && b.direct[j].second == first.direct[j].second &&
               inits.at(x.input(b.direct[j].second))->dims_size() ==
                   inits.at(y.input(first.direct[j].second))->dims_size();
      }
      if (!same)
        return fail(g.node(b.nonZero), "its block reads other parameters than the first");
    }
    for (size_t j = 0; j < first.direct.size(); ++j) {
      std::vector<std::string> parts;
      for (const Block *b : byExpert)
        parts.push_back(op("Unsqueeze",
                           {g.node(b->direct[j].first).input(b->direct[j].second), constant({0})}));
      stacked.push_back(op("Concat", parts));
      setInt(g.node_size() - 1, "axis", 0);
    }
    return stacked;
  }

  LogicalResult rewrite(Layer &l) {
    Block &first = l.blocks.front();
    for (Block &b : l.blocks)
      if (b.weights != first.weights)
        return fail(g.node(b.nonZero), "its block gathers other expert weights than the first");
    if (failed(alignBlocks(l)))
      return failure();
    FailureOr<std::vector<std::string>> stacked = stackModules(l);
    if (failed(stacked))
      return failure();
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
      std::string origin = "gathered by " + describeNode(g.node(gi));
      for (int u : std::vector<int>(usersOf(g.node(gi).output(0))))
        if (failed(batchUse(*g.mutable_node(u), g.node(gi).output(0), rank, origin)))
          return failure();
    }
    // A node's later inputs first: a Gemm's bias before its weight.
    for (size_t j = first.direct.size(); j-- > 0;) {
      auto [u, i] = first.direct[j];
      int64_t rank = inits.at(g.node(u).input(i))->dims_size() + 1;
      std::string origin = "'" + g.node(u).input(i) + "' (stacked over the experts)";
      std::string w = op("Gather", {(*stacked)[j], ids});
      g.mutable_node(u)->set_input(i, w);
      if (failed(batchUse(*g.mutable_node(u), w, rank, origin)))
        return failure();
    }
    // The first scatter sums every pair of a token; the others are in it.
    onnx::NodeProto &sc = *g.mutable_node(first.scatter);
    std::string rowShape =
        op("Slice", {op("Shape", {sc.input(2)}), constant({1}), constant({INT64_MAX})});
    std::string tk = op("Concat", {shapeTK, rowShape});
    setInt(g.node_size() - 1, "axis", 0);
    std::string perPair = op("Reshape", {sc.input(2), tk});
    std::string sum = op("ReduceSum", {perPair, constant({1})});
    setInt(g.node_size() - 1, "keepdims", 0);
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
};

} // namespace

LogicalResult onnx_import::batchExpertLoops(onnx::ModelProto &model, std::string &error) {
  return ExpertLoops(model, error).run();
}
