//===- manifest_schema.h - The manifest's JSON schema, once ------*- C++ -*-===//
//
// The manifest merak-compile embeds in every generated program (program.h
// describes its meaning) as typed structs with nlohmann-json to_json and
// from_json. The compiler (lib/Target) fills these and writes them; the
// runtime (src/manifest.cpp, src/pipeline.cpp) reads them back and checks
// what the types cannot (offsets inside regions, known dtypes, ...).
//
// Each struct lists its members once, in visit(): key, member, and whether
// a reader may find it absent (std::optional members, or kDefaulted: the
// member keeps its initial value). Writing follows nlohmann's std::map, so
// keys come out sorted, as llvm::json wrote them.
//
// Reading throws schema::Error, naming the place as the runtime always has:
// "manifest: missing \"inputs\"", "\"arena_bytes\" must be a non-negative
// integer", "params[0] ('w'): shape dimension must be ...", "ops[1] must be
// a string, got an integer", "mesh.dp ...". Every integer of the manifest is
// non-negative. Members a struct does not list are ignored. The compiler
// builds without exceptions (JSON_NOEXCEPTION) and only writes: the reading
// half is left out there.
//
// Header-only; includes nothing of the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_MANIFEST_SCHEMA_H
#define MERAK_RT_MANIFEST_SCHEMA_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#ifndef JSON_NOEXCEPTION
#include <set>
#include <stdexcept>
#include <type_traits>
#endif

namespace merak::rt::schema {

/// How a reader treats an absent member that is not a std::optional.
enum Need { kRequired, kDefaulted };
/// Elements of a list named "<list> dimension" in errors (shapes).
constexpr const char *kDimension = "dimension";

/// An integer that may be negative (the manifest's other integers are
/// sizes, offsets and counts, read as non-negative).
struct SignedInt {
  int64_t value = 0;
};
inline void to_json(nlohmann::json &j, const SignedInt &s) { j = s.value; }

/// Tensor parallelism: dimension `axis` as [blocks, parts, rest], or, with
/// `block_sizes`, as blocks of those lengths, each cut into `parts`.
struct Shard {
  int64_t axis = 0, parts = 0, blocks = 1;
  std::optional<std::vector<int64_t>> blockSizes;
  /// The group whose ranks hold the parts: "tp" (tensor parallelism) or
  /// "ep" (expert parallelism: an expert weight split on its expert axis).
  std::string group = "tp";
  /// An expert weight's (or its optimizer state's) placement table (the
  /// Moe table whose permutation orders its experts), if any.
  std::optional<int64_t> placement;
  template <class S, class V> static void visit(S &s, V &v) {
    v("axis", s.axis);
    v("parts", s.parts);
    v("blocks", s.blocks);
    v("group", s.group, kDefaulted);
    v("placement", s.placement);
    v("block_sizes", s.blockSizes);
  }
};

/// ZeRO-1: a dp rank's part of the flattened tensor.
struct Zero {
  int64_t parts = 0;
  template <class S, class V> static void visit(S &s, V &v) { v("parts", s.parts); }
};

/// A param (kind, bytes, shard, zero, ...), input (role) or output.
struct Tensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  std::optional<int64_t> bytes;
  std::optional<std::string> kind, role;
  std::optional<Shard> shard;
  std::optional<Zero> zero;
  std::optional<std::vector<int64_t>> globalShape;
  std::optional<int64_t> dataOffset, dataBytes;
  /// Integer inputs: values must lie in [0, indexLimit) (token ids: the
  /// vocabulary), from merak-record-index-limits.
  std::optional<int64_t> indexLimit;
  /// Labels: the one value outside [0, indexLimit) allowed, which the loss
  /// skips (PyTorch's ignore_index, -100), from merak-attach-loss.
  std::optional<SignedInt> ignoreIndex;
  template <class S, class V> static void visit(S &s, V &v) {
    v("name", s.name);
    v("dtype", s.dtype);
    v("shape", s.shape, kRequired, kDimension);
    v("bytes", s.bytes);
    v("offset", s.offset);
    v("kind", s.kind);
    v("role", s.role);
    v("shard", s.shard);
    v("global_shape", s.globalShape, kRequired, kDimension);
    v("data_offset", s.dataOffset);
    v("data_bytes", s.dataBytes);
    v("zero", s.zero);
    v("index_limit", s.indexLimit);
    v("ignore_index", s.ignoreIndex);
  }
};

