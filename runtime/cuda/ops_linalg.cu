//===- ops_linalg.cu - GPU ABI: numpy matmul ---------------------------------===//
//
// F32 through cuBLASLt, one strided-batched call when each operand's batch
// dims are either all broadcast or equal to the result's, else one call per
// result batch. The precision is MERAK_MATMUL_PRECISION (read once):
//   fp32 (default)  full FP32, the CPU program's precision;
//   tf32            fp32 in/out on TF32 tensor cores, fp32 accumulation;
//   bf16            both operands rounded to bf16 (into the context's
//                   scratch), bf16 tensor cores, fp32 accumulation and
//                   result: what torch.autocast(bfloat16) does to a matmul,
//                   with the activations staying fp32 between ops.
// BF16 tensors (merak-mixed-precision's GEMMs) always run on bf16 tensor
// cores with fp32 accumulation and a bf16 result.
// Other element types: one thread per output element, accumulating floats
// in double and integers wrapping in int64 (as runtime/src/ops_linalg.cpp).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/gemm.h"
#include "merak_rt/cuda/mixed.h"
#include "ops_common.cuh"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

namespace merak::rt::gpu {
using namespace detail;

namespace {
std::unique_ptr<cuda::Blas> &blasSlot() {
  static std::unique_ptr<cuda::Blas> b;
  return b;
}
} // namespace

namespace detail {
cuda::GemmPrecision matmulPrecision() {
  static const cuda::GemmPrecision p = [] {
    const char *e = std::getenv("MERAK_MATMUL_PRECISION");
    if (!e || !*e || !std::strcmp(e, "fp32"))
      return cuda::GemmPrecision::F32;
    if (!std::strcmp(e, "tf32"))
      return cuda::GemmPrecision::TF32;
    if (!std::strcmp(e, "bf16"))
      return cuda::GemmPrecision::BF16;
    fatal(("MERAK_MATMUL_PRECISION='" + std::string(e) + "': expected fp32, tf32 or bf16")
              .c_str());
  }();
  return p;
}

cuda::Blas &blas() {
  auto &b = blasSlot();
  if (!b) {
    Result<cuda::Blas> r = cuda::Blas::create();
    if (!r.ok())
      fatal(("matmul: " + r.message()).c_str());
    b = std::make_unique<cuda::Blas>(std::move(r).value());
  }
  return *b;
}

void releaseBlas() { blasSlot().reset(); }
} // namespace detail

namespace {
/// y[batch, M, N] = a[batch, M, K] b[batch, K, N]; batch offsets by walk
/// (s0: y, s1: a, s2: b in elements).
template <class T>
__global__ void __launch_bounds__(256)
    matmulKernel(const T *a, const T *b, T *y, int64_t batches, int64_t M,
                 int64_t N, int64_t K, const __grid_constant__ Walk w) {
  using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  MERAK_GRID_STRIDE(i, batches * M * N) {
    const int64_t n = i % N, m = (i / N) % M, bt = i / (M * N);
    int64_t oy, oa, ob;
    walkOffsets(w, bt, oy, oa, ob);
    A acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      if constexpr (std::is_floating_point_v<T>)
        acc += double(a[oa + m * K + k]) * double(b[ob + k * N + n]);
      else
        acc = A(uint64_t(acc) + uint64_t(A(a[oa + m * K + k])) * uint64_t(A(b[ob + k * N + n])));
    }
    y[oy + m * N + n] = T(acc);
  }
}
} // namespace

void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db,
            void *y, const Dims &dy, bool ta, bool tb) {
  gpu::matmul(t, a, da, b, db, y, dy, ta, tb, t);
}

