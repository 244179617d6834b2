//===- attention.cu - Fused causal attention forward/backward (sm_90) -------===//
//
// See attention.h for the contract and the tiling. Notation inside: a block
// owns a 64-token tile; tid = 16*ty + tx (ty, tx in [0, 16)); a thread holds
// the 4x4 score block (rows 4*ty + i, columns 4*tx + j) and accumulator rows
// 4*ty + i, columns tx + 16*jc (jc < D/16: conflict-free shared reads and
// coalesced global writes). The 16 threads sharing a row are one half warp,
// so row statistics reduce with shuffles of offset < 16.
//
// Shared tiles are float32 and transposed, tile[d * kLD + token], kLD = 68
// (16-byte aligned rows; the +4 spreads the transposed score stores over
// banks).
//
//===----------------------------------------------------------------------===//
#include "attention_impl.cuh"

#include <cmath>
#include <string>

namespace merak::rt::cuda {
namespace {
using namespace detail;

constexpr int kLD = kTile + 4;
constexpr int kThreads = 256;
using View = AttnView;
using WView = AttnWView;
using FwdArgs = AttnFwdArgs;

template <typename T>
__device__ __forceinline__ const T *headPtr(const View &v, int b, int h) {
  return static_cast<const T *>(v.p) + b * v.sB + h * v.sH;
}
template <typename T>
__device__ __forceinline__ T *headPtr(const WView &v, int b, int h) {
  return static_cast<T *>(v.p) + b * v.sB + h * v.sH;
}

/// dst[d * kLD + t] = src[(t0 + t) * sT + d] for the 64 tokens of a tile
/// (zero past T): 16-byte global loads, token-fastest shared stores.
template <typename T, int D>
__device__ __forceinline__ void loadTileT(float *dst, const T *src,
                                          int64_t sT, int t0, int Tn) {
  constexpr int N = Vec<T>::N;
  constexpr int kChunks = D / N;
  for (int item = threadIdx.x; item < kTile * kChunks; item += kThreads) {
    const int t = item % kTile, ch = item / kTile;
    float v[N];
    if (t0 + t < Tn) {
      load16(src + int64_t(t0 + t) * sT + ch * N, v);
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e)
        v[e] = 0.f;
    }
#pragma unroll
    for (int e = 0; e < N; ++e)
      dst[(ch * N + e) * kLD + t] = v[e];
  }
}

__device__ __forceinline__ float4 lds4(const float *p) {
  return *reinterpret_cast<const float4 *>(p);
}
__device__ __forceinline__ float comp(const float4 &v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/// s[i][j] = sum_d A[d][4*ra + i] * B[d][4*cb + j] over transposed tiles.
template <int D>
__device__ __forceinline__ void tileDot(const float *A, int ra, const float *B,
                                        int cb, float (&s)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      s[i][j] = 0.f;
#pragma unroll 8
  for (int d = 0; d < D; ++d) {
    const float4 a = lds4(A + d * kLD + 4 * ra);
    const float4 b = lds4(B + d * kLD + 4 * cb);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        s[i][j] = fmaf(comp(a, i), comp(b, j), s[i][j]);
  }
}

/// Stores the thread's 4x4 block x[i][j] (rows 4*ty+i, cols 4*tx+j) into a
/// [col][row] tile: tile[(4*tx + j) * kLD + 4*ty + i].
__device__ __forceinline__ void storeBlockT(float *tile, int ty, int tx,
                                            const float (&x)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
    *reinterpret_cast<float4 *>(tile + (4 * tx + j) * kLD + 4 * ty) =
        make_float4(x[0][j], x[1][j], x[2][j], x[3][j]);
}

/// acc[i][jc] += sum_k W[k][4*ty + i] * Xt[tx + 16*jc][k] over the 64 k of a
/// tile: W is a [k][row] tile, Xt a transposed [d][k] tile.
template <int D>
__device__ __forceinline__ void accumulate(const float *W, const float *Xt,
                                           int ty, int tx,
                                           float (&acc)[4][D / 16]) {
#pragma unroll 2
  for (int k4 = 0; k4 < kTile / 4; ++k4) {
    float4 w[4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      w[kk] = lds4(W + (4 * k4 + kk) * kLD + 4 * ty);
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc) {
      const float4 x = lds4(Xt + (tx + 16 * jc) * kLD + 4 * k4);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[i][jc] = fmaf(comp(w[kk], i), comp(x, kk), acc[i][jc]);
    }
  }
}

__device__ __forceinline__ float halfWarpMax(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float halfWarpSum(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ bool masked(int r, int c, int Tn, bool causal) {
  return c >= Tn || (causal && c > r);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attnFwdKernel(const FwdArgs a) {
  extern __shared__ float4 smem4[];
  float *Qt = reinterpret_cast<float *>(smem4);
  float *Kt = Qt + D * kLD;
  float *Vt = Kt + D * kLD;
  float *Ps = Vt + D * kLD; // [key][query]
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  // Largest causal work first.
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int Tn = a.T;

  loadTileT<T, D>(Qt, headPtr<T>(a.q, b, h), a.q.sT, q0, Tn);
  const T *kp = headPtr<T>(a.k, b, h), *vp = headPtr<T>(a.v, b, h);

  float acc[4][D / 16];
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc)
      acc[i][jc] = 0.f;
  }
  const int kEnd = a.causal ? min(Tn, q0 + kTile) : Tn;
  for (int k0 = 0; k0 < kEnd; k0 += kTile) {
    __syncthreads(); // the previous tile's Kt/Vt/Ps reads are done
    loadTileT<T, D>(Kt, kp, a.k.sT, k0, Tn);
    loadTileT<T, D>(Vt, vp, a.v.sT, k0, Tn);
    __syncthreads();
    float s[4][4];
    tileDot<D>(Qt, ty, Kt, tx, s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = q0 + 4 * ty + i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = masked(r, k0 + 4 * tx + j, Tn, a.causal)
                      ? -INFINITY
                      : s[i][j] * a.scaleLog2;
        mx = fmaxf(mx, s[i][j]);
      }
      const float mNew = fmaxf(m[i], halfWarpMax(mx));
      // A row with nothing unmasked so far keeps a zero state.
      const float mRef = mNew == -INFINITY ? 0.f : mNew;
      const float alpha = exp2f(m[i] - mRef);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - mRef);
        sum += s[i][j];
      }
      l[i] = l[i] * alpha + halfWarpSum(sum);
      m[i] = mNew;
#pragma unroll
      for (int jc = 0; jc < D / 16; ++jc)
        acc[i][jc] *= alpha;
    }
    storeBlockT(Ps, ty, tx, s);
    __syncthreads();
    accumulate<D>(Ps, Vt, ty, tx, acc);
  }

