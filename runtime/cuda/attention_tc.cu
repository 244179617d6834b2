//===- attention_tc.cu - Tensor-core (WMMA) attention, bf16 ----------------===//
//
// The opt-in bf16 kernels of attention.h (AttnShape::tensorCores); the
// backward's are described above attnBwdKVTcKernel. The forward: a block of
// 4 warps owns 64 query rows (16 per warp) and walks 64-key tiles:
//   S[16 x 64]  = Q K^T      WMMA bf16 16x16x16, fp32 accumulate -> smem
//   softmax     fp32, SIMT on the warp's 16 rows (2 lanes per row), online
//               in the exp2 domain; O rows rescaled in smem; P -> bf16 smem
//   O[16 x D]  += P V        WMMA, the fp32 accumulator kept in smem
// Keeping O in shared memory (loaded into the accumulator fragment, updated,
// stored back per tile) makes the rescale independent of WMMA's opaque
// fragment layout. Q, K, V stay bf16 in shared memory (rows padded by 8
// elements); every WMMA pointer is 32-byte aligned (row strides and region
// offsets are multiples of 32 bytes).
//
//===----------------------------------------------------------------------===//
#include "attention_impl.cuh"

#include <mma.h>

namespace merak::rt::cuda::detail {
namespace {
using namespace nvcuda;

constexpr int kTcThreads = 128;
constexpr int kPadH = 8; // bf16 row padding
constexpr int kLdS = kTile + 4;
constexpr int kLdP = kTile + kPadH;

template <int D> struct TcLayout {
  static constexpr int ldq = D + kPadH; // bf16
  static constexpr int ldo = D + 4;     // float
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(kTile) * ldq * 2;
  static constexpr size_t v = k + size_t(kTile) * ldq * 2;
  static constexpr size_t s = v + size_t(kTile) * ldq * 2;
  static constexpr size_t o = s + size_t(kTile) * kLdS * 4;
  static constexpr size_t p = o + size_t(kTile) * ldo * 4;
  static constexpr size_t bytes = p + size_t(kTile) * kLdP * 2;
  static_assert(k % 32 == 0 && v % 32 == 0 && s % 32 == 0 && o % 32 == 0 &&
                    p % 32 == 0,
                "WMMA needs 32-byte aligned regions");
  static_assert((16 * ldq * 2) % 32 == 0 && (16 * kLdS * 4) % 32 == 0 &&
                    (16 * ldo * 4) % 32 == 0 && (16 * kLdP * 2) % 32 == 0,
                "WMMA needs 32-byte aligned row blocks");
};

/// dst[t][0, D) = src row t0 + t (zero past T), 16-byte copies.
template <int D>
__device__ __forceinline__ void copyTile(bf16 *dst, int ld, const bf16 *src,
                                         int64_t sT, int t0, int Tn) {
  constexpr int kChunks = D / 8;
  for (int item = threadIdx.x; item < kTile * kChunks; item += kTcThreads) {
    const int t = item / kChunks, ch = item % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t0 + t < Tn)
      v = *reinterpret_cast<const uint4 *>(src + int64_t(t0 + t) * sT + ch * 8);
    *reinterpret_cast<uint4 *>(dst + t * ld + ch * 8) = v;
  }
}

/// dst[16 x 64] (fp32, row-major, ld kLdS) = A[16 x D] B^T for the warp's 16
/// rows of A (bf16 row-major, ld `lda`) and the 64 rows of B (bf16, ld `ldb`).
template <int D>
__device__ __forceinline__ void rowsTimesTileT(float *dst, const bf16 *A, int lda,
                                               const bf16 *B, int ldb) {
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, A + 16 * kk, lda);
      wmma::load_matrix_sync(fb, B + 16 * n * ldb + 16 * kk, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(dst + 16 * n, acc, kLdS, wmma::mem_row_major);
  }
}

/// acc[16 x D] (fp32 smem, ld `ldo`) += A[16 x 64] (bf16, ld kLdP) B[64 x D]
/// (bf16 row-major, ld `ldb`).
template <int D>
__device__ __forceinline__ void accumulateTile(float *acc, int ldo, const bf16 *A,
                                               const bf16 *B, int ldb) {
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::load_matrix_sync(c, acc + 16 * n, ldo, wmma::mem_row_major);
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, A + 16 * kk, kLdP);
      wmma::load_matrix_sync(fb, B + 16 * kk * ldb + 16 * n, ldb);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(acc + 16 * n, c, ldo, wmma::mem_row_major);
  }
}

