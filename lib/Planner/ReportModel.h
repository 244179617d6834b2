//===- ReportModel.h - The data behind merak-compile --report (internal) -*- C++ -*-===//
//
// What Report.cpp collects from a compiled program (per-stage parameters,
// memory, FLOPs and traffic) and ReportJson.cpp writes as --report=json.
// Not a public header: lib/Tools only.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_TOOLS_REPORTMODEL_H
#define MERAK_LIB_TOOLS_REPORTMODEL_H

#include "merak/Planner/Report.h"
#include "merak/Planner/Simulate.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::merak::report {

namespace json = llvm::json;

struct ParamInfo {
  std::string name;
  SmallVector<int64_t> shape, globalShape;
  int64_t elements = 0, bytes = 0, stateBytes = 0;
  bool trainable = false;
  bool buffer = false; // updated by the forward, never trained (BatchNorm's running statistics)
  std::optional<ShardLayout> shard;
  std::string split;
  SmallVector<int64_t> holders; // stages
};

using Traffic = CollectiveTraffic;

struct Bucket {
  int64_t stage = 0;
  std::string kind;
  int64_t tensors = 0, bytes = 0;
  /// The element type on the wire: "f32", or "bf16" (--grad-reduce bf16).
  std::string dtype;
};

struct StageInfo {
  SmallVector<std::string> nodes;
  SmallVector<std::string> params;
  int64_t paramElements = 0, paramBytes = 0, stateBytes = 0, accumulatorBytes = 0;
  SmallVector<std::pair<std::string, int64_t>> arenas;
  /// Per fragment: the bytes a call copies in and out (fragmentCopyBytes).
  SmallVector<std::pair<std::string, int64_t>> copies;
  int64_t stashBytes = 0;
  /// Pipelined: bytes held per micro-batch until its backward (stage inputs
  /// and stashed activations) and merak-recompute's choice for the stage.
  int64_t stashPerMicrobatch = 0;
  std::string recompute;
  int64_t forwardFlops = 0, backwardFlops = 0, updateFlops = 0;
  std::optional<int64_t> partitionCost;
  std::map<std::string, Traffic> collectives; // "<kind> <group>" -> per step
  /// `collectives` by fragment: forward, backward, update.
  std::map<std::string, Traffic> byFragment[3];
  int64_t sendNext = 0, recvPrev = 0, sendPrev = 0, recvNext = 0, tiedBytes = 0;
  int64_t flops() const { return forwardFlops + backwardFlops + updateFlops; }
  int64_t arenaPeak() const {
    int64_t m = 0;
    for (auto &a : arenas)
      m = std::max(m, a.second);
    return m;
  }
};

struct Report {
  const ReportOptions &opts;
  ModuleOp module;
  bool pipelined = false, plannedByCompile = false;
  int64_t microbatchRows = 0, sequence = 0;
  int64_t paramStorageBytes = 0, constantBytes = 0;
  int64_t cutPoints = 0;
  SmallVector<int64_t> cuts;
  std::vector<ParamInfo> params;
  llvm::StringMap<size_t> paramIndex;
  std::vector<StageInfo> stages;
  /// Vocabulary parallelism: the split embedding / LM head, if any.
  const ParamInfo *vocab = nullptr;
  /// The logits stay split for a vocab-parallel cross-entropy (false when
  /// only token embeddings are split).
  bool vocabLoss = false;
  SmallVector<Bucket> dpBuckets;
  int64_t dpScalarBytes = 0;

  Report(const ReportOptions &opts, ModuleOp module) : opts(opts), module(module) {}

  LogicalResult collect();
  void collectParams();
  void collectStage(int64_t s, ModuleOp planned);
  void countCollectives(func::FuncOp fn, int64_t times, int64_t s, int fragment = 0);
  void printText(llvm::raw_ostream &os) const;
  /// One kind of collective ("all_reduce tp", ...) summed over the stages.
  Traffic total(StringRef key) const {
    Traffic t;
    for (const StageInfo &st : stages)
      if (auto it = st.collectives.find(key.str()); it != st.collectives.end())
        t = {t.count + it->second.count, t.bytes + it->second.bytes};
    return t;
  }
  void printVocabulary(llvm::raw_ostream &os) const;
  json::Value toJson() const;

  /// The symbol tables of the module and of its memory-planned copy: one
  /// lookup per fragment and parameter (ModuleOp::lookupSymbol walks the
  /// whole module each time).
  mutable SymbolTableCollection symbols;
  func::FuncOp fn(ModuleOp m, const Twine &name) const {
    return symbols.getSymbolTable(m).lookup<func::FuncOp>(name.str());
  }
  std::string fragment(int64_t s, StringRef kind) const {
    return ("stage" + Twine(s) + "_" + kind).str();
  }
  ParamInfo &param(StringRef name) { return params[paramIndex.lookup(name)]; }
  const ParamInfo &param(StringRef name) const { return params[paramIndex.lookup(name)]; }
};

/// Bytes of a static tensor type.
int64_t tensorBytes(Type t);
/// A value's slot in a pipeline message (64-byte aligned, as
/// lib/Target/PipelineProgram.cpp packs them).
int64_t messageSlotBytes(Type t);
/// The collective kind an op counts as ("all_reduce", ...), or nullopt for
/// an op that moves no data between ranks.
std::optional<StringRef> collectiveKind(Operation *op);

} // namespace mlir::merak::report

#endif // MERAK_LIB_TOOLS_REPORTMODEL_H