void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db, void *y,
            const Dims &dy, bool ta, bool tb, DT yt, bool accumulate) {
  if (yt != t && !(t == DT::BF16 && yt == DT::F32))
    fatal("matmul: the result type must be the operands' (or f32 for bf16 operands)");
  if (accumulate && yt != DT::F32)
    fatal("matmul: an accumulated product must be f32");
  if ((ta || tb) && ((t != DT::F32 && t != DT::BF16) || da.rank < 2 || db.rank < 2))
    fatal("matmul: transposed operands need F32 or BF16 matrices");
  // Transposed operands are stored [..., K, M] / [..., N, K] and read by
  // cuBLASLt with op = T (the same element counts per batch).
  const int64_t M = da.rank == 1 ? 1 : da.d[da.rank - (ta ? 1 : 2)];
  const int64_t K = da.d[da.rank - (ta ? 2 : 1)];
  const int64_t N = db.rank == 1 ? 1 : db.d[db.rank - (tb ? 2 : 1)];
  if (M * N == 0 || dy.numel() == 0)
    return;
  // Batch dims: the result's leading dims; a's and b's right-aligned.
  Dims ab, bb, yb;
  ab.rank = da.rank > 2 ? da.rank - 2 : 0;
  bb.rank = db.rank > 2 ? db.rank - 2 : 0;
  for (int32_t i = 0; i < ab.rank; ++i)
    ab.d[i] = da.d[i];
  for (int32_t i = 0; i < bb.rank; ++i)
    bb.d[i] = db.d[i];
  yb.rank = ab.rank > bb.rank ? ab.rank : bb.rank;
  for (int32_t i = 0; i < yb.rank; ++i) {
    const int32_t ia = i - (yb.rank - ab.rank), ib = i - (yb.rank - bb.rank);
    const int64_t va = ia >= 0 ? ab.d[ia] : 1, vb = ib >= 0 ? bb.d[ib] : 1;
    yb.d[i] = va == 1 ? vb : va;
  }
  const int64_t batches = yb.numel();
  if (K == 0) {
    if (accumulate) // y += an empty product
      return;
    if (cudaMemsetAsync(y, 0, batches * M * N * elemSize(yt), cs()) != cudaSuccess)
      fatal("matmul: cudaMemsetAsync failed");
    return;
  }
  Walk w;
  w.rank = yb.rank;
  for (int32_t i = 0; i < yb.rank; ++i)
    w.dims[i] = yb.d[i];
  contiguousStrides(yb, w.s0);
  broadcastStrides(ab, yb, w.s1);
  broadcastStrides(bb, yb, w.s2);
  for (int32_t i = 0; i < yb.rank; ++i) {
    w.s0[i] *= M * N;
    w.s1[i] *= M * K;
    w.s2[i] *= K * N;
  }
  if (t != DT::F32 && t != DT::BF16) {
    dispatchNumeric(t, "matmul: numeric tensors only", [&](auto tag) {
      using T = typename decltype(tag)::type;
      matmulKernel<T><<<gridFor(batches * M * N), 256, 0, cs()>>>(
          static_cast<const T *>(a), static_cast<const T *>(b),
          static_cast<T *>(y), batches, M, N, K, w);
    });
    checkLaunch("matmul");
    return;
  }
  cuda::GemmShape s;
  s.M = M, s.N = N, s.K = K;
  s.transA = ta, s.transB = tb;
  const int64_t na = ab.numel(), nb = bb.numel();
  const bool simpleA = na == 1 || na == batches, simpleB = nb == 1 || nb == batches;
  // bf16 tensors (merak-mixed-precision): bf16 tensor cores, fp32
  // accumulation, a bf16 result. fp32 tensors: MERAK_MATMUL_PRECISION.
  const bool native = t == DT::BF16;
  const cuda::GemmPrecision prec = native ? cuda::GemmPrecision::BF16 : matmulPrecision();
  const bool bf16 = prec == cuda::GemmPrecision::BF16;
  // bf16: element offsets stay those of the fp32 operands, into bf16 copies.
  const size_t elem = bf16 ? 2 : 4;
  const char *ca = static_cast<const char *>(a), *cb = static_cast<const char *>(b);
  if (bf16 && !native) {
    void *a16 = scratch(0, static_cast<uint64_t>(na * M * K) * 2);
    void *b16 = scratch(1, static_cast<uint64_t>(nb * K * N) * 2);
    if (Status st = cuda::castF32ToBf16(static_cast<const float *>(a), a16, na * M * K, stream());
        !st.ok())
      fatal(("matmul: " + st.message()).c_str());
    if (Status st = cuda::castF32ToBf16(static_cast<const float *>(b), b16, nb * K * N, stream());
        !st.ok())
      fatal(("matmul: " + st.message()).c_str());
    ca = static_cast<const char *>(a16);
    cb = static_cast<const char *>(b16);
  }
  // The result: bf16 for bf16 tensors unless yt asks for float32.
  const bool yF32 = !native || yt == DT::F32;
  const size_t yElem = yF32 ? 4 : 2;
  auto run = [&](const cuda::GemmShape &g, int64_t oa, int64_t ob, int64_t oy) {
    // beta = 1: y += the product (gradient-accumulation fusion).
    if (Status st =
            blas().gemm(prec, g, 1.f, ca + oa * elem, cb + ob * elem, accumulate ? 1.f : 0.f,
                        static_cast<char *>(y) + oy * yElem, stream(),
                        /*cIsF32=*/yF32);
        !st.ok())
      fatal(("matmul: " + st.message()).c_str());
  };
  if (simpleA && simpleB) {
    s.batch = batches;
    s.strideA = na == 1 ? 0 : M * K;
    s.strideB = nb == 1 ? 0 : K * N;
    s.strideC = M * N;
    if (batches == 1)
      s.strideA = s.strideB = s.strideC = 0;
    return run(s, 0, 0, 0);
  }
  // Partial broadcasting ([2,1,M,K] x [1,3,K,N]): one GEMM per result batch.
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t rem = bt, oy = 0, oa = 0, ob = 0;
    for (int32_t d = w.rank - 1; d >= 0; --d) {
      const int64_t k = rem % w.dims[d];
      rem /= w.dims[d];
      oy += k * w.s0[d];
      oa += k * w.s1[d];
      ob += k * w.s2[d];
    }
    run(s, oa, ob, oy);
  }
}

} // namespace merak::rt::gpu
