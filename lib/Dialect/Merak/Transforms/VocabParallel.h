//===- VocabParallel.h - merak-tensor-parallel's vocabulary split -*- C++ -*-===//
//
// Megatron-LM's vocabulary parallelism (merak-tensor-parallel
// `vocab-parallel`, see ShardingPasses.td): the LM head's weight [V, C], its
// bias [V] when it has one, and the embedding lookups of a tied table split
// on V; the logits stay split for the vocab-parallel cross-entropy. Token
// embeddings without such a head split alone.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TRANSFORMS_VOCABPARALLEL_H
#define MERAK_TRANSFORMS_VOCABPARALLEL_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::merak {

/// The LM head a vocabulary split applies to: @entry's only result is
/// `matmul(x, transpose(W))`, or that plus a bias `b` [V] (either operand
/// order), then any column-wise ops (`tail`: each result column computed
/// from the same column of the value before and operands broadcast along
/// V, by the op's sharding rule: Gemma's and nanochat's soft-capping
/// tanh(l / c) c, Cohere's and Granite's logit scales, a cast),
/// W [V, C] a float parameter read otherwise only by embedding
/// lookups (`merak.gather W[ids] axis = 0`), b one read nowhere else; or
/// `matmul(x, W)` with W [C, V] read only there (a weight stored as
/// [in, out]: JAX/TF exports, a bare nn.Parameter), V dividing by tp. An
/// untied input embedding of the same vocabulary (a float [V, C'] table
/// read only by such lookups: Llama's `embed_tokens` next to its
/// `lm_head`) is split with it, as Megatron-LM's VocabParallelEmbedding.
struct VocabHead {
  MatmulOp head;
  /// Null for a [C, V] head.
  TransposeOp transpose;
  /// W's vocabulary axis: 0 for [V, C], 1 for [C, V].
  int64_t axis = 0;
  ParamOp weight;
  AddOp biasAdd = {};
  ParamOp bias = {};
  /// The untied tables, by name.
  SmallVector<ParamOp> tables = {};
  /// Every lookup of W and of the tables.
  SmallVector<GatherOp> lookups = {};
  /// The column-wise ops from the head (or its bias) to the result, in
  /// order; they run on each rank's columns.
  SmallVector<Operation *> tail = {};
};

/// The LM head of `fn` to split over `tp` ranks, or failure with the
/// reason in `why`.
FailureOr<VocabHead> findVocabHead(func::FuncOp fn,
                                   const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                                   int64_t tp, std::string &why);

/// Splits `h` over `tp` ranks: W (and b, and the tables) on V (W's axis 1
/// for a [C, V] head, which V divides), padded to tp shards of
/// ceil(V / tp) rows when V does not divide; the lookups become
/// `ids - rank * V/tp` masked to the local rows and summed over tp; the
/// head takes f (`merak.tp_identity`) on x; the tail ops compute the local
/// columns; the result is marked
/// `merak.vocab_parallel = "tp"` (and `merak.vocab_classes = V` if padded).
void splitVocabulary(func::FuncOp fn, VocabHead h,
                     const llvm::StringMap<SmallVector<GetParamOp>> &getters, int64_t tp);

/// Token embeddings of their own (VocabParallelEmbedding without an LM
/// head: a text classifier's, or a vocabulary other than the head's): float
/// [N, C] parameters with N >= C (a vocabulary, not a handful of token
/// types), not yet split, read only by lookups whose ids are a function
/// argument (through casts and reshapes; position tables, looked up by
/// computed ids, stay whole), in name order.
SmallVector<ParamOp> findTokenTables(const llvm::StringMap<SmallVector<GetParamOp>> &getters);

/// Splits each of `tables` on its rows over `tp` ranks (padded as the head's
/// tables) and rewrites its lookups as splitVocabulary does.
void splitTokenTables(ArrayRef<ParamOp> tables,
                      const llvm::StringMap<SmallVector<GetParamOp>> &getters, int64_t tp);

} // namespace mlir::merak

#endif // MERAK_TRANSFORMS_VOCABPARALLEL_H
