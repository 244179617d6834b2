//===- pipeline.h - The pipeline interpreter of generated programs -*- C++ -*-===//
//
// A program compiled with --pp P and/or --microbatches M holds, instead of
// one step function, fragments (per stage: forward, backward, update, and
// for schedules that split the backward forward_keep, recompute,
// backward_weight; the runtime finds them by "stage" and "kind") reached
// through
//
//   extern "C" void merak_run_fragment(long long k, char *A, char *P,
//                                      const char *C, char **IO);
//
// A fragment reads argument i from the buffer IO[i] and writes result j
// into IO[args + j]. The runner points them at the values' own buffers:
// the stash, the messages (on the CPU; a device program's messages are
// host staging buffers, copied through the fragment's arena slots at
// "offset"), the micro-batch's rows of the step's inputs in A; the loss,
// the step and unused results use the arena slots. So a fragment's inputs
// and outputs are never copied around its call.
//
// and a manifest with a "pipeline" object:
//   "stages", "microbatches", "schedule": "gpipe" | "1f1b",
//   "fragments": [{"name", "stage", "kind", "arena_bytes",
//       "args":    [{"source": "tokens"|"labels"|"input"|"act"|"cot"|"stash"|
//                              "rstash"|"wstash"|"step"|"label_count",
//                    "offset" (in A), "bytes", "msg_offset" (act/cot/*stash),
//                    "input_offset" (input: the step input's offset in A, an
//                    array input other than token ids and labels, read a
//                    micro-batch's rows at a time; label_count: the step's
//                    label count, the same for every micro-batch)}],
//       "results": [{"dest": "act"|"cot"|"stash"|"rstash"|"wstash"|"loss"|
//                            "grad_norm"|"lr"|"none",
//                    "offset", "bytes", "dtype", "msg_offset" | "out_offset"}]}],
//   "stage_info": [{"act_in_bytes", "act_out_bytes", "cot_in_bytes",
//                   "cot_out_bytes", "stash_bytes", "rstash_bytes",
//                   "wstash_bytes" (optional, 0),
//                   "owned": [param names], "params": [names used]}],
//   "accumulators": [names of the pipeline.grad.* params (kind "scratch":
//                    zeroed every step, not checkpointed)],
//   "shared": [{"name": accumulator, "stages": [holders]}],
//   "programs": [[[instruction, micro-batch], ...] per stage]
// A stage may also have a "prepare" fragment (no arguments or results),
// which the runner calls at the start of every step, before the
// instructions: it writes the stage's bf16 copies of its weights
// (merak-cache-param-casts in the compiler).
// (instructions: recv-act, wait-act, fwd, fwd-keep, rcp, send-act,
// recv-grad, wait-grad, bwd, bwd-w, send-grad, wait-sends, update; fwd runs
// the forward fragment, fwd-keep forward_keep, rcp recompute, bwd backward,
// bwd-w backward_weight; see
// include/merak/Dialect/Merak/Transforms/Pipeline.h in the compiler).
//
// Every rank runs its stage's list (stage = its pp coordinate). A message
// packs one micro-batch's values of one cut (activations forward, their
// gradients backward), each 64-byte aligned. Message buffers are pooled
// like the stash below: a received one (the stage inputs) is taken when its
// receive is posted and given back after the micro-batch's last fragment;
// one to send is taken by the fragment computing it and given back once the
// send has completed (completed sends are reaped when a pool runs dry), so
// a stage holds as many as micro-batches in flight, not m. The stage
// inputs stay until the micro-batch's backward, which recomputes from them
// what the forward did not stash: merak-recompute makes the forward return
// activations as "stash" results (packed like a message, "msg_offset" in
// a buffer of "stash_bytes") that the backward takes as "stash" args. The
// parts of a split backward pass values the same way: recompute (or
// forward_keep) -> backward as "rstash", backward -> backward_weight as
// "wstash". Each such buffer is taken from a pool by the first fragment of
// a micro-batch that writes it and returned after the micro-batch's last
// fragment (backward_weight when the stage has one, else backward), so
// there are as many as micro-batches in flight. Data inputs
// are the rows of micro-batch mb of the step's batch in A. Gradient accumulators are zeroed before
// every step; before the update, the accumulators of parameters several stages hold (tied
// embeddings) are exchanged between the holders and summed in stage order, so every copy gets
// bitwise the same gradient.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_PIPELINE_H
#define MERAK_RT_PIPELINE_H

