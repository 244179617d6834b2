//===- params.cu - Embedding forward/backward, fused AdamW and Adan steps ---===//
#include "common.cuh"
#include "merak_rt/cuda/kernels.h"

#include <cmath>

namespace merak::rt::cuda {
namespace {
using namespace detail;

/// One block row per id: blockDim.y ids per block, threadIdx.x walks the
/// embedding row in 16-byte vectors (VEC) or elements.
template <typename T, bool VEC>
__global__ void __launch_bounds__(256)
    embeddingFwdKernel(const T *__restrict__ table, int64_t vocab, int64_t dim,
                       const int64_t *__restrict__ ids, int64_t n,
                       T *__restrict__ out, int *badIds) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (i >= n)
    return;
  const int64_t id = ids[i];
  const bool ok = id >= 0 && id < vocab;
  if (!ok && threadIdx.x == 0 && badIds)
    atomicAdd(badIds, 1);
  T *o = out + i * dim;
  if constexpr (VEC) {
    constexpr int N = Vec<T>::N;
    float v[N];
    for (int64_t j = threadIdx.x; j * N < dim; j += blockDim.x) {
      if (ok)
        load16(table + id * dim + j * N, v);
      else
#pragma unroll
        for (int k = 0; k < N; ++k)
          v[k] = 0.f;
      store16(o + j * N, v);
    }
  } else {
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      o[j] = ok ? table[id * dim + j] : fromF<T>(0.f);
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    embeddingBwdKernel(const T *__restrict__ dy, const int64_t *__restrict__ ids,
                       int64_t n, int64_t dim, float *dtable, int64_t vocab) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (i >= n)
    return;
  const int64_t id = ids[i];
  if (id < 0 || id >= vocab)
    return;
  const T *g = dy + i * dim;
  float *d = dtable + id * dim;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    atomicAdd(d + j, toF(g[j]));
}

/// AdamW over float4 vectors (VEC) or elements; the same float arithmetic,
/// in the same order, as cpu::adamwStep.
template <bool VEC>
__global__ void __launch_bounds__(256)
    adamwKernel(float *__restrict__ p, const float *__restrict__ g,
                float *__restrict__ m, float *__restrict__ v, int64_t items,
                float decay, float stepSize, float bc2Sqrt, float beta1,
                float beta2, float omb1, float omb2, float eps,
                bf16 *__restrict__ pBf16) {
  constexpr int N = VEC ? 4 : 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    float pv[N], gv[N], mv[N], vv[N];
    if constexpr (VEC) {
      load16(p + i * N, pv);
      load16(g + i * N, gv);
      load16(m + i * N, mv);
      load16(v + i * N, vv);
    } else {
      pv[0] = p[i], gv[0] = g[i], mv[0] = m[i], vv[0] = v[i];
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float gi = gv[k];
      const float mi = __fadd_rn(__fmul_rn(beta1, mv[k]), __fmul_rn(omb1, gi));
      const float vi = __fadd_rn(__fmul_rn(beta2, vv[k]),
                                 __fmul_rn(__fmul_rn(omb2, gi), gi));
      mv[k] = mi;
      vv[k] = vi;
      const float denom = __fadd_rn(__fdiv_rn(sqrtf(vi), bc2Sqrt), eps);
      pv[k] = __fsub_rn(__fmul_rn(pv[k], decay),
                        __fmul_rn(stepSize, __fdiv_rn(mi, denom)));
    }
    if constexpr (VEC) {
      store16(p + i * N, pv);
      store16(m + i * N, mv);
      store16(v + i * N, vv);
      if (pBf16) {
        __nv_bfloat162 h0 = __floats2bfloat162_rn(pv[0], pv[1]);
        __nv_bfloat162 h1 = __floats2bfloat162_rn(pv[2], pv[3]);
        uint2 u;
        u.x = *reinterpret_cast<uint32_t *>(&h0);
        u.y = *reinterpret_cast<uint32_t *>(&h1);
        *reinterpret_cast<uint2 *>(pBf16 + i * N) = u; // 8 bytes
      }
    } else {
      p[i] = pv[0], m[i] = mv[0], v[i] = vv[0];
      if (pBf16)
        pBf16[i] = __float2bfloat16_rn(pv[0]);
    }
  }
}

/// Adan over float4 vectors (VEC) or elements.
struct AdanK {
  float b1, b2, b3, omb1, omb2, omb3, ibc1, ibc2, bc3Sqrt, eps, lr, decay;
  bool first, noProx;
};
template <bool VEC>
__global__ void __launch_bounds__(256)
    adanKernel(float *__restrict__ p, const float *__restrict__ g,
               float *__restrict__ m, float *__restrict__ d,
               float *__restrict__ v, float *__restrict__ prevG,
               int64_t items, AdanK k, bf16 *__restrict__ pBf16) {
  constexpr int N = VEC ? 4 : 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    float pv[N], gv[N], mv[N], dv[N], vv[N], pg[N];
    if constexpr (VEC) {
      load16(p + i * N, pv);
      load16(g + i * N, gv);
      load16(m + i * N, mv);
      load16(d + i * N, dv);
      load16(v + i * N, vv);
      load16(prevG + i * N, pg);
    } else {
      pv[0] = p[i], gv[0] = g[i], mv[0] = m[i], dv[0] = d[i], vv[0] = v[i],
      pg[0] = prevG[i];
    }
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const float gi = gv[e];
      const float diff = k.first ? 0.f : gi - pg[e];
      mv[e] = k.b1 * mv[e] + k.omb1 * gi;
      dv[e] = k.b2 * dv[e] + k.omb2 * diff;
      const float u = gi + k.b2 * diff;
      vv[e] = k.b3 * vv[e] + k.omb3 * u * u;
      const float denom = sqrtf(vv[e]) / k.bc3Sqrt + k.eps;
      const float upd = (mv[e] * k.ibc1 + k.b2 * dv[e] * k.ibc2) / denom;
      pv[e] = k.noProx ? pv[e] * k.decay - k.lr * upd
                       : (pv[e] - k.lr * upd) / k.decay;
      pg[e] = gi;
    }
    if constexpr (VEC) {
      store16(p + i * N, pv);
      store16(m + i * N, mv);
      store16(d + i * N, dv);
      store16(v + i * N, vv);
      store16(prevG + i * N, pg);
      if (pBf16) {
        __nv_bfloat162 h0 = __floats2bfloat162_rn(pv[0], pv[1]);
        __nv_bfloat162 h1 = __floats2bfloat162_rn(pv[2], pv[3]);
        uint2 u2;
        u2.x = *reinterpret_cast<uint32_t *>(&h0);
        u2.y = *reinterpret_cast<uint32_t *>(&h1);
        *reinterpret_cast<uint2 *>(pBf16 + i * N) = u2;
      }
    } else {
      p[i] = pv[0], m[i] = mv[0], d[i] = dv[0], v[i] = vv[0], prevG[i] = pg[0];
      if (pBf16)
        pBf16[i] = __float2bfloat16_rn(pv[0]);
    }
  }
}

