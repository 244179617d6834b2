//===- FuseAttention.h - merak-fuse-attention's matches ---------*- C++ -*-===//
//
// What merak-fuse-attention matched (FuseAttention.cpp) and its rewrite
// into merak.attention (FuseAttentionRewrite.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_DIALECT_MERAK_TRANSFORMS_FUSEATTENTION_H
#define MERAK_LIB_DIALECT_MERAK_TRANSFORMS_FUSEATTENTION_H

#include "merak/Dialect/Merak/IR/MerakOps.h"

namespace mlir::merak {
/// What a mask lets a query row see: every key, the causal keys, a
/// causal sliding window of `window` keys, or (not causal) a band of the
/// keys |r - c| < window.
struct MaskKind {
  bool causal = false;
  int64_t window = 0;
};

/// A term the model adds to the scores: `value` as the model adds it, to
/// scores of type `scores` (whose leading dims may regroup q's), times
/// `scale` (a scale applied outside it; negative for a term subtracted).
struct BiasTerm {
  Value value;
  RankedTensorType scores;
  double scale;
};

/// An attention tryFuse matched, ending in `pv`: its ops (`chain`), q, kT
/// and v as the products read them, and what the fused op takes (its bias
/// the sum of `biases`).
struct Matched {
  MatmulOp pv;
  SmallVector<Operation *> chain;
  Value q, kT, v;
  SmallVector<BiasTerm> biases;
  Value sink;
  DropoutOp dropout;
  MaskKind mask;
  double scale, softcap;
};

/// Replaces a matched attention by merak.attention: k transposed back,
/// keys and values broadcast to q's heads, heads of different widths
/// padded (and the output cut back), the sinks' rescaling; erases the chain.
void rewriteAttention(const Matched &m);
} // namespace mlir::merak

#endif