#include "merak_rt/status.h"

#include <cstdint>
#include <memory>

extern "C" {
/// Defined by pipeline programs only (weak here: serial programs lack it).
__attribute__((weak)) void merak_run_fragment(long long k, char *A, char *P, const char *C,
                                              char **IO);
}

namespace merak::rt {
class Comm;
struct Manifest; // src/manifest.h: the checked manifest

/// Where the pipeline runner's buffers live and how it moves bytes between
/// them: the stashes (stash, rstash, wstash), the messages, the fragment
/// arguments and results in A, the accumulators in P. The CPU program's
/// (hostPipelineMemory) is host memory with memcpy/memset; a device
/// program's (--target cuda: cuda::createPipelineMemory) keeps the stashes
/// on the device and stages messages through pinned host buffers, since
/// activations and gradients travel between stages over MPI (device ->
/// host copy, send/recv, host -> device copy). A, P and C are then device
/// regions. No CUDA header here: the runtime's sources include none.
class PipelineMemory {
public:
  virtual ~PipelineMemory() = default;
  /// "host" or "cuda" (messages).
  virtual const char *name() const = 0;
  /// Device buffers are host memory (the CPU): messages are then the
  /// buffers fragments write and receives land in, and tied gradients are
  /// exchanged straight from P. Otherwise messages are host staging
  /// buffers and the runner synchronises before MPI touches one.
  virtual bool hostResident() const = 0;
  /// A zeroed buffer of `bytes` (at least 64-byte aligned) in device
  /// memory, or with `host` a host buffer that copies and MPI both use
  /// (pinned on CUDA); nullptr when out of memory.
  virtual char *allocate(uint64_t bytes, bool host) = 0;
  virtual void release(char *p, bool host) = 0;
  /// Copies `bytes` from src to dst (device or host, either side), ordered
  /// after the fragments and copies issued before; a host source may be
  /// reused when the call returns, a host destination is valid after
  /// synchronize().
  virtual Status copy(void *dst, const void *src, uint64_t bytes) = 0;
  /// Zeroes device bytes, in the same order.
  virtual Status zero(void *dst, uint64_t bytes) = 0;
  /// Waits until every fragment and copy issued so far has completed.
  virtual Status synchronize() = 0;
};

/// The CPU program's: host memory, memcpy, nothing to wait for.
PipelineMemory &hostPipelineMemory();

class PipelineRunner {
public:
  /// nullptr when the manifest has no "pipeline" object; an error when it
  /// is inconsistent or the program lacks its fragments.
  static Result<std::unique_ptr<PipelineRunner>> create(const Manifest &manifest, Comm *comm);
  ~PipelineRunner();

  /// One step: this stage's instruction list over all micro-batches, then
  /// the update. Writes the outputs (loss: the mean over micro-batches and
  /// data-parallel ranks, on every rank; grad_norm; lr) into A.
  Status step(char *A, char *P, const char *C, int64_t step);

  /// Where the buffers live (hostPipelineMemory() unless set; set before
  /// the first step). A, P and C given to step() are then in its memory.
  void setMemory(PipelineMemory *memory);

  /// The first stage whose fragments use param `param` (a parameter, its
  /// optimizer state, an accumulator): the one that writes it into
  /// checkpoints. 0 for a param no stage uses.
  int ownerStage(const std::string &param) const;

  /// Whether this rank's stage uses `param` or owns it: the params it
  /// initialises and restores. The others' storage is never touched (P is
  /// mapped lazily), so a rank's memory holds only its stage's parameters,
  /// state and accumulators.
  bool touches(const std::string &param) const;

  struct Impl;

private:
  explicit PipelineRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace merak::rt

#endif // MERAK_RT_PIPELINE_H