/// Rows per block for a row-copy kernel: 256 threads split as
/// (threads per row) x (rows per block).
dim3 rowCopyBlock(int64_t perRowItems) {
  unsigned x = 32;
  while (x < 256 && x < perRowItems)
    x *= 2;
  return dim3(x, 256 / x);
}
} // namespace

Status embeddingForward(DType t, const void *table, int64_t vocab, int64_t dim,
                        const int64_t *ids, int64_t n, void *out, int *badIds,
                        StreamHandle stream) {
  if (vocab < 0 || dim < 0 || n < 0)
    return Status::error("cuda embeddingForward: negative size");
  if (n == 0 || dim == 0)
    return Status::success();
  const bool vec = dim % vectorWidth(t) == 0 &&
                   canVectorize(DType::F32, 0, table, out);
  const dim3 block = rowCopyBlock(vec ? dim / vectorWidth(t) : dim);
  const dim3 grid(static_cast<unsigned>((n + block.y - 1) / block.y));
  if (t == DType::F32) {
    auto *tb = static_cast<const float *>(table);
    auto *o = static_cast<float *>(out);
    if (vec)
      embeddingFwdKernel<float, true><<<grid, block, 0, st(stream)>>>(
          tb, vocab, dim, ids, n, o, badIds);
    else
      embeddingFwdKernel<float, false><<<grid, block, 0, st(stream)>>>(
          tb, vocab, dim, ids, n, o, badIds);
  } else {
    auto *tb = static_cast<const bf16 *>(table);
    auto *o = static_cast<bf16 *>(out);
    if (vec)
      embeddingFwdKernel<bf16, true><<<grid, block, 0, st(stream)>>>(
          tb, vocab, dim, ids, n, o, badIds);
    else
      embeddingFwdKernel<bf16, false><<<grid, block, 0, st(stream)>>>(
          tb, vocab, dim, ids, n, o, badIds);
  }
  return launched("embeddingFwdKernel");
}

