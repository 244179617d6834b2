//===- DeviceProfile.h - Device profiles for the cost model -----*- C++ -*-===//
//
// What the pipeline simulator needs to know about a machine: compute rate
// per dtype, memory bandwidth and size, devices per node, and the intra- and
// inter-node links. Read from JSON (profiles/*.json, or one written by
// merak-calibrate); see docs/user-guide.md, "Device profiles".
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_DIALECT_MERAK_ANALYSIS_DEVICEPROFILE_H
#define MERAK_DIALECT_MERAK_ANALYSIS_DEVICEPROFILE_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::merak {

/// A link between two devices: bytes per second and seconds per message.
struct LinkProfile {
  double bandwidth = 0.0, latency = 0.0;
  /// Seconds to move one message of `bytes`: latency + bytes / bandwidth.
  double seconds(double bytes) const { return latency + bytes / bandwidth; }
};

struct DeviceProfile {
  std::string name;
  /// Peak FLOP/s per dtype.
  double flopsF32 = 0.0, flopsBF16 = 0.0, flopsF16 = 0.0;
  /// Fraction of peak the GEMMs achieve (optional, default 1).
  double efficiency = 1.0;
  double memoryBandwidth = 0.0; ///< bytes per second
  double memoryBytes = 0.0;
  int64_t devicesPerNode = 1;
  LinkProfile intraNode, interNode;

  /// Peak FLOP/s for "f32", "bf16" or "f16" (f32 for anything else).
  double flops(llvm::StringRef dtype) const;
  /// Achieved FLOP/s: flops(dtype) * efficiency.
  double achievedFlops(llvm::StringRef dtype) const { return flops(dtype) * efficiency; }
};

/// Parses a profile (JSON text); `file` names it in errors, which also name
/// the missing or invalid field ("h200.json: intra_node.bandwidth: ...").
llvm::Expected<DeviceProfile> parseDeviceProfile(llvm::StringRef json, llvm::StringRef file);
/// Reads and parses the file at `path`.
llvm::Expected<DeviceProfile> readDeviceProfile(llvm::StringRef path);

/// Ring all-reduce of `bytes` over `n` devices on `link`:
///   2 (n - 1) / n * bytes / bandwidth + 2 (n - 1) * latency; 0 for n <= 1.
double ringAllReduceSeconds(double bytes, int64_t n, const LinkProfile &link);
/// Ring reduce-scatter or all-gather (half an all-reduce):
///   (n - 1) / n * bytes / bandwidth + (n - 1) * latency.
double ringGatherSeconds(double bytes, int64_t n, const LinkProfile &link);
/// All-to-all of `bytes` per rank (its part for every rank, itself
/// included) among `n` ranks, `perNode` of them on each node (N = n /
/// perNode nodes; perNode >= n: one node).
/// - Flat (every part sent straight to its rank; the intra- and
///   inter-node parts travel at once, each message pays its latency):
///     (L - 1) a_intra + (n - L) a_inter
///       + max(bytes (L - 1) / n / b_intra, bytes (n - L) / n / b_inter)
/// - Two-level (`twoLevel`, MoNTA / Tutel's 2DH: within the node to the
///   rank with the destination's local index, then across nodes among the
///   ranks of one local index; as many bytes cross nodes, in N - 1 instead
///   of n - L messages):
///     (L - 1) a_intra + bytes (L - 1) / L / b_intra
///       + (N - 1) a_inter + bytes (N - 1) / N / b_inter
/// 0 for n <= 1.
double allToAllSeconds(double bytes, int64_t n, int64_t perNode, const DeviceProfile &p,
                       bool twoLevel);

/// "80GB" -> 80e9, "512MiB" -> 512 * 2^20, "1000" -> 1000, "" -> 0 (memory
/// sizes as --memory-per-device spells them); nullopt when malformed or
/// overflowing.
std::optional<int64_t> parseByteSize(StringRef text);

} // namespace mlir::merak

#endif
