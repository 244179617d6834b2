//===- ExpertSegments.cpp - experts over sorted segments, batched --------===//
//
// A Mixture-of-Experts layer that sorts its (token, choice) rows by expert
// and runs each expert on its own segment (JetMoE's ParallelExperts,
// Megatron-LM's SequentialMLP, any `torch.split(x, counts.tolist())`
// dispatch) exports, under dynamo, as a split by sizes known only at run
// time:
//
//   parts = SplitToSequence(x [R, I], sizes [E], axis 0)
//   y_e   = Gemm(SequenceAt(parts, e), Gather(W, e), [Gather(b, e)])
//           (or MatMul(SequenceAt(parts, e), [Transpose](Gather(W, e))))
//   y     = Concat(y_0, ..., y_{E-1}, axis 0)
//
// The parts' shapes depend on the data, which no static program holds. Row
// r of x is in segment ids[r] = #{k : cumsum(sizes)[k] <= r}, so the layer
// is the batched_mm form with those ids (merak-fuse-experts turns it into
// grouped expert GEMMs), computed before the import:
//
//   ends = CumSum(Cast(sizes, float))                      // [E]
//   rows = CumSum(ones [R], exclusive)                     // 0, 1, .., R-1
//   ids  = Cast(ReduceSum(Cast(rows [R, 1] >= ends [1, E]), 1))
//   y    = Squeeze(MatMul(Gather(W, ids), Unsqueeze(x, 2)), 2)  // W [E, O, I]
//          Squeeze(MatMul(Unsqueeze(x, 1), Gather(W, ids)), 1)  // W [E, I, O]
//          [+ Gather(b, ids)]
//
// (the float row numbers are exact below 2^24 rows; the ones are counted
// from x's first column, so that a part of the batch numbers its own rows;
// a later split by the same sizes, the experts' next layer, reuses the
// ids, whose input tensor parallelism may split by features).
// W holds one expert per part. Sizes that do not sum to R leave rows past
// the last segment with the id E, which the gather refuses at run time, as
// the split itself would. A split whose parts are read otherwise is left as
// it is (the importer then names it).
//
//===----------------------------------------------------------------------===//
#include "ProtoGraph.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::merak::onnx_import;

