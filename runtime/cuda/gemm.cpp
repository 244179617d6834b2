//===- gemm.cpp - Row-major GEMMs through cuBLASLt --------------------------===//
#include "merak_rt/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

namespace merak::rt::cuda {

static Status lt(cublasStatus_t s, const char *call) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  std::string msg = call;
  msg += ": ";
  msg += cublasLtGetStatusString(s);
  msg += " (";
  msg += cublasLtGetStatusName(s);
  msg += ")";
  return Status::error(msg);
}

#define MERAK_LT(call)                                                         \
  do {                                                                         \
    if (Status st_ = lt((call), #call); !st_)                                  \
      return st_;                                                              \
  } while (0)

Result<Blas> Blas::create(uint64_t workspaceBytes) {
  Blas b;
  cublasLtHandle_t h = nullptr;
  if (Status s = lt(cublasLtCreate(&h), "cublasLtCreate"); !s)
    return s;
  b.handle_ = h;
  if (workspaceBytes) {
    Result<void *> ws = deviceAlloc(workspaceBytes);
    if (!ws)
      return ws.status();
    b.workspace_ = *ws;
    b.workspaceBytes_ = workspaceBytes;
  }
  return b;
}

Blas::Blas(Blas &&o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)),
      workspace_(std::exchange(o.workspace_, nullptr)),
      workspaceBytes_(std::exchange(o.workspaceBytes_, 0)) {}
Blas &Blas::operator=(Blas &&o) noexcept {
  if (this != &o) {
    this->~Blas();
    handle_ = std::exchange(o.handle_, nullptr);
    workspace_ = std::exchange(o.workspace_, nullptr);
    workspaceBytes_ = std::exchange(o.workspaceBytes_, 0);
  }
  return *this;
}
Blas::~Blas() {
  if (workspace_)
    deviceFree(workspace_);
  if (handle_)
    cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
  workspace_ = handle_ = nullptr;
}

namespace {
/// Descriptors released on every exit path.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

Status layout(cublasLtMatrixLayout_t *l, cudaDataType type, int64_t rows,
              int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  MERAK_LT(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows),
                                      static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    MERAK_LT(cublasLtMatrixLayoutSetAttribute(
        *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    MERAK_LT(cublasLtMatrixLayoutSetAttribute(
        *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof stride));
  }
  return Status::success();
}
} // namespace

Status Blas::gemm(GemmPrecision prec, const GemmShape &s, float alpha,
                  const void *A, const void *B, float beta, void *C,
                  StreamHandle stream, bool cIsF32) {
  if (!handle_)
    return Status::error("cuda gemm: Blas not created");
  if (Status v = validate(s); !v)
    return v;
  if (s.M == 0 || s.N == 0)
    return Status::success();
  const ColMajorGemm g = toColMajor(s);
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType abType = CUDA_R_32F, cType = CUDA_R_32F;
  if (prec == GemmPrecision::TF32)
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (prec == GemmPrecision::BF16) {
    abType = CUDA_R_16BF;
    cType = cIsF32 ? CUDA_R_32F : CUDA_R_16BF;
  }
  Descs d;
  MERAK_LT(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F));
  cublasOperation_t t1 = g.trans1 ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t t2 = g.trans2 ? CUBLAS_OP_T : CUBLAS_OP_N;
  MERAK_LT(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &t1, sizeof t1));
  MERAK_LT(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &t2, sizeof t2));
  if (Status st = layout(&d.a, abType, g.rows1, g.cols1, g.ld1, s.batch,
                         s.strideB);
      !st)
    return st;
  if (Status st = layout(&d.b, abType, g.rows2, g.cols2, g.ld2, s.batch,
                         s.strideA);
      !st)
    return st;
  if (Status st = layout(&d.c, cType, g.m, g.n, g.ldc, s.batch, s.strideC);
      !st)
    return st;
  MERAK_LT(cublasLtMatmulPreferenceCreate(&d.pref));
  uint64_t ws = workspaceBytes_;
  MERAK_LT(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The pointers' actual alignment (the heuristic otherwise assumes 256
  // bytes; a per-batch offset into a broadcast operand may have less).
  auto alignment = [](const void *p) {
    const auto u = reinterpret_cast<uintptr_t>(p);
    uint32_t a = 256;
    while (a > 1 && (u & (a - 1)))
      a >>= 1;
    return a;
  };
  const uint32_t alignA = alignment(B), alignB = alignment(A), alignC = alignment(C);
  MERAK_LT(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof alignA));
  MERAK_LT(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof alignB));
  MERAK_LT(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof alignC));
  MERAK_LT(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC, sizeof alignC));
  auto h = static_cast<cublasLtHandle_t>(handle_);
  cublasLtMatmulHeuristicResult_t heur = {};
  int found = 0;
  MERAK_LT(cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.c, d.pref,
                                          1, &heur, &found));
  if (found == 0)
    return Status::error("cuda gemm: cuBLASLt has no algorithm for M=" +
                         std::to_string(s.M) + " N=" + std::to_string(s.N) +
                         " K=" + std::to_string(s.K));
  MERAK_LT(cublasLtMatmul(h, d.op, &alpha, B, d.a, A, d.b, &beta, C, d.c, C,
                          d.c, &heur.algo, workspace_, workspaceBytes_,
                          static_cast<cudaStream_t>(stream)));
  return Status::success();
}

} // namespace merak::rt::cuda