  T *op = headPtr<T>(a.o, b, h);
  float *lse = a.lse + (int64_t(b) * a.H + h) * Tn;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = q0 + 4 * ty + i;
    if (r >= Tn)
      continue;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc)
      op[int64_t(r) * a.o.sT + tx + 16 * jc] = fromF<T>(acc[i][jc] * inv);
    if (tx == 0)
      lse[r] = l[i] > 0.f ? m[i] / kLog2e + logf(l[i]) : -INFINITY;
  }
}

// --- backward -----------------------------------------------------------------

using BwdArgs = AttnBwdArgs;

/// Delta[r] = sum_d dO[r,d] O[r,d] - lseGrad[r] (lseGrad null: 0): one
/// warp per row.
template <typename T>
__global__ void __launch_bounds__(256)
    attnDeltaKernel(View o, View dO, const float *lseGrad, float *delta, int H, int Tn, int D,
                    int64_t rows) {
  const int64_t row = int64_t(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows)
    return;
  const int t = int(row % Tn);
  const int64_t bh = row / Tn;
  const int b = int(bh / H), h = int(bh % H);
  const T *op = headPtr<T>(o, b, h) + int64_t(t) * o.sT;
  const T *gp = headPtr<T>(dO, b, h) + int64_t(t) * dO.sT;
  float sum = 0.f;
  for (int d = lane; d < D; d += 32)
    sum = fmaf(toF(op[d]), toF(gp[d]), sum);
  sum = warpSum(sum);
  if (lane == 0)
    delta[row] = lseGrad ? sum - lseGrad[row] : sum;
}