template <int D>
__global__ void __launch_bounds__(kTcThreads)
    attnFwdTcKernel(const AttnFwdArgs a) {
  using L = TcLayout<D>;
  extern __shared__ __align__(128) unsigned char smemTc[];
  bf16 *Qs = reinterpret_cast<bf16 *>(smemTc + L::q);
  bf16 *Ks = reinterpret_cast<bf16 *>(smemTc + L::k);
  bf16 *Vs = reinterpret_cast<bf16 *>(smemTc + L::v);
  float *Ss = reinterpret_cast<float *>(smemTc + L::s);
  float *Os = reinterpret_cast<float *>(smemTc + L::o);
  bf16 *Ps = reinterpret_cast<bf16 *>(smemTc + L::p);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int Tn = a.T;
  const bf16 *qp = static_cast<const bf16 *>(a.q.p) + b * a.q.sB + h * a.q.sH;
  const bf16 *kp = static_cast<const bf16 *>(a.k.p) + b * a.k.sB + h * a.k.sH;
  const bf16 *vp = static_cast<const bf16 *>(a.v.p) + b * a.v.sB + h * a.v.sH;
  copyTile<D>(Qs, L::ldq, qp, a.q.sT, q0, Tn);

  // This lane's row (2 lanes per row) and half of the columns.
  const int rowL = 16 * warp + (lane >> 1), half = lane & 1;
  const int r = q0 + rowL;
  for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c)
    Os[rowL * L::ldo + c] = 0.f;
  float m = -INFINITY, l = 0.f;

  const int kEnd = a.causal ? min(Tn, q0 + kTile) : Tn;
  for (int k0 = 0; k0 < kEnd; k0 += kTile) {
    __syncthreads(); // previous tile's Ks/Vs reads are done
    copyTile<D>(Ks, L::ldq, kp, a.k.sT, k0, Tn);
    copyTile<D>(Vs, L::ldq, vp, a.v.sT, k0, Tn);
    __syncthreads();

    // S = Q K^T for the warp's 16 rows.
    rowsTimesTileT<D>(Ss + 16 * warp * kLdS, Qs + 16 * warp * L::ldq, L::ldq, Ks, L::ldq);
    __syncwarp();

    // Online softmax on the row: 32 columns per lane.
    float *srow = Ss + rowL * kLdS + half * 32;
    float mx = -INFINITY;
    for (int j = 0; j < 32; ++j) {
      const int c = k0 + half * 32 + j;
      const float s = (c >= Tn || (a.causal && c > r))
                          ? -INFINITY
                          : srow[j] * a.scaleLog2;
      srow[j] = s;
      mx = fmaxf(mx, s);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float mNew = fmaxf(m, mx);
    const float mRef = mNew == -INFINITY ? 0.f : mNew;
    const float alpha = exp2f(m - mRef);
    float sum = 0.f;
    bf16 *prow = Ps + rowL * kLdP + half * 32;
    for (int j = 0; j < 32; ++j) {
      const float p = exp2f(srow[j] - mRef);
      prow[j] = __float2bfloat16_rn(p);
      sum += p; // fp32, so that L is exact for the backward
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = mNew;
    float *orow = Os + rowL * L::ldo + half * (D / 2);
    for (int c = 0; c < D / 2; ++c)
      orow[c] *= alpha;
    __syncwarp();

    // O += P V for the warp's 16 rows.
    accumulateTile<D>(Os + 16 * warp * L::ldo, L::ldo, Ps + 16 * warp * kLdP, Vs, L::ldq);
    __syncwarp();
  }

  if (r < Tn) {
    bf16 *op = static_cast<bf16 *>(a.o.p) + b * a.o.sB + h * a.o.sH +
               int64_t(r) * a.o.sT;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float *orow = Os + rowL * L::ldo;
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c)
      op[c] = __float2bfloat16_rn(orow[c] * inv);
    if (half == 0)
      a.lse[(int64_t(b) * a.H + h) * Tn + r] =
          l > 0.f ? m / kLog2e + logf(l) : -INFINITY;
  }
}

template <int D>
Status launchTc(const AttnFwdArgs &a, int64_t BH, cudaStream_t stream) {
  const size_t smem = TcLayout<D>::bytes;
  cudaError_t e = cudaFuncSetAttribute(
      attnFwdTcKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      int(smem));
  if (e != cudaSuccess)
    return cudaCheck(int(e), "attention tensor-core forward kernel");
  const dim3 grid(unsigned(BH), unsigned((a.T + kTile - 1) / kTile));
  attnFwdTcKernel<D><<<grid, kTcThreads, smem, stream>>>(a);
  return launched("attention tensor-core forward kernel");
}

