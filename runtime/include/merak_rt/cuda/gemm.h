//===- gemm.h - cuBLASLt GEMMs --------------------------------------*- C++ -*-===//
//
// Row-major (batched, strided) GEMMs through cuBLASLt: one handle and one
// device workspace per Blas object. Precisions: F32 (fp32 in, fp32 compute),
// TF32 (fp32 in/out, tf32 tensor cores, fp32 accumulation), BF16 (bf16 A/B,
// fp32 accumulation, C in bf16 or fp32).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_GEMM_H
#define MERAK_RT_CUDA_GEMM_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

namespace merak::rt::cuda {

enum class GemmPrecision : int32_t { F32, TF32, BF16 };

class Blas {
public:
  Blas() = default;
  /// Creates the cuBLASLt handle and a workspace of `workspaceBytes`.
  static Result<Blas> create(uint64_t workspaceBytes = 32ull << 20);
  Blas(Blas &&o) noexcept;
  Blas &operator=(Blas &&o) noexcept;
  Blas(const Blas &) = delete;
  Blas &operator=(const Blas &) = delete;
  ~Blas();

  /// C = alpha * op(A) op(B) + beta * C per batch (see GemmShape). With
  /// BF16, A and B are bf16 and C is bf16 unless cIsF32.
  Status gemm(GemmPrecision prec, const GemmShape &s, float alpha,
              const void *A, const void *B, float beta, void *C,
              StreamHandle stream, bool cIsF32 = false);

private:
  void *handle_ = nullptr;
  void *workspace_ = nullptr;
  uint64_t workspaceBytes_ = 0;
};

} // namespace merak::rt::cuda

#endif // MERAK_RT_CUDA_GEMM_H