namespace {

/// One expert's product of its segment.
struct Product {
  int node = -1;
  std::string weight, bias;
  bool transposed = false; // W [E, O, I] (x W_e^T) rather than [E, I, O]
};

class ExpertSegments : ProtoGraph {
public:
  explicit ExpertSegments(onnx::ModelProto &m) : ProtoGraph(*m.mutable_graph(), "merak.segments/") {
    for (const auto &imp : m.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx")
        opset = imp.version();
  }

  void run() {
    if (opset < 13) // the rewrite writes axes as inputs
      return;
    index();
    bool changed = false;
    for (int i = 0, n = g.node_size(); i < n; ++i)
      if (g.node(i).op_type() == "SplitToSequence")
        changed |= rewrite(i);
    if (changed)
      removeDeadNodes();
  }

private:
  int64_t opset = 0;
  /// The rows' experts of the splits rewritten so far, by their sizes.
  std::vector<std::pair<std::string, std::string>> idsBySizes;

  /// `v` as Gather(P, e) of a parameter P of rank `rank` along axis 0.
  std::string gatheredParam(const std::string &v, int64_t e, int rank) const {
    const onnx::NodeProto *gather = def(v, "Gather");
    if (!gather || gather->input_size() != 2 || intAttr(*gather, "axis", 0) != 0 ||
        !isParam(gather->input(0)) || inits.at(gather->input(0))->dims_size() != rank)
      return "";
    std::optional<std::vector<int64_t>> at = constInts(gather->input(1));
    return at && at->size() == 1 && (*at)[0] == e ? gather->input(0) : "";
  }

  /// The product that reads segment `e` (`part`), or nullopt.
  std::optional<Product> productOf(const std::string &part, int64_t e) const {
    const std::vector<int> &readers = usersOf(part);
    if (readers.size() != 1)
      return std::nullopt;
    const onnx::NodeProto &n = g.node(readers[0]);
    if (n.input_size() < 2 || n.input(0) != part || n.output_size() != 1)
      return std::nullopt;
    Product p;
    p.node = readers[0];
    if (n.op_type() == "Gemm") {
      if (intAttr(n, "transA", 0) || floatAttr(n, "alpha", 1) != 1 || floatAttr(n, "beta", 1) != 1)
        return std::nullopt;
      p.transposed = intAttr(n, "transB", 0);
      p.weight = gatheredParam(n.input(1), e, 3);
      if (n.input_size() > 2 && !n.input(2).empty() &&
          (p.bias = gatheredParam(n.input(2), e, 2)).empty())
        return std::nullopt;
    } else if (n.op_type() == "MatMul") {
      std::string w = n.input(1);
      if (const onnx::NodeProto *t = def(w, "Transpose")) {
        if (intsAttr(*t, "perm") != std::vector<int64_t>{1, 0})
          return std::nullopt;
        w = t->input(0), p.transposed = true;
      }
      p.weight = gatheredParam(w, e, 3);
    } else {
      return std::nullopt;
    }
    if (p.weight.empty())
      return std::nullopt;
    return p;
  }

  /// The rank `v` is declared with (a graph input or value_info), or -1.
  int declaredRank(const std::string &v) const {
    for (const auto *infos : {&g.input(), &g.value_info()})
      for (const onnx::ValueInfoProto &info : *infos)
        if (info.name() == v && info.type().has_tensor_type() &&
            info.type().tensor_type().has_shape())
          return info.type().tensor_type().shape().dim_size();
    return -1;
  }

  /// A scalar int64 constant.
  std::string scalar(int64_t v) { return op("Squeeze", {constant({v}), constant({0})}); }

  std::string cast(const std::string &v, int64_t to) {
    std::string out = op("Cast", {v});
    setInt(g.node_size() - 1, "to", to);
    return out;
  }

  /// The expert of each row of `x` split by `sizes`: those of an earlier
  /// split by the same sizes (the next layer of the same experts, whose
  /// input may be split by features under tensor parallelism), or computed
  /// from `x`'s rows.
  std::string segmentIds(const std::string &x, const std::string &sizes) {
    for (const auto &[earlier, ids] : idsBySizes)
      if (equivalent(earlier, sizes))
        return ids;
    std::string ends = op("CumSum", {cast(sizes, onnx::TensorProto::FLOAT), scalar(0)});
    // The row numbers, counted over x's rows (not a Range of their count):
    // when the batch is split, each part numbers its own rows.
    std::string column = op("Gather", {x, scalar(0)});
    setInt(g.node_size() - 1, "axis", 1);
    std::string one = op("Or", {op("Equal", {column, column}), op("IsNaN", {column})});
    std::string rows = op("CumSum", {cast(one, onnx::TensorProto::FLOAT), scalar(0)});
    setInt(g.node_size() - 1, "exclusive", 1);
    rows = op("Unsqueeze", {rows, constant({1})});
    std::string past = op("GreaterOrEqual", {rows, op("Unsqueeze", {ends, constant({0})})});
    std::string summed = op("ReduceSum", {cast(past, onnx::TensorProto::FLOAT), constant({1})});
    setInt(g.node_size() - 1, "keepdims", 0);
    std::string ids = cast(summed, onnx::TensorProto::INT64);
    idsBySizes.push_back({sizes, ids});
    return ids;
  }

  /// Rewrites the split at node `s` when every part is one expert's
  /// product and the products are concatenated in order.
  bool rewrite(int s) {
    const onnx::NodeProto &split = g.node(s);
    // (A scalar split is one chunk length: not the experts' sizes.)
    if (split.input_size() != 2 || split.input(1).empty() || constInts(split.input(1)) ||
        intAttr(split, "axis", 0) != 0 || declaredRank(split.input(1)) == 0)
      return false;
    const std::vector<int> &readers = usersOf(split.output(0));
    std::vector<Product> products(readers.size());
    for (int r : readers) {
      const onnx::NodeProto &at = g.node(r);
      std::optional<std::vector<int64_t>> e =
          at.op_type() == "SequenceAt" ? constInts(at.input(1)) : std::nullopt;
      if (!e || e->size() != 1 || (*e)[0] < 0 || (*e)[0] >= (int64_t)products.size() ||
          products[(*e)[0]].node >= 0)
        return false;
      std::optional<Product> p = productOf(at.output(0), (*e)[0]);
      if (!p)
        return false;
      products[(*e)[0]] = *p;
    }
    // One expert per part, all of them: a row past the parts would gather
    // expert E, which the gather refuses at run time.
    if (products.empty() || inits.at(products[0].weight)->dims(0) != (int64_t)products.size())
      return false;
    for (const Product &p : products)
      if (p.weight != products.front().weight || p.bias != products.front().bias ||
          p.transposed != products.front().transposed)
        return false;
    // One Concat along the rows reads the products, in expert order.
    const std::vector<int> &joins = usersOf(g.node(products[0].node).output(0));
    if (joins.size() != 1 || g.node(joins[0]).op_type() != "Concat" ||
        intAttr(g.node(joins[0]), "axis", 0) != 0 ||
        g.node(joins[0]).input_size() != (int)products.size())
      return false;
    int join = joins[0];
    for (auto [e, p] : llvm::enumerate(products))
      if (g.node(join).input(e) != g.node(p.node).output(0) ||
          usersOf(g.node(p.node).output(0)).size() != 1)
        return false;

    std::string x = split.input(0);
    const Product &p = products.front();
    std::string ids = segmentIds(x, split.input(1));
    std::string w = op("Gather", {p.weight, ids});
    std::string y =
        p.transposed
            ? op("Squeeze", {op("MatMul", {w, op("Unsqueeze", {x, constant({2})})}), constant({2})})
            : op("Squeeze",
                 {op("MatMul", {op("Unsqueeze", {x, constant({1})}), w}), constant({1})});
    if (!p.bias.empty())
      y = op("Add", {y, op("Gather", {p.bias, ids})});
    onnx::NodeProto &out = *g.mutable_node(join);
    out.set_op_type("Identity");
    out.clear_input();
    out.clear_attribute();
    out.add_input(y);
    return true;
  }
};

} // namespace

void mlir::merak::onnx_import::batchExpertSegments(onnx::ModelProto &model) {
  ExpertSegments(model).run();
}