// --- backward ---------------------------------------------------------------
//
// FlashAttention-2's split on tensor cores, bf16 operands and fp32
// accumulation. One block of 4 warps per 64-key tile accumulates dK and dV
// over the query tiles that see it; one per 64-query tile accumulates dQ
// over its key tiles (no atomics: deterministic). A warp owns 16 rows of
// the block's tile. Per streamed tile:
//   S (or S^T) and dP (or dP^T)   WMMA, fp32 -> smem
//   P = exp2(S * scale log2e - L2), dS = P * (dP - Delta)   fp32, SIMT,
//                                  2 lanes per row, rounded to bf16 in smem
//   dV += P^T dO, dK += dS^T Q  /  dQ += dS K   WMMA into fp32 smem
// L (natural log, from the forward) and Delta (attnDeltaKernel) are read per
// query row; dK and dQ are multiplied by the scale at the end.

template <int D> struct TcBwdLayout {
  static constexpr int ldq = D + kPadH; // bf16
  static constexpr int ldo = D + 4;     // float
  static constexpr size_t tile = size_t(kTile) * ldq * 2;
  static constexpr size_t own0 = 0, own1 = tile, str0 = 2 * tile, str1 = 3 * tile;
  // What the dQ kernel uses comes first, so that it can launch with less
  // (at D = 64, two blocks per SM).
  static constexpr size_t s = 4 * tile;                              // fp32
  static constexpr size_t dp = s + size_t(kTile) * kLdS * 4;         // fp32
  static constexpr size_t ds = dp + size_t(kTile) * kLdS * 4;        // bf16
  static constexpr size_t acc0 = ds + size_t(kTile) * kLdP * 2;      // fp32
  static constexpr size_t qBytes = acc0 + size_t(kTile) * ldo * 4;  // dQ kernel
  static constexpr size_t p = qBytes;                                 // bf16
  static constexpr size_t acc1 = p + size_t(kTile) * kLdP * 2;       // fp32
  static constexpr size_t rows = acc1 + size_t(kTile) * ldo * 4;    // 2 x 64 fp32
  static constexpr size_t bytes = rows + 2 * kTile * 4;              // dK/dV kernel
  static_assert(tile % 32 == 0 && s % 32 == 0 && dp % 32 == 0 && p % 32 == 0 &&
                    ds % 32 == 0 && acc0 % 32 == 0 && acc1 % 32 == 0 && rows % 32 == 0,
                "WMMA needs 32-byte aligned regions");
  static_assert((16 * ldq * 2) % 32 == 0 && (16 * ldo * 4) % 32 == 0 &&
                    (16 * kLdS * 4) % 32 == 0 && (16 * kLdP * 2) % 32 == 0,
                "WMMA needs 32-byte aligned row blocks");
  static_assert(bytes <= 227 * 1024, "shared memory of one block");
};

__device__ __forceinline__ const bf16 *headOf(const AttnView &v, int b, int h) {
  return static_cast<const bf16 *>(v.p) + b * v.sB + h * v.sH;
}
__device__ __forceinline__ bf16 *headOf(const AttnWView &v, int b, int h) {
  return static_cast<bf16 *>(v.p) + b * v.sB + h * v.sH;
}

