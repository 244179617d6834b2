//===- launch.h - Host-side launch planning for the CUDA kernels -*- C++ -*-===//
//
// Pure host logic (no CUDA calls, unit-tested without a GPU): how a binary
// op's operands broadcast (coalesced strides), how many blocks/threads each
// kernel family launches, when 16-byte vector accesses are legal, and how a
// row-major GEMM maps onto cuBLASLt's column-major one.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_LAUNCH_H
#define MERAK_RT_CUDA_LAUNCH_H

#include "merak_rt/ops.h"
#include "merak_rt/status.h"

#include <cstdint>

namespace merak::rt::cuda {

using cpu::Dims;
using cpu::kMaxRank;

/// Element types of the CUDA kernels.
enum class DType : int32_t { F32 = 0, BF16 = 1 };
int64_t dtypeSize(DType t);
/// Elements in one 16-byte access: 4 (F32) or 8 (BF16).
int vectorWidth(DType t);
/// True when n elements at every pointer (nullptr ignored) can be accessed
/// as 16-byte vectors: n is a multiple of the width and the addresses are
/// 16-byte aligned.
bool canVectorize(DType t, int64_t n, const void *p0, const void *p1 = nullptr,
                  const void *p2 = nullptr, const void *p3 = nullptr);

/// How a binary op reads its operands.
enum class BroadcastKind : int32_t {
  Same,    // a, b and out have the same number of elements, no broadcast
  ScalarA, // a is one element
  ScalarB, // b is one element
  RowB,    // b is a suffix row of `inner` elements repeated (x + bias)
  RowA,    // a is the repeated suffix row
  General  // strided walk over the (coalesced) output dims
};

/// out's dims after merging adjacent dims that broadcast the same way, with
/// element strides of a and b (0 on broadcast dims).
struct BroadcastPlan {
  BroadcastKind kind = BroadcastKind::Same;
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strideA[kMaxRank] = {};
  int64_t strideB[kMaxRank] = {};
  int64_t numel = 0;
  int64_t inner = 0; // RowA/RowB: the row length
};

/// numpy broadcasting of da and db to dout; an error when they do not
/// broadcast to exactly dout.
Result<BroadcastPlan> planBroadcast(const Dims &da, const Dims &db,
                                    const Dims &dout);

struct Launch {
  uint32_t grid = 0;  // blocks (x)
  uint32_t block = 0; // threads per block
};

/// Grid-stride elementwise launch over `items` work items (elements or
/// vectors): 256 threads, at most 8 blocks per SM (`smCount` 0: 132).
Launch elementwiseLaunch(int64_t items, int smCount = 0);

/// A row kernel (softmax, layer norm, cross entropy): rows of `cols`
/// elements. Rows up to kWarpRowMax elements get one warp each (8 rows per
/// 256-thread block); longer rows get one block each, of 128..1024 threads.
constexpr int64_t kWarpRowMax = 1024;
struct RowLaunch {
  bool warpPerRow = true;
  uint32_t grid = 0, block = 0;
  uint32_t rowsPerBlock = 0;
};
RowLaunch rowLaunch(int64_t rows, int64_t cols);

/// A row-major GEMM C[M,N] = op(A) op(B) as cuBLASLt's column-major
/// C^T[N,M] = op(B)^T op(A)^T: the first cuBLASLt operand is B.
struct GemmShape {
  bool transA = false, transB = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0; // elements; 0 broadcasts
};
struct ColMajorGemm {
  // cuBLASLt operand 1 (our B), operand 2 (our A), result (our C).
  bool trans1 = false, trans2 = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t rows1 = 0, cols1 = 0, ld1 = 0; // stored layout of operand 1
  int64_t rows2 = 0, cols2 = 0, ld2 = 0;
  int64_t ldc = 0;
};
ColMajorGemm toColMajor(const GemmShape &s);
/// Checks a GemmShape (sizes >= 0, batch >= 1, C stride not 0 with batch > 1).
Status validate(const GemmShape &s);

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_LAUNCH_H