Status embeddingBackward(DType t, const void *dy, const int64_t *ids,
                         int64_t n, int64_t dim, float *dtable, int64_t vocab,
                         bool accumulate, StreamHandle stream) {
  if (vocab < 0 || dim < 0 || n < 0)
    return Status::error("cuda embeddingBackward: negative size");
  if (!accumulate)
    if (Status s = memsetDevice(dtable, 0,
                                uint64_t(vocab) * uint64_t(dim) * 4, stream);
        !s)
      return s;
  if (n == 0 || dim == 0)
    return Status::success();
  const dim3 block = rowCopyBlock(dim);
  const dim3 grid(static_cast<unsigned>((n + block.y - 1) / block.y));
  if (t == DType::F32)
    embeddingBwdKernel<float><<<grid, block, 0, st(stream)>>>(
        static_cast<const float *>(dy), ids, n, dim, dtable, vocab);
  else
    embeddingBwdKernel<bf16><<<grid, block, 0, st(stream)>>>(
        static_cast<const bf16 *>(dy), ids, n, dim, dtable, vocab);
  return launched("embeddingBwdKernel");
}

Status adamwStep(float *p, const float *g, float *m, float *v, int64_t n,
                 float lr, float beta1, float beta2, float eps,
                 float weightDecay, int64_t step, void *pBf16,
                 StreamHandle stream) {
  if (n < 0 || step < 1)
    return Status::error("cuda adamwStep: bad size or step (steps count from 1)");
  if (n == 0)
    return Status::success();
  const double sd = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), sd);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), sd);
  const float decay = 1.0f - lr * weightDecay;
  const float stepSize = static_cast<float>(lr / bc1);
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const bool vec = n % 4 == 0 && canVectorize(DType::F32, 0, p, g, m, v) &&
                   (!pBf16 || reinterpret_cast<uintptr_t>(pBf16) % 8 == 0);
  const int64_t items = vec ? n / 4 : n;
  const Launch l = elementwiseLaunch(items);
  auto *pb = static_cast<bf16 *>(pBf16);
  if (vec)
    adamwKernel<true><<<l.grid, l.block, 0, st(stream)>>>(
        p, g, m, v, items, decay, stepSize, bc2Sqrt, beta1, beta2,
        1.0f - beta1, 1.0f - beta2, eps, pb);
  else
    adamwKernel<false><<<l.grid, l.block, 0, st(stream)>>>(
        p, g, m, v, items, decay, stepSize, bc2Sqrt, beta1, beta2,
        1.0f - beta1, 1.0f - beta2, eps, pb);
  return launched("adamwKernel");
}

Status adanStep(float *p, const float *g, float *m, float *d, float *v,
                float *prevG, int64_t n, const AdanParams &hp, int64_t step,
                void *pBf16, StreamHandle stream) {
  if (n < 0 || step < 1)
    return Status::error("cuda adanStep: bad size or step (steps count from 1)");
  if (n == 0)
    return Status::success();
  const double sd = static_cast<double>(step);
  AdanK k;
  k.b1 = hp.beta1, k.b2 = hp.beta2, k.b3 = hp.beta3;
  k.omb1 = 1.f - hp.beta1, k.omb2 = 1.f - hp.beta2, k.omb3 = 1.f - hp.beta3;
  k.ibc1 = static_cast<float>(1.0 / (1.0 - std::pow(double(hp.beta1), sd)));
  k.ibc2 = static_cast<float>(1.0 / (1.0 - std::pow(double(hp.beta2), sd)));
  k.bc3Sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(double(hp.beta3), sd)));
  k.eps = hp.eps;
  k.lr = hp.lr;
  k.noProx = hp.noProx;
  k.decay = hp.noProx ? 1.f - hp.lr * hp.weightDecay
                      : 1.f + hp.lr * hp.weightDecay;
  k.first = step == 1;
  const bool vec = n % 4 == 0 && canVectorize(DType::F32, 0, p, g, m, d) &&
                   canVectorize(DType::F32, 0, v, prevG) &&
                   (!pBf16 || reinterpret_cast<uintptr_t>(pBf16) % 8 == 0);
  const int64_t items = vec ? n / 4 : n;
  const Launch l = elementwiseLaunch(items);
  auto *pb = static_cast<bf16 *>(pBf16);
  if (vec)
    adanKernel<true><<<l.grid, l.block, 0, st(stream)>>>(p, g, m, d, v, prevG,
                                                         items, k, pb);
  else
    adanKernel<false><<<l.grid, l.block, 0, st(stream)>>>(p, g, m, d, v, prevG,
                                                          items, k, pb);
  return launched("adanKernel");
}

} // namespace merak::rt::cuda
