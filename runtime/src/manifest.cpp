//===- manifest.cpp - The manifest of a generated program -----------------===//
#include "manifest.h"

#include "json_util.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <tuple>

namespace merak::rt {

namespace {

/// Thrown inside the checks only; parseManifest turns it into an error.
struct ManifestError {
  std::string message;
};

[[noreturn]] void fail(const std::string &message) {
  throw ManifestError{message};
}

/// An integer of the manifest (the schema checked that it is >= 0).
uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

ManifestTensor checkTensor(const schema::Tensor &v, const std::string &where,
                           uint64_t regionBytes, const char *regionName) {
  ManifestTensor t;
  t.name = v.name;
  if (t.name.empty())
    fail(where + ": empty name");
  std::string at = where + " ('" + t.name + "')";
  std::optional<DType> d = parseDType(v.dtype);
  if (!d)
    fail(at + ": unknown dtype '" + v.dtype + "'");
  t.dtype = *d;
  t.shape = v.shape;
  std::optional<uint64_t> n = elementCount(t.shape);
  if (!n || *n > (UINT64_MAX / 16))
    fail(at + ": shape too large");
  t.elements = *n;
  t.bytes = *n * dtypeSize(t.dtype);
  if (v.bytes && u64(*v.bytes) != t.bytes)
    fail(at + ": bytes is " + std::to_string(*v.bytes) + " but the shape " +
         "and dtype need " + std::to_string(t.bytes));
  t.offset = u64(v.offset);
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

std::vector<ManifestTensor> checkList(const std::vector<schema::Tensor> &list,
                                      const char *key, uint64_t regionBytes,
                                      const char *regionName) {
  std::vector<ManifestTensor> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    out.push_back(checkTensor(list[i], where, regionBytes, regionName));
    if (!names.insert(out.back().name).second)
      fail(where + ": duplicate name '" + out.back().name + "'");
  }
  return out;
}

/// A param's tensor-parallel "shard", "global_shape", "data_offset" and
/// "data_bytes" (see program.h).
void checkShard(const schema::Tensor &v, ManifestTensor &t, int64_t tp, int64_t ep,
                const std::string &where) {
  if (!v.shard)
    return;
  t.shardAxis = v.shard->axis;
  t.shardParts = v.shard->parts;
  t.shardBlocks = v.shard->blocks;
  if (v.shard->blockSizes)
    t.shardBlockSizes = *v.shard->blockSizes;
  if (v.shard->group != "tp" && v.shard->group != "ep")
    fail(where + ": shard.group must be \"tp\" or \"ep\", got \"" + v.shard->group + "\"");
  t.expertShard = v.shard->group == "ep";
  if (v.shard->placement) {
    t.placement = *v.shard->placement;
    if (!t.expertShard || t.shardAxis != 0)
      fail(where + ": shard.placement needs an \"ep\" shard of axis 0");
  }
  int64_t parts = t.expertShard ? ep : tp;
  if (t.shardParts != parts)
    fail(where + ": shard.parts " + std::to_string(t.shardParts) + " differs from mesh." +
         v.shard->group + " " + std::to_string(parts));
  if (!v.globalShape)
    fail(where + ": missing \"global_shape\"");
  t.globalShape = *v.globalShape;
  // With "zero" too, shape is the ZeRO part of the shard (checked there).
  const bool zero = v.zero.has_value();
  if (t.shardAxis >= static_cast<int64_t>(t.globalShape.size()) || t.shardBlocks < 1)
    fail(where + ": shard axis or blocks out of range");
  // Only a one-block axis may be padded to divide (vocabulary parallelism).
  bool ok = t.shardBlocks == 1 ||
            t.globalShape[t.shardAxis] % (t.shardBlocks * t.shardParts) == 0;
  if (!t.shardBlockSizes.empty()) {
    // Blocks of their own lengths: one per block, each divisible by the
    // parts, together the whole axis (never padded).
    int64_t total = 0;
    ok = static_cast<int64_t>(t.shardBlockSizes.size()) == t.shardBlocks;
    for (int64_t len : t.shardBlockSizes) {
      ok = ok && len > 0 && len % t.shardParts == 0;
      total += len;
    }
    if (!ok || total != t.globalShape[t.shardAxis])
      fail(where + ": shard.block_sizes must be shard.blocks lengths, each divisible by "
                   "shard.parts, summing to global_shape[axis]");
  }
  ok = ok && (zero || t.globalShape.size() == t.shape.size());
  for (size_t d = 0; !zero && ok && d < t.shape.size(); ++d)
    ok = static_cast<int64_t>(d) == t.shardAxis ? t.shape[d] == t.shardLocalLength()
                                                : t.globalShape[d] == t.shape[d];
  if (!ok)
    fail(where + ": global_shape does not match the shard's shape and layout");
  if (v.dataOffset) {
    if (!v.dataBytes)
      fail(where + ": missing \"data_bytes\"");
    t.dataOffset = u64(*v.dataOffset);
    t.dataBytes = u64(*v.dataBytes);
    uint64_t full = dtypeSize(t.dtype);
    for (int64_t d : t.globalShape)
      full *= static_cast<uint64_t>(d);
    if (t.dataBytes != full)
      fail(where + ": data_bytes " + std::to_string(t.dataBytes) +
           " is not the full tensor's size");
  }
}

/// A param's ZeRO-1 "zero" {"parts"} and "global_shape" (see program.h).
void checkZero(const schema::Tensor &v, ManifestTensor &t, int64_t dp, int64_t ep,
               const std::string &where) {
  if (!v.zero)
    return;
  t.zeroParts = v.zero->parts;
  // An expert shard's state is split over its expert-data-parallel group.
  int64_t parts = t.expertShard ? dp / ep : dp;
  if (t.zeroParts != parts)
    fail(where + ": zero.parts " + std::to_string(t.zeroParts) + " differs from " +
         (t.expertShard ? "mesh.dp / mesh.ep " : "mesh.dp ") + std::to_string(parts));
  if (!t.sharded()) { // (a shard's state: read by checkShard)
    if (!v.globalShape)
      fail(where + ": missing \"global_shape\"");
    t.globalShape = *v.globalShape;
  }
  uint64_t n = t.zeroSourceElements();
  uint64_t part = (n + t.zeroParts - 1) / t.zeroParts;
  if (t.shape.size() != 1 || static_cast<uint64_t>(t.shape[0]) != part)
    fail(where + ": a ZeRO part of " + std::to_string(n) + " elements over " +
         std::to_string(t.zeroParts) + " ranks must have shape [" + std::to_string(part) + "]");
}

/// The sizes of the regions, checked against each other.
void checkSizes(const schema::Program &p, Manifest &m) {
  m.arenaBytes = u64(p.arenaBytes);
  m.paramsBytes = u64(p.paramsBytes);
  // Storage past params_init_bytes (optimizer state) starts as zeros and
  // has no bytes in the data; absent, everything has.
  m.paramsInitBytes = p.paramsInitBytes ? u64(*p.paramsInitBytes) : m.paramsBytes;
  if (m.paramsInitBytes > m.paramsBytes)
    fail("params_init_bytes " + std::to_string(m.paramsInitBytes) +
         " exceeds params_bytes " + std::to_string(m.paramsBytes));
  m.constsOffset = u64(p.constsOffset);
  m.constsBytes = u64(p.constsBytes);
  if (m.constsOffset < m.paramsInitBytes)
    fail("consts_offset " + std::to_string(m.constsOffset) +
         " is inside the parameter data (params_init_bytes " +
         std::to_string(m.paramsInitBytes) + ")");
  if (m.constsBytes > UINT64_MAX - m.constsOffset)
    fail("consts_offset + consts_bytes overflows");
}

/// Params, inputs and outputs: kinds, roles, and what ./train feeds and reads.
void checkTensors(const schema::Program &p, Manifest &m) {
  m.params = checkList(p.params, "params", m.paramsBytes, "params_bytes");
  for (size_t i = 0; i < m.params.size(); ++i) {
    std::string where =
        "params[" + std::to_string(i) + "] ('" + m.params[i].name + "')";
    if (!p.params[i].kind)
      fail(where + ": missing \"kind\"");
    const std::string &k = m.params[i].kind = *p.params[i].kind;
    if (k != "trainable" && k != "frozen" && k != "buffer" && k != "state" && k != "scratch" &&
        k != "hparam")
      fail(where + ": unknown kind '" + k +
           "' (expected trainable, frozen, buffer, state, scratch or hparam)");
  }

  m.inputs = checkList(p.inputs, "inputs", m.arenaBytes, "arena_bytes");
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    ManifestTensor &t = m.inputs[i];
    std::string where = "inputs[" + std::to_string(i) + "] ('" + t.name + "')";
    if (!p.inputs[i].role)
      fail(where + ": missing \"role\"");
    t.role = *p.inputs[i].role;
    if (p.inputs[i].indexLimit) {
      if (*p.inputs[i].indexLimit < 1 || !isIndex(t.dtype))
        fail(where + ": index_limit needs an integer input and a limit >= 1");
      t.indexLimit = *p.inputs[i].indexLimit;
    }
    if (p.inputs[i].ignoreIndex) {
      if (!isIndex(t.dtype))
        fail(where + ": ignore_index needs an integer input");
      t.ignoreIndex = p.inputs[i].ignoreIndex->value;
    }
    if (t.role != "tokens" && t.role != "labels" && t.role != "step" && t.role != "label_count" &&
        t.role != "other")
      fail(where + ": unknown role '" + t.role +
           "' (expected tokens, labels, step, label_count or other)");
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
  // The loss's count of labels (merak-attach-loss's global-mean): a float
  // scalar, of the labels of an input with an ignore_index.
  if (const ManifestTensor *count = m.inputWithRole("label_count")) {
    if (count->elements != 1 || count->dtype != DType::F32)
      fail("the label_count input '" + count->name + "' must be an F32 scalar");
    if (std::none_of(m.inputs.begin(), m.inputs.end(),
                     [](const ManifestTensor &in) { return in.ignoreIndex.has_value(); }))
      fail("the label_count input '" + count->name +
           "' needs labels with an ignore_index to count");
  }

  m.outputs = checkList(p.outputs, "outputs", m.arenaBytes, "arena_bytes");
  for (const char *name : {"loss", "grad_norm", "lr"})
    if (const ManifestTensor *t = m.output(name))
      if (!isFloatScalar(*t))
        fail(std::string("the output '") + name +
             "' must be an F32 or F64 scalar");
}

/// "moe": each table an I64 [E] frozen param; each placed shard's table
/// among them, with E experts.
void checkMoe(const schema::Program &p, Manifest &m) {
  m.moe = p.moe;
  std::vector<int64_t> experts; // by table index, 0: no table
  if (m.moe)
    for (size_t i = 0; i < m.moe->tables.size(); ++i) {
      const schema::MoeTable &t = m.moe->tables[i];
      std::string where = "moe.tables[" + std::to_string(i) + "]";
      const ManifestTensor *param = m.param(t.param);
      if (!param || param->dtype != DType::I64 || param->shape.size() != 1 ||
          param->kind != "frozen" || param->sharded() || param->shape[0] < 1)
        fail(where + ": '" + t.param + "' is not a frozen unsharded I64 [E] param");
      if (t.table < 0 || t.table > 65536 || t.weightRows < 1)
        fail(where + ": table must be in [0, 65536] and weight_rows at least 1");
      if (static_cast<int64_t>(experts.size()) <= t.table)
        experts.resize(static_cast<size_t>(t.table) + 1, 0);
      if (experts[t.table])
        fail(where + ": table " + std::to_string(t.table) + " is given twice");
      experts[t.table] = param->shape[0];
    }
  for (const ManifestTensor &t : m.params) {
    if (t.placement < 0)
      continue;
    if (t.placement >= static_cast<int64_t>(experts.size()) || !experts[t.placement])
      fail("params ('" + t.name + "'): shard.placement " + std::to_string(t.placement) +
           " names no moe table");
    if (t.globalShape[0] != experts[t.placement])
      fail("params ('" + t.name + "'): " + std::to_string(t.globalShape[0]) +
           " experts, but its placement table has " + std::to_string(experts[t.placement]));
  }
}

Manifest check(const schema::Program &p) {
  Manifest m;
  m.format = 1;
  m.entry = p.entry;
  checkSizes(p, m);
  checkTensors(p, m);
  for (const auto &[key, target] : p.hparams) {
    std::string where = "hparams." + key;
    const ManifestTensor *param = m.param(target);
    if (!param)
      fail(where + " names '" + target + "', which is not a param");
    if (!isFloatScalar(*param))
      fail(where + " names '" + target + "', which is not an F32 or F64 scalar");
    m.hparams.emplace_back(key, target);
  }
  m.ops = p.ops;
  if (!p.opKeys.empty() && p.opKeys.size() != p.ops.size())
    fail("op_keys has " + std::to_string(p.opKeys.size()) + " entries but ops has " +
         std::to_string(p.ops.size()));
  m.opKeys = p.opKeys;
  m.model = p.model;
  if (p.optimizer)
    m.optimizer = *p.optimizer;
  for (auto [key, v, field] : {std::tuple<const char *, int64_t, int64_t *>{"pp", p.mesh.pp, &m.meshPp},
                               {"dp", p.mesh.dp, &m.meshDp},
                               {"tp", p.mesh.tp, &m.meshTp},
                               {"ep", p.mesh.ep, &m.meshEp}}) {
    if (v < 1 || v > 65536)
      fail(std::string("mesh.") + key + " must be in [1, 65536]");
    *field = v;
  }
  if (m.meshDp % m.meshEp != 0)
    fail("mesh.ep " + std::to_string(m.meshEp) + " must divide mesh.dp " +
         std::to_string(m.meshDp));
  for (size_t i = 0; i < m.params.size(); ++i) {
    std::string where = "params[" + std::to_string(i) + "] ('" + m.params[i].name + "')";
    checkShard(p.params[i], m.params[i], m.meshTp, m.meshEp, where);
    checkZero(p.params[i], m.params[i], m.meshDp, m.meshEp, where);
  }
  const schema::Defaults &d = p.defaults;
  if (auto lr = d.hparams.find("lr"); lr != d.hparams.end()) {
    if (!std::isfinite(lr->second) || lr->second < 0)
      fail("defaults.lr must be a finite non-negative number");
    m.defaultLr = lr->second;
  }
  if (d.seed)
    m.defaultSeed = u64(*d.seed);
  if (d.sampler) {
    std::optional<Sampler> sampler = parseSampler(*d.sampler);
    if (!sampler)
      fail("defaults.sampler must be \"random\" or \"sequential\"");
    m.defaultSampler = sampler;
  }
  if (d.optimizer)
    m.optimizer = *d.optimizer;
  m.pipeline = p.pipeline;
  m.weights = p.weights;
  checkMoe(p, m);
  if (m.weights && (m.weights->file.empty() || m.weights->file.find('/') != std::string::npos))
    fail("weights.file must be a file name (looked up next to the executable)");
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
    ParsedJson parsed = parseJson(text);
    const nlohmann::json &root = parsed.value;
    if (!parsed.duplicate.empty()) {
      std::string path;
      for (const std::string &k : parsed.duplicate)
        path += (path.empty() || k[0] == '[' ? "" : ".") + k;
      return Result<Manifest>::error("'" + path + "' given twice");
    }
    // The format first: what follows is format 1's schema.
    if (root.is_object()) {
      auto format = root.find("format");
      if (format == root.end())
        return Result<Manifest>::error("manifest: missing \"format\"");
      if (!format->is_number_integer() || format->get<int64_t>() != 1)
        return Result<Manifest>::error(
            "unsupported \"format\" (this runtime reads format 1)");
    }
    return check(root.get<schema::Program>());
  } catch (const ManifestError &e) {
    return Result<Manifest>::error(e.message);
  } catch (const schema::Error &e) {
    return Result<Manifest>::error(e.what());
  } catch (const nlohmann::json::parse_error &e) {
    return Result<Manifest>::error("not valid JSON: " + jsonErrorText(e));
  } catch (const std::exception &e) {
    return Result<Manifest>::error(std::string("cannot read it: ") + e.what());
  }
}

} // namespace merak::rt
