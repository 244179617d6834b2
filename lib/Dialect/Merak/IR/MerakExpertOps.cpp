//===- MerakExpertOps.cpp - verifiers and costs of the expert GEMMs -------===//
//
// expert_matmul: input [S, K], weight [E, O, K] ([E, K, O] transposed),
// experts [S] -> [S, O]; expert_matmul_grad_weight: input [S, K], grad
// [S, O], experts [S] -> the weight's [E, O, K] ([E, K, O]). One float
// element type throughout.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
/// The checks both ops share, on the weight-shaped type `weight`
/// ([E, O, K] or [E, K, O]) and the row-shaped `input` [S, K], `rows`
/// [S, O] and `experts` [S].
LogicalResult verifyExpertGemm(Operation *op, RankedTensorType input, RankedTensorType weight,
                               RankedTensorType rows, RankedTensorType experts,
                               bool transposed, StringRef weightName, StringRef rowsName) {
  if (input.getRank() != 2 || rows.getRank() != 2 || weight.getRank() != 3 ||
      experts.getRank() != 1)
    return op->emitOpError("expects input [S, K], ")
           << rowsName << " [S, O], " << weightName
           << " [E, O, K] and experts [S], got ranks " << input.getRank() << ", "
           << rows.getRank() << ", " << weight.getRank() << " and " << experts.getRank();
  if (input.getElementType() != weight.getElementType() ||
      input.getElementType() != rows.getElementType())
    return op->emitOpError("input, ") << rowsName << " and " << weightName
                                      << " must have one element type";
  int64_t s = input.getDimSize(0), k = input.getDimSize(1), o = rows.getDimSize(1);
  if (rows.getDimSize(0) != s || experts.getDimSize(0) != s)
    return op->emitOpError("input, ") << rowsName << " and experts must have the same rows, got "
                                      << s << ", " << rows.getDimSize(0) << " and "
                                      << experts.getDimSize(0);
  int64_t wo = weight.getDimSize(transposed ? 2 : 1), wk = weight.getDimSize(transposed ? 1 : 2);
  if (wo != o || wk != k)
    return op->emitOpError() << weightName << " " << weight << " does not match input [" << s
                             << ", " << k << "] and " << rowsName << " [" << s << ", " << o
                             << "]: expected [E, " << (transposed ? k : o) << ", "
                             << (transposed ? o : k) << "]"
                             << (transposed ? " (transpose_weight)" : "");
  if (weight.getDimSize(0) < 1)
    return op->emitOpError() << weightName << " needs at least one expert";
  return success();
}

LogicalResult verifyFirst(Operation *op, Value first) {
  if (first && cast<RankedTensorType>(first.getType()).getRank() != 0)
    return op->emitOpError("first must be a scalar tensor<i64>, got ") << first.getType();
  return success();
}
} // namespace

LogicalResult ExpertMatmulOp::verify() {
  if (failed(verifyFirst(*this, getFirst())) || failed(verifyFirst(*this, getShadowFirst())))
    return failure();
  if (Value shadow = getShadow()) {
    auto w = cast<RankedTensorType>(getWeight().getType());
    auto s = cast<RankedTensorType>(shadow.getType());
    if (!getFirst() || !getShadowFirst())
      return emitOpError("shadow copies need first and shadow_first");
    if (s.getElementType() != w.getElementType() || s.getRank() != w.getRank() ||
        s.getShape().drop_front() != w.getShape().drop_front())
      return emitOpError("shadow ") << s << " must hold matrices of the weight's, " << w;
  }
  return verifyExpertGemm(*this, cast<RankedTensorType>(getInput().getType()),
                          cast<RankedTensorType>(getWeight().getType()),
                          cast<RankedTensorType>(getResult().getType()),
                          cast<RankedTensorType>(getExperts().getType()), getTransposeWeight(),
                          "weight", "result");
}

LogicalResult ExpertMatmulGradWeightOp::verify() {
  if (failed(verifyFirst(*this, getFirst())))
    return failure();
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError("acc type ")
           << getAcc().getType() << " must equal the result type " << getResult().getType();
  return verifyExpertGemm(*this, cast<RankedTensorType>(getInput().getType()),
                          cast<RankedTensorType>(getResult().getType()),
                          cast<RankedTensorType>(getGrad().getType()),
                          cast<RankedTensorType>(getExperts().getType()), getTransposeWeight(),
                          "result", "grad");
}

/// The rows the op multiplies: all S, or with `first` and `total_experts`
/// (expert parallelism: the ep group's rows, of which this rank's E experts
/// get E / total when routing is balanced) that share of S, or of
/// `groupRows` for compact rows (at most S of them).
static int64_t expectedRows(Value input, int64_t experts, std::optional<uint64_t> total,
                            std::optional<uint64_t> groupRows = std::nullopt) {
  int64_t s = cast<RankedTensorType>(input.getType()).getDimSize(0);
  if (total && *total > 0 && groupRows)
    return std::min<int64_t>(s, static_cast<int64_t>(*groupRows) * experts /
                                    static_cast<int64_t>(*total));
  if (total && *total > 0)
    return s * experts / static_cast<int64_t>(*total);
  return s;
}

