//===- Registration.h - everything the merak tools register -----*- C++ -*-===//
#ifndef MERAK_TOOLS_REGISTRATION_H
#define MERAK_TOOLS_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include <string>
#include <vector>

namespace mlir::merak {

/// Dialects merak IR uses (merak, func, and what later phases add).
void registerMerakDialects(DialectRegistry &registry);
/// Every merak pass and pipeline, plus the upstream passes merak uses.
void registerAllMerakPasses();

/// The clean-up that follows import: fold shape arithmetic, canonicalise,
/// CSE, fuse decomposed LayerNorm/GELU, drop parameters nothing reads.
void buildImportCleanupPipeline(OpPassManager &pm);

/// Options of the training phase (merak-compile --loss/--logits/--labels/
/// --frozen).
struct TrainingOptions {
  std::string loss = "cross-entropy";
  std::string logits;
  std::string labels = "next-token";
  std::vector<std::string> frozen;
  /// merak-optimizer options as `key=value` pairs (optimizer, lr, ...).
  std::string optimizer = "optimizer=adamw";
  /// Data-parallel ranks (the program was imported with the per-rank batch)
  /// and the gradient all-reduce bucket size.
  int64_t dp = 1;
  int64_t bucketBytes = 25 * 1024 * 1024;
  /// Tensor-parallel ranks: merak-tensor-parallel shards @forward first.
  int64_t tp = 1;
  /// With tp > 1: vocabulary-parallel embedding, LM head and cross-entropy;
  /// with vocabParallelFallback a model that does not qualify keeps them
  /// replicated (with a remark) instead of failing.
  bool vocabParallel = false;
  bool vocabParallelFallback = false;
  /// ZeRO stage (0 or 1): with 1 and dp > 1, optimizer state is sharded
  /// over dp (merak-data-parallel zero=1).
  int64_t zero = 0;
  /// merak-fuse-attention after tensor parallelism (--fused-attention).
  bool fuseAttention = true;
};

/// Shards @forward over tp (merak-tensor-parallel, when tp > 1), attaches the loss (@loss), differentiates it (@loss_grad), builds the
/// update (@train_step) and cleans up. Fails on bad optimizer options
/// (printed to `log`).
/// The passes from the imported @forward to @loss that every training
/// pipeline starts with: merak-tensor-parallel (tp > 1), merak-attach-loss.
void addForwardToLossPasses(OpPassManager &pm, const TrainingOptions &options);

LogicalResult buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options,
                                    llvm::raw_ostream &log);

/// Prints "N trainable parameters (M elements), K frozen".
void reportTrainableParameters(ModuleOp module, const TrainingOptions &options,
                               llvm::raw_ostream &os);

} // namespace mlir::merak

#endif
