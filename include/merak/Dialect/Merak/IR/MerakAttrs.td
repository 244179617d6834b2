//===- MerakAttrs.td - merak dialect attributes ------------*- tablegen -*-===//
//
// Typed contracts between passes: what one pass decides and a later one (or
// the program writer) reads back, with named, typed fields rather than
// dictionary keys.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_ATTRS_TD
#define MERAK_ATTRS_TD

include "merak/Dialect/Merak/IR/MerakBase.td"
include "mlir/IR/AttrTypeBase.td"

class Merak_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Merak_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// A list of integers spelled `[1, 2, 3]` (the default spelling of an array
// parameter has no brackets, which a struct of several lists cannot parse).
class Merak_I64List<string desc = ""> : ArrayRefParameter<"int64_t", desc> {
  let printer = "::mlir::merak::printI64List($_printer, $_self)";
  let parser = "::mlir::merak::parseI64List($_parser)";
}
class Merak_OptionalI64List<string desc = ""> : OptionalArrayRefParameter<"int64_t", desc> {
  let printer = "::mlir::merak::printI64List($_printer, $_self)";
  let parser = "::mlir::merak::parseI64List($_parser)";
}

def Merak_PipelinePlanAttr : Merak_Attr<"PipelinePlan", "pipeline_plan"> {
  let summary = "The pipeline plan: stages, their parameters, recomputation and schedule";
  let description = [{
    The module attribute `merak.pipeline`, written by merak-pipeline (the
    stage assignment), completed by merak-recompute (the choice per stage)
    and merak-record-schedule (the schedule), and read by every later phase
    and the program writer.
    - `stages`: model stages, `pp * virtual_stages` (interleaved 1F1B runs
      `virtual_stages` model chunks per pipeline rank; `getRanks()` is pp);
    - `microbatches`; `cut_points`: the candidate cuts the partitioner saw;
      `cuts`: the chosen ones (stage s ends at cut `cuts[s]`);
    - `costs`: the estimated forward FLOPs of each stage; `owners`: the
      parameters each stage holds (a tied parameter on several stages);
    - `schedule`: gpipe, 1f1b, interleaved, zb-h1, zb-h2 or
      shifted-critical-path (merak-record-schedule);
    - `recompute`, `stash_bytes`, `memory_estimate`: per stage, the mode
      merak-recompute chose, the bytes a micro-batch stashes and the
      estimated peak; `scp_kept`: the micro-batches the shifted critical
      path keeps per stage.
  }];
  let parameters = (ins
    "int64_t":$stages,
    "int64_t":$microbatches,
    "int64_t":$cut_points,
    Merak_I64List<>:$cuts,
    Merak_I64List<>:$costs,
    "::mlir::ArrayAttr":$owners,
    DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
    Merak_OptionalI64List<>:$memory_estimate,
    OptionalParameter<"::mlir::ArrayAttr">:$recompute,
    Merak_OptionalI64List<>:$scp_kept,
    Merak_OptionalI64List<>:$stash_bytes,
    OptionalParameter<"::mlir::StringAttr">:$schedule
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// Pipeline ranks (--pp): the model stages over the chunks per rank.
    int64_t getRanks() const { return getStages() / getVirtualStages(); }
    /// The parameters stage `s` holds.
    ::llvm::SmallVector<::llvm::StringRef> getOwnersOf(int64_t s) const;
    /// This plan with the schedule recorded.
    PipelinePlanAttr withSchedule(::llvm::StringRef schedule, int64_t virtualStages) const;
    /// This plan with merak-recompute's choice recorded.
    PipelinePlanAttr withRecompute(::mlir::ArrayAttr modes, ::llvm::ArrayRef<int64_t> stash,
                                   ::llvm::ArrayRef<int64_t> estimate,
                                   ::llvm::ArrayRef<int64_t> scpKept) const;
  }];
}

def Merak_MeshAttr : Merak_Attr<"Mesh", "mesh"> {
  let summary = "The device mesh the program is compiled for";
  let description = [{
    The module attribute `merak.mesh` (merak-record-mesh, the first pass of
    the training phase, when any axis has more than one rank): data-,
    tensor- and pipeline-parallel ranks; the program runs on dp * tp * pp
    processes, rank = (pp_i * dp + dp_i) * tp + tp_i. `ep` (expert
    parallelism, default 1) folds into dp and divides it: the experts are
    split over groups of ep consecutive dp ranks. The program writer reads
    it (getMesh); a module without it is serial.
  }];
  let parameters = (ins "int64_t":$dp, "int64_t":$tp, "int64_t":$pp,
                        DefaultValuedParameter<"int64_t", "1">:$ep);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Merak_ShardLayoutAttr : Merak_Attr<"ShardLayout", "shard"> {
  let summary = "How a parameter is split over the tp (or ep) ranks";
  let description = [{
    `merak.shard` on a `merak.param` (merak-tensor-parallel, copied to the
    optimizer state): dimension `axis` of the full tensor viewed as
    [blocks, parts, n / (blocks * parts)], tp rank r holding part r of every
    block (blocks = 3 for a fused QKV weight). `size`, when not 0, is the
    full length of `axis` when the shards were padded to divide it (the
    vocabulary of vocabulary parallelism). `group` is the group whose ranks
    hold the parts: "tp", or "ep" for an expert weight that
    merak-expert-parallel split on its expert axis. `placement`, when not
    -1, is the `merak.expert_place` table that orders that expert axis
    (dynamic placement: the trainer permutes the experts of every
    parameter naming the table together). `block_sizes`, when given, are
    the full lengths of the `blocks` blocks along `axis`, which then differ
    (a fused QKV projection with fewer key/value heads than query heads:
    [q, k, v] of H * D, KV * D, KV * D rows); each is cut into `parts`
    equal parts, rank r holding part r of every block. Read through
    getShardLayout.
  }];
  let parameters = (ins "int64_t":$axis, "int64_t":$blocks, "int64_t":$parts,
                        DefaultValuedParameter<"int64_t", "0">:$size,
                        StringRefParameter<"the group holding the parts", "\"tp\"">:$group,
                        DefaultValuedParameter<"int64_t", "-1">:$placement,
                        Merak_OptionalI64List<>:$block_sizes);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Merak_ZeroLayoutAttr : Merak_Attr<"ZeroLayout", "zero"> {
  let summary = "A ZeRO stage 1 part: a flattened tensor split over dp";
  let description = [{
    `merak.zero` (merak-data-parallel zero = 1, merak-optimizer): a tensor
    of `shape` flattened, zero-padded to a multiple of `parts` and split
    into `parts` equal parts, dp rank r holding part r. Read through
    getZeroLayout.
  }];
  let parameters = (ins "int64_t":$parts, Merak_I64List<>:$shape);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif
