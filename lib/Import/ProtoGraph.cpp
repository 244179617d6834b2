//===- ProtoGraph.cpp - an ONNX graph to rewrite before the import --------===//
#include "ProtoGraph.h"

#include <cstring>
#include <set>

using namespace mlir::merak::onnx_import;

namespace mlir::merak::onnx_import {

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

float floatAttr(const onnx::NodeProto &n, const char *name, float dflt) {
  const onnx::AttributeProto *a = findAttr(n, name);
  return a ? a->f() : dflt;
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
    if (!v.empty()) // (an empty vector's data() may be null)
      std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(int64_t));
    return v;
  }
  if (t.data_type() == onnx::TensorProto::INT32) {
    if (t.int32_data_size())
      return std::vector<int64_t>(t.int32_data().begin(), t.int32_data().end());
    std::vector<int32_t> w(t.raw_data().size() / sizeof(int32_t));
    if (!w.empty())
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

} // namespace mlir::merak::onnx_import

void ProtoGraph::index() {
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

const onnx::NodeProto *ProtoGraph::def(const std::string &name, const char *op) const {
  auto it = producer.find(name);
  if (it == producer.end() || g.node(it->second).op_type() != op)
    return nullptr;
  return &g.node(it->second);
}

const std::vector<int> &ProtoGraph::usersOf(const std::string &name) const {
  static const std::vector<int> none;
  auto it = users.find(name);
  return it == users.end() ? none : it->second;
}

std::optional<std::vector<int64_t>> ProtoGraph::constInts(const std::string &name) const {
  if (auto it = inits.find(name); it != inits.end())
    return tensorInts(*it->second);
  const onnx::NodeProto *c = def(name, "Constant");
  if (!c)
    return std::nullopt;
  if (const onnx::AttributeProto *v = findAttr(*c, "value"))
    return tensorInts(v->t());
  if (const onnx::AttributeProto *v = findAttr(*c, "value_ints"))
    return std::vector<int64_t>(v->ints().begin(), v->ints().end());
  if (const onnx::AttributeProto *v = findAttr(*c, "value_int"))
    return std::vector<int64_t>{v->i()};
  return std::nullopt;
}

std::string ProtoGraph::skipCasts(std::string v) const {
  while (const onnx::NodeProto *c = def(v, "Cast"))
    v = c->input(0);
  return v;
}

bool ProtoGraph::isParam(const std::string &name) const {
  auto it = inits.find(name);
  if (it == inits.end() || !isFloat(it->second->data_type()))
    return false;
  int64_t elements = 1;
  for (int64_t d : it->second->dims())
    elements *= d;
  return elements > 1;
}

bool ProtoGraph::isConstant(const std::string &name) const {
  return inits.count(name) || def(name, "Constant");
}

bool ProtoGraph::fromShapes(const std::string &v, int depth) const {
  auto it = producer.find(v);
  if (it == producer.end() || depth > 8)
    return false;
  const onnx::NodeProto &n = g.node(it->second);
  if (n.op_type() == "Shape")
    return true;
  static const std::set<std::string> arithmetic = {"Gather",  "Slice", "Concat",  "Unsqueeze",
                                                   "Squeeze", "Cast",  "Reshape", "Add",
                                                   "Sub",     "Mul",   "Div"};
  if (!arithmetic.count(n.op_type()))
    return false;
  bool shaped = false;
  for (const auto &in : n.input()) {
    if (isConstant(in))
      continue;
    if (!fromShapes(in, depth + 1))
      return false;
    shaped = true;
  }
  return shaped;
}

bool ProtoGraph::sameAttributes(const onnx::NodeProto &a, const onnx::NodeProto &b) {
  if (a.attribute_size() != b.attribute_size())
    return false;
  for (int i = 0; i < a.attribute_size(); ++i)
    if (a.attribute(i).SerializeAsString() != b.attribute(i).SerializeAsString())
      return false;
  return true;
}

bool ProtoGraph::equivalent(const std::string &x, const std::string &y, int depth) const {
  if (x == y)
    return true;
  // Two parameters are two values, whatever they hold; shared inputs make
  // the walk a DAG, so each pair is decided once.
  if (depth > 8 || isParam(x) || isParam(y))
    return false;
  std::string key = x + '\n' + y;
  if (auto it = equivalents.find(key); it != equivalents.end())
    return it->second;
  bool same = false;
  auto ix = inits.find(x), iy = inits.find(y);
  auto px = producer.find(x), py = producer.find(y);
  if (ix != inits.end() || iy != inits.end()) {
    if (ix != inits.end() && iy != inits.end()) {
      onnx::TensorProto tx = *ix->second, ty = *iy->second;
      tx.clear_name();
      ty.clear_name();
      same = tx.SerializeAsString() == ty.SerializeAsString();
    }
  } else if (px != producer.end() && py != producer.end()) {
    const onnx::NodeProto &a = g.node(px->second), &b = g.node(py->second);
    same = a.op_type() == b.op_type() && a.input_size() == b.input_size() &&
           a.output_size() == b.output_size() && sameAttributes(a, b);
    for (int o = 0; same && o < a.output_size(); ++o)
      same = (a.output(o) == x) == (b.output(o) == y);
    for (int i = 0; same && i < a.input_size(); ++i)
      same = equivalent(a.input(i), b.input(i), depth + 1);
  }
  equivalents[key] = same;
  return same;
}

std::string ProtoGraph::name(const std::string &hint) {
  return prefix + hint + "_" + std::to_string(fresh++);
}

onnx::NodeProto &ProtoGraph::node(const char *op, std::vector<std::string> inputs,
                                  std::string out) {
  onnx::NodeProto &n = *g.add_node();
  n.set_op_type(op);
  n.set_name(out);
  for (auto &in : inputs)
    n.add_input(in);
  n.add_output(out);
  return n;
}

std::string ProtoGraph::constant(const std::vector<int64_t> &values) {
  std::string out = name("const");
  onnx::AttributeProto *a = node("Constant", {}, out).add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = int64Tensor(values);
  return out;
}

std::string ProtoGraph::op(const char *type, std::vector<std::string> inputs) {
  std::string out = name(type);
  node(type, std::move(inputs), out);
  return out;
}

void ProtoGraph::setInt(int node, const char *name, int64_t value) {
  onnx::AttributeProto *a = g.mutable_node(node)->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void ProtoGraph::removeDeadNodes() {
  index();
  std::vector<char> live(g.node_size(), 0);
  std::vector<std::string> work;
  for (const auto &o : g.output())
    work.push_back(o.name());
  // What a node's subgraphs (If branches, Loop bodies) read, nested ones too.
  auto subgraphReads = [&](const onnx::NodeProto &n, auto &self) -> void {
    for (const auto &a : n.attribute()) {
      std::vector<const onnx::GraphProto *> subs;
      if (a.has_g())
        subs.push_back(&a.g());
      for (const auto &sg : a.graphs())
        subs.push_back(&sg);
      for (const onnx::GraphProto *sub : subs) {
        for (const auto &inner : sub->node()) {
          for (const auto &in : inner.input())
            work.push_back(in);
          self(inner, self);
        }
        for (const auto &o : sub->output())
          work.push_back(o.name());
      }
    }
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
    subgraphReads(n, subgraphReads);
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < g.node_size(); ++i)
    if (live[i])
      *kept.Add() = std::move(*g.mutable_node(i));
  g.mutable_node()->Swap(&kept);
}