/// Compile-time choices; every other member is a run-time hyper-parameter's
/// default, by its "hparams" key ("lr").
struct Defaults {
  std::optional<std::string> optimizer, sampler;
  std::optional<int64_t> seed;
  std::map<std::string, double> hparams;
  template <class S, class V> static void visit(S &s, V &v) {
    v("optimizer", s.optimizer);
    v("sampler", s.sampler);
    v("seed", s.seed);
    v.rest(s.hparams);
  }
};

/// The initial data in a safetensors file next to the executable: `file`
/// (a name, looked up in the executable's directory) whose metadata
/// "merak.program" is `id`, this compilation's.
struct Weights {
  std::string file, id;
  template <class S, class V> static void visit(S &s, V &v) {
    v("file", s.file);
    v("id", s.id);
  }
};

/// Dynamic expert placement (merak.expert_place): table n is the i64
/// parameter `param` ([E], a permutation: logical expert l in slot
/// placement[l]); the params whose shard names n hold their experts in slot
/// order. Moving one expert costs `weight_rows` rows of the layer's
/// all-to-all (its weights alone).
struct MoeTable {
  int64_t table = 0;
  std::string param;
  int64_t weightRows = 1;
  template <class S, class V> static void visit(S &s, V &v) {
    v("table", s.table);
    v("param", s.param);
    v("weight_rows", s.weightRows);
  }
};

/// The trainer's default rebalancing period (steps) and the tables.
struct Moe {
  int64_t rebalanceEvery = 0;
  std::vector<MoeTable> tables;
  template <class S, class V> static void visit(S &s, V &v) {
    v("rebalance_every", s.rebalanceEvery, kDefaulted);
    v("tables", s.tables, kDefaulted);
  }
};

/// The device mesh (mpirun -np pp*dp*tp).
struct Mesh {
  int64_t pp = 1, dp = 1, tp = 1;
  /// Expert parallelism, folded into dp (divides it; adds no ranks).
  int64_t ep = 1;
  template <class S, class V> static void visit(S &s, V &v) {
    v("pp", s.pp, kDefaulted);
    v("dp", s.dp, kDefaulted);
    v("tp", s.tp, kDefaulted);
    v("ep", s.ep, kDefaulted);
  }
};

/// What a pipeline fragment's arguments and results share: where they lie
/// in A (no offset: the fragment reads or writes them only in the runner's
/// buffer, runtime/include/merak_rt/pipeline.h) and, for messages and kept
/// values, in their buffer.
struct FragmentSlot {
  std::optional<int64_t> offset;
  int64_t bytes = 0;
  std::optional<int64_t> msgOffset;
  template <class S, class V> static void visit(S &s, V &v) {
    v("offset", s.offset);
    v("bytes", s.bytes);
    v("msg_offset", s.msgOffset);
  }
};

/// An argument: where its bytes come from.
struct FragmentArg : FragmentSlot {
  std::string source;
  std::optional<int64_t> inputOffset;
  template <class S, class V> static void visit(S &s, V &v) {
    FragmentSlot::visit(s, v);
    v("source", s.source);
    v("input_offset", s.inputOffset);
  }
};

/// A result: where its bytes go.
struct FragmentResult : FragmentSlot {
  std::string dest, dtype;
  std::optional<int64_t> outOffset;
  template <class S, class V> static void visit(S &s, V &v) {
    FragmentSlot::visit(s, v);
    v("dest", s.dest);
    v("dtype", s.dtype, kDefaulted);
    v("out_offset", s.outOffset);
  }
};

struct Fragment {
  std::string name, kind;
  int64_t stage = 0, arenaBytes = 0;
  std::vector<FragmentArg> args;
  std::vector<FragmentResult> results;
  template <class S, class V> static void visit(S &s, V &v) {
    v("name", s.name, kDefaulted);
    v("stage", s.stage);
    v("kind", s.kind);
    v("arena_bytes", s.arenaBytes, kDefaulted);
    v("args", s.args);
    v("results", s.results);
  }
};

