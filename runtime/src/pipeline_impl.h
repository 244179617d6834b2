//===- pipeline_impl.h - The pipeline interpreter's state -------*- C++ -*-===//
//
// Private to the runtime: PipelineRunner::Impl (merak_rt/pipeline.h) and
// the manifest's pipeline as the runner holds it, shared by the runner
// (pipeline.cpp) and the manifest reader (pipeline_manifest.cpp). Included
// by those two files only.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_PIPELINE_IMPL_H
#define MERAK_RT_SRC_PIPELINE_IMPL_H

#include "merak_rt/comm.h"
#include "merak_rt/pipeline.h"

#include "manifest.h"

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace merak::rt {
namespace pipeline_detail {

/// What is inconsistent in the manifest's pipeline (its types are the
/// schema's, checked when it was read).
struct ParseError {
  std::string message;
};

[[noreturn]] inline void bad(const std::string &m) { throw ParseError{m}; }

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
inline int keptKind(const std::string &name) {
  return name == "stash" ? Stash : name == "rstash" ? RStash : name == "wstash" ? WStash : -1;
}
/// Whether fragment `f` reads values of kind `kind` (a kept buffer it then
/// must not write while it runs).
inline bool readsKind(const Fragment &f, const std::string &kind) {
  for (const Slot &a : f.args)
    if (a.kind == kind)
      return true;
  return false;
}
/// The fragment kind an instruction runs; nullptr for the others.
inline const char *fragmentKindOf(const std::string &op) {
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

inline double readScalar(const char *p, bool f64) {
  if (f64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

} // namespace pipeline_detail

using namespace pipeline_detail; // the two files that include this header

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

} // namespace merak::rt

#endif // MERAK_RT_SRC_PIPELINE_IMPL_H