/// One block per 64-key tile: dK, dV over the query tiles that see it.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attnBwdKVKernel(const BwdArgs a) {
  extern __shared__ float4 smem4[];
  float *Kt = reinterpret_cast<float *>(smem4);
  float *Vt = Kt + D * kLD;
  float *Qt = Vt + D * kLD;
  float *Gt = Qt + D * kLD;    // dO, transposed
  float *Ps = Gt + D * kLD;    // [query][key]
  float *Ss = Ps + kTile * kLD; // dS, [query][key]
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int k0 = blockIdx.y * kTile;
  const int Tn = a.T;
  loadTileT<T, D>(Kt, headPtr<T>(a.k, b, h), a.k.sT, k0, Tn);
  loadTileT<T, D>(Vt, headPtr<T>(a.v, b, h), a.v.sT, k0, Tn);
  const T *qp = headPtr<T>(a.q, b, h), *gp = headPtr<T>(a.dO, b, h);
  const int64_t rowBase = (int64_t(b) * a.H + h) * Tn;

  float dk[4][D / 16], dv[4][D / 16];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc)
      dk[i][jc] = dv[i][jc] = 0.f;

  for (int q0 = a.causal ? k0 : 0; q0 < Tn; q0 += kTile) {
    __syncthreads();
    loadTileT<T, D>(Qt, qp, a.q.sT, q0, Tn);
    loadTileT<T, D>(Gt, gp, a.dO.sT, q0, Tn);
    float L2[4], Dl[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = q0 + 4 * tx + j;
      L2[j] = r < Tn ? a.lse[rowBase + r] * kLog2e : 0.f;
      Dl[j] = r < Tn ? a.delta[rowBase + r] : 0.f;
    }
    __syncthreads();
    // Transposed scores: rows are keys 4*ty+i, columns queries 4*tx+j.
    float p[4][4], ds[4][4];
    tileDot<D>(Kt, ty, Qt, tx, p);
    tileDot<D>(Vt, ty, Gt, tx, ds); // dP^T
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = k0 + 4 * ty + i, r = q0 + 4 * tx + j;
        const float pij = (r >= Tn || masked(r, c, Tn, a.causal))
                              ? 0.f
                              : exp2f(p[i][j] * a.scaleLog2 - L2[j]);
        p[i][j] = pij;
        ds[i][j] = pij * (ds[i][j] - Dl[j]);
      }
    storeBlockT(Ps, ty, tx, p);
    storeBlockT(Ss, ty, tx, ds);
    __syncthreads();
    accumulate<D>(Ps, Gt, ty, tx, dv); // dV += P^T dO
    accumulate<D>(Ss, Qt, ty, tx, dk); // dK += dS^T Q
  }

  T *dkp = headPtr<T>(a.dk, b, h), *dvp = headPtr<T>(a.dv, b, h);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = k0 + 4 * ty + i;
    if (c >= Tn)
      continue;
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc) {
      dkp[int64_t(c) * a.dk.sT + tx + 16 * jc] = fromF<T>(dk[i][jc] * a.scale);
      dvp[int64_t(c) * a.dv.sT + tx + 16 * jc] = fromF<T>(dv[i][jc]);
    }
  }
}

