//===- attention_tc.cu - Tensor-core (WMMA) attention forward, bf16 --------===//
//
// The opt-in bf16 forward of attention.h (AttnShape::tensorCores). A block of
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
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, Qs + 16 * warp * L::ldq + 16 * kk, L::ldq);
        wmma::load_matrix_sync(fb, Ks + 16 * n * L::ldq + 16 * kk, L::ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Ss + 16 * warp * kLdS + 16 * n, acc, kLdS,
                              wmma::mem_row_major);
    }
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
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, Os + 16 * warp * L::ldo + 16 * n, L::ldo,
                             wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, Ps + 16 * warp * kLdP + 16 * kk, kLdP);
        wmma::load_matrix_sync(fb, Vs + 16 * kk * L::ldq + 16 * n, L::ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Os + 16 * warp * L::ldo + 16 * n, acc, L::ldo,
                              wmma::mem_row_major);
    }
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

} // namespace

bool attentionTcSupported(DType t, int64_t D) {
  return t == DType::BF16 && (D == 64 || D == 128);
}

Status attentionForwardTc(const AttnFwdArgs &a, int64_t BH, int D,
                          cudaStream_t stream) {
  return D == 64 ? launchTc<64>(a, BH, stream) : launchTc<128>(a, BH, stream);
}

} // namespace merak::rt::cuda::detail
