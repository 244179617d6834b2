//===- manifest.cpp - The manifest of a generated program -----------------===//
#include "manifest.h"

#include "json.h"

#include <cmath>
#include <exception>
#include <set>

namespace merak::rt {

namespace {

using json::Value;

/// Thrown inside the parser only; parseManifest turns it into an error.
struct ManifestError {
  std::string message;
};

[[noreturn]] void fail(const std::string &message) {
  throw ManifestError{message};
}

const char *kindName(Value::Kind k) {
  switch (k) {
  case Value::Kind::Null: return "null";
  case Value::Kind::Bool: return "a boolean";
  case Value::Kind::Integer: return "an integer";
  case Value::Kind::Double: return "a number";
  case Value::Kind::String: return "a string";
  case Value::Kind::Array: return "a list";
  case Value::Kind::Object: return "an object";
  }
  return "a value";
}

const Value &member(const Value &object, const std::string &key,
                    const std::string &where) {
  const Value *v = object.get(key);
  if (!v)
    fail(where + ": missing \"" + key + "\"");
  return *v;
}

const Value &expectKind(const Value &v, Value::Kind kind,
                        const std::string &what) {
  if (v.kind != kind)
    fail(what + " must be " + kindName(kind) + ", got " + kindName(v.kind));
  return v;
}

uint64_t nonNegative(const Value &v, const std::string &what) {
  if (!v.isInteger() || v.integer < 0)
    fail(what + " must be a non-negative integer");
  return static_cast<uint64_t>(v.integer);
}

std::string stringMember(const Value &object, const std::string &key,
                         const std::string &where) {
  return expectKind(member(object, key, where), Value::Kind::String,
                    where + ": \"" + key + "\"")
      .string;
}

ManifestTensor parseTensor(const Value &v, const std::string &where,
                           uint64_t regionBytes, const char *regionName) {
  expectKind(v, Value::Kind::Object, where);
  ManifestTensor t;
  t.name = stringMember(v, "name", where);
  if (t.name.empty())
    fail(where + ": empty name");
  std::string at = where + " ('" + t.name + "')";
  std::string dtype = stringMember(v, "dtype", at);
  std::optional<DType> d = parseDType(dtype);
  if (!d)
    fail(at + ": unknown dtype '" + dtype + "'");
  t.dtype = *d;
  const Value &shape =
      expectKind(member(v, "shape", at), Value::Kind::Array, at + ": shape");
  for (const Value &dim : shape.array)
    t.shape.push_back(
        static_cast<int64_t>(nonNegative(dim, at + ": shape dimension")));
  std::optional<uint64_t> n = elementCount(t.shape);
  if (!n || *n > (UINT64_MAX / 16))
    fail(at + ": shape too large");
  t.elements = *n;
  t.bytes = *n * dtypeSize(t.dtype);
  if (const Value *b = v.get("bytes")) {
    uint64_t declared = nonNegative(*b, at + ": bytes");
    if (declared != t.bytes)
      fail(at + ": bytes is " + std::to_string(declared) + " but the shape " +
           "and dtype need " + std::to_string(t.bytes));
  }
  t.offset = nonNegative(member(v, "offset", at), at + ": offset");
  if (t.offset > regionBytes || t.bytes > regionBytes - t.offset)
    fail(at + ": offset " + std::to_string(t.offset) + " + " +
         std::to_string(t.bytes) + " bytes exceeds " + regionName + " " +
         std::to_string(regionBytes));
  return t;
}

bool isFloatScalar(const ManifestTensor &t) {
  return (t.dtype == DType::F32 || t.dtype == DType::F64) && t.elements == 1;
}

bool isIndex(DType d) { return d == DType::I64 || d == DType::I32; }

std::vector<ManifestTensor> parseList(const Value &root, const char *key,
                                      uint64_t regionBytes,
                                      const char *regionName) {
  const Value &list = expectKind(member(root, key, "manifest"),
                                 Value::Kind::Array,
                                 std::string("\"") + key + "\"");
  std::vector<ManifestTensor> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.array.size(); ++i) {
    std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    out.push_back(parseTensor(list.array[i], where, regionBytes, regionName));
    if (!names.insert(out.back().name).second)
      fail(where + ": duplicate name '" + out.back().name + "'");
  }
  return out;
}

/// A param's tensor-parallel "shard", "global_shape", "data_offset" and
/// "data_bytes" (see program.h).
void parseShard(const Value &v, ManifestTensor &t, int64_t tp,
                const std::string &where) {
  const Value *shard = v.get("shard");
  if (!shard)
    return;
  expectKind(*shard, Value::Kind::Object, where + ": shard");
  auto field = [&](const char *key) {
    return static_cast<int64_t>(
        nonNegative(member(*shard, key, where + ": shard"),
                    where + ": shard." + key));
  };
  t.shardAxis = field("axis");
  t.shardParts = field("parts");
  t.shardBlocks = field("blocks");
  if (t.shardParts != tp)
    fail(where + ": shard.parts " + std::to_string(t.shardParts) +
         " differs from mesh.tp " + std::to_string(tp));
  const Value &g = expectKind(member(v, "global_shape", where),
                              Value::Kind::Array, where + ": global_shape");
  for (const Value &dim : g.array)
    t.globalShape.push_back(static_cast<int64_t>(
        nonNegative(dim, where + ": global_shape dimension")));
  // With "zero" too, shape is the ZeRO part of the shard (checked there).
  const bool zero = v.get("zero") != nullptr;
  if (t.shardAxis >= static_cast<int64_t>(t.globalShape.size()) || t.shardBlocks < 1)
    fail(where + ": shard axis or blocks out of range");
  // Only a one-block axis may be padded to divide (vocabulary parallelism).
  bool ok = t.shardBlocks == 1 ||
            t.globalShape[t.shardAxis] % (t.shardBlocks * t.shardParts) == 0;
  ok = ok && (zero || t.globalShape.size() == t.shape.size());
  for (size_t d = 0; !zero && ok && d < t.shape.size(); ++d)
    ok = static_cast<int64_t>(d) == t.shardAxis
             ? t.shape[d] == t.shardChunk() * t.shardBlocks
             : t.globalShape[d] == t.shape[d];
  if (!ok)
    fail(where + ": global_shape does not match the shard's shape and layout");
  if (const Value *off = v.get("data_offset")) {
    t.dataOffset = nonNegative(*off, where + ": data_offset");
    t.dataBytes = nonNegative(member(v, "data_bytes", where), where + ": data_bytes");
    uint64_t full = dtypeSize(t.dtype);
    for (int64_t d : t.globalShape)
      full *= static_cast<uint64_t>(d);
    if (t.dataBytes != full)
      fail(where + ": data_bytes " + std::to_string(t.dataBytes) +
           " is not the full tensor's size");
  }
}

/// A param's ZeRO-1 "zero" {"parts"} and "global_shape" (see program.h).
void parseZero(const Value &v, ManifestTensor &t, int64_t dp, const std::string &where) {
  const Value *zero = v.get("zero");
  if (!zero)
    return;
  expectKind(*zero, Value::Kind::Object, where + ": zero");
  t.zeroParts = static_cast<int64_t>(
      nonNegative(member(*zero, "parts", where + ": zero"), where + ": zero.parts"));
  if (t.zeroParts != dp)
    fail(where + ": zero.parts " + std::to_string(t.zeroParts) + " differs from mesh.dp " +
         std::to_string(dp));
  if (!t.sharded()) { // (a shard's state: read by parseShard)
    const Value &g = expectKind(member(v, "global_shape", where), Value::Kind::Array,
                                where + ": global_shape");
    for (const Value &dim : g.array)
      t.globalShape.push_back(
          static_cast<int64_t>(nonNegative(dim, where + ": global_shape dimension")));
  }
  uint64_t n = t.zeroSourceElements();
  uint64_t part = (n + t.zeroParts - 1) / t.zeroParts;
  if (t.shape.size() != 1 || static_cast<uint64_t>(t.shape[0]) != part)
    fail(where + ": a ZeRO part of " + std::to_string(n) + " elements over " +
         std::to_string(t.zeroParts) + " ranks must have shape [" + std::to_string(part) + "]");
}

Manifest parseRoot(const Value &root) {
  expectKind(root, Value::Kind::Object, "the manifest");
  Manifest m;
  const Value &format = member(root, "format", "manifest");
  if (!format.isInteger() || format.integer != 1)
    fail("unsupported \"format\" (this runtime reads format 1)");
  m.format = 1;
  if (const Value *e = root.get("entry"))
    m.entry = expectKind(*e, Value::Kind::String, "\"entry\"").string;
  m.arenaBytes = nonNegative(member(root, "arena_bytes", "manifest"),
                             "\"arena_bytes\"");
  m.paramsBytes = nonNegative(member(root, "params_bytes", "manifest"),
                              "\"params_bytes\"");
  // Storage past params_init_bytes (optimizer state) starts as zeros and
  // has no bytes in the data; absent, everything has.
  m.paramsInitBytes = m.paramsBytes;
  if (const Value *init = root.get("params_init_bytes"))
    m.paramsInitBytes = nonNegative(*init, "\"params_init_bytes\"");
  if (m.paramsInitBytes > m.paramsBytes)
    fail("params_init_bytes " + std::to_string(m.paramsInitBytes) +
         " exceeds params_bytes " + std::to_string(m.paramsBytes));
  m.constsOffset = nonNegative(member(root, "consts_offset", "manifest"),
                               "\"consts_offset\"");
  m.constsBytes = nonNegative(member(root, "consts_bytes", "manifest"),
                              "\"consts_bytes\"");
  if (m.constsOffset < m.paramsInitBytes)
    fail("consts_offset " + std::to_string(m.constsOffset) +
         " is inside the parameter data (params_init_bytes " +
         std::to_string(m.paramsInitBytes) + ")");
  if (m.constsBytes > UINT64_MAX - m.constsOffset)
    fail("consts_offset + consts_bytes overflows");

  m.params = parseList(root, "params", m.paramsBytes, "params_bytes");
  for (size_t i = 0; i < m.params.size(); ++i) {
    std::string where =
        "params[" + std::to_string(i) + "] ('" + m.params[i].name + "')";
    m.params[i].kind =
        stringMember(root.get("params")->array[i], "kind", where);
    const std::string &k = m.params[i].kind;
    if (k != "trainable" && k != "frozen" && k != "state" && k != "scratch" &&
        k != "hparam")
      fail(where + ": unknown kind '" + k +
           "' (expected trainable, frozen, state, scratch or hparam)");
  }

  m.inputs = parseList(root, "inputs", m.arenaBytes, "arena_bytes");
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    ManifestTensor &t = m.inputs[i];
    std::string where = "inputs[" + std::to_string(i) + "] ('" + t.name + "')";
    t.role = stringMember(root.get("inputs")->array[i], "role", where);
    if (t.role != "tokens" && t.role != "labels" && t.role != "step" &&
        t.role != "other")
      fail(where + ": unknown role '" + t.role +
           "' (expected tokens, labels, step or other)");
    if (t.role != "other")
      for (size_t j = 0; j < i; ++j)
        if (m.inputs[j].role == t.role)
          fail(where + ": a second input with role '" + t.role + "'");
  }
  if (const ManifestTensor *tok = m.inputWithRole("tokens")) {
    if (tok->shape.size() != 2 || tok->shape[0] < 1 || tok->shape[1] < 1 ||
        !isIndex(tok->dtype))
      fail("the tokens input '" + tok->name +
           "' must be an I64 or I32 tensor of shape [B, T] with B, T >= 1");
    if (const ManifestTensor *lab = m.inputWithRole("labels"))
      if (lab->shape != tok->shape || !isIndex(lab->dtype))
        fail("the labels input '" + lab->name +
             "' must be I64 or I32 with the tokens' shape");
  }
  // Without tokens, labels are one of the arrays ./train reads from .npy
  // files (array_data.h), like every other input.
  if (const ManifestTensor *step = m.inputWithRole("step"))
    if (step->elements != 1 || !isIndex(step->dtype))
      fail("the step input '" + step->name + "' must be an I64 or I32 scalar");