/// One block per 64-query tile: dQ over the key tiles it sees.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attnBwdQKernel(const BwdArgs a) {
  extern __shared__ float4 smem4[];
  float *Qt = reinterpret_cast<float *>(smem4);
  float *Gt = Qt + D * kLD;
  float *Kt = Gt + D * kLD;
  float *Vt = Kt + D * kLD;
  float *Ss = Vt + D * kLD; // dS, [key][query]
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int Tn = a.T;
  const int64_t rowBase = (int64_t(b) * a.H + h) * Tn;
  loadTileT<T, D>(Qt, headPtr<T>(a.q, b, h), a.q.sT, q0, Tn);
  loadTileT<T, D>(Gt, headPtr<T>(a.dO, b, h), a.dO.sT, q0, Tn);
  const T *kp = headPtr<T>(a.k, b, h), *vp = headPtr<T>(a.v, b, h);
  float L2[4], Dl[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = q0 + 4 * ty + i;
    L2[i] = r < Tn ? a.lse[rowBase + r] * kLog2e : 0.f;
    Dl[i] = r < Tn ? a.delta[rowBase + r] : 0.f;
  }
  float dq[4][D / 16];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc)
      dq[i][jc] = 0.f;

  const int kEnd = a.causal ? min(Tn, q0 + kTile) : Tn;
  for (int k0 = 0; k0 < kEnd; k0 += kTile) {
    __syncthreads();
    loadTileT<T, D>(Kt, kp, a.k.sT, k0, Tn);
    loadTileT<T, D>(Vt, vp, a.v.sT, k0, Tn);
    __syncthreads();
    float p[4][4], ds[4][4];
    tileDot<D>(Qt, ty, Kt, tx, p);
    tileDot<D>(Gt, ty, Vt, tx, ds); // dP
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = q0 + 4 * ty + i, c = k0 + 4 * tx + j;
        const float pij = (r >= Tn || masked(r, c, Tn, a.causal))
                              ? 0.f
                              : exp2f(p[i][j] * a.scaleLog2 - L2[i]);
        ds[i][j] = pij * (ds[i][j] - Dl[i]);
      }
    storeBlockT(Ss, ty, tx, ds);
    __syncthreads();
    accumulate<D>(Ss, Kt, ty, tx, dq); // dQ += dS K
  }

  T *dqp = headPtr<T>(a.dq, b, h);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = q0 + 4 * ty + i;
    if (r >= Tn)
      continue;
#pragma unroll
    for (int jc = 0; jc < D / 16; ++jc)
      dqp[int64_t(r) * a.dq.sT + tx + 16 * jc] = fromF<T>(dq[i][jc] * a.scale);
  }
}

// --- host ---------------------------------------------------------------------

View view(const AttnOperand &o) {
  return {o.data, o.strideB, o.strideH, o.strideT};
}
WView wview(const AttnOperand &o) {
  return {o.data, o.strideB, o.strideH, o.strideT};
}
float effectiveScale(const AttnShape &s) {
  return s.scale != 0.f ? s.scale : 1.f / std::sqrt(float(s.D));
}

constexpr size_t fwdSmem(int D) { return size_t(3 * D + kTile) * kLD * 4; }
constexpr size_t bwdKVSmem(int D) {
  return size_t(4 * D + 2 * kTile) * kLD * 4;
}
constexpr size_t bwdQSmem(int D) { return size_t(4 * D + kTile) * kLD * 4; }

template <typename K>
Status launch(K kernel, const char *name, dim3 grid, size_t smem,
              cudaStream_t stream, const void *args) {
  cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess)
    return cudaCheck(int(e), name);
  void *argv[] = {const_cast<void *>(args)};
  e = cudaLaunchKernel(reinterpret_cast<const void *>(kernel), grid,
                       dim3(kThreads), argv, smem, stream);
  if (e != cudaSuccess)
    return cudaCheck(int(e), name);
  return launched(name);
}

