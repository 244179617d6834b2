//===- pipeline.cpp - The pipeline interpreter (see pipeline.h) -----------===//
#include "merak_rt/pipeline.h"

#include "merak_rt/comm.h"
#include "merak_rt/ops.h"

#include "pipeline_impl.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace merak::rt {

namespace {

/// Host memory (the CPU program): 64-byte aligned, zeroed.
class HostMemory final : public PipelineMemory {
public:
  const char *name() const override { return "host"; }
  bool hostResident() const override { return true; }
  char *allocate(uint64_t bytes, bool) override {
    void *p = nullptr;
    uint64_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    if (::posix_memalign(&p, 64, n) != 0 || !p)
      return nullptr;
    std::memset(p, 0, n);
    return static_cast<char *>(p);
  }
  void release(char *p, bool) override { std::free(p); }
  Status copy(void *dst, const void *src, uint64_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  Status zero(void *dst, uint64_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status();
  }
  Status synchronize() override { return Status(); }
};

} // namespace

PipelineMemory &hostPipelineMemory() {
  static HostMemory memory;
  return memory;
}

Status PipelineRunner::Impl::bindArgs(const Fragment &f, Chunk &ch, char *A, int64_t mb) {
  io.assign(f.args.size() + f.results.size(), nullptr);
  for (size_t i = 0; i < f.args.size(); ++i) {
    const Slot &s = f.args[i];
    const char *src = nullptr;
    bool inPlace = true; // the fragment reads the buffer itself
    if (s.kind == "tokens")
      src = A + tokens.offset + mb * s.bytes;
    else if (s.kind == "labels")
      src = A + labels.offset + mb * s.bytes;
    else if (s.kind == "input") // an array input (features, images)
      src = A + s.inputOffset + mb * s.bytes;
    else if (s.kind == "label_count") // the step's, the same for every micro-batch
      src = A + s.inputOffset;
    else if (s.kind == "act")
      src = ch.actIn.of[mb] + s.msgOffset, inPlace = memory->hostResident();
    else if (s.kind == "cot")
      src = ch.cotIn.of[mb] + s.msgOffset, inPlace = memory->hostResident();
    else if (int k = keptKind(s.kind); k >= 0)
      src = ch.kept[k].of[mb] + s.msgOffset;
    if (src && inPlace) {
      io[i] = const_cast<char *>(src); // read only
      continue;
    }
    // A staged message (host memory) goes into the fragment's arena.
    io[i] = A + s.offset;
    if (src)
      if (Status st = memory->copy(A + s.offset, src, s.bytes); !st.ok())
        return st;
  }
  return Status();
}

/// Runs a compute instruction's fragment for its micro-batch: kept buffers it
/// writes are taken from their pools, those it reads must hold an earlier
/// fragment's values, and after the micro-batch's last fragment every
/// buffer it holds goes back.
Status PipelineRunner::Impl::compute(const Instr &in, char *A, char *P, const char *C,
                                     size_t &lossIndex) {
  Chunk &ch = mine[in.chunk];
  const int64_t mb = in.mb, k = in.frag;
  const Fragment &f = fragments[k];
  for (const Slot &s : f.args) {
    int c = keptKind(s.kind);
    const Kept *from = c >= 0 ? &ch.kept[c] : s.kind == "act" ? &ch.actIn
                                            : s.kind == "cot" ? &ch.cotIn
                                                              : nullptr;
    if (from && !from->of[mb])
      return Status::error(f.kind + " of micro-batch " + std::to_string(mb) + " on stage " +
                           std::to_string(ch.stage) + " reads " + s.kind +
                           " values no earlier instruction provided");
  }
  for (const Slot &s : f.results) {
    Kept *to = nullptr;
    if (int c = keptKind(s.kind); c >= 0) {
      to = &ch.kept[c];
    } else if (s.kind == "act" || s.kind == "cot") {
      to = s.kind == "act" ? &ch.actOut : &ch.cotOut;
      if (to->free.empty())
        reapSends();
    }
    if (to && !to->take(mb, *memory))
      return noMemory(s.kind, to->bytes);
  }
  if (Status st = bindArgs(f, ch, A, mb); !st.ok())
    return st;
  // Results go straight into their stash or message buffer; a staged
  // message (device memory), the loss and unused results into the
  // fragment's arena slot, copied out after the call.
  const size_t nargs = f.args.size();
  for (size_t j = 0; j < f.results.size(); ++j) {
    const Slot &s = f.results[j];
    char *dst = nullptr;
    if ((s.kind == "act" || s.kind == "cot") && memory->hostResident())
      dst = (s.kind == "act" ? ch.actOut.of[mb] : ch.cotOut.of[mb]) + s.msgOffset;
    else if (int c = keptKind(s.kind); c >= 0 && !readsKind(f, s.kind))
      dst = ch.kept[c].of[mb] + s.msgOffset;
    io[nargs + j] = dst ? dst : A + s.offset;
  }
  // merak.dropout draws the micro-batch's masks (a recomputation too).
  cpu::trainingPosition().microbatch = mb;
  // A backward or recomputation reruns forward ops: the routing counts
  // stay those of the forward.
  cpu::setExpertCounting(f.kind == "forward" || f.kind == "forward_keep");
  merak_run_fragment(k, A, P, C, io.data());
  cpu::setExpertCounting(true);
  for (size_t j = 0; j < f.results.size(); ++j) {
    const Slot &s = f.results[j];
    if (s.offset < 0 || io[nargs + j] != A + s.offset)
      continue; // written in place
    char *dst = nullptr;
    if (s.kind == "act")
      dst = ch.actOut.of[mb] + s.msgOffset;
    else if (s.kind == "cot")
      dst = ch.cotOut.of[mb] + s.msgOffset;
    else if (int c = keptKind(s.kind); c >= 0)
      dst = ch.kept[c].of[mb] + s.msgOffset;
    else if (s.kind == "loss" && lossIndex < lossCount)
      dst = losses.data() + 8 * lossIndex++;
    if (dst)
      if (Status st = memory->copy(dst, A + s.offset, s.kind == "loss" ? (s.f64 ? 8 : 4) : s.bytes);
          !st.ok())
        return st;
  }
  if (in.releases) {
    // A staged receive's buffer may be read by a host -> device copy still
    // in flight; it goes back (and MPI may write it) only after that.
    if (!memory->hostResident() && (ch.actIn.of[mb] || ch.cotIn.of[mb]))
      if (Status st = memory->synchronize(); !st.ok())
        return st;
    for (Kept &pool : ch.kept)
      pool.give(mb);
    ch.actIn.give(mb);
    ch.cotIn.give(mb);
  }
  return Status();
}

void PipelineRunner::Impl::reapSends() {
  size_t kept = 0;
  for (PendingSend &p : sends) {
    if (comm->test(p.request)) {
      (void)comm->wait(p.request, "send of activations or gradients"); // done: returns at once
      p.free->push_back(p.buffer);
    } else {
      sends[kept++] = p;
    }
  }
  sends.resize(kept);
}

Status PipelineRunner::Impl::waitSends() {
  for (PendingSend &p : sends) {
    if (Status s = comm->wait(p.request, "send of activations or gradients"); !s.ok())
      return s;
    p.free->push_back(p.buffer);
  }
  sends.clear();
  return Status();
}

Status PipelineRunner::Impl::update(char *A, char *P, const char *C, int64_t step) {
  // Tied parameters: every holder gets every other holder's accumulator
  // and sums them all in stage order (on the host; a device accumulator
  // is copied out first and the sum copied back).
  const bool resident = memory->hostResident();
  for (size_t i = 0; i < shared.size(); ++i) {
    const Shared &sh = shared[i];
    bool holds = false;
    for (int s : sh.stages)
      holds |= s == rank;
    if (!holds || sh.stages.size() < 2)
      continue;
    std::vector<char> staged;
    const char *mine = P + sh.acc.offset;
    if (!resident) {
      staged.resize(sh.acc.bytes);
      if (Status s = memory->copy(staged.data(), mine, sh.acc.bytes); !s.ok())
        return s;
      if (Status s = memory->synchronize(); !s.ok())
        return s;
      mine = staged.data();
    }
    std::vector<Bytes> theirs(sh.stages.size());
    std::vector<Comm::Request> reqs;
    int tag = kTiedTagBase + static_cast<int>(i % 2000);
    for (size_t h = 0; h < sh.stages.size(); ++h) {
      if (sh.stages[h] == rank)
        continue;
      theirs[h] = Bytes(hostPipelineMemory().allocate(sh.acc.bytes, true),
                        Releaser{&hostPipelineMemory(), true});
      if (!theirs[h])
        return noMemory("tied-gradient", sh.acc.bytes);
      reqs.push_back(comm->recv(Axis::PP, sh.stages[h], theirs[h].get(), sh.acc.bytes, tag));
      reqs.push_back(comm->send(Axis::PP, sh.stages[h], mine, sh.acc.bytes, tag));
    }
    if (Status s = comm->waitAll(reqs, "exchange of tied-parameter gradients"); !s.ok())
      return s;
    std::vector<char> sum(sh.acc.bytes);
    for (size_t h = 0; h < sh.stages.size(); ++h) {
      const char *src = sh.stages[h] == rank ? mine : theirs[h].get();
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
    if (Status s = memory->copy(P + sh.acc.offset, sum.data(), sh.acc.bytes); !s.ok())
      return s;
    // `sum` is a host source: the copy must be done before it goes.
    if (!resident)
      if (Status s = memory->synchronize(); !s.ok())
        return s;
  }
  int64_t k = updateFragment;
  const Fragment &f = fragments[k];
  stepValue = step;
  bindArena(f, A);
  for (const Slot &s : f.args)
    if (s.kind == "step")
      if (Status st = memory->copy(A + s.offset, &stepValue, sizeof(stepValue)); !st.ok())
        return st;
  merak_run_fragment(k, A, P, C, io.data());
  for (const Slot &s : f.results)
    if (s.kind == "grad_norm" || s.kind == "lr")
      if (Status st = memory->copy(A + s.outOffset, A + s.offset, s.bytes); !st.ok())
        return st;
  return Status();
}


Status PipelineRunner::Impl::run(char *A, char *P, const char *C, int64_t step) {
  for (const Region &t : accumulators)
    if (Status s = memory->zero(P + t.offset, t.bytes); !s.ok())
      return s;
  // The chunks' narrow copies of their weights for this step
  // (merak-cache-param-casts), after the last update, restore or move.
  for (Chunk &ch : mine)
    if (auto it = ch.frags.find("prepare"); it != ch.frags.end()) {
      bindArena(fragments[it->second], A);
      merak_run_fragment(it->second, A, P, C, io.data());
    }
  const bool resident = memory->hostResident();
  size_t lossIndex = 0;
  const int prev = static_cast<int>((rank + ranks - 1) % ranks),
            next = static_cast<int>((rank + 1) % ranks);
  for (const Instr &in : program) {
    int64_t mb = in.mb;
    Chunk &ch = mine[in.chunk];
    if (in.op == "recv-act" || in.op == "recv-grad") {
      bool act = in.op == "recv-act";
      Kept &into = act ? ch.actIn : ch.cotIn;
      char *buffer = into.take(mb, *memory);
      if (!buffer)
        return noMemory(act ? "received activation" : "received gradient", into.bytes);
      (act ? ch.recvAct : ch.recvGrad)[mb] =
          comm->recv(Axis::PP, act ? prev : next, buffer, into.bytes, tag(ch.stage, mb, !act));
    } else if (in.op == "wait-act") {
      if (Status s = comm->wait(ch.recvAct[mb], "receive of activations"); !s.ok())
        return s;
    } else if (in.op == "wait-grad") {
      if (Status s = comm->wait(ch.recvGrad[mb], "receive of gradients"); !s.ok())
        return s;
    } else if (in.op == "send-act" || in.op == "send-grad") {
      bool act = in.op == "send-act";
      Kept &out = act ? ch.actOut : ch.cotOut;
      if (!out.of[mb])
        return Status::error(in.op + " of micro-batch " + std::to_string(mb) +
                             " before the fragment computing it");
      // A staged message: the device -> host copies into it must be done.
      if (!resident)
        if (Status s = memory->synchronize(); !s.ok())
          return s;
      char *buffer = out.of[mb];
      out.of[mb] = nullptr; // back to the pool once sent
      sends.push_back({comm->send(Axis::PP, act ? next : prev, buffer, out.bytes,
                                  act ? tag(ch.stage + 1, mb, false) : tag(ch.stage - 1, mb, true)),
                       &out.free, buffer});
    } else if (in.op == "wait-sends") {
      if (Status s = waitSends(); !s.ok())
        return s;
    } else if (in.frag >= 0) {
      if (Status st = compute(in, A, P, C, lossIndex); !st.ok())
        return st;
    } else if (in.op == "update") {
      if (Status s = update(A, P, C, step); !s.ok())
        return s;
    } else {
      return Status::error("unknown pipeline instruction '" + in.op + "'");
    }
  }
  // The losses copied out of A (device -> host on a device).
  if (Status s = memory->synchronize(); !s.ok())
    return s;
  double lossSum = 0;
  for (size_t i = 0; i < lossIndex; ++i)
    lossSum += readScalar(losses.data() + 8 * i, lossF64[i]);
  // The loss: the mean over micro-batches and data-parallel ranks, from the
  // rank of the last model stage to every rank.
  double mean = lossSum / static_cast<double>(microbatches);
  if (comm && rank == ranks - 1 && dp > 1) {
    Comm::Request r = comm->allReduceSum(Axis::DP, &mean, 1, CommType::F64);
    if (Status s = comm->wait(r, "all-reduce of the loss"); !s.ok())
      return s;
    mean /= static_cast<double>(dp);
  }
  if (comm && ranks > 1) {
    Comm::Request r =
        comm->broadcast(Axis::PP, &mean, 1, CommType::F64, static_cast<int>(ranks - 1));
    if (Status s = comm->wait(r, "broadcast of the loss"); !s.ok())
      return s;
  }
  if (haveLoss) {
    lossMean = mean;
    lossMeanF32 = static_cast<float>(mean);
    const void *src = loss.f64 ? static_cast<const void *>(&lossMean) : &lossMeanF32;
    if (Status s = memory->copy(A + loss.offset, src, loss.f64 ? 8 : 4); !s.ok())
      return s;
  }
  return memory->synchronize();
}

PipelineRunner::PipelineRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PipelineRunner::~PipelineRunner() = default;

Result<std::unique_ptr<PipelineRunner>> PipelineRunner::create(const Manifest &manifest,
                                                               Comm *comm) {
  if (!manifest.pipeline)
    return std::unique_ptr<PipelineRunner>();
  if (!merak_run_fragment)
    return Result<std::unique_ptr<PipelineRunner>>::error(
        "the manifest describes a pipeline but the program has no fragments");
  auto impl = std::make_unique<Impl>();
  impl->comm = comm;
  try {
    impl->parse(manifest);
  } catch (const ParseError &e) {
    return Result<std::unique_ptr<PipelineRunner>>::error("the manifest's pipeline: " +
                                                          e.message);
  } catch (const std::out_of_range &) {
    return Result<std::unique_ptr<PipelineRunner>>::error(
        "the manifest's pipeline: a list is too short");
  }
  if (!comm && (impl->ranks > 1 || impl->dp > 1))
    return Result<std::unique_ptr<PipelineRunner>>::error(
        "a parallel pipeline program needs its communicator");
  return std::unique_ptr<PipelineRunner>(new PipelineRunner(std::move(impl)));
}

Status PipelineRunner::step(char *A, char *P, const char *C, int64_t step) {
  return impl_->run(A, P, C, step);
}

void PipelineRunner::setMemory(PipelineMemory *memory) {
  impl_->memory = memory ? memory : &hostPipelineMemory();
}

int PipelineRunner::ownerStage(const std::string &param) const {
  auto it = impl_->firstUser.find(param);
  return it == impl_->firstUser.end() ? 0 : it->second;
}

bool PipelineRunner::touches(const std::string &param) const {
  return impl_->usedHere.count(param) || ownerStage(param) == impl_->rank;
}

} // namespace merak::rt
