//===- OpCosts.h - Measured op costs (profile-guided cost model) -*- C++ -*-===//
//
// The roofline (max(FLOPs / rate, bytes / bandwidth)) misses what small ops
// really cost on a target: GEMMs below the calibrated rate, per-op overheads,
// kernels that do not reach the memory bandwidth. A training program run
// with `--profile-ops FILE` times each of its ops and writes the medians by
// op *shape key* into FILE, merged with what the file already holds (a
// cache, shared by the programs of any plan on that target):
//
//   {"format": "merak-op-costs", "version": 1, "target": "cpu",
//    "threads": 1,
//    "ops": {"<key>": {"seconds": 1.2e-05, "samples": 48}, ...}}
//
// merak-compile --op-costs FILE reads it: the simulator (and the planner,
// where a probe has the candidate's shapes) charges the measured seconds of
// an op whose key is in the file, and the roofline otherwise.
//
// The key is what determines an op's cost: its name, operand and result
// types and inherent attributes (not its discardable `merak.*` ones, not its
// location; a dense constant of more than 16 distinct elements by its type
// and an xxh3 hash of its bytes, so keys stay short and stable), e.g.
//   merak.matmul(tensor<128x128xf32>, tensor<128x512xf32>) -> (tensor<128x512xf32>) {transpose_b = true}
// The compiler writes each kernel's key into the manifest ("op_keys"), so
// the runtime never spells one itself.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_ANALYSIS_OPCOSTS_H
#define MERAK_DIALECT_MERAK_ANALYSIS_OPCOSTS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir::merak {

/// The shape key of `op` (see above).
std::string opCostKey(Operation *op);

/// An op-cost file: measured seconds per shape key.
struct MeasuredOpCosts {
  std::string path;
  std::string target; ///< "cpu" or "cuda"
  int64_t threads = 0;
  llvm::StringMap<double> seconds;
  /// The measured seconds of `op`, if its key was timed.
  std::optional<double> lookup(Operation *op) const;
};

/// Reads an op-cost file; errors name the file and the bad field.
llvm::Expected<MeasuredOpCosts> readMeasuredOpCosts(llvm::StringRef path);

} // namespace mlir::merak

#endif
