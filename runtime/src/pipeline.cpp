//===- pipeline.cpp - The pipeline interpreter (see pipeline.h) -----------===//
#include "merak_rt/pipeline.h"

#include "merak_rt/comm.h"
#include "merak_rt/ops.h"

#include "manifest.h"

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

/// What is inconsistent in the manifest's pipeline (its types are the
/// schema's, checked when it was read).
struct ParseError {
  std::string message;
};

[[noreturn]] void bad(const std::string &m) { throw ParseError{m}; }

struct Slot {
  std::string kind; // source or dest
  /// Its arena slot in A; -1 when the fragment reads or writes it only in
  /// the runner's buffer (the stash, the micro-batch's rows).
  int64_t offset = 0;
  uint64_t bytes = 0, msgOffset = 0, outOffset = 0;
  uint64_t inputOffset = 0; ///< source "input": the step input's offset in A
  bool f64 = false;
};
struct Fragment {
  int64_t stage = 0;
  std::string kind; // forward, backward, update, forward_keep, recompute, backward_weight
  std::vector<Slot> args, results;
};
/// Values kept between two fragments of a micro-batch on a stage: the
/// forward's stash, the recomputation's rstash, the input-gradient
/// backward's wstash. A buffer per micro-batch in flight, from a pool.
enum KeptKind { Stash, RStash, WStash, NumKept };
int keptKind(const std::string &name) {
  return name == "stash" ? Stash : name == "rstash" ? RStash : name == "wstash" ? WStash : -1;
}
/// Whether fragment `f` reads values of kind `kind` (a kept buffer it then
/// must not write while it runs).
bool readsKind(const Fragment &f, const std::string &kind) {
  for (const Slot &a : f.args)
    if (a.kind == kind)
      return true;
  return false;
}
/// The fragment kind an instruction runs; nullptr for the others.
const char *fragmentKindOf(const std::string &op) {
  if (op == "fwd")
    return "forward";
  if (op == "fwd-keep")
    return "forward_keep";
  if (op == "rcp")
    return "recompute";
  if (op == "bwd")
    return "backward";
  if (op == "bwd-w")
    return "backward_weight";
  return nullptr;
}
/// Bytes of A or P the runner reads or writes.
struct Region {
  uint64_t offset = 0, bytes = 0;
  bool f64 = false;
};
struct Instr {
  std::string op;
  int64_t mb = -1, chunk = 0;
  /// A compute instruction's fragment (resolved once when parsed), and
  /// whether it is the micro-batch's last, after which its buffers go back.
  int64_t frag = -1;
  bool releases = false;
};
/// Tags of the tied-parameter gradient exchange; message tags stay below.
constexpr int kTiedTagBase = 30000;

/// A buffer of a PipelineMemory, given back to it when dropped.
struct Releaser {
  PipelineMemory *memory = nullptr;
  bool host = false;
  void operator()(char *p) const { memory->release(p, host); }
};
using Bytes = std::unique_ptr<char, Releaser>;

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

} // namespace

PipelineMemory &hostPipelineMemory() {
  static HostMemory memory;
  return memory;
}