/// Per model stage: message and kept-value sizes, the params it owns and
/// the params its fragments use.
struct StageInfo {
  int64_t actInBytes = 0, actOutBytes = 0, cotInBytes = 0, cotOutBytes = 0;
  int64_t stashBytes = 0, rstashBytes = 0, wstashBytes = 0;
  std::vector<std::string> owned, params;
  template <class S, class V> static void visit(S &s, V &v) {
    v("act_in_bytes", s.actInBytes);
    v("act_out_bytes", s.actOutBytes);
    v("cot_in_bytes", s.cotInBytes);
    v("cot_out_bytes", s.cotOutBytes);
    v("stash_bytes", s.stashBytes, kDefaulted);
    v("rstash_bytes", s.rstashBytes, kDefaulted);
    v("wstash_bytes", s.wstashBytes, kDefaulted);
    v("owned", s.owned, kDefaulted);
    v("params", s.params);
  }
};

/// A gradient accumulator several pipeline ranks hold.
struct SharedAccumulator {
  std::string name;
  std::vector<int64_t> stages;
  template <class S, class V> static void visit(S &s, V &v) {
    v("name", s.name);
    v("stages", s.stages);
  }
};

/// One instruction of a rank's pipeline program: [op, mb] or, interleaved,
/// [op, mb, chunk] (mb -1: of no micro-batch; the one exception to
/// non-negative integers).
struct Instr {
  std::string op;
  int64_t mb = 0;
  std::optional<int64_t> chunk;
};

struct Pipeline {
  int64_t stages = 1, virtualStages = 1, microbatches = 1;
  std::string schedule;
  std::vector<Fragment> fragments;
  std::vector<StageInfo> stageInfo;
  std::vector<std::string> accumulators;
  std::vector<SharedAccumulator> shared;
  std::vector<std::vector<Instr>> programs; ///< per pipeline rank
  template <class S, class V> static void visit(S &s, V &v) {
    v("stages", s.stages);
    v("virtual_stages", s.virtualStages, kDefaulted);
    v("microbatches", s.microbatches);
    v("schedule", s.schedule, kDefaulted);
    v("fragments", s.fragments);
    v("stage_info", s.stageInfo);
    v("accumulators", s.accumulators);
    v("shared", s.shared);
    v("programs", s.programs);
  }
};

/// The manifest.
struct Program {
  int64_t format = 1;
  std::string entry, model;
  int64_t arenaBytes = 0, paramsBytes = 0, constsOffset = 0, constsBytes = 0;
  std::optional<int64_t> paramsInitBytes; ///< absent: params_bytes
  std::vector<Tensor> params, inputs, outputs;
  std::map<std::string, std::string> hparams; ///< key ("lr") -> param name
  Defaults defaults;
  std::optional<std::string> optimizer; ///< older manifests: defaults.optimizer
  std::vector<std::string> ops;         ///< op index -> name, for traces
  /// op index -> shape key (merak/Dialect/Merak/Analysis/OpCosts.h), for
  /// --profile-ops; empty in older manifests.
  std::vector<std::string> opKeys;
  Mesh mesh;
  std::optional<Pipeline> pipeline;
  std::optional<Weights> weights; ///< absent: the data is merak_data
  std::optional<Moe> moe;         ///< absent: no placement tables
  template <class S, class V> static void visit(S &s, V &v) {
    v("format", s.format);
    v("entry", s.entry, kDefaulted);
    v("model", s.model, kDefaulted);
    v("arena_bytes", s.arenaBytes);
    v("params_bytes", s.paramsBytes);
    v("params_init_bytes", s.paramsInitBytes);
    v("consts_offset", s.constsOffset);
    v("consts_bytes", s.constsBytes);
    v("params", s.params);
    v("inputs", s.inputs);
    v("outputs", s.outputs);
    v("hparams", s.hparams, kDefaulted);
    v("defaults", s.defaults, kDefaulted);
    v("optimizer", s.optimizer);
    v("ops", s.ops, kDefaulted);
    v("op_keys", s.opKeys, kDefaulted);
    v("mesh", s.mesh, kDefaulted);
    v("pipeline", s.pipeline);
    v("weights", s.weights);
    v("moe", s.moe);
  }
};

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace detail {
/// visit() visitor that fills a JSON object; absent optionals are left out.
struct Writer {
  nlohmann::json &out;
  template <class T>
  void operator()(const char *key, const T &v, Need = kRequired, const char * = nullptr) {
    out[key] = v;
  }
  template <class T>
  void operator()(const char *key, const std::optional<T> &v, Need = kRequired,
                  const char * = nullptr) {
    if (v)
      out[key] = *v;
  }
  template <class T> void rest(const std::map<std::string, T> &members) {
    for (const auto &[key, v] : members)
      out[key] = v;
  }
};

template <class T> void write(nlohmann::json &j, const T &s) {
  j = nlohmann::json::object();
  Writer w{j};
  T::visit(s, w);
}
} // namespace detail