  m.outputs = parseList(root, "outputs", m.arenaBytes, "arena_bytes");
  for (const char *name : {"loss", "grad_norm", "lr"})
    if (const ManifestTensor *t = m.output(name))
      if (!isFloatScalar(*t))
        fail(std::string("the output '") + name +
             "' must be an F32 or F64 scalar");

  if (const Value *h = root.get("hparams")) {
    expectKind(*h, Value::Kind::Object, "\"hparams\"");
    for (const auto &[key, value] : h->object) {
      std::string where = "hparams." + key;
      const std::string &target =
          expectKind(value, Value::Kind::String, where).string;
      const ManifestTensor *p = m.param(target);
      if (!p)
        fail(where + " names '" + target + "', which is not a param");
      if (!isFloatScalar(*p))
        fail(where + " names '" + target +
             "', which is not an F32 or F64 scalar");
      for (const auto &seen : m.hparams)
        if (seen.first == key)
          fail("hparams: '" + key + "' given twice");
      m.hparams.emplace_back(key, target);
    }
  }

  if (const Value *ops = root.get("ops")) {
    expectKind(*ops, Value::Kind::Array, "\"ops\"");
    for (size_t i = 0; i < ops->array.size(); ++i)
      m.ops.push_back(expectKind(ops->array[i], Value::Kind::String,
                                 "ops[" + std::to_string(i) + "]")
                          .string);
  }