template <typename T, int D>
Status forwardD(const FwdArgs &a, int64_t BH, cudaStream_t stream) {
  const dim3 grid(unsigned(BH), unsigned((a.T + kTile - 1) / kTile));
  return launch(attnFwdKernel<T, D>, "attention forward kernel", grid,
                fwdSmem(D), stream, &a);
}
template <typename T, int D>
Status backwardD(const BwdArgs &a, int64_t BH, cudaStream_t stream) {
  const dim3 grid(unsigned(BH), unsigned((a.T + kTile - 1) / kTile));
  Status s = launch(attnBwdKVKernel<T, D>, "attention backward dK/dV kernel",
                    grid, bwdKVSmem(D), stream, &a);
  if (!s.ok())
    return s;
  return launch(attnBwdQKernel<T, D>, "attention backward dQ kernel", grid,
                bwdQSmem(D), stream, &a);
}

template <typename T>
Status forwardT(const FwdArgs &a, int64_t BH, int D, cudaStream_t stream) {
  switch (D) {
  case 16:
    return forwardD<T, 16>(a, BH, stream);
  case 32:
    return forwardD<T, 32>(a, BH, stream);
  case 64:
    return forwardD<T, 64>(a, BH, stream);
  default:
    return forwardD<T, 128>(a, BH, stream);
  }
}
template <typename T>
Status backwardT(const BwdArgs &a, int64_t BH, int D, cudaStream_t stream) {
  switch (D) {
  case 16:
    return backwardD<T, 16>(a, BH, stream);
  case 32:
    return backwardD<T, 32>(a, BH, stream);
  case 64:
    return backwardD<T, 64>(a, BH, stream);
  default:
    return backwardD<T, 128>(a, BH, stream);
  }
}

} // namespace

AttnOperand AttnOperand::bhtd(const void *p, int64_t H, int64_t T, int64_t D) {
  return {const_cast<void *>(p), H * T * D, T * D, D};
}
AttnOperand AttnOperand::bthd(const void *p, int64_t H, int64_t T, int64_t D) {
  return {const_cast<void *>(p), T * H * D, D, H * D};
}
AttnOperand AttnOperand::packedQKV(const void *p, DType t, int which,
                                   int64_t H, int64_t T, int64_t D) {
  const int64_t C = H * D;
  char *base = static_cast<char *>(const_cast<void *>(p)) +
               which * C * dtypeSize(t);
  return {base, T * 3 * C, D, 3 * C};
}

double attentionForwardFlops(const AttnShape &s) {
  const double T = double(s.T);
  const double pairs = s.causal ? T * (T + 1) / 2 : T * T;
  return 4.0 * double(s.B) * double(s.H) * double(s.D) * pairs;
}

Status checkAttention(
    DType t, const AttnShape &s,
    std::initializer_list<std::pair<const char *, AttnOperand>> ops) {
  auto err = [](const std::string &m) {
    return Status::error("attention: " + m);
  };
  if (s.B < 1 || s.H < 1 || s.T < 1)
    return err("B, H and T must be >= 1 (got B=" + std::to_string(s.B) +
               " H=" + std::to_string(s.H) + " T=" + std::to_string(s.T) +
               ")");
  if (s.D != 16 && s.D != 32 && s.D != 64 && s.D != 128)
    return err("head dim D=" + std::to_string(s.D) +
               " is not supported (16, 32, 64 or 128)");
  if (s.B * s.H > int64_t(INT32_MAX) || s.T > int64_t(kTile) * 65535)
    return err("B*H=" + std::to_string(s.B * s.H) + " or T=" +
               std::to_string(s.T) + " exceeds the launch grid");
  if (!(s.scale == s.scale) || std::isinf(s.scale))
    return err("scale is not finite");
  const int64_t w = vectorWidth(t);
  const char *tn = t == DType::F32 ? "fp32" : "bf16";
  for (const auto &[name, op] : ops) {
    const std::string n = name;
    if (!op.data)
      return err(n + ": null pointer");
    if (reinterpret_cast<uintptr_t>(op.data) % 16 != 0)
      return err(n + ": base address is not 16-byte aligned");
    const int64_t strides[3] = {op.strideB, op.strideH, op.strideT};
    const char *which[3] = {"b", "h", "t"};
    for (int i = 0; i < 3; ++i)
      if (strides[i] < 0 || strides[i] % w != 0)
        return err(n + ": " + which[i] + " stride " +
                   std::to_string(strides[i]) +
                   " (elements) is not a non-negative multiple of " +
                   std::to_string(w) + " (16 bytes of " + tn + ")");
    if (op.strideT < s.D)
      return err(n + ": t stride " + std::to_string(op.strideT) +
                 " is smaller than D=" + std::to_string(s.D) +
                 " (rows would overlap)");
  }
  return Status::success();
}

