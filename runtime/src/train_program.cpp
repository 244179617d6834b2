//===- train_program.cpp - ./train's program, data and inputs -------------===//
//
// See train_program.h.
//
//===----------------------------------------------------------------------===//
#include "train_program.h"

#include "merak_rt/program.h"

#include "train_support.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

namespace merak::rt::train {

namespace {
/// Stores `n` indices into an I64 or I32 tensor of A.
void writeIndices(char *base, const ManifestTensor &t, const int64_t *values, uint64_t n) {
  char *dst = base + t.offset;
  if (t.dtype == DType::I64) {
    std::memcpy(dst, values, n * sizeof(int64_t));
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    int32_t v = static_cast<int32_t>(values[i]);
    std::memcpy(dst + i * sizeof(int32_t), &v, sizeof(v));
  }
}

/// The label_count input of step s: the global batch's labels other than
/// the ignore_index (every label of a token file counts), over the pieces.
Status fillLabelCount(const Program &program, Datasets &data, int64_t s, char *A) {
  const ManifestTensor &labels = *program.countedLabels;
  const int64_t globalBatch = program.batch * program.manifest.meshDp;
  int64_t counted = 0;
  if (data.arrays) {
    auto at = std::find(program.arrayInputs.begin(), program.arrayInputs.end(), &labels);
    if (at == program.arrayInputs.end())
      return Status::error("internal: the counted labels '" + labels.name + "' are not read");
    Result<int64_t> n = data.arrays->countOther(at - program.arrayInputs.begin(), s, globalBatch,
                                                *labels.ignoreIndex);
    if (!n.ok())
      return n.status();
    counted = n.value();
  } else {
    counted = globalBatch * (labels.elements / program.batch);
  }
  if (counted == 0)
    return Status::error("every label of the batch is the ignore_index " +
                         std::to_string(*labels.ignoreIndex) +
                         ": the loss has no label to average (a batch of padding only)");
  const float value = static_cast<float>(static_cast<double>(counted) / program.pieces);
  std::memcpy(A + program.labelCount->offset, &value, sizeof(value));
  return Status();
}

} // namespace

Program loadProgram() {
  Result<Manifest> parsed = parseManifest(merak_manifest);
  if (!parsed.ok())
    internalError("the embedded manifest is invalid: " + parsed.message());
  Program p;
  p.manifest = std::move(parsed).value();
  const Manifest &m = p.manifest;
  // With a weights file, its tensors are checked when it is opened.
  if (!m.weights && merak_data_size < m.constsOffset + m.constsBytes)
    internalError("the embedded data holds " + std::to_string(merak_data_size) +
                  " bytes, but the manifest needs consts_offset " + std::to_string(m.constsOffset) +
                  " + consts_bytes " + std::to_string(m.constsBytes));
  for (const ManifestTensor &t : m.params)
    if (!m.weights && t.dataBytes > 0 &&
        (t.dataOffset > merak_data_size || t.dataBytes > merak_data_size - t.dataOffset))
      internalError("the embedded data holds " + std::to_string(merak_data_size) +
                    " bytes, but the shards of '" + t.name + "' lie at " +
                    std::to_string(t.dataOffset) + " + " + std::to_string(t.dataBytes));
  // Token ids alone (a language model) come from a token file. Without
  // them (an MLP, a CNN), or with other inputs beside them (an attention
  // mask), every input but the step comes from a directory of .npy arrays
  // (array_data.h): input_ids.npy, attention_mask.npy, labels.npy.
  const ManifestTensor *ids = m.inputWithRole("tokens");
  bool others = std::any_of(m.inputs.begin(), m.inputs.end(),
                            [](const ManifestTensor &in) { return in.role == "other"; });
  p.tokens = others ? nullptr : ids;
  for (const ManifestTensor &in : m.inputs)
    if (!p.tokens && in.role != "step" && in.role != "label_count") {
      if (in.shape.empty() || (!p.arrayInputs.empty() && in.shape[0] != p.arrayInputs[0]->shape[0]))
        internalError("input '" + in.name +
                      "' has no batch dimension shared "
                      "with the other inputs");
      p.arrayInputs.push_back(&in);
    }
  if (!p.tokens && p.arrayInputs.empty())
    internalError("the manifest has no input to feed");
  p.labels = m.inputWithRole("labels");
  p.step = m.inputWithRole("step");
  p.labelCount = m.inputWithRole("label_count");
  for (const ManifestTensor &in : m.inputs)
    if (in.ignoreIndex)
      p.countedLabels = &in;
  p.pieces = m.meshDp * (m.pipeline ? m.pipeline->microbatches : 1);
  p.loss = m.output("loss");
  p.gradNorm = m.output("grad_norm");
  p.lr = m.output("lr");
  static const std::set<std::string> kStandard = {
      "step", "loss", "lr", "grad_norm", "tokens_per_s", "time_ms", "nonfinite"};
  for (const ManifestTensor &out : m.outputs)
    if (!kStandard.count(out.name) && out.elements == 1 &&
        (out.dtype == DType::F32 || out.dtype == DType::F64))
      p.extraOutputs.push_back(&out);
  if (p.tokens) {
    p.batch = p.tokens->shape[0];
    p.seqLen = p.tokens->shape[1];
  } else {
    p.batch = p.arrayInputs[0]->shape[0];
    // Without token ids "tokens" per second are samples per second.
    p.seqLen = ids ? ids->shape[1] : 1;
  }
  return p;
}

Datasets openData(const Program &program, const TrainOptions &o) {
  Datasets d;
  if (!program.tokens) {
    std::vector<ArraySpec> specs;
    for (const ManifestTensor *in : program.arrayInputs)
      specs.push_back({in->name, in->dtype,
                       std::vector<int64_t>(in->shape.begin() + 1, in->shape.end()), in->indexLimit,
                       in->ignoreIndex});
    Result<ArrayDataset> opened = ArrayDataset::open(o.data, specs, o.sampler, o.seed);
    if (!opened.ok())
      die(kExitError, opened.message());
    d.arrays.emplace(std::move(opened).value());
  }
  if (program.tokens) {
    Result<TokenDataset> opened = TokenDataset::open(o.data, program.seqLen, o.sampler, o.seed);
    if (!opened.ok())
      die(kExitError, opened.message());
    d.tokens.emplace(std::move(opened).value());
    // Labels are the same file shifted by one: both limits apply to it.
    int64_t limit = program.tokens->indexLimit;
    if (program.labels && program.labels->indexLimit > 0)
      limit = limit > 0 ? std::min(limit, program.labels->indexLimit) : program.labels->indexLimit;
    if (limit > 0)
      if (Status st = d.tokens->checkIds(limit); !st.ok())
        die(kExitError, st.message());
  }
  return d;
}

const char *constants(const Manifest &m, const WeightsFile *w, Buffer &constsCopy) {
  const char *C = reinterpret_cast<const char *>(merak_data) + m.constsOffset;
  if (w && m.constsBytes > 0) {
    C = w->tensor(kConstantsTensor, m.constsBytes);
    if (!C)
      die(kExitError, "the weights file '" + w->path() + "' has no " +
                          std::to_string(m.constsBytes) + " bytes of constants '" +
                          kConstantsTensor + "' (recompile the program)");
  }
  if (reinterpret_cast<uintptr_t>(C) % kAlignment != 0) {
    constsCopy = allocateAligned(m.constsBytes, "constants");
    std::memcpy(constsCopy.get(), C, m.constsBytes);
    C = constsCopy.get();
  }
  return C;
}

Status fillStepInputs(const Program &program, Datasets &data, int64_t s, int64_t dpRank, char *A,
                      std::vector<int64_t> &inputs, std::vector<int64_t> &labels) {
  const int64_t globalBatch = program.batch * program.manifest.meshDp;
  const int64_t begin = dpRank * program.batch, end = (dpRank + 1) * program.batch;
  if (data.arrays) {
    for (size_t i = 0; i < program.arrayInputs.size(); ++i)
      if (Status st =
              data.arrays->fill(i, s, globalBatch, begin, end, A + program.arrayInputs[i]->offset);
          !st.ok())
        return st;
  } else {
    if (Status st = data.tokens->fill(s, globalBatch, begin, end, inputs.data(), labels.data());
        !st.ok())
      return st;
    writeIndices(A, *program.tokens, inputs.data(), inputs.size());
    if (program.labels)
      writeIndices(A, *program.labels, labels.data(), labels.size());
  }
  if (program.labelCount)
    if (Status st = fillLabelCount(program, data, s, A); !st.ok())
      return st;
  if (program.step)
    writeIndices(A, *program.step, &s, 1);
  return Status();
}

} // namespace merak::rt::train
