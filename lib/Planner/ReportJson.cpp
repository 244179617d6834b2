//===- ReportJson.cpp - merak-compile --report=json ------------------------===//
//
// The collected report (ReportModel.h) as JSON; the keys are documented in
// docs/user-guide.md.
//
//===----------------------------------------------------------------------===//
#include "ReportModel.h"

using namespace mlir;
using namespace mlir::merak;

namespace mlir::merak::report {

static json::Array shapeJson(ArrayRef<int64_t> shape) {
  json::Array a;
  for (int64_t d : shape)
    a.push_back(d);
  return a;
}

static json::Array intsJson(ArrayRef<int64_t> values) { return shapeJson(values); }

/// One parameter of a stage's "params".
static json::Object paramJson(const ParamInfo &p) {
  json::Object o{
      {"name", p.name},   {"shape", shapeJson(p.shape)},           {"elements", p.elements},
      {"bytes", p.bytes}, {"optimizer_state_bytes", p.stateBytes}, {"trainable", p.trainable}};
  if (p.holders.size() > 1)
    o["tied_stages"] = intsJson(p.holders);
  if (p.shard) {
    o["shard"] = json::Object{{"kind", p.split},
                              {"axis", p.shard->axis},
                              {"parts", p.shard->parts},
                              {"blocks", p.shard->blocks},
                              {"global_shape", shapeJson(p.globalShape)}};
    if (!p.shard->blockSizes.empty())
      (*o["shard"].getAsObject())["block_sizes"] = shapeJson(p.shard->blockSizes);
  }
  return o;
}

/// A stage's "collectives": {"all_reduce": {"tp": {count, bytes}, ...},
/// ..., "send": ..., "recv": ...}.
static json::Object collectivesJson(const StageInfo &st) {
  std::map<std::string, json::Object> byKind;
  for (auto &[key, t] : st.collectives) {
    auto [kind, g] = StringRef(key).split(' ');
    byKind[kind.str()][g] = json::Object{{"count", t.count}, {"bytes", t.bytes}};
  }
  json::Object collectives;
  for (auto &[kind, groups] : byKind)
    collectives[kind] = std::move(groups);
  collectives["send"] =
      json::Object{{"next", st.sendNext}, {"prev", st.sendPrev}, {"tied", st.tiedBytes}};
  collectives["recv"] =
      json::Object{{"next", st.recvNext}, {"prev", st.recvPrev}, {"tied", st.tiedBytes}};
  return collectives;
}

/// One entry of "stages" (its ranks: dp x tp of them, Megatron's order).
static json::Object stageJson(const Report &r, int64_t s, const StageInfo &st) {
  int64_t group = r.opts.dp * r.opts.tp;
  json::Array ranks, nodes, ps;
  for (int64_t k = s * group; k < (s + 1) * group; ++k)
    ranks.push_back(k);
  for (const std::string &n : st.nodes)
    nodes.push_back(n);
  for (const std::string &name : st.params)
    ps.push_back(paramJson(r.param(name)));
  json::Object arenas, copies;
  for (auto &[name, bytes] : st.arenas)
    arenas[name] = bytes;
  for (auto &[name, bytes] : st.copies)
    copies[name] = bytes;
  return json::Object{
      {"stage", s},
      {"ranks", std::move(ranks)},
      {"node_count", (int64_t)st.nodes.size()},
      {"nodes", std::move(nodes)},
      {"param_count", (int64_t)st.params.size()},
      {"param_elements", st.paramElements},
      {"param_bytes", st.paramBytes},
      {"optimizer_state_bytes", st.stateBytes},
      {"grad_accumulator_bytes", st.accumulatorBytes},
      {"params", std::move(ps)},
      {"activations",
       json::Object{
           {"arena_bytes", std::move(arenas)},
           {"arena_peak_bytes", st.arenaPeak()},
           {"copy_bytes", std::move(copies)},
           {"stash_bytes", st.stashBytes},
           {"stash_bytes_per_microbatch", st.stashPerMicrobatch},
           {"recompute", st.recompute.empty() ? json::Value(nullptr) : json::Value(st.recompute)}}},
      {"flops", json::Object{{"forward", st.forwardFlops},
                             {"backward", st.backwardFlops},
                             {"update", st.updateFlops},
                             {"total", st.flops()}}},
      {"partition_cost", st.partitionCost ? json::Value(*st.partitionCost) : json::Value(nullptr)},
      {"collectives", collectivesJson(st)},
  };
}

/// merak-sequence-parallel's reduce-scatters and all-gathers over tp, or
/// null without them.
static json::Value sequenceParallelJson(const Report &r) {
  Traffic scatters = r.total("reduce_scatter tp"), gathers = r.total("all_gather tp");
  if (!scatters.count)
    return nullptr;
  return json::Object{
      {"reduce_scatter", json::Object{{"count", scatters.count}, {"bytes", scatters.bytes}}},
      {"all_gather", json::Object{{"count", gathers.count}, {"bytes", gathers.bytes}}}};
}

/// "tensor_parallel": the sharded parameters, the vocabulary split (the
/// first shard's numbers, and every shard), the tp all-reduces.
static json::Object tensorParallelJson(const Report &r) {
  Traffic tpTotal = r.total("all_reduce tp");
  json::Array sharded;
  for (const ParamInfo &p : r.params)
    if (p.shard)
      sharded.push_back(json::Object{{"name", p.name},
                                     {"stages", intsJson(p.holders)},
                                     {"kind", p.split},
                                     {"axis", p.shard->axis},
                                     {"parts", p.shard->parts},
                                     {"blocks", p.shard->blocks},
                                     {"shape", shapeJson(p.shape)},
                                     {"global_shape", shapeJson(p.globalShape)}});
  int64_t tp = r.opts.tp;
  const ParamInfo *vocab = r.vocab;
  size_t axis = vocab ? vocab->shard->axis : 0;
  // Every vocabulary shard (a head, its bias, the tables), each on its axis.
  json::Array vocabShards;
  for (const ParamInfo &p : r.params)
    if (p.shard && p.split == "vocab")
      vocabShards.push_back(json::Object{{"param", p.name},
                                         {"axis", p.shard->axis},
                                         {"vocabulary", p.globalShape[p.shard->axis]},
                                         {"per_rank", p.shape[p.shard->axis]}});
  return json::Object{
      {"tp", tp},
      {"sharded", std::move(sharded)},
      {"vocab", vocab ? json::Value(json::Object{{"param", vocab->name},
                                                 {"vocabulary", vocab->globalShape[axis]},
                                                 {"per_rank", vocab->shape[axis]},
                                                 {"padded", vocab->shape[axis] * tp},
                                                 {"logits_split", r.vocabLoss},
                                                 {"shards", std::move(vocabShards)}})
                      : json::Value(nullptr)},
      {"all_reduce", json::Object{{"count", tpTotal.count}, {"bytes", tpTotal.bytes}}},
      {"sequence_parallel", sequenceParallelJson(r)}};
}

/// "data_parallel": the gradient buckets and the scalars reduced over dp.
static json::Object dataParallelJson(const Report &r) {
  json::Array buckets;
  int64_t bucketBytes = 0;
  for (const Bucket &b : r.dpBuckets) {
    buckets.push_back(json::Object{{"stage", b.stage},
                                   {"kind", b.kind},
                                   {"tensors", b.tensors},
                                   {"bytes", b.bytes},
                                   {"dtype", b.dtype}});
    bucketBytes += b.bytes;
  }
  return json::Object{{"dp", r.opts.dp},
                      {"bucket_count", (int64_t)r.dpBuckets.size()},
                      {"bucket_bytes", bucketBytes},
                      {"buckets", std::move(buckets)},
                      {"scalar_bytes", r.dpScalarBytes}};
}

json::Value Report::toJson() const {
  int64_t dp = opts.dp, tp = opts.tp, m = opts.microbatches, pp = stages.size();
  json::Object root;
  root["model"] = opts.model;
  root["mesh"] = json::Object{{"dp", dp}, {"tp", tp}, {"pp", pp}, {"world", dp * tp * pp},
                              {"ep", getMesh(module).ep}};
  root["microbatches"] = m;
  root["schedule"] = opts.schedule.empty() ? json::Value(nullptr) : json::Value(opts.schedule);
  root["optimizer"] = opts.optimizer;
  if (microbatchRows)
    root["batch"] = json::Object{{"global", microbatchRows * m * dp},
                                 {"per_dp_rank", microbatchRows * m},
                                 {"microbatch", microbatchRows},
                                 {"sequence", sequence}};
  else
    root["batch"] = nullptr;
  root["memory"] = json::Object{{"planned_by_compile", plannedByCompile},
                                {"param_storage_bytes", paramStorageBytes},
                                {"constant_bytes", constantBytes}};
  json::Array stageArr;
  for (auto [s, st] : llvm::enumerate(stages))
    stageArr.push_back(stageJson(*this, s, st));
  root["stages"] = std::move(stageArr);
  root["tensor_parallel"] = tensorParallelJson(*this);
  root["data_parallel"] = dataParallelJson(*this);
  if (pipelined) {
    int64_t p2p = 0;
    for (const StageInfo &st : stages)
      p2p += st.sendNext + st.sendPrev + st.tiedBytes;
    root["pipeline"] =
        json::Object{{"cut_points", cutPoints}, {"cuts", intsJson(cuts)}, {"send_bytes", p2p}};
  } else {
    root["pipeline"] = nullptr;
  }
  if (opts.simulated)
    root["simulated"] = simulatedStepJson(*opts.simulated);
  if (!opts.plannerJson.empty()) {
    if (llvm::Expected<json::Value> planner = json::parse(opts.plannerJson))
      root["planner"] = std::move(*planner);
    else
      llvm::consumeError(planner.takeError());
  }
  return json::Value(std::move(root));
}

} // namespace mlir::merak::report
