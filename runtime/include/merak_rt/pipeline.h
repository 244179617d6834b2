//===- pipeline.h - The pipeline interpreter of generated programs -*- C++ -*-===//
//
// A program compiled with --pp P and/or --microbatches M holds, instead of
// one step function, fragments (per stage: forward, backward, update, and
// for schedules that split the backward forward_keep, recompute,
// backward_weight; the runtime finds them by "stage" and "kind") reached
// through
//
//   extern "C" void merak_run_fragment(long long k, char *A, char *P,
//                                      const char *C);
//
// and a manifest with a "pipeline" object:
//   "stages", "microbatches", "schedule": "gpipe" | "1f1b",
//   "fragments": [{"name", "stage", "kind", "arena_bytes",
//       "args":    [{"source": "tokens"|"labels"|"input"|"act"|"cot"|"stash"|
//                              "rstash"|"wstash"|"step",
//                    "offset" (in A), "bytes", "msg_offset" (act/cot/*stash),
//                    "input_offset" (input: the step input's offset in A,
//                    an array input of a model without token ids)}],
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
// are the rows of micro-batch mb of the step's batch in A. Gradient accumulators are zeroed before every step;
// before the update, the accumulators of parameters several stages hold
// (tied embeddings) are exchanged between the holders and summed in stage
// order, so every copy gets bitwise the same gradient.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_PIPELINE_H
#define MERAK_RT_PIPELINE_H

#include "merak_rt/status.h"

#include <cstdint>
#include <memory>
#include <string_view>

extern "C" {
/// Defined by pipeline programs only (weak here: serial programs lack it).
__attribute__((weak)) void merak_run_fragment(long long k, char *A, char *P,
                                              const char *C);
}

namespace merak::rt {
class Comm;

class PipelineRunner {
public:
  /// nullptr when the manifest has no "pipeline" object; an error when it
  /// is malformed or the program lacks its fragments.
  static Result<std::unique_ptr<PipelineRunner>>
  create(std::string_view manifestJson, Comm *comm);
  ~PipelineRunner();

  /// One step: this stage's instruction list over all micro-batches, then
  /// the update. Writes the outputs (loss: the mean over micro-batches and
  /// data-parallel ranks, on every rank; grad_norm; lr) into A.
  Status step(char *A, char *P, const char *C, int64_t step);

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
