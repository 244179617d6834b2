//===- pipeline.cpp - The pipeline interpreter (see pipeline.h) -----------===//
#include "merak_rt/pipeline.h"

#include "merak_rt/comm.h"

#include "json.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace merak::rt {

namespace {

struct ParseError {
  std::string message;
};

[[noreturn]] void bad(const std::string &m) { throw ParseError{m}; }

const json::Value &at(const json::Value &v, const char *key) {
  const json::Value *x = v.get(key);
  if (!x)
    bad(std::string("missing \"") + key + "\"");
  return *x;
}
int64_t integer(const json::Value &v, const char *key) {
  const json::Value &x = at(v, key);
  if (!x.isInteger() || x.integer < 0)
    bad(std::string("\"") + key + "\" must be a non-negative integer");
  return x.integer;
}
int64_t optInteger(const json::Value &v, const char *key) {
  return v.get(key) ? integer(v, key) : 0;
}
const std::string &str(const json::Value &v, const char *key) {
  const json::Value &x = at(v, key);
  if (!x.isString())
    bad(std::string("\"") + key + "\" must be a string");
  return x.string;
}

struct Slot {
  std::string kind; // source or dest
  uint64_t offset = 0, bytes = 0, msgOffset = 0, outOffset = 0;
  uint64_t inputOffset = 0; ///< source "input": the step input's offset in A
  bool f64 = false;
};
struct Fragment {
  std::vector<Slot> args, results;
};
struct Tensor {
  uint64_t offset = 0, bytes = 0;
  bool f64 = false;
};
struct Instr {
  std::string op;
  int64_t mb = -1;
};

struct AlignedFree {
  void operator()(char *p) const { std::free(p); }
};
using Bytes = std::unique_ptr<char, AlignedFree>;
Bytes allocate(uint64_t bytes) {
  void *p = nullptr;
  uint64_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
  if (::posix_memalign(&p, 64, n) != 0 || !p)
    throw std::bad_alloc();
  std::memset(p, 0, n);
  return Bytes(static_cast<char *>(p));
}

double readScalar(const char *p, bool f64) {
  if (f64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
void writeScalar(char *p, bool f64, double value) {
  if (f64) {
    std::memcpy(p, &value, 8);
  } else {
    float v = static_cast<float>(value);
    std::memcpy(p, &v, 4);
  }
}

} // namespace

struct PipelineRunner::Impl {
  Comm *comm = nullptr;
  int64_t stages = 1, microbatches = 1, stage = 0, dp = 1;
  std::vector<Fragment> fragments;
  std::vector<Instr> program;
  uint64_t actIn = 0, actOut = 0, cotIn = 0, cotOut = 0, stashBytes = 0;
  std::vector<Tensor> accumulators;
  struct Shared {
    Tensor acc;
    std::vector<int> stages;
  };
  std::vector<Shared> shared;
  /// Param name -> the first stage whose fragments use it; and the params
  /// this rank's stage uses (stage_info "params").
  std::map<std::string, int> firstUser;
  std::set<std::string> usedHere;
  Tensor tokens, labels, loss;
  bool haveTokens = false, haveLabels = false, haveLoss = false;

  // Per micro-batch buffers: stashed stage inputs, outgoing activations,
  // incoming and outgoing gradients.
  std::vector<Bytes> actInBuf, actOutBuf, cotInBuf, cotOutBuf;
  // Activations a forward stashes for its backward (merak-recompute): a
  // buffer taken from a pool at the forward and returned after the
  // backward, so the pool grows to the micro-batches in flight (1F1B:
  // min(m, stages - stage)), not to m.
  std::vector<Bytes> stashPool;
  std::vector<char *> stashFree, stashOf;
  std::vector<Comm::Request> recvAct, recvGrad, sends;
  double lossSum = 0;

  void parse(const json::Value &root);
  Status run(char *A, char *P, const char *C, int64_t step);
  void copyArgs(const Fragment &f, char *A, int64_t mb);
  Status update(char *A, char *P, const char *C, int64_t step);
};

void PipelineRunner::Impl::parse(const json::Value &root) {
  const json::Value &pl = at(root, "pipeline");
  stages = integer(pl, "stages");
  microbatches = integer(pl, "microbatches");
  if (stages < 1 || microbatches < 1 || microbatches > 16000)
    bad("bad stages or microbatches");
  if (const json::Value *mesh = root.get("mesh"))
    dp = mesh->get("dp") ? integer(*mesh, "dp") : 1;
  stage = comm ? comm->coord().pp : 0;
  if (stage >= stages)
    bad("this rank's stage is outside the pipeline");
  for (const json::Value &f : at(pl, "fragments").array) {
    Fragment fr;
    for (const char *list : {"args", "results"})
      for (const json::Value &s : at(f, list).array) {
        Slot slot;
        slot.kind = str(s, list[0] == 'a' ? "source" : "dest");
        slot.offset = integer(s, "offset");
        slot.bytes = integer(s, "bytes");
        slot.msgOffset = optInteger(s, "msg_offset");
        slot.outOffset = optInteger(s, "out_offset");
        slot.inputOffset = optInteger(s, "input_offset");
        if (const json::Value *d = s.get("dtype"))
          slot.f64 = d->isString() && d->string == "F64";
        (list[0] == 'a' ? fr.args : fr.results).push_back(slot);
      }
    fragments.push_back(std::move(fr));
  }
  if (static_cast<int64_t>(fragments.size()) != 3 * stages)
    bad("expected 3 fragments per stage");
  const json::Value &info = at(pl, "stage_info").array.at(stage);
  actIn = integer(info, "act_in_bytes");
  actOut = integer(info, "act_out_bytes");
  cotIn = integer(info, "cot_in_bytes");
  cotOut = integer(info, "cot_out_bytes");
  stashBytes = optInteger(info, "stash_bytes");
  for (const json::Value &i : at(pl, "programs").array.at(stage).array) {
    if (!i.isArray() || i.array.size() != 2 || !i.array[0].isString() || !i.array[1].isInteger())
      bad("bad instruction");
    if (i.array[1].integer >= microbatches)
      bad("instruction micro-batch out of range");
    program.push_back({i.array[0].string, i.array[1].integer});
  }

  std::map<std::string, Tensor> params;
  for (const json::Value &p : at(root, "params").array)
    params[str(p, "name")] = {static_cast<uint64_t>(integer(p, "offset")),
                              static_cast<uint64_t>(integer(p, "bytes")),
                              str(p, "dtype") == "F64"};
  auto param = [&](const std::string &name) {
    auto it = params.find(name);
    if (it == params.end())
      bad("no param '" + name + "'");
    return it->second;
  };
  const json::Value &infos = at(pl, "stage_info");
  for (int64_t s = stages - 1; s >= 0; --s)
    for (const json::Value &n : at(infos.array.at(s), "params").array) {
      param(n.string); // must exist
      firstUser[n.string] = static_cast<int>(s);
      if (s == stage)
        usedHere.insert(n.string);
    }
  // Accumulators are zeroed before every step: only this stage's, so that
  // the pages of other stages' parameters are never touched.
  for (const json::Value &a : at(pl, "accumulators").array)
    if (usedHere.count(a.string))
      accumulators.push_back(param(a.string));
  for (const json::Value &s : at(pl, "shared").array) {
    Shared sh{param(str(s, "name")), {}};
    for (const json::Value &x : at(s, "stages").array)
      sh.stages.push_back(static_cast<int>(x.integer));
    shared.push_back(std::move(sh));
  }

  for (const json::Value &in : at(root, "inputs").array) {
    Tensor t{static_cast<uint64_t>(integer(in, "offset")), 0, false};
    if (str(in, "role") == "tokens")
      tokens = t, haveTokens = true;
    else if (str(in, "role") == "labels")
      labels = t, haveLabels = true;
  }
  for (const json::Value &out : at(root, "outputs").array)
    if (str(out, "name") == "loss")
      loss = {static_cast<uint64_t>(integer(out, "offset")), 0, str(out, "dtype") == "F64"},
      haveLoss = true;

  for (int64_t mb = 0; mb < microbatches; ++mb) {
    actInBuf.push_back(allocate(actIn));
    actOutBuf.push_back(allocate(actOut));
    cotInBuf.push_back(allocate(cotIn));
    cotOutBuf.push_back(allocate(cotOut));
  }
  stashOf.assign(microbatches, nullptr);
  recvAct.resize(microbatches);
  recvGrad.resize(microbatches);
}

void PipelineRunner::Impl::copyArgs(const Fragment &f, char *A, int64_t mb) {
  for (const Slot &s : f.args) {
    const char *src = nullptr;
    if (s.kind == "tokens")
      src = A + tokens.offset + mb * s.bytes;
    else if (s.kind == "labels")
      src = A + labels.offset + mb * s.bytes;
    else if (s.kind == "input") // an array input (features, images)
      src = A + s.inputOffset + mb * s.bytes;
    else if (s.kind == "act")
      src = actInBuf[mb].get() + s.msgOffset;
    else if (s.kind == "cot")
      src = cotInBuf[mb].get() + s.msgOffset;
    else if (s.kind == "stash")
      src = stashOf[mb] + s.msgOffset;
    if (src)
      std::memcpy(A + s.offset, src, s.bytes);
  }
}

Status PipelineRunner::Impl::update(char *A, char *P, const char *C, int64_t step) {
  // Tied parameters: every holder gets every other holder's accumulator
  // and sums them all in stage order.
  for (size_t i = 0; i < shared.size(); ++i) {
    const Shared &sh = shared[i];
    bool holds = false;
    for (int s : sh.stages)
      holds |= s == stage;
    if (!holds || sh.stages.size() < 2)
      continue;
    std::vector<Bytes> theirs(sh.stages.size());
    std::vector<Comm::Request> reqs;
    int tag = 20000 + static_cast<int>(i % 10000);
    for (size_t h = 0; h < sh.stages.size(); ++h) {
      if (sh.stages[h] == stage)
        continue;
      theirs[h] = allocate(sh.acc.bytes);
      reqs.push_back(comm->recv(Axis::PP, sh.stages[h], theirs[h].get(), sh.acc.bytes, tag));
      reqs.push_back(comm->send(Axis::PP, sh.stages[h], P + sh.acc.offset, sh.acc.bytes, tag));
    }
    if (Status s = comm->waitAll(reqs, "exchange of tied-parameter gradients"); !s.ok())
      return s;
    std::vector<char> sum(sh.acc.bytes);
    for (size_t h = 0; h < sh.stages.size(); ++h) {
      const char *src = sh.stages[h] == stage ? P + sh.acc.offset : theirs[h].get();
      if (h == 0) {
        std::memcpy(sum.data(), src, sh.acc.bytes);
        continue;
      }
      if (sh.acc.f64) {
        auto *d = reinterpret_cast<double *>(sum.data());
        const auto *x = reinterpret_cast<const double *>(src);
        for (uint64_t e = 0; e < sh.acc.bytes / 8; ++e)
          d[e] += x[e];
      } else {
        auto *d = reinterpret_cast<float *>(sum.data());
        const auto *x = reinterpret_cast<const float *>(src);
        for (uint64_t e = 0; e < sh.acc.bytes / 4; ++e)
          d[e] += x[e];
      }
    }
    std::memcpy(P + sh.acc.offset, sum.data(), sh.acc.bytes);
  }
  const Fragment &f = fragments[3 * stage + 2];
  for (const Slot &s : f.args)
    if (s.kind == "step")
      std::memcpy(A + s.offset, &step, sizeof(step));
  merak_run_fragment(3 * stage + 2, A, P, C);
  for (const Slot &s : f.results)
    if (s.kind == "grad_norm" || s.kind == "lr")
      std::memcpy(A + s.outOffset, A + s.offset, s.bytes);
  return Status();
}

Status PipelineRunner::Impl::run(char *A, char *P, const char *C, int64_t step) {
  for (const Tensor &t : accumulators)
    std::memset(P + t.offset, 0, t.bytes);
  lossSum = 0;
  const int prev = static_cast<int>(stage) - 1, next = static_cast<int>(stage) + 1;
  for (const Instr &in : program) {
    int64_t mb = in.mb;
    int actTag = static_cast<int>(2 * mb), gradTag = static_cast<int>(2 * mb + 1);
    if (in.op == "recv-act") {
      recvAct[mb] = comm->recv(Axis::PP, prev, actInBuf[mb].get(), actIn, actTag);
    } else if (in.op == "wait-act") {
      if (Status s = comm->wait(recvAct[mb], "receive of activations"); !s.ok())
        return s;
    } else if (in.op == "recv-grad") {
      recvGrad[mb] = comm->recv(Axis::PP, next, cotInBuf[mb].get(), cotIn, gradTag);
    } else if (in.op == "wait-grad") {
      if (Status s = comm->wait(recvGrad[mb], "receive of gradients"); !s.ok())
        return s;
    } else if (in.op == "send-act") {
      sends.push_back(comm->send(Axis::PP, next, actOutBuf[mb].get(), actOut, actTag));
    } else if (in.op == "send-grad") {
      sends.push_back(comm->send(Axis::PP, prev, cotOutBuf[mb].get(), cotOut, gradTag));
    } else if (in.op == "wait-sends") {
      if (!sends.empty())
        if (Status s = comm->waitAll(sends, "send of activations or gradients"); !s.ok())
          return s;
      sends.clear();
    } else if (in.op == "fwd" || in.op == "bwd") {
      bool fwd = in.op == "fwd";
      int64_t k = 3 * stage + (fwd ? 0 : 1);
      const Fragment &f = fragments[k];
      if (fwd && stashBytes && !stashOf[mb]) {
        if (stashFree.empty()) {
          stashPool.push_back(allocate(stashBytes));
          stashFree.push_back(stashPool.back().get());
        }
        stashOf[mb] = stashFree.back();
        stashFree.pop_back();
      } else if (!fwd && stashBytes && !stashOf[mb]) {
        return Status::error("backward of micro-batch " + std::to_string(mb) +
                             " before its forward");
      }
      copyArgs(f, A, mb);
      merak_run_fragment(k, A, P, C);
      if (!fwd && stashOf[mb]) {
        stashFree.push_back(stashOf[mb]);
        stashOf[mb] = nullptr;
      }
      for (const Slot &s : f.results) {
        if (s.kind == "act")
          std::memcpy(actOutBuf[mb].get() + s.msgOffset, A + s.offset, s.bytes);
        else if (s.kind == "cot")
          std::memcpy(cotOutBuf[mb].get() + s.msgOffset, A + s.offset, s.bytes);
        else if (s.kind == "stash")
          std::memcpy(stashOf[mb] + s.msgOffset, A + s.offset, s.bytes);
        else if (s.kind == "loss")
          lossSum += readScalar(A + s.offset, s.f64);
      }
    } else if (in.op == "update") {
      if (Status s = update(A, P, C, step); !s.ok())
        return s;
    } else {
      return Status::error("unknown pipeline instruction '" + in.op + "'");
    }
  }
  // The loss: the mean over micro-batches and data-parallel ranks, from the
  // last stage to every rank.
  double mean = lossSum / static_cast<double>(microbatches);
  if (comm && stage == stages - 1 && dp > 1) {
    Comm::Request r = comm->allReduceSum(Axis::DP, &mean, 1, CommType::F64);
    if (Status s = comm->wait(r, "all-reduce of the loss"); !s.ok())
      return s;
    mean /= static_cast<double>(dp);
  }
  if (comm && stages > 1) {
    Comm::Request r =
        comm->broadcast(Axis::PP, &mean, 1, CommType::F64, static_cast<int>(stages - 1));
    if (Status s = comm->wait(r, "broadcast of the loss"); !s.ok())
      return s;
  }
  if (haveLoss)
    writeScalar(A + loss.offset, loss.f64, mean);
  return Status();
}

PipelineRunner::PipelineRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PipelineRunner::~PipelineRunner() = default;

Result<std::unique_ptr<PipelineRunner>> PipelineRunner::create(std::string_view manifestJson,
                                                               Comm *comm) {
  json::Value root;
  std::string error;
  if (!json::parse(manifestJson, root, error))
    return Result<std::unique_ptr<PipelineRunner>>::error("the manifest is not JSON: " + error);
  if (!root.get("pipeline"))
    return std::unique_ptr<PipelineRunner>();
  if (!merak_run_fragment)
    return Result<std::unique_ptr<PipelineRunner>>::error(
        "the manifest describes a pipeline but the program has no fragments");
  auto impl = std::make_unique<Impl>();
  impl->comm = comm;
  try {
    impl->parse(root);
  } catch (const ParseError &e) {
    return Result<std::unique_ptr<PipelineRunner>>::error("the manifest's pipeline: " +
                                                          e.message);
  } catch (const std::out_of_range &) {
    return Result<std::unique_ptr<PipelineRunner>>::error(
        "the manifest's pipeline: a list is too short");
  }
  if (!comm && (impl->stages > 1 || impl->dp > 1))
    return Result<std::unique_ptr<PipelineRunner>>::error(
        "a parallel pipeline program needs its communicator");
  return std::unique_ptr<PipelineRunner>(new PipelineRunner(std::move(impl)));
}

Status PipelineRunner::step(char *A, char *P, const char *C, int64_t step) {
  return impl_->run(A, P, C, step);
}

int PipelineRunner::ownerStage(const std::string &param) const {
  auto it = impl_->firstUser.find(param);
  return it == impl_->firstUser.end() ? 0 : it->second;
}

bool PipelineRunner::touches(const std::string &param) const {
  return impl_->usedHere.count(param) || ownerStage(param) == impl_->stage;
}

} // namespace merak::rt