struct PipelineRunner::Impl {
  Comm *comm = nullptr;
  PipelineMemory *memory = &hostPipelineMemory();
  /// Model stages, of which this rank runs `chunks` (interleaved 1F1B:
  /// virtual stages): chunk c is model stage c * ranks + rank.
  int64_t stages = 1, ranks = 1, chunks = 1, microbatches = 1, rank = 0, dp = 1;
  std::vector<Fragment> fragments;
  std::vector<Instr> program;
  int64_t updateFragment = -1;
  // Per-micro-batch buffers of one kind: taken from a pool when a
  // micro-batch first needs one and given back when it is done with it, so
  // each pool grows to the micro-batches in flight (1F1B: min(m, stages -
  // stage)), not to m.
  // Messages are host buffers when the memory is not (staged over MPI).
  struct Kept {
    uint64_t bytes = 0;
    bool message = false;
    std::vector<Bytes> pool;
    std::vector<char *> free, of;
    /// mb's buffer; nullptr when a new one cannot be allocated.
    char *take(int64_t mb, PipelineMemory &memory) {
      if (!of[mb]) {
        if (free.empty()) {
          bool host = message && !memory.hostResident();
          char *p = memory.allocate(bytes, host);
          if (!p)
            return nullptr;
          pool.push_back(Bytes(p, Releaser{&memory, host}));
          free.push_back(p);
        }
        of[mb] = free.back();
        free.pop_back();
      }
      return of[mb];
    }
    void give(int64_t mb) {
      if (of[mb])
        free.push_back(of[mb]);
      of[mb] = nullptr;
    }
  };
  /// A posted send and the buffer it reads, returned to its pool once the
  /// send has completed.
  struct PendingSend {
    Comm::Request request;
    std::vector<char *> *free;
    char *buffer;
  };
  /// One model stage this rank runs.
  struct Chunk {
    int64_t stage = 0; ///< model stage
    /// Its fragments by kind (index into fragments).
    std::map<std::string, int64_t> frags;
    /// The kind after which a micro-batch's kept buffers go back to their
    /// pools: its last fragment (the weight gradient when split off).
    std::string finalKind = "backward";
    // Kept values (stash, rstash, wstash): taken by the first fragment of a
    // micro-batch that writes them, given back after its last fragment.
    Kept kept[NumKept];
    // Messages: received activations and gradients (taken when the receive
    // is posted, given back after the micro-batch's last fragment, which
    // may read them), and those to send (taken by the fragment computing
    // them, given back when the send has completed).
    Kept actIn, actOut, cotIn, cotOut;
    std::vector<Comm::Request> recvAct, recvGrad;
  };
  std::vector<Chunk> mine;
  std::vector<Region> accumulators;
  struct Shared {
    Region acc;
    std::vector<int> stages; ///< the ranks holding it
  };
  std::vector<Shared> shared;
  /// Param name -> the rank that owns it (initialises and checkpoints it);
  /// and the params this rank's chunks use (stage_info "params").
  std::map<std::string, int> firstUser;
  std::set<std::string> usedHere;
  Region tokens, labels, loss;
  bool haveTokens = false, haveLabels = false, haveLoss = false;
  std::vector<PendingSend> sends;
  /// Sends whose buffers are back in their pools; the others stay pending.
  void reapSends();
  Status waitSends();
  /// The loss of every loss-producing fragment of a step, in program
  /// order, copied out of A as the fragments run (sized when parsed, so
  /// that pending device -> host copies never see it move) and summed at
  /// the end of the step; and host copies of the values the step writes
  /// into A, which must outlive their copies.
  std::vector<char> losses;
  size_t lossCount = 0;
  std::vector<bool> lossF64;
  int64_t stepValue = 0;
  double lossMean = 0;
  float lossMeanF32 = 0;

  void parse(const Manifest &m);
  void parseFragments(const schema::Pipeline &pl);
  void parseChunks(const schema::Pipeline &pl);
  void parseProgram(const schema::Pipeline &pl);
  void parseTensors(const Manifest &m, const schema::Pipeline &pl);
  Status run(char *A, char *P, const char *C, int64_t step);
  /// Fills `io` for fragment `f` of micro-batch `mb`: each argument's
  /// buffer (a stash, a message, the micro-batch's rows of the step's
  /// inputs), read in place, except staged messages of device memory,
  /// which are copied into the fragment's arena slot. Results: bindResults.
  Status bindArgs(const Fragment &f, Chunk &ch, char *A, int64_t mb);
  /// The fragment's pointer table: IO[i] for argument i, IO[args + j] for
  /// result j (merak_run_fragment).
  std::vector<char *> io;
  /// `io` at the arena slots of every argument and result (the update, the
  /// prepare fragments: run once a step, with every slot in A).
  void bindArena(const Fragment &f, char *A) {
    io.clear();
    for (const Slot &s : f.args)
      io.push_back(A + s.offset);
    for (const Slot &s : f.results)
      io.push_back(A + s.offset);
  }
  /// An allocation failure of `what` (bytes) as a Status.
  Status noMemory(const std::string &what, uint64_t bytes) const {
    return Status::error("cannot allocate " + std::to_string(bytes) + " bytes of " + what +
                         " buffers (" + memory->name() + " memory) on pipeline rank " +
                         std::to_string(rank));
  }
  Status compute(const Instr &in, char *A, char *P, const char *C, size_t &lossIndex);
  Status update(char *A, char *P, const char *C, int64_t step);
  /// Message tag of the activations (grad = false) or gradients into model
  /// stage `to` for micro-batch `mb`; below the tied-exchange tags.
  int tag(int64_t to, int64_t mb, bool grad) const {
    return static_cast<int>(2 * (to * microbatches + mb) + (grad ? 1 : 0));
  }
};