/// 2 S O K: each row meets one expert's matrix.
static int64_t expertGemmFlops(Value input, Value rows, int64_t experts,
                               std::optional<uint64_t> total,
                               std::optional<uint64_t> groupRows) {
  auto x = cast<RankedTensorType>(input.getType());
  auto y = cast<RankedTensorType>(rows.getType());
  return 2 * expectedRows(input, experts, total, groupRows) * x.getDimSize(1) *
         y.getDimSize(1);
}

int64_t ExpertMatmulOp::getFlops() {
  return expertGemmFlops(getInput(), getResult(),
                         cast<RankedTensorType>(getWeight().getType()).getDimSize(0),
                         getTotalExperts(), getGroupRows());
}

/// The rows in and out, and at most the experts' matrices the rows can
/// reach (min(S, E) of them).
int64_t ExpertMatmulOp::getBytesAccessed() {
  auto bytes = [](Type t) {
    auto r = cast<RankedTensorType>(t);
    return r.getNumElements() * ((r.getElementTypeBitWidth() + 7) / 8);
  };
  auto w = cast<RankedTensorType>(getWeight().getType());
  int64_t experts = w.getDimSize(0), rows = cast<RankedTensorType>(getInput().getType()).getDimSize(0);
  return bytes(getInput().getType()) + bytes(getExperts().getType()) +
         bytes(getResult().getType()) + bytes(w) / experts * std::min(experts, rows);
}

int64_t ExpertMatmulGradWeightOp::getFlops() {
  return expertGemmFlops(getInput(), getGrad(),
                         cast<RankedTensorType>(getResult().getType()).getDimSize(0),
                         getTotalExperts(), getGroupRows());
}

LogicalResult ExpertShadowPlanOp::verify() {
  auto ids = cast<RankedTensorType>(getExperts().getType());
  auto routed = cast<RankedTensorType>(getRouted().getType());
  auto slots = cast<RankedTensorType>(getSlots().getType());
  if (ids.getRank() != 1 || routed != ids)
    return emitOpError("expects one expert id per row (rank 1) and routed ids of that type");
  if (slots.getRank() != 1 || slots.getDimSize(0) < 1)
    return emitOpError("expects at least one slot (a rank-1 result), got ") << slots;
  if (static_cast<int64_t>(getExpertsPerRank()) < 1 || static_cast<int64_t>(getParts()) < 1 ||
      static_cast<int64_t>(getMinRows()) < 1)
    return emitOpError("experts_per_rank, parts and min_rows must be at least 1");
  if (ids.getDimSize(0) % static_cast<int64_t>(getParts()) != 0)
    return emitOpError("the group's ")
           << ids.getDimSize(0) << " rows do not divide by " << getParts() << " parts";
  return success();
}

LogicalResult ExpertPlaceOp::verify() {
  auto ids = cast<RankedTensorType>(getExperts().getType());
  auto table = cast<RankedTensorType>(getPlacement().getType());
  if (ids.getRank() != 1 || getResult().getType() != ids)
    return emitOpError("expects one expert id per row (rank 1) and a result of that type");
  if (table.getRank() != 1 || table.getDimSize(0) < 1)
    return emitOpError("expects a placement of at least one expert (rank 1), got ") << table;
  if (static_cast<int64_t>(getTable()) < 0 || static_cast<int64_t>(getWeightRows()) < 1 ||
      static_cast<int64_t>(getRebalanceEvery()) < 0)
    return emitOpError("expects table >= 0, weight_rows >= 1 and rebalance_every >= 0");
  return success();
}

LogicalResult ExpertCapacityOp::verify() {
  auto ids = cast<RankedTensorType>(getExperts().getType());
  auto probs = cast<RankedTensorType>(getProbs().getType());
  if (ids.getRank() != 1 || getResult().getType() != ids)
    return emitOpError("expects one expert id per row (rank 1) and a result of that type");
  if (probs.getShape() != ids.getShape())
    return emitOpError("expects one probability per row: ")
           << probs << " for " << ids.getDimSize(0) << " rows";
  if (static_cast<int64_t>(getNumExperts()) < 1 || static_cast<int64_t>(getCapacity()) < 1)
    return emitOpError("expects experts >= 1 and capacity >= 1");
  if (getPolicy() != "probs" && getPolicy() != "position")
    return emitOpError("policy must be \"probs\" or \"position\", got \"") << getPolicy() << "\"";
  return success();
}

LogicalResult ExpertCompactOp::verify() {
  auto ids = cast<RankedTensorType>(getExperts().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  auto first = cast<RankedTensorType>(getFirst().getType());
  if (ids.getRank() != 1 || out.getRank() != 1 || out.getDimSize(0) < 1)
    return emitOpError("expects the group's ids and the compact ids as rank-1 tensors");
  if (out.getDimSize(0) > ids.getDimSize(0))
    return emitOpError("the ") << out.getDimSize(0) << " compact rows exceed the group's "
                               << ids.getDimSize(0);
  if (first.getNumElements() != 1)
    return emitOpError("first must be one i64, got ") << first;
  if (static_cast<int64_t>(getExpertsPerRank()) < 1)
    return emitOpError("experts_per_rank must be at least 1");
  return success();
}