/// One block per 64-key tile: dK and dV (rows are keys; S^T and dP^T).
template <int D>
__global__ void __launch_bounds__(kTcThreads) attnBwdKVTcKernel(const AttnBwdArgs a) {
  using L = TcBwdLayout<D>;
  extern __shared__ __align__(128) unsigned char smemTcKV[];
  bf16 *Ks = reinterpret_cast<bf16 *>(smemTcKV + L::own0);
  bf16 *Vs = reinterpret_cast<bf16 *>(smemTcKV + L::own1);
  bf16 *Qs = reinterpret_cast<bf16 *>(smemTcKV + L::str0);
  bf16 *Gs = reinterpret_cast<bf16 *>(smemTcKV + L::str1);
  float *St = reinterpret_cast<float *>(smemTcKV + L::s);
  float *Dt = reinterpret_cast<float *>(smemTcKV + L::dp);
  bf16 *Pt = reinterpret_cast<bf16 *>(smemTcKV + L::p);
  bf16 *Tt = reinterpret_cast<bf16 *>(smemTcKV + L::ds);
  float *dKs = reinterpret_cast<float *>(smemTcKV + L::acc0);
  float *dVs = reinterpret_cast<float *>(smemTcKV + L::acc1);
  float *L2s = reinterpret_cast<float *>(smemTcKV + L::rows), *Dls = L2s + kTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int k0 = blockIdx.y * kTile;
  const int Tn = a.T;
  const int64_t rowBase = (int64_t(b) * a.H + h) * Tn;
  const bf16 *qp = headOf(a.q, b, h), *gp = headOf(a.dO, b, h);
  copyTile<D>(Ks, L::ldq, headOf(a.k, b, h), a.k.sT, k0, Tn);
  copyTile<D>(Vs, L::ldq, headOf(a.v, b, h), a.v.sT, k0, Tn);
  for (int i = threadIdx.x; i < kTile * L::ldo; i += kTcThreads)
    dKs[i] = dVs[i] = 0.f;
  // This lane's key row (2 lanes per row) and half of the query columns.
  const int rowL = 16 * warp + (lane >> 1), half = lane & 1;
  const int c = k0 + rowL;

  for (int q0 = a.causal ? k0 : 0; q0 < Tn; q0 += kTile) {
    __syncthreads(); // the previous query tile's reads are done
    copyTile<D>(Qs, L::ldq, qp, a.q.sT, q0, Tn);
    copyTile<D>(Gs, L::ldq, gp, a.dO.sT, q0, Tn);
    for (int i = threadIdx.x; i < kTile; i += kTcThreads) {
      const int r = q0 + i;
      L2s[i] = r < Tn ? a.lse[rowBase + r] * kLog2e : 0.f;
      Dls[i] = r < Tn ? a.delta[rowBase + r] : 0.f;
    }
    __syncthreads();
    rowsTimesTileT<D>(St + 16 * warp * kLdS, Ks + 16 * warp * L::ldq, L::ldq, Qs, L::ldq);
    rowsTimesTileT<D>(Dt + 16 * warp * kLdS, Vs + 16 * warp * L::ldq, L::ldq, Gs, L::ldq);
    __syncwarp();
    const float *srow = St + rowL * kLdS + half * 32, *drow = Dt + rowL * kLdS + half * 32;
    bf16 *prow = Pt + rowL * kLdP + half * 32, *trow = Tt + rowL * kLdP + half * 32;
    for (int j = 0; j < 32; ++j) {
      const int qi = half * 32 + j, r = q0 + qi;
      const bool off = c >= Tn || r >= Tn || (a.causal && c > r);
      const float p = off ? 0.f : exp2f(srow[j] * a.scaleLog2 - L2s[qi]);
      prow[j] = __float2bfloat16_rn(p);
      trow[j] = __float2bfloat16_rn(p * (drow[j] - Dls[qi]));
    }
    __syncwarp();
    accumulateTile<D>(dVs + 16 * warp * L::ldo, L::ldo, Pt + 16 * warp * kLdP, Gs, L::ldq);
    accumulateTile<D>(dKs + 16 * warp * L::ldo, L::ldo, Tt + 16 * warp * kLdP, Qs, L::ldq);
    __syncwarp();
  }

  if (c < Tn) {
    bf16 *dkp = headOf(a.dk, b, h) + int64_t(c) * a.dk.sT;
    bf16 *dvp = headOf(a.dv, b, h) + int64_t(c) * a.dv.sT;
    for (int col = half * (D / 2); col < (half + 1) * (D / 2); ++col) {
      dkp[col] = __float2bfloat16_rn(dKs[rowL * L::ldo + col] * a.scale);
      dvp[col] = __float2bfloat16_rn(dVs[rowL * L::ldo + col]);
    }
  }
}