void PipelineRunner::Impl::parse(const Manifest &m) {
  const schema::Pipeline &pl = *m.pipeline;
  stages = pl.stages;
  microbatches = pl.microbatches;
  chunks = pl.virtualStages;
  if (stages < 1 || microbatches < 1 || chunks < 1 || stages % chunks != 0)
    bad("bad stages, virtual_stages or microbatches");
  if (2 * stages * microbatches > kTiedTagBase)
    bad("too many stages x micro-batches (" + std::to_string(stages * microbatches) +
        ", at most " + std::to_string(kTiedTagBase / 2) + ")");
  ranks = stages / chunks;
  dp = m.meshDp;
  rank = comm ? comm->coord().pp : 0;
  if (rank >= ranks)
    bad("this rank's stage is outside the pipeline");
  mine.resize(chunks);
  for (int64_t c = 0; c < chunks; ++c)
    mine[c].stage = c * ranks + rank;
  parseFragments(pl);
  parseChunks(pl);
  parseProgram(pl);
  parseTensors(m, pl);
}

void PipelineRunner::Impl::parseFragments(const schema::Pipeline &pl) {
  for (const schema::Fragment &f : pl.fragments) {
    Fragment fr;
    fr.stage = f.stage;
    fr.kind = f.kind;
    if (fr.stage >= stages)
      bad("a fragment's stage is outside the pipeline");
    if (fr.stage % ranks == rank) {
      if (fr.kind == "update") {
        if (fr.stage != rank || updateFragment >= 0)
          bad("rank " + std::to_string(rank) + "'s update must be one fragment of stage " +
              std::to_string(rank));
        updateFragment = fragments.size();
      } else if (!mine[fr.stage / ranks].frags.emplace(fr.kind, fragments.size()).second) {
        bad("two \"" + fr.kind + "\" fragments on stage " + std::to_string(fr.stage));
      }
    }
    auto slot = [](const schema::FragmentSlot &s, const std::string &kind) {
      Slot out;
      out.kind = kind;
      out.offset = s.offset.value_or(-1);
      out.bytes = s.bytes;
      out.msgOffset = s.msgOffset.value_or(0);
      return out;
    };
    for (const schema::FragmentArg &a : f.args) {
      fr.args.push_back(slot(a, a.source));
      fr.args.back().inputOffset = a.inputOffset.value_or(0);
    }
    for (const schema::FragmentResult &r : f.results) {
      fr.results.push_back(slot(r, r.dest));
      fr.results.back().outOffset = r.outOffset.value_or(0);
      fr.results.back().f64 = r.dtype == "F64";
    }
    // Only what the runner always hands over in its own buffer may lack an
    // arena slot (bindArgs, compute).
    const bool update = fr.kind == "update" || fr.kind == "prepare";
    for (const Slot &a : fr.args)
      if (a.offset < 0 && (update || (a.kind != "tokens" && a.kind != "labels" &&
                                      a.kind != "input" && keptKind(a.kind) < 0)))
        bad("fragment \"" + f.name + "\"'s " + a.kind + " argument has no arena slot");
    for (const Slot &r : fr.results)
      if (r.offset < 0 && (update || keptKind(r.kind) < 0 || readsKind(fr, r.kind)))
        bad("fragment \"" + f.name + "\"'s " + r.kind + " result has no arena slot");
    fragments.push_back(std::move(fr));
  }
  if (updateFragment < 0)
    bad("stage " + std::to_string(rank) + " has no \"update\" fragment");
}

