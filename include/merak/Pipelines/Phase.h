//===- Phase.h - the phases of merak's compilation --------------*- C++ -*-===//
//
// Standard library only: Compile.h (included by the Python module, built
// with exceptions and RTTI) names the phases too.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_PIPELINES_PHASE_H
#define MERAK_PIPELINES_PHASE_H

namespace mlir::merak {

/// merak-compile --compile-to and merak-training-pipeline's from/to: the
/// phases in the order they run. Training, Shard, Pipeline, Recompute and
/// Schedule are views of one pass chunk (the training step with its
/// sharding, stages, recomputation and schedule); Pipeline shows the stages
/// before recomputation. Emit and Binary translate the lowered module.
enum class CompilePhase {
  Import,
  Training,
  Shard,
  Pipeline,
  Recompute,
  Schedule,
  Overlap,
  Lower,
  Emit,
  Binary
};

} // namespace mlir::merak

#endif
