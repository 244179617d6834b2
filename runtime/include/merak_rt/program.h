//===- program.h - What a generated program provides the runtime -*- C++ -*-===//
//
// `merak-compile --compile-to=binary` links three things into ./train:
//   1. the generated step (C++ from EmitC), `merak_train_step`;
//   2. an object holding the manifest (JSON text), embedded with the
//      assembler's .incbin; the initial data (parameter and optimizer-state
//      initial values, constants, the full initial tensors of
//      tensor-parallel shards) is in the safetensors file the manifest's
//      "weights" names, next to the executable (runtime/src/weights_file.h;
//      merak_data is then empty). Without "weights" (older programs, the
//      runtime's tests) it is merak_data: parameters, then constants, then
//      the shards' full tensors;
//   3. libmerak_runtime_cpu.a, whose `merak_train_main` (train_main.cpp) is
//      the program's main: flags, data, the step loop, checkpoints, metrics.
//
// Memory: three regions, all 64-byte aligned.
//   A  the arena (manifest "arena_bytes"): step inputs, outputs and every
//      temporary, at offsets planned by merak-plan-memory; contents are
//      undefined between steps except where the runtime writes inputs;
//   P  parameter storage ("params_bytes"): parameters, frozen buffers,
//      optimizer state and hyper-parameters, persistent across steps,
//      initialised from the first params_init_bytes of merak_data (the
//      rest starts as zeros, then each rank copies its tensor-parallel
//      shards out of their full tensors) and checkpointed;
//   C  constants: merak_data + "consts_offset", read-only.
//
// Manifest (JSON object; every offset in bytes, every shape a list; the
// schema as code, which the compiler writes and the runtime reads:
// manifest_schema.h):
//   "format": 1,
//   "entry": "train_step",
//   "arena_bytes", "params_bytes", "params_init_bytes", "consts_offset",
//   "consts_bytes": ints,
//   "params": [{"name", "dtype" (safetensors spelling: F32, I64, BOOL ...),
//               "shape", "offset" (in P), "bytes",
//               "kind": "trainable" | "frozen" | "state" | "hparam" |
//                 "scratch" (lives within one step, e.g. pipeline gradient
//                 accumulators: neither checkpointed nor restored),
//               tensor-parallel shards only (merak-tensor-parallel):
//               "shard": {"axis", "parts", "blocks"}: dimension axis of the
//                 full tensor viewed as [blocks, parts, n/(blocks*parts)],
//                 tp rank r holding part r of every block ("shape",
//                 "offset" and "bytes" describe that local shard in P);
//                 with "block_sizes" (ragged blocks: a grouped-query fused
//                 QKV) the blocks have those lengths, each cut into parts;
//               "global_shape": the full tensor's shape (checkpoints
//                 record each piece's place in it);
//               "data_offset", "data_bytes": where the full initial tensor
//                 lies in merak_data (absent for zero-initialised state);
//               ZeRO-1 optimizer state only (merak-compile --zero 1):
//               "zero": {"parts"} with "global_shape": the full tensor
//                 flattened and zero-padded to parts * S elements, dp rank r
//                 holding elements [r*S, (r+1)*S) ("shape" is [S]);
//                 with "shard" too (state of a tensor-parallel shard), the
//                 tp rank's shard is what is flattened and split, and
//                 "global_shape" is the full tensor's}],
//   "inputs":  [{"name", "role": "tokens" | "labels" | "step" |
//                "label_count" | "other", "dtype", "shape", "offset" (in A),
//                "index_limit", "ignore_index"}]; label_count (F32 scalar):
//                the step's labels other than the ignore_index over its
//                dp x micro-batch pieces (merak-attach-loss's global-mean),
//                filled by ./train
//   "outputs": [{"name" ("loss", "grad_norm", "lr", ...), "dtype", "shape",
//                "offset" (in A)}],
//   "hparams": {"lr": "<param name>", ...}   run-time overridable scalars
//   "ops": ["matmul", "add", ...]            op index -> name, for traces
//   "defaults": {"lr": x, "optimizer": "adamw", ...}  compile-time choices
//   "model": "<source file name>"
//   "weights": {"file", "id"}                the initial data's safetensors
//                                            file (a name, next to the
//                                            executable) and the id its
//                                            metadata "merak.program" has
//   "mesh": {"pp", "dp", "tp"}               the device mesh (mpirun -np
//                                            pp*dp*tp); rank = (pp_i*dp +
//                                            dp_i)*tp + tp_i
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_PROGRAM_H
#define MERAK_RT_PROGRAM_H

#include <cstdint>

extern "C" {
/// One training step: reads inputs from A, parameters and state from P,
/// constants from C; writes outputs to A and the updated parameters and
/// state to P.
void merak_train_step(char *A, char *P, const char *C);

/// The manifest, NUL-terminated JSON.
extern const char merak_manifest[];
/// Initial parameter storage followed by the constants.
extern const unsigned char merak_data[];
extern const uint64_t merak_data_size;

/// The runtime's main for generated programs (train_main.cpp).
int merak_train_main(int argc, char **argv);
}

#endif // MERAK_RT_PROGRAM_H