inline void to_json(nlohmann::json &j, const Shard &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Zero &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Tensor &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Defaults &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Mesh &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Weights &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const MoeTable &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Moe &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const FragmentArg &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const FragmentResult &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Fragment &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const StageInfo &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const SharedAccumulator &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Pipeline &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Program &s) { detail::write(j, s); }
inline void to_json(nlohmann::json &j, const Instr &i) {
  j = nlohmann::json::array({i.op, i.mb});
  if (i.chunk)
    j.push_back(*i.chunk);
}

/// The manifest's text: compact, keys sorted; invalid UTF-8 in a name
/// becomes U+FFFD.
inline std::string dump(const Program &p) {
  return nlohmann::json(p).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

//===----------------------------------------------------------------------===//
// Reading (not in the compiler: it builds without exceptions)
//===----------------------------------------------------------------------===//
#ifndef JSON_NOEXCEPTION

/// What is wrong with a manifest, and where.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void fail(const std::string &message) { throw Error(message); }

/// How errors name a value: `value` in "<value> must be ..."; `path` for
/// the values inside it, after `sep` for members of an object.
struct Label {
  std::string value, path, sep;
};

inline const char *kindName(const nlohmann::json &j) {
  switch (j.type()) {
  case nlohmann::json::value_t::null: return "null";
  case nlohmann::json::value_t::boolean: return "a boolean";
  case nlohmann::json::value_t::number_integer:
  case nlohmann::json::value_t::number_unsigned: return "an integer";
  case nlohmann::json::value_t::number_float: return "a number";
  case nlohmann::json::value_t::string: return "a string";
  case nlohmann::json::value_t::array: return "a list";
  case nlohmann::json::value_t::object: return "an object";
  default: return "a value";
  }
}

inline void expect(bool ok, const nlohmann::json &j, const Label &l, const char *what) {
  if (!ok)
    fail(l.value + " must be " + what + ", got " + kindName(j));
}

template <class T> struct IsVector : std::false_type {};
template <class T> struct IsVector<std::vector<T>> : std::true_type {};
template <class T> struct IsMap : std::false_type {};
template <class T> struct IsMap<std::map<std::string, T>> : std::true_type {};

template <class T> void read(const nlohmann::json &j, T &out, const Label &l, const char *noun);

/// visit() visitor that reads a JSON object's members.
class Reader {
public:
  /// `where` names the object ("manifest", "params[1] ('w')"); `prefix`
  /// comes before its members' keys; the manifest's own members are quoted.
  Reader(const nlohmann::json &j, std::string where, std::string prefix, bool quote)
      : j_(j), where_(std::move(where)), prefix_(std::move(prefix)), quote_(quote) {}

  template <class T>
  void operator()(const char *key, T &out, Need need = kRequired, const char *noun = nullptr) {
    if (const nlohmann::json *v = find(key))
      read(*v, out, label(key), noun);
    else if (need == kRequired)
      fail(where_ + ": missing \"" + key + "\"");
  }
  template <class T>
  void operator()(const char *key, std::optional<T> &out, Need = kRequired,
                  const char *noun = nullptr) {
    if (const nlohmann::json *v = find(key))
      read(*v, out.emplace(), label(key), noun);
  }
  /// Every member not visited before.
  template <class T> void rest(std::map<std::string, T> &out) {
    for (const auto &[key, v] : j_.items())
      if (!seen_.count(key))
        read(v, out[key], label(key), nullptr);
  }

private:
  const nlohmann::json *find(const char *key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  Label label(const std::string &key) const {
    return {quote_ ? "\"" + key + "\"" : prefix_ + key, prefix_ + key, "."};
  }
  const nlohmann::json &j_;
  std::string where_, prefix_;
  bool quote_;
  std::set<std::string> seen_;
};

/// [op, mb] or [op, mb, chunk]; mb is -1 for the instructions of no
/// micro-batch (update, wait-sends).
inline void readInstr(const nlohmann::json &j, Instr &out, const Label &l) {
  const size_t n = j.is_array() ? j.size() : 0;
  auto isInt = [&](size_t i) {
    return j[i].is_number_integer() &&
           (!j[i].is_number_unsigned() || j[i].get<uint64_t>() <= INT64_MAX);
  };
  if ((n != 2 && n != 3) || !j[0].is_string() || !isInt(1) || (n == 3 && !isInt(2)))
    fail(l.value + " must be [op, micro-batch] or [op, micro-batch, chunk]");
  out.op = j[0].get<std::string>();
  out.mb = j[1].get<int64_t>();
  if (n == 3)
    out.chunk = j[2].get<int64_t>();
}

template <class T> void read(const nlohmann::json &j, T &out, const Label &l, const char *noun) {
  if constexpr (std::is_same_v<T, int64_t>) {
    bool ok = j.is_number_unsigned() ? j.get<uint64_t>() <= INT64_MAX
                                     : j.is_number_integer() && j.get<int64_t>() >= 0;
    if (!ok)
      fail(l.value + " must be a non-negative integer");
    out = j.get<int64_t>();
  } else if constexpr (std::is_same_v<T, SignedInt>) {
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX))
      fail(l.value + " must be an integer");
    out.value = j.get<int64_t>();
  } else if constexpr (std::is_same_v<T, double>) {
    expect(j.is_number(), j, l, "a number");
    out = j.get<double>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    expect(j.is_string(), j, l, "a string");
    out = j.get<std::string>();
  } else if constexpr (std::is_same_v<T, Instr>) {
    readInstr(j, out, l);
  } else if constexpr (IsVector<T>::value) {
    expect(j.is_array(), j, l, "a list");
    out.resize(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      // "params[1] ('w')", "ops[1]", "params[0] ('w'): shape dimension".
      std::string at = l.path + "[" + std::to_string(i) + "]";
      if (j[i].is_object() && j[i].contains("name") && j[i]["name"].is_string() &&
          !j[i]["name"].template get<std::string>().empty())
        at += " ('" + j[i]["name"].template get<std::string>() + "')";
      read(j[i], out[i], {noun ? l.path + " " + noun : at, at, ": "}, nullptr);
    }
  } else if constexpr (IsMap<T>::value) {
    expect(j.is_object(), j, l, "an object");
    for (const auto &[key, v] : j.items())
      read(v, out[key], {l.path + "." + key, l.path + "." + key, "."}, nullptr);
  } else {
    expect(j.is_object(), j, l, "an object");
    Reader r(j, l.path, l.path + l.sep, false);
    T::visit(out, r);
  }
}

template <class T> void readMembers(const nlohmann::json &j, T &out) {
  read(j, out, {"the value", "", ""}, nullptr);
}
} // namespace detail

inline void from_json(const nlohmann::json &j, Shard &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Zero &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Tensor &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Defaults &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Mesh &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Weights &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, MoeTable &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Moe &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, FragmentArg &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, FragmentResult &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Fragment &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, StageInfo &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, SharedAccumulator &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Pipeline &s) { detail::readMembers(j, s); }
inline void from_json(const nlohmann::json &j, Instr &i) {
  detail::readInstr(j, i, {"the instruction", "", ""});
}
/// The whole manifest, with the runtime's names for every place.
inline void from_json(const nlohmann::json &j, Program &p) {
  if (!j.is_object())
    detail::fail(std::string("the manifest must be an object, got ") + detail::kindName(j));
  detail::Reader r(j, "manifest", "", true);
  Program::visit(p, r);
}

#endif // JSON_NOEXCEPTION

} // namespace merak::rt::schema

#endif // MERAK_RT_MANIFEST_SCHEMA_H
