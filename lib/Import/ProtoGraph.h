//===- ProtoGraph.h - an ONNX graph to rewrite before the import -*- C++
//-*-===//
//
// The importer's graph rewrites before validation (ExpertLoops.cpp) read
// and edit the GraphProto itself: who produces and who reads each value,
// constant inputs, structural equality of values, new nodes, and the
// removal of nodes no output reads.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_IMPORT_PROTOGRAPH_H
#define MERAK_LIB_IMPORT_PROTOGRAPH_H

#include "ImporterImpl.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlir::merak::onnx_import {

const onnx::AttributeProto *findAttr(const onnx::NodeProto &n, const char *name);
int64_t intAttr(const onnx::NodeProto &n, const char *name, int64_t dflt);
float floatAttr(const onnx::NodeProto &n, const char *name, float dflt);
std::vector<int64_t> intsAttr(const onnx::NodeProto &n, const char *name);
/// The values of a small int64/int32 tensor stored in the proto itself.
std::optional<std::vector<int64_t>> tensorInts(const onnx::TensorProto &t);
bool isFloat(int32_t type);
onnx::TensorProto int64Tensor(const std::vector<int64_t> &values);

class ProtoGraph {
public:
  /// New nodes' names start with `prefix`.
  ProtoGraph(onnx::GraphProto &g, std::string prefix) : g(g), prefix(std::move(prefix)) {}

protected:
  onnx::GraphProto &g;
  std::string prefix;
  int fresh = 0;
  std::unordered_map<std::string, int> producer;
  std::unordered_map<std::string, std::vector<int>> users;
  std::unordered_map<std::string, const onnx::TensorProto *> inits;
  /// equivalent()'s answers, by "x\ny".
  mutable std::unordered_map<std::string, bool> equivalents;

  /// (Re)builds producer, users and inits: after nodes were added or
  /// rewired, before reading them again.
  void index();
  /// The node of type `op` that produces `name`, or null.
  const onnx::NodeProto *def(const std::string &name, const char *op) const;
  /// The nodes that read `name` (by index, as of the last index()).
  const std::vector<int> &usersOf(const std::string &name) const;

  /// A constant input's integers (a Constant node or an initializer).
  std::optional<std::vector<int64_t>> constInts(const std::string &name) const;

  /// `v` with the Casts that produce it skipped.
  std::string skipCasts(std::string v) const;

  /// A float initializer of more than one element: a parameter.
  bool isParam(const std::string &name) const;

  /// An initializer or a Constant node's output.
  bool isConstant(const std::string &name) const;

  /// A value computed from tensors' shapes and constants only (folded at
  /// import).
  bool fromShapes(const std::string &v, int depth = 0) const;

  /// The same attributes in the same order.
  static bool sameAttributes(const onnx::NodeProto &a, const onnx::NodeProto &b);

  /// Two values computed alike (a traced loop body computes its own copy of
  /// what it reads: Unsqueeze(routing weights), shapes, constants): the
  /// same value, equal constants (Constant nodes or initializers), or
  /// the same op and attributes on equivalent inputs.
  bool equivalent(const std::string &x, const std::string &y, int depth = 0) const;

  // Node building (appended to the graph; index() does not see them).
  /// A fresh value name.
  std::string name(const std::string &hint);
  /// A node with one output `out`.
  onnx::NodeProto &node(const char *op, std::vector<std::string> inputs, std::string out);
  /// An int64 Constant node's output.
  std::string constant(const std::vector<int64_t> &values);
  /// A node with a fresh output, which it returns.
  std::string op(const char *type, std::vector<std::string> inputs);
  /// Sets integer attribute `name` of node `node`.
  void setInt(int node, const char *name, int64_t value);

  /// Drops the nodes no graph output reads. Names a subgraph reads count as
  /// read.
  void removeDeadNodes();
};

} // namespace mlir::merak::onnx_import

#endif // MERAK_LIB_IMPORT_PROTOGRAPH_H