Status attentionForward(DType t, const AttnShape &s, const AttnOperand &q,
                        const AttnOperand &k, const AttnOperand &v,
                        const AttnOperand &o, float *lse,
                        StreamHandle stream) {
  Status c = checkAttention(t, s, {{"q", q}, {"k", k}, {"v", v}, {"o", o}});
  if (!c.ok())
    return c;
  if (!lse)
    return Status::error("attention: lse: null pointer");
  const float scale = effectiveScale(s);
  FwdArgs a{view(q), view(k), view(v), wview(o),         lse,
            int(s.H), int(s.T), scale * kLog2e, s.causal};
  const int64_t BH = s.B * s.H;
  if (s.tensorCores && attentionTcSupported(t, s.D))
    return attentionForwardTc(a, BH, int(s.D), st(stream));
  return t == DType::F32 ? forwardT<float>(a, BH, int(s.D), st(stream))
                         : forwardT<bf16>(a, BH, int(s.D), st(stream));
}

Status attentionBackward(DType t, const AttnShape &s, const AttnOperand &q, const AttnOperand &k,
                         const AttnOperand &v, const AttnOperand &o, const AttnOperand &dO,
                         const float *lse, float *delta, const AttnOperand &dq,
                         const AttnOperand &dk, const AttnOperand &dv, StreamHandle stream,
                         const float *lseGrad) {
  Status c = checkAttention(t, s,
                            {{"q", q},
                             {"k", k},
                             {"v", v},
                             {"o", o},
                             {"dO", dO},
                             {"dq", dq},
                             {"dk", dk},
                             {"dv", dv}});
  if (!c.ok())
    return c;
  if (!lse || !delta)
    return Status::error("attention: lse/delta: null pointer");
  const int64_t rows = s.B * s.H * s.T;
  const unsigned deltaBlocks = unsigned((rows + 7) / 8);
  if (t == DType::F32)
    attnDeltaKernel<float><<<deltaBlocks, 256, 0, st(stream)>>>(view(o), view(dO), lseGrad, delta,
                                                                int(s.H), int(s.T), int(s.D), rows);
  else
    attnDeltaKernel<bf16><<<deltaBlocks, 256, 0, st(stream)>>>(view(o), view(dO), lseGrad, delta,
                                                               int(s.H), int(s.T), int(s.D), rows);
  Status d = launched("attention backward delta kernel");
  if (!d.ok())
    return d;
  const float scale = effectiveScale(s);
  BwdArgs a{view(q),  view(k),   view(v),        view(dO),
            lse,      delta,     wview(dq),      wview(dk),
            wview(dv), int(s.H), int(s.T),       scale,
            scale * kLog2e, s.causal};
  const int64_t BH = s.B * s.H;
  if (s.tensorCores && attentionTcSupported(t, s.D))
    return attentionBackwardTc(a, BH, int(s.D), st(stream));
  return t == DType::F32 ? backwardT<float>(a, BH, int(s.D), st(stream))
                         : backwardT<bf16>(a, BH, int(s.D), st(stream));
}

} // namespace merak::rt::cuda