/// One block per 64-query tile: dQ (rows are queries; S and dP).
template <int D>
__global__ void __launch_bounds__(kTcThreads) attnBwdQTcKernel(const AttnBwdArgs a) {
  using L = TcBwdLayout<D>;
  extern __shared__ __align__(128) unsigned char smemTcQ[];
  bf16 *Qs = reinterpret_cast<bf16 *>(smemTcQ + L::own0);
  bf16 *Gs = reinterpret_cast<bf16 *>(smemTcQ + L::own1);
  bf16 *Ks = reinterpret_cast<bf16 *>(smemTcQ + L::str0);
  bf16 *Vs = reinterpret_cast<bf16 *>(smemTcQ + L::str1);
  float *Ss = reinterpret_cast<float *>(smemTcQ + L::s);
  float *Ps = reinterpret_cast<float *>(smemTcQ + L::dp); // dP
  bf16 *Ts = reinterpret_cast<bf16 *>(smemTcQ + L::ds);   // dS
  float *dQs = reinterpret_cast<float *>(smemTcQ + L::acc0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int Tn = a.T;
  const int64_t rowBase = (int64_t(b) * a.H + h) * Tn;
  const bf16 *kp = headOf(a.k, b, h), *vp = headOf(a.v, b, h);
  copyTile<D>(Qs, L::ldq, headOf(a.q, b, h), a.q.sT, q0, Tn);
  copyTile<D>(Gs, L::ldq, headOf(a.dO, b, h), a.dO.sT, q0, Tn);
  for (int i = threadIdx.x; i < kTile * L::ldo; i += kTcThreads)
    dQs[i] = 0.f;
  const int rowL = 16 * warp + (lane >> 1), half = lane & 1;
  const int r = q0 + rowL;
  const float L2 = r < Tn ? a.lse[rowBase + r] * kLog2e : 0.f;
  const float Dl = r < Tn ? a.delta[rowBase + r] : 0.f;

  const int kEnd = a.causal ? min(Tn, q0 + kTile) : Tn;
  for (int k0 = 0; k0 < kEnd; k0 += kTile) {
    __syncthreads(); // the previous key tile's reads are done
    copyTile<D>(Ks, L::ldq, kp, a.k.sT, k0, Tn);
    copyTile<D>(Vs, L::ldq, vp, a.v.sT, k0, Tn);
    __syncthreads();
    rowsTimesTileT<D>(Ss + 16 * warp * kLdS, Qs + 16 * warp * L::ldq, L::ldq, Ks, L::ldq);
    rowsTimesTileT<D>(Ps + 16 * warp * kLdS, Gs + 16 * warp * L::ldq, L::ldq, Vs, L::ldq);
    __syncwarp();
    const float *srow = Ss + rowL * kLdS + half * 32, *drow = Ps + rowL * kLdS + half * 32;
    bf16 *trow = Ts + rowL * kLdP + half * 32;
    for (int j = 0; j < 32; ++j) {
      const int c = k0 + half * 32 + j;
      const bool off = r >= Tn || c >= Tn || (a.causal && c > r);
      const float p = off ? 0.f : exp2f(srow[j] * a.scaleLog2 - L2);
      trow[j] = __float2bfloat16_rn(p * (drow[j] - Dl));
    }
    __syncwarp();
    accumulateTile<D>(dQs + 16 * warp * L::ldo, L::ldo, Ts + 16 * warp * kLdP, Ks, L::ldq);
    __syncwarp();
  }

  if (r < Tn) {
    bf16 *dqp = headOf(a.dq, b, h) + int64_t(r) * a.dq.sT;
    for (int col = half * (D / 2); col < (half + 1) * (D / 2); ++col)
      dqp[col] = __float2bfloat16_rn(dQs[rowL * L::ldo + col] * a.scale);
  }
}

template <typename K>
Status launchTcKernel(K kernel, const char *name, dim3 grid, size_t smem,
                      const AttnBwdArgs &a, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess)
    return cudaCheck(int(e), name);
  kernel<<<grid, kTcThreads, smem, stream>>>(a);
  return launched(name);
}

template <int D>
Status launchBwdTc(const AttnBwdArgs &a, int64_t BH, cudaStream_t stream) {
  const dim3 grid(unsigned(BH), unsigned((a.T + kTile - 1) / kTile));
  Status s = launchTcKernel(attnBwdKVTcKernel<D>, "attention tensor-core backward dK/dV kernel",
                            grid, TcBwdLayout<D>::bytes, a, stream);
  if (!s.ok())
    return s;
  return launchTcKernel(attnBwdQTcKernel<D>, "attention tensor-core backward dQ kernel", grid,
                        TcBwdLayout<D>::qBytes, a, stream);
}

} // namespace

bool attentionTcSupported(DType t, int64_t D) {
  return t == DType::BF16 && (D == 64 || D == 128);
}

Status attentionForwardTc(const AttnFwdArgs &a, int64_t BH, int D,
                          cudaStream_t stream) {
  return D == 64 ? launchTc<64>(a, BH, stream) : launchTc<128>(a, BH, stream);
}

Status attentionBackwardTc(const AttnBwdArgs &a, int64_t BH, int D,
                           cudaStream_t stream) {
  return D == 64 ? launchBwdTc<64>(a, BH, stream) : launchBwdTc<128>(a, BH, stream);
}

} // namespace merak::rt::cuda::detail