  if (const Value *model = root.get("model"))
    m.model = expectKind(*model, Value::Kind::String, "\"model\"").string;
  if (const Value *opt = root.get("optimizer"))
    if (opt->isString())
      m.optimizer = opt->string;

  if (const Value *mesh = root.get("mesh")) {
    expectKind(*mesh, Value::Kind::Object, "\"mesh\"");
    for (auto [key, field] : {std::pair<const char *, int64_t *>{"pp", &m.meshPp},
                              {"dp", &m.meshDp},
                              {"tp", &m.meshTp}})
      if (const Value *v = mesh->get(key)) {
        *field = nonNegative(*v, std::string("mesh.") + key);
        if (*field < 1 || *field > 65536)
          fail(std::string("mesh.") + key + " must be in [1, 65536]");
      }
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    parseShard(root.get("params")->array[i], m.params[i], m.meshTp,
               "params[" + std::to_string(i) + "] ('" + m.params[i].name + "')");
    parseZero(root.get("params")->array[i], m.params[i], m.meshDp,
              "params[" + std::to_string(i) + "] ('" + m.params[i].name + "')");
  }
  if (const Value *d = root.get("defaults")) {
    expectKind(*d, Value::Kind::Object, "\"defaults\"");
    if (const Value *lr = d->get("lr")) {
      if (!lr->isNumber() || !std::isfinite(lr->number) || lr->number < 0)
        fail("defaults.lr must be a finite non-negative number");
      m.defaultLr = lr->number;
    }
    if (const Value *seed = d->get("seed"))
      m.defaultSeed = nonNegative(*seed, "defaults.seed");
    if (const Value *s = d->get("sampler")) {
      std::optional<Sampler> sampler = parseSampler(
          expectKind(*s, Value::Kind::String, "defaults.sampler").string);
      if (!sampler)
        fail("defaults.sampler must be \"random\" or \"sequential\"");
      m.defaultSampler = sampler;
    }
    if (const Value *opt = d->get("optimizer"))
      m.optimizer =
          expectKind(*opt, Value::Kind::String, "defaults.optimizer").string;
  }
  return m;
}

} // namespace

const ManifestTensor *Manifest::param(const std::string &name) const {
  for (const ManifestTensor &t : params)
    if (t.name == name)
      return &t;
  return nullptr;
}

const ManifestTensor *Manifest::inputWithRole(const std::string &r) const {
  for (const ManifestTensor &t : inputs)
    if (t.role == r)
      return &t;
  return nullptr;
}

const ManifestTensor *Manifest::output(const std::string &name) const {
  for (const ManifestTensor &t : outputs)
    if (t.name == name)
      return &t;
  return nullptr;
}

Result<Manifest> parseManifest(std::string_view text) {
  try {
    Value root;
    std::string error;
    if (!json::parse(text, root, error))
      return Result<Manifest>::error("not valid JSON: " + error);
    return parseRoot(root);
  } catch (const ManifestError &e) {
    return Result<Manifest>::error(e.message);
  } catch (const std::exception &e) {
    return Result<Manifest>::error(std::string("cannot read it: ") + e.what());
  }
}

} // namespace merak::rt