void PipelineRunner::Impl::parseChunks(const schema::Pipeline &pl) {
  for (Chunk &ch : mine) {
    for (const char *k : {"forward", "backward"})
      if (!ch.frags.count(k))
        bad("stage " + std::to_string(ch.stage) + " has no \"" + k + "\" fragment");
    if (ch.frags.count("backward_weight"))
      ch.finalKind = "backward_weight";
    const schema::StageInfo &info = pl.stageInfo.at(ch.stage);
    ch.actIn.bytes = info.actInBytes;
    ch.actOut.bytes = info.actOutBytes;
    ch.cotIn.bytes = info.cotInBytes;
    ch.cotOut.bytes = info.cotOutBytes;
    ch.kept[Stash].bytes = info.stashBytes;
    ch.kept[RStash].bytes = info.rstashBytes;
    ch.kept[WStash].bytes = info.wstashBytes;
    for (Kept *b : {&ch.actIn, &ch.actOut, &ch.cotIn, &ch.cotOut, &ch.kept[0], &ch.kept[1],
                    &ch.kept[2]})
      b->of.assign(microbatches, nullptr);
    for (Kept *b : {&ch.actIn, &ch.actOut, &ch.cotIn, &ch.cotOut})
      b->message = true;
    ch.recvAct.resize(microbatches);
    ch.recvGrad.resize(microbatches);
  }
}

void PipelineRunner::Impl::parseProgram(const schema::Pipeline &pl) {
  for (const schema::Instr &i : pl.programs.at(rank)) {
    Instr in{i.op, i.mb, i.chunk.value_or(0)};
    if (in.mb >= microbatches || in.chunk < 0 || in.chunk >= chunks)
      bad("instruction micro-batch or chunk out of range");
    if (const char *kind = fragmentKindOf(in.op); kind && !mine[in.chunk].frags.count(kind))
      bad("instruction \"" + in.op + "\" needs a \"" + kind + "\" fragment, which stage " +
          std::to_string(mine[in.chunk].stage) + " lacks");
    program.push_back(std::move(in));
  }
  // Each compute instruction's fragment. A chunk's last `finalKind`
  // instruction runs the "_last" copy when there is one (merak-overlap:
  // it also all-reduces the finished gradients over dp).
  std::vector<bool> lastSeen(chunks, false);
  for (auto it = program.rbegin(); it != program.rend(); ++it) {
    const char *kind = fragmentKindOf(it->op);
    if (!kind)
      continue;
    Chunk &ch = mine[it->chunk];
    it->frag = ch.frags.at(kind);
    it->releases = kind == ch.finalKind;
    if (it->releases && !lastSeen[it->chunk]) {
      lastSeen[it->chunk] = true;
      if (auto last = ch.frags.find(std::string(kind) + "_last"); last != ch.frags.end())
        it->frag = last->second;
    }
  }
  for (const Instr &in : program)
    if (in.frag >= 0)
      for (const Slot &r : fragments[in.frag].results)
        if (r.kind == "loss")
          lossF64.push_back(r.f64), ++lossCount;
  losses.assign(8 * lossCount, 0);
}

void PipelineRunner::Impl::parseTensors(const Manifest &m, const schema::Pipeline &pl) {
  std::map<std::string, Region> params;
  for (const ManifestTensor &p : m.params)
    params[p.name] = {p.offset, p.bytes, p.dtype == DType::F64};
  auto param = [&](const std::string &name) {
    auto it = params.find(name);
    if (it == params.end())
      bad("no param '" + name + "'");
    return it->second;
  };
  for (int64_t s = stages - 1; s >= 0; --s)
    for (const std::string &n : pl.stageInfo.at(s).params) {
      param(n); // must exist
      firstUser[n] = static_cast<int>(s % ranks);
      if (s % ranks == rank)
        usedHere.insert(n);
    }
  // Accumulators are zeroed before every step: only this rank's, so that
  // the pages of other ranks' parameters are never touched.
  for (const std::string &a : pl.accumulators)
    if (usedHere.count(a))
      accumulators.push_back(param(a));
  for (const schema::SharedAccumulator &s : pl.shared) {
    Shared sh{param(s.name), {}};
    for (int64_t x : s.stages)
      sh.stages.push_back(static_cast<int>(x));
    shared.push_back(std::move(sh));
  }

  for (const ManifestTensor &in : m.inputs) {
    Region t{in.offset, 0, false};
    if (in.role == "tokens")
      tokens = t, haveTokens = true;
    else if (in.role == "labels")
      labels = t, haveLabels = true;
  }
  if (const ManifestTensor *out = m.output("loss"))
    loss = {out->offset, 0, out->dtype == DType::F64}, haveLoss = true;
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
